"""The authors and tags indexes and the sitemap of pages stay put as the pool grows.

Each listed every author (or tag) in one file, by name or count
(authors/index.html was 1.37 MB and sitemap-pages-1.xml 486 KB at 100k
dreams), so a build after one new dream rewrote them whole, and a new author
moved every author after them. Now they are paged in the order authors and
tags first appear in the log: a new one joins the last page, a new dream
changes the pages of its author and its tags.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.content import anonymity, pool
from builder.formats import dream as dreamfmt
from builder.formats.note import parse_private_key
from builder.log import erase, logbuild
from builder.site import feeds, render
from builder.site.model import SiteModel, build_model
from tests import pools
from tests.conftest import draft
from tests.pools import PoolFixture, key_id_of, make_pool

# Authors beyond tests.pools' three, each with a fixed seed.
ANONYMIZED = {"share": True, "derivatives": True, "anonymize": True}
MORE = {name: bytes([4 + n] * 32) for n, name in enumerate(("cyd", "dee", "2", "eve"))}


@pytest.fixture(autouse=True)
def more_authors(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, seed in MORE.items():
        monkeypatch.setitem(pools.SEEDS, name, seed)


def index_files(site: Path, kind: str = "authors") -> dict[str, tuple[int, bytes]]:
    """The pages of the authors (or tags) index: site path → (inode, bytes)."""
    paths = [site / kind / "index.html", *sorted((site / kind / "index").rglob("*.html"))]
    return {str(p.relative_to(site)): (os.stat(p).st_ino, p.read_bytes()) for p in paths}


def bodies(files: dict[str, tuple[int, bytes]]) -> dict[str, bytes]:
    """:func:`index_files` without the inodes: what a reader gets."""
    return {path: body for path, (_, body) in files.items()}


def tags_on(page: bytes) -> list[tuple[str, int]]:
    """The tags a page of the tags index shows, with their counts, in order."""
    link = r'<a class="tag" href="[^"]*"><span dir="auto">([^<]*)</span> '
    link += r'<span class="count"[^>]*>(\d+)'
    return [(name, int(n)) for name, n in re.findall(link, page.decode())]


def names_on(page: bytes) -> list[str]:
    """The authors a page of the index shows, in order."""
    card = r'<h2 class="card-title"><a href="[^"]*" dir="auto">([^<]*)</a>'
    return re.findall(card, page.decode())


def join(tp: PoolFixture, site: Path, *names: str, **fields: Any) -> None:
    """A dream of each of ``names``, each built (so signed) before the next is
    added: within one build key leaves go by keyId, not by when they came. With
    no name, one build of what the pool holds."""
    signer = parse_private_key(tp.log_key)
    for name in names:
        tp.add(name, 1, **fields)
        buildmod.build(tp.content, site, signer=signer)
    if not names:
        buildmod.build(tp.content, site, signer=signer)


def model_of(tp: PoolFixture) -> SiteModel:
    config = pool.load_config(tp.content)
    directory, _ = pool.load_keys(tp.content)
    scanned, _ = pool.scan_dreams(tp.content, directory)
    log = logbuild.update(tp.content, scanned, origin=config.origin, signer=None)
    return build_model(log, directory, config, base_url="/")


def test_authors_are_paged_in_the_order_they_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render, "AUTHOR_INDEX_PAGE_SIZE", 2)
    tp = make_pool(tmp_path)
    site = tmp_path / "site"
    join(tp, site, "dee", "ada", "2", "cyd", "bob")
    pages = bodies(index_files(site))
    assert sorted(pages) == [
        "authors/index.html",
        "authors/index/1/index.html",
        "authors/index/2/index.html",
        "authors/index/3/index.html",
    ]
    assert names_on(pages["authors/index.html"]) == ["bob", "cyd"]
    assert names_on(pages["authors/index/1/index.html"]) == ["ada", "dee"]
    assert names_on(pages["authors/index/2/index.html"]) == ["cyd", "2"]
    assert names_on(pages["authors/index/3/index.html"]) == ["bob"]
    entry = pages["authors/index.html"].decode()
    assert "5 authors; the 2 newest to join here, newest first" in entry
    assert all(f'href="../authors/index/{n}/"' in entry for n in (1, 2, 3))
    # A full page links on by number and shows no count; the open page says so.
    full = pages["authors/index/2/index.html"].decode()
    assert 'rel="prev" href="../../../authors/index/1/"' in full
    assert 'rel="next" href="../../../authors/index/3/"' in full
    assert "5 authors" not in full and "new authors join" not in full
    assert "new authors join this page" in pages["authors/index/3/index.html"].decode()
    # The author called "2" keeps their diary at authors/2/: index pages never meet it.
    diary = (site / "authors" / "2" / "index.html").read_text()
    assert '<h1 dir="auto">2</h1>' in diary and "/ diary</p>" in diary


def test_a_new_dream_rewrites_only_its_authors_page_of_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render, "AUTHOR_INDEX_PAGE_SIZE", 2)
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    site = tmp_path / "site"
    join(tp, site, "ada", "bob", "cyd", "dee")
    before = index_files(site)
    assert sorted(before)[-1] == "authors/index/3/index.html"  # open, empty

    tp.add("2", 1)  # a new author joins the open page, and the entry page
    buildmod.build(tp.content, site, signer=signer)
    after = index_files(site)
    changed = {p for p in after if after[p] != before.get(p)}
    assert changed == {"authors/index.html", "authors/index/3/index.html"}
    assert names_on(after["authors/index/3/index.html"][1]) == ["2"]

    tp.add("ada", 1)  # a dream of an author of a full page: that page alone
    buildmod.build(tp.content, site, signer=signer)
    again = index_files(site)
    changed = {p for p in again if again[p] != after.get(p)}
    assert changed == {"authors/index/1/index.html"}
    assert b"2 dreams" in again["authors/index/1/index.html"][1]

    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert bodies(index_files(cold)) == bodies(again)


def test_the_sitemap_of_pages_only_grows_at_its_end(tmp_path: Path) -> None:
    """A new author and a new tag join the end of the list of pages, whatever
    their names, so a part of it the pool has moved past keeps its folders."""
    tp = make_pool(tmp_path)
    site = tmp_path / "site"
    join(tp, site, "dee", tags=["zebra"])
    join(tp, site, "cyd", tags=["yak", "zebra"])
    first = [folder for folder, _ in feeds.sitemap_pages(model_of(tp))]
    assert first == [
        "authors/dee/",
        "tags/zebra/",
        "authors/cyd/",
        "tags/yak/",
    ]
    join(tp, site, "ada", tags=["aardvark", "zebra"])  # names that sort first
    join(tp, site, "dee", tags=["yak"])
    second = [folder for folder, _ in feeds.sitemap_pages(model_of(tp))]
    assert second == [*first, "authors/ada/", "tags/aardvark/"]


def test_the_sitemap_of_pages_is_cut_into_parts_that_stay_put(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four pages a part: the site's own pages are part 1, dated by the pool;
    diaries and tag pages the next, in the order they first appear. A new
    author with a new tag joins the last part; a full part of others keeps its
    file (the writer keeps a part whose key did not change)."""
    monkeypatch.setattr(feeds, "SITEMAP_PAGES_PART", 4)
    tp = make_pool(tmp_path)
    site = tmp_path / "site"
    for name in ("ada", "bob", "cyd", "dee", "2"):
        join(tp, site, name, tags=[f"t{name}"])

    def parts() -> dict[str, tuple[int, bytes]]:
        return {
            p.name: (os.stat(p).st_ino, p.read_bytes()) for p in site.glob("sitemap-pages-*.xml")
        }

    before = parts()
    # ada, tada, bob, tbob | cyd, tcyd, dee, tdee | 2, t2
    assert sorted(before) == [f"sitemap-pages-{j}.xml" for j in range(1, 5)]
    assert b"<loc>tags/</loc>" in before["sitemap-pages-1.xml"][1]
    assert b"<loc>authors/2/</loc>" in before["sitemap-pages-4.xml"][1]
    join(tp, site, "eve", tags=["teve"])
    after = parts()
    changed = {p for p in after if after[p] != before.get(p)}
    assert "sitemap-pages-4.xml" in changed and changed <= {
        "sitemap-pages-1.xml",
        "sitemap-pages-4.xml",
    }
    assert b"<loc>tags/teve/</loc>" in after["sitemap-pages-4.xml"][1]
    assert after["sitemap-pages-2.xml"] == before["sitemap-pages-2.xml"]  # same inode too
    assert after["sitemap-pages-3.xml"] == before["sitemap-pages-3.xml"]


def test_tags_are_paged_in_the_order_they_first_appear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tags/ shows the most used; tags/index/<n>/ every tag in the order it
    first appeared. A dream of a tag on a full page changes that page and the
    entry page (its counts), no other."""
    monkeypatch.setattr(render, "TAG_INDEX_PAGE_SIZE", 2)
    tp = make_pool(tmp_path)
    site = tmp_path / "site"
    join(tp, site, "ada", tags=["zebra"])
    join(tp, site, "ada", tags=["yak", "zebra"])
    join(tp, site, "bob", tags=["auk"])
    join(tp, site, "bob", tags=["emu"])
    before = index_files(site, "tags")
    pages = bodies(before)
    assert sorted(pages) == [
        "tags/index.html",
        "tags/index/1/index.html",
        "tags/index/2/index.html",
        "tags/index/3/index.html",
    ]
    assert tags_on(pages["tags/index.html"]) == [("zebra", 2), ("auk", 1)]
    assert tags_on(pages["tags/index/1/index.html"]) == [("yak", 1), ("zebra", 2)]
    assert tags_on(pages["tags/index/2/index.html"]) == [("emu", 1), ("auk", 1)]
    assert tags_on(pages["tags/index/3/index.html"]) == []
    assert "4 tags, most used first; the 2 most used here" in pages["tags/index.html"].decode()

    join(tp, site, "bob", tags=["yak"])
    after = index_files(site, "tags")
    changed = {p for p in after if after[p] != before[p]}
    assert changed == {"tags/index.html", "tags/index/1/index.html"}
    assert tags_on(after["tags/index/1/index.html"][1]) == [("yak", 2), ("zebra", 2)]

    join(tp, site, "bob", tags=["owl"])  # a new tag joins the open page
    again = index_files(site, "tags")
    changed = {p for p in again if again[p] != after[p]}
    assert changed == {"tags/index.html", "tags/index/3/index.html"}
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert bodies(index_files(cold, "tags")) == bodies(again)


def test_an_author_hidden_until_they_sign_openly_joins_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool from before one-time keys (docs/protocol.md §1.2) may hold a dream
    anonymized under its author's own name and key; that author is not listed
    until they sign openly, and then joins at the end, not back at that key's
    leaf, where they would push a full page's authors along (review r58)."""
    monkeypatch.setattr(render, "AUTHOR_INDEX_PAGE_SIZE", 2)
    tp = make_pool(tmp_path)
    site = tmp_path / "site"
    join(tp, site, "ada", "bob")
    with monkeypatch.context() as legacy:  # as admission was before one-time keys
        legacy.setattr(anonymity, "refusals", lambda *a, **k: {})
        body = draft(author="cyd", title="legacy", consent=dict(ANONYMIZED))
        signed = tmp_path / "legacy.json"
        signed.write_text(json.dumps(dreamfmt.sign(body, MORE["cyd"])), encoding="utf-8")
        pool.submit(tp.content, [signed])
        join(tp, site)
    assert "cyd" not in (site / "authors" / "index.html").read_text()
    join(tp, site, "dee", "eve")
    page2 = site / "authors" / "index" / "2" / "index.html"
    assert names_on(page2.read_bytes()) == ["eve", "dee"]
    listed = [folder for folder, _ in feeds.sitemap_pages(model_of(tp))]

    join(tp, site, "cyd")  # signs openly now
    assert names_on(page2.read_bytes()) == ["eve", "dee"]
    assert names_on((site / "authors" / "index" / "3" / "index.html").read_bytes()) == ["cyd"]
    assert [folder for folder, _ in feeds.sitemap_pages(model_of(tp))] == [
        *listed,
        "authors/cyd/",
    ]


def test_incremental_builds_equal_a_cold_one_through_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After each change (a tier, an erasure, an anonymized dream, a hostile
    new name, an author called "index") the kept pages of the indexes and
    sitemaps equal a cold build's: their keys cover all they show."""
    monkeypatch.setattr(render, "AUTHOR_INDEX_PAGE_SIZE", 2)
    monkeypatch.setattr(render, "TAG_INDEX_PAGE_SIZE", 2)
    monkeypatch.setattr(feeds, "SHARD_LEAVES", 4)
    monkeypatch.setattr(feeds, "SITEMAP_PAGES_PART", 2)
    monkeypatch.setitem(pools.SEEDS, "<b>&x", bytes([20] * 32))
    monkeypatch.setitem(pools.SEEDS, "index", bytes([21] * 32))
    tp = make_pool(tmp_path)
    site = tmp_path / "site"
    first: list[str] = []
    for name in ("ada", "bob", "cyd", "dee", "eve"):
        first += tp.add(name, 1, tags=[f"t{name}"])
        join(tp, site)

    def same_as_cold(step: str) -> None:
        cold = tmp_path / f"cold-{step}"
        buildmod.build(tp.content, cold, signer=None)
        for kind in ("authors", "tags"):
            assert bodies(index_files(site, kind)) == bodies(index_files(cold, kind)), step
        sitemaps = {p.name: p.read_bytes() for p in site.glob("sitemap*.xml")}
        assert sitemaps == {p.name: p.read_bytes() for p in cold.glob("sitemap*.xml")}, step

    same_as_cold("start")
    key_file = tp.content / "keys" / f"{key_id_of('bob')[7:]}.yaml"
    key_file.write_text(key_file.read_text().replace("tier: guest", "tier: member"))
    join(tp, site)
    same_as_cold("tier")
    for p in tp.content.parent.glob("in-*.json"):
        p.unlink()  # the submitted copies, which erase would find as residue
    erase.erase(tp.content, first[0], "author-request")
    join(tp, site)
    same_as_cold("erasure")
    join(tp, site, "cyd", consent=dict(ANONYMIZED))
    same_as_cold("anonymized")
    join(tp, site, "<b>&x", tags=["<i>"])
    same_as_cold("hostile")
    entry = (site / "authors" / "index.html").read_text()
    assert "<b>&x" not in entry and "&lt;b&gt;&amp;x" in entry
    join(tp, site, "index")
    same_as_cold("index")
    assert not (site / "authors" / "index" / "index.html").exists()
