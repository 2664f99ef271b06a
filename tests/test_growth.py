"""One contribution never makes the site grow faster than what it adds.

A pull request is one contributor's choice of dreams, signed with keys they
make at will. Whatever its dreams declare, the site they add must be linear
in them: bytes, files and the pages each dream is shown on. These tests build
the same shape of contribution at two sizes and compare.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.content import pool
from builder.formats import dream as dreamfmt
from builder.formats.note import parse_private_key
from builder.site import agentdocs as agents
from builder.site import render
from tests.conftest import draft
from tests.pools import SEEDS, make_pool

SMALL, LARGE = 60, 120
# Bytes at twice the dreams: 2 if linear; the slack is fixed costs and the
# log's tiles, proofs and ids growing by a digit. Quadratic gives ≈ 4.
LINEAR = 2.2
_DREAM_LINK = re.compile(r"dreams/([0-9a-f]{16})/")
_ID = re.compile(r"[0-9a-f]{16}")
Site = tuple[dict[str, bytes], list[str]]  # a built site's files by path, and its dreams' ids


@pytest.fixture(autouse=True)
def _archive_paged_at_both_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The archive's entry page repeats its newest page's dreams once it is paged
    # (past ARCHIVE_PAGE_SIZE): a step from one file to two, not growth. Paged at
    # both sizes, a dream is named by as many files at SMALL as at LARGE.
    monkeypatch.setattr(render, "ARCHIVE_PAGE_SIZE", 10)


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    # Sizes, not durability, are under test: an fsync per submitted dream
    # and written page was most of these tests' time.
    monkeypatch.setattr(os, "fsync", lambda fd: None)


@pytest.fixture(autouse=True)
def _paged_at_both_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    # A tag or diary longer than a page shows its newest dreams on its entry
    # page and each dream on one numbered page too (builder.site.render, "Pages
    # that stay put"): one more file a list, once. With pages smaller than
    # SMALL both sizes are paged, so "as many files at any length" compares
    # like with like.
    monkeypatch.setattr(render, "TAG_PAGE_SIZE", SMALL // 2)
    monkeypatch.setattr(render, "DIARY_PAGE_SIZE", SMALL // 2)


def _chain(root: Path, n: int, lineage: Any) -> tuple[Path, list[str], str]:
    """A pool holding one author's n dreams, the i-th with ``lineage(i,
    previous ids)`` (made before it is signed, so it may name any earlier
    one), submitted at once as one pull request would be."""
    tp = make_pool(root)
    ids: list[str] = []
    files = []
    for i in range(n):
        body = dreamfmt.sign(
            draft(author="ada", title=f"Link {i}", lineage=lineage(i, ids)), SEEDS["ada"]
        )
        data = json.dumps(body, ensure_ascii=False).encode()
        path = root / f"in-{i}.json"
        path.write_bytes(data)
        files.append(path)
        ids.append(dreamfmt.parse(data, path.name).id)
    pool.submit(tp.content, files)
    return tp.content, ids, tp.log_key


def _site(root: Path, n: int, lineage: Any) -> Site:
    content, ids, log_key = _chain(root, n, lineage)
    buildmod.build(content, root / "site", signer=parse_private_key(log_key))
    site = (root / "site").resolve()
    files = {p.relative_to(site).as_posix(): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    return files, ids


def _growth(tmp_path: Path, lineage: Any) -> list[Site]:
    return [_site(tmp_path / str(n), n, lineage) for n in (SMALL, LARGE)]


def _lineage_links(files: dict[str, bytes]) -> Counter[str]:
    """How often each dream is linked from the lineage pages, all together."""
    found: Counter[str] = Counter()
    for path, data in files.items():
        if path.startswith("lineage/"):
            found.update(_DREAM_LINK.findall(data.decode()))
    return found


def _files_naming(files: dict[str, bytes], ids: list[str]) -> Counter[str]:
    """How many files of the site name each dream's id."""
    named: Counter[str] = Counter()
    wanted = set(ids)
    for data in files.values():
        named.update(wanted.intersection(_ID.findall(data.decode("utf-8", "replace"))))
    return named


def _assert_linear(sites: list[Site]) -> None:
    """Twice the dreams make at most about twice the lineage bytes, site
    bytes, files, and (file, dream named in it) pairs."""
    (small, _), (large, _) = sites
    for part in ("lineage/", ""):
        a = sum(len(v) for k, v in small.items() if k.startswith(part))
        b = sum(len(v) for k, v in large.items() if k.startswith(part))
        assert b <= LINEAR * a, f"{part or 'the site'}: {a:,} B at {SMALL}, {b:,} B at {LARGE}"
    assert len(large) <= LINEAR * len(small)
    a, b = (sum(_files_naming(f, ids).values()) for f, ids in sites)
    assert b <= LINEAR * a, f"dreams named {a:,} times at {SMALL}, {b:,} at {LARGE}"


def _assert_each_named_in_as_many_files(sites: list[Site]) -> None:
    """In a chain each dream is named by its own files, its child's page,
    and lists that take it once: as many files at any length."""
    (small, small_ids), (large, large_ids) = sites
    assert max(_files_naming(large, large_ids).values()) <= max(
        _files_naming(small, small_ids).values()
    )


def _each_once_in_one_tree(files: dict[str, bytes], ids: list[str]) -> None:
    links = _lineage_links(files)
    assert {i: links[i] for i in ids} == dict.fromkeys(ids, 1)
    lineage = b"".join(v for k, v in files.items() if k.startswith("lineage/")).decode()
    assert lineage.count('<section class="tree panel"') == 1


def _zero(i: int, ids: list[str]) -> dict[str, Any]:
    return {"parent": ids[-1], "generation": 0} if ids else {"generation": 0}


def _counted(i: int, ids: list[str]) -> dict[str, Any]:
    return {"parent": ids[-1], "generation": i} if ids else {"generation": 0}


def _fan(i: int, ids: list[str]) -> dict[str, Any]:
    return {"parent": ids[0], "generation": 1} if ids else {"generation": 0}


def test_a_chain_that_declares_generation_0_throughout_is_one_tree(tmp_path: Path) -> None:
    """Each dream names the one before as parent but says generation 0. The
    generation is the author's word; the parent link is what places a dream:
    one chain, each dream in it once, on one lineage page. (Taken as roots,
    every link made a tree of all after it: 1,200 dreams gave 273 MB.)"""
    sites = _growth(tmp_path, _zero)
    _assert_linear(sites)
    _assert_each_named_in_as_many_files(sites)
    for files, ids in sites:
        _each_once_in_one_tree(files, ids)


@pytest.mark.parametrize("lineage", [_counted, _fan], ids=["honest-chain", "fan"])
def test_a_long_chain_or_a_wide_fan_grows_linearly(tmp_path: Path, lineage: Any) -> None:
    """The honest shapes of one contribution: a chain that counts its
    generations, and one parent with every other dream as its child (the
    parent's page lists them all: one line each)."""
    sites = _growth(tmp_path, lineage)
    _assert_linear(sites)
    if lineage is _counted:
        _assert_each_named_in_as_many_files(sites)
    for files, ids in sites:
        _each_once_in_one_tree(files, ids)


def test_a_declared_generation_that_disagrees_is_marked_not_obeyed(tmp_path: Path) -> None:
    """Generations are shown as declared, and where the parent links place a
    dream elsewhere the page says so; no declaration makes or moves a root."""
    plan: list[dict[str, Any]] = [
        {"generation": 0},  # A: a root, honest
        {"parent": 0, "generation": 0},  # B under A: generation 1
        {"parent": 1, "generation": 7},  # C under B: generation 2
        {"generation": 3},  # D: names no parent, so generation 0
        {"parent": "feedfacefeedface", "generation": 4},  # E: parent not in the pool
        {"parent": 4, "generation": 9},  # F under E: taken from E's word, 5
    ]

    def lineage(i: int, ids: list[str]) -> dict[str, Any]:
        parent = plan[i].get("parent")
        return {**plan[i], "parent": ids[parent]} if isinstance(parent, int) else plan[i]

    files, ids = _site(tmp_path, len(plan), lineage)
    html = files["lineage/index.html"].decode()
    trees = re.findall(r'<section class="tree panel".*?</section>', html, re.S)
    roots = [_DREAM_LINK.findall(tree)[0] for tree in trees]
    assert sorted(roots) == sorted([ids[0], ids[3], ids[4]])  # one build admits in id order
    assert _lineage_links(files) == Counter(ids)
    nodes = re.findall(r'<div class="node.*?</div>', html, re.S)
    marked = {
        ids.index(_DREAM_LINK.findall(node)[0]): re.findall(
            r"declares gen (\d+); gen (\d+) by its parent links", node
        )
        for node in nodes
    }
    assert marked == {
        0: [],
        1: [("0", "1")],
        2: [("7", "2")],
        3: [("3", "0")],
        4: [],
        5: [("9", "5")],
    }


def test_a_large_pull_request_after_small_ones_is_in_one_since_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """agents/since/<m>.md exists for every checkpoint size m. After a run of
    one-dream builds, each of the last SINCE_FULL_LIMIT sizes' files used to
    span the next large build whole, listing its every dream: a hundred
    times over at the real limit. Only the file of the size just before it
    may."""
    monkeypatch.setattr(agents, "SINCE_FULL_LIMIT", 3)
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    site = tmp_path / "site"
    for _ in range(4):
        tp.add("ada", 1)
        buildmod.build(tp.content, site, signer=signer)
    folder = site / "agents" / "since"
    small = sorted(int(p.stem) for p in folder.iterdir())
    assert len(small) == 4
    large = tp.add("bob", 12)
    buildmod.build(tp.content, site, signer=signer)
    since = {int(p.stem): p.read_text() for p in folder.iterdir()}
    assert len(since) == 5
    for i in large:
        assert [m for m in sorted(since) if i in since[m]] == [small[-1]]
