"""Whole builds: reproducible, atomic under SIGKILL, and equal to a golden copy."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache, parallel
from builder.buildcache import BuildCache
from builder.formats.note import parse_private_key
from builder.site import assemble, favicon, feeds, patterns, render, units, writer
from tests.conftest import REPO
from tests.pools import PoolFixture, key_id_of, make_pool
from tests.test_agents import set_tier

GOLDEN = REPO / "tests" / "golden"


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture
def built(tmp_path: Path) -> PoolFixture:
    tp = make_pool(tmp_path)
    tp.add("ada", 4)
    tp.add("bob", 3, consent={"share": True, "derivatives": True, "anonymize": True})
    tp.add("墨子", 2)
    buildmod.build(tp.content, tmp_path / "first", signer=parse_private_key(tp.log_key))
    return tp


def test_two_builds_are_byte_identical(built: PoolFixture, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    buildmod.build(built.content, a, signer=None)
    buildmod.build(built.content, b, signer=None)
    assert tree(a) == tree(b)
    assert tree(a) == tree(tmp_path / "first")


def test_rebuild_in_place_keeps_identical_bytes(built: PoolFixture, tmp_path: Path) -> None:
    site = tmp_path / "first"
    before = tree(site)
    buildmod.build(built.content, site, signer=None)
    assert tree(site) == before


def test_golden_fixture_site() -> None:
    """The committed fixture pool builds exactly the committed golden site.

    After an intended change to pages, regenerate with
    `python -m tests.golden_update` and review the diff.
    """
    from tests.golden_update import build_golden

    got = build_golden()
    want = tree(GOLDEN / "site")
    assert sorted(got) == sorted(want), set(got) ^ set(want)
    for path in want:
        assert got[path] == want[path], f"{path} differs from tests/golden/site/{path}"


def _build_cmd(tp: PoolFixture, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "builder",
        "build",
        "--content",
        str(tp.content),
        "--out",
        str(out),
        "--quiet",
    ]


def test_killed_build_leaves_previous_site_and_log_intact(tmp_path: Path) -> None:
    tp = make_pool(tmp_path)
    tp.add("ada", 150)
    site = tmp_path / "site"
    env = {**os.environ, "DREAMPOOL_LOG_KEY": tp.log_key}
    subprocess.run(_build_cmd(tp, site), check=True, env=env, capture_output=True)
    tp.add("bob", 150)
    site_before = tree(site)
    rng = random.Random(7)
    started = time.monotonic()
    subprocess.run(_build_cmd(tp, tmp_path / "timing"), check=True, env=env, capture_output=True)
    duration = time.monotonic() - started
    (tmp_path / "timing").unlink()  # a symlink to a generation (builder.site.writer)
    shutil.rmtree(tmp_path / ".timing.builds")
    content_copy = tmp_path / "content-copy"
    for moment in sorted(rng.uniform(0.05, 0.95) * duration for _ in range(6)):
        shutil.rmtree(content_copy, ignore_errors=True)
        shutil.copytree(tp.content, content_copy)
        proc = subprocess.Popen(
            _build_cmd(tp, site), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(moment)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        now = tree(site)
        # Either the old site, untouched, or (if the swap already happened) a
        # complete new one; never a mix.
        # 150 + 150 dreams and one key leaf each: the new log holds 302 leaves.
        assert now == site_before or (
            "log/checkpoints/302" in now and "log/consistency/151" in now and "index.html" in now
        )
        if now != site_before:
            break
    # The next build succeeds and is consistent with what was published.
    result = subprocess.run(_build_cmd(tp, site), env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (site / "log" / "consistency" / "151").exists()
    assert not list(tmp_path.glob(".site.new-*"))


def test_the_command_exits_with_the_builds_code_and_all_its_output(tmp_path: Path) -> None:
    """`dreampool build` ends with os._exit after a build (builder.cli.main.run):
    its exit code and every line it printed still reach the caller, through
    pipes, for a clean build and for one that refuses a file."""
    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    env = {**os.environ, "DREAMPOOL_LOG_KEY": tp.log_key}
    site = tmp_path / "site"
    first = subprocess.run(_build_cmd(tp, site), env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"built {site}: 3 admitted, 0 refused")
    (tp.content / "dreams" / "broken.json").write_text("{", encoding="utf-8")
    second = subprocess.run(_build_cmd(tp, site), env=env, capture_output=True, text=True)
    assert second.returncode == 1
    assert "0 admitted, 1 refused" in second.stdout
    assert "dreampool: refused: " in second.stderr and "broken.json" in second.stderr


@pytest.mark.parametrize("check_fork_min", [units.CHECK_FORK_MIN, 0])
def test_incremental_and_cold_builds_are_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check_fork_min: int
) -> None:
    """250 dreams: enough that verification and dream pages run on every core.
    The incremental side is built four times, so both generations of its output
    and its cache are used; the cold side once, with no cache. The units' keys
    and checks (units.Units._check) run in this process, then on forked workers,
    as they do from units.CHECK_FORK_MIN dreams on; one kept page is edited in
    place in the generation the last build writes, which must not keep it."""
    monkeypatch.setattr(units, "CHECK_FORK_MIN", check_fork_min)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    forked: list[object] = []
    fork_pool = parallel._fork_pool

    def spied(processes: int, task: Any) -> Any:
        forked.append(getattr(task, "__func__", task))
        return fork_pool(processes, task)

    monkeypatch.setattr(parallel, "_fork_pool", spied)
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    ids = tp.add("ada", 250, tags=["shared"])
    incremental = tmp_path / "incremental"
    first = buildmod.build(tp.content, incremental, signer=signer)
    assert (first.verified, first.rendered) == (250, 250)
    tp.add("bob", 3, tags=["shared"])
    second = buildmod.build(tp.content, incremental, signer=signer)
    # Only the new dreams are read, verified and rendered: the rest is kept.
    assert (second.verified, second.rendered) == (3, 3)
    child = tp.add("墨子", 1, lineage={"parent": ids[0], "generation": 1})
    third = buildmod.build(tp.content, incremental, signer=signer)
    assert (third.verified, third.rendered) == (1, 2)  # the child, and its parent's new link
    live = incremental.resolve()
    other = live.parent / ("a" if live.name == "b" else "b")
    edited = other / "dreams" / ids[1] / "index.html"
    edited.write_bytes(edited.read_bytes() + b"<!-- edited in place -->")
    # The workers' answers are used: no unit they found held is looked for elsewhere.
    looked: list[str] = []
    can_keep = writer.SiteWriter.can_keep

    def spied_can_keep(self: writer.SiteWriter, rel: str, want: bytes) -> bool:
        looked.append(rel)
        return can_keep(self, rel, want)

    monkeypatch.setattr(writer.SiteWriter, "can_keep", spied_can_keep)
    again = buildmod.build(tp.content, incremental, signer=None)
    # (the edited unit, and the two the last build rendered into the other
    # generation: this one, two builds old, holds their older files)
    units_looked = {rel.split("/")[1] for rel in looked if rel.startswith("dreams/")}
    assert ids[1] in units_looked and units_looked <= {ids[0], ids[1], child[0]}
    # The edited page's unit only: a kept file is a hard link of the other
    # generation's, so neither generation holds that page as recorded.
    assert (again.verified, again.rendered) == (0, 1)
    assert (units.Units._check in forked) == (check_fork_min == 0)
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert tree(incremental) == tree(cold)
    assert child[0] in (cold / "dreams" / ids[0] / "index.html").read_text()
    # The shared tag spans three pages; every link on them resolves.
    from tests.test_links import broken_links

    assert (cold / "tags" / "shared" / "3" / "index.html").is_file()
    assert not (cold / "tags" / "shared" / "4").exists()
    assert broken_links(cold, "/") == []


@pytest.mark.parametrize("check_fork_min", [units.CHECK_FORK_MIN, 0])
def test_a_build_that_fails_in_the_units_checks_leaves_no_worker_or_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check_fork_min: int
) -> None:
    """Review r38. From units.CHECK_FORK_MIN dreams on, Units.write consumes the
    units' checks from ``parallel.imap_ordered`` while its forked workers run;
    an error in that loop (here a stand-in for one of SiteWriter.keep's
    PlanErrors) leaves the generator suspended, never closed, so its pool is
    never shut down: the build has returned (raised), yet its workers live on
    holding their copies of the pool lock and the build lock until whoever
    caught the error lets its traceback go, and a second build in the same
    process is refused ("another build ... is writing the pool"). In process
    (below the threshold) nothing is left behind."""
    import multiprocessing

    from builder.errors import DreampoolError
    from builder.site import writer

    monkeypatch.setattr(units, "CHECK_FORK_MIN", check_fork_min)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    tp = make_pool(tmp_path)
    tp.add("ada", 30)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    buildmod.build(tp.content, site, signer=None)  # both generations hold every unit
    real = writer.SiteWriter.keep_all
    calls = []

    def fails(self: writer.SiteWriter, files: Any, *, held: bool | None = None) -> bool:
        calls.append(files)
        if len(calls) == 3:
            raise writer.PlanError("kept, but a folder of it is a link (stand-in)")
        return real(self, files, held=held)

    with monkeypatch.context() as m:
        m.setattr(writer.SiteWriter, "keep_all", fails)
        with pytest.raises(writer.PlanError) as failed:
            buildmod.build(tp.content, site, signer=None)
    left = multiprocessing.active_children()
    try:
        buildmod.build(tp.content, site, signer=None)
        refused = None
    except DreampoolError as exc:
        refused = str(exc)
    del failed  # lets the suspended generator close, so no worker outlives the test
    assert (left, refused) == ([], None)


def test_a_cosignature_added_later_reaches_every_proof_against_that_checkpoint(
    tmp_path: Path,
) -> None:
    """docs/operators.md, "Add a witness": the cosignature line is appended to
    content/log/checkpoints/<size> and the pool built again. The proofs embed
    that note, so a build that kept them by the checkpoint's size alone
    published proofs without the cosignature beside a checkpoint with it."""
    from builder.formats import checkpoint as cpmod

    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    ids = tp.add("ada", 2)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    key, vkey = cpmod.generate_cosigner_key("witness.example/w1")
    policy = tp.content / "log" / "policy"
    policy.write_text(policy.read_text().replace("quorum none", f"witness w1 {vkey}\nquorum none"))
    stored = tp.content / "log" / "checkpoints" / "3"
    note = stored.read_bytes()
    text = note.split(b"\n\n")[0].decode() + "\n"
    line = cpmod.cosign(text, cpmod.parse_cosigner_private_key(key), 1_767_225_600).encode()
    stored.write_bytes(note + line)
    report = buildmod.build(tp.content, site, signer=signer)
    assert report.rendered == 2  # both proofs are against checkpoint 3
    for i in ids:
        assert (site / "dreams" / i / "proof.tlog-proof").read_bytes().endswith(line)
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert tree(site) == tree(cold)


def test_deflated_fragments_change_no_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pools above units.SQUEEZE_ABOVE keep cards, diary lines, feed and search
    entries deflated in the store. A pool that grows past it
    keeps its raw ones beside new deflated ones; none of it shows in a byte."""
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    raw = tp.add("ada", 12, tags=["shared"])
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    monkeypatch.setattr(units, "SQUEEZE_ABOVE", 10)
    squeezed = tp.add("墨子", 2, tags=["shared"])
    report = buildmod.build(tp.content, site, signer=signer)
    assert report.rendered == 2  # the twelve raw units are kept, fragments and all
    cache = BuildCache(tmp_path / ".site.builds" / "cache")
    kept, rows = cache["units"], cache.rows("fragments")
    assert {rows.get(kept[i][0])[0][:1] for i in raw} != {units.SQUEEZED}
    assert {f[:1] for i in squeezed for f in rows.get(kept[i][0])} == {units.SQUEEZED}
    rows.close()
    cold_squeezed = tmp_path / "cold-squeezed"
    buildmod.build(tp.content, cold_squeezed, signer=None)
    monkeypatch.undo()
    cold_raw = tmp_path / "cold-raw"
    buildmod.build(tp.content, cold_raw, signer=None)
    assert tree(site) == tree(cold_raw) == tree(cold_squeezed)


@pytest.mark.usefixtures("pages_here")
def test_feeds_are_made_again_only_when_what_they_show_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Atom feed carries a key (builder.site.feeds.feed_pages): a new dream
    makes the pool's feed and its author's and tags' feeds again, and keeps
    every other; a new pool title makes them all again. Either way the site
    is the one a cold build makes."""
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    tp.add("ada", 3, tags=["t-ada"])
    tp.add("bob", 2, tags=["t-bob"])
    tp.add("墨子", 1, tags=["t-mozi"])
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    made: list[str] = []
    feed = feeds._feed

    def counted(model: object, **kwargs: Any) -> bytes:
        made.append(kwargs["path"])
        return feed(model, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(feeds, "_feed", counted)
    tp.add("bob", 1, tags=["t-bob"])
    buildmod.build(tp.content, site, signer=signer)
    assert sorted(made) == ["authors/bob/feed.xml", "feed.xml", "tags/t-bob/feed.xml"]
    made.clear()
    config = tp.content / "pool.yaml"
    config.write_text(config.read_text().replace("Test pool", "Renamed pool"), encoding="utf-8")
    buildmod.build(tp.content, site, signer=signer)
    assert len(made) == 1 + 3 + 3 and "Renamed pool" in (site / "feed.xml").read_text()
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert tree(site) == tree(cold)


def _built_with_ten(tmp_path: Path) -> tuple[PoolFixture, Any, Path]:
    """A pool of ten dreams of ada's, built once with its log key: the pool, the
    signer and the site, for a test of what the next build makes again."""
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    tp.add("ada", 10)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    return tp, signer, site


@pytest.mark.usefixtures("pages_here")
def test_only_the_search_shards_that_change_are_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search shard carries a key (builder.site.render.list_pages): a new dream
    makes the newest shard again and keeps the ones the log has moved past."""
    monkeypatch.setattr(render, "SEARCH_SHARD_LEAVES", 4)
    tp, signer, site = _built_with_ten(tmp_path)
    made: list[int] = []
    shard = render.search_shard

    def counted(dreams: Any, entry: Any) -> bytes:
        made.append(dreams[0].index // 4)
        return shard(dreams, entry)

    monkeypatch.setattr(render, "search_shard", counted)
    tp.add("ada", 1)
    buildmod.build(tp.content, site, signer=signer)
    # Leaves: ada's key, then the dreams; the new dream is leaf 11, in shard 2.
    assert made == [2]
    assert len(list((site / "search").glob("shard-*.json"))) == 3
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert tree(site) == tree(cold)


@pytest.mark.usefixtures("pages_here")
def test_only_the_sitemaps_that_change_are_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each sitemap but the index carries a key (builder.site.feeds.sitemap_files):
    a new dream makes its leaf shard's sitemap again, and keeps the shards the
    log has moved past."""
    monkeypatch.setattr(feeds, "SHARD_LEAVES", 4)
    tp, signer, site = _built_with_ten(tmp_path)
    made: list[list[tuple[str, str | None]]] = []
    urlset = feeds._urlset

    def counted(model: Any, part: list[tuple[str, str | None]]) -> bytes:
        made.append(part)
        return urlset(model, part)

    monkeypatch.setattr(feeds, "_urlset", counted)
    tp.add("ada", 1)
    buildmod.build(tp.content, site, signer=signer)
    # Leaves: ada's key, then the dreams; the new dream is leaf 11, in shard 2
    # with leaves 8 to 10. sitemap-pages-1 (the site's own pages, from the home
    # page) and sitemap-pages-2 (ada's diary and tags, dated by her newest
    # dream) are made again only if the date moved (not in one second).
    dreams = [part for part in made if part[0][0].startswith("dreams/")]
    assert [len(part) for part in dreams] == [4]
    assert all(part[0][0] in ("", "authors/ada/") for part in made if part not in dreams)
    assert len(made) <= 3
    assert len(list(site.glob("sitemap-dreams-*.xml"))) == 3
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert tree(site) == tree(cold)


@pytest.mark.usefixtures("pages_here")
def test_the_favicon_is_drawn_once_and_then_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """favicon.ico depends on no input (builder.site.favicon.ICO_KEY): the first
    build draws it, the next ones keep its file, with or without a new dream;
    a build without the store draws it again, the same bytes."""
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    tp.add("ada", 2)
    site = tmp_path / "site"
    drawn: list[int] = []
    bmp = favicon._bmp

    def counted(size: int, samples: int = 4) -> bytes:
        drawn.append(size)
        return bmp(size, samples)

    monkeypatch.setattr(favicon, "_bmp", counted)
    favicon.ico.cache_clear()  # as in a new process
    buildmod.build(tp.content, site, signer=signer)
    assert drawn == [16, 32]
    first = (site / "favicon.ico").read_bytes()
    for more in (0, 1):
        favicon.ico.cache_clear()
        tp.add("bob", more)
        buildmod.build(tp.content, site, signer=signer)
        assert drawn == [16, 32] and (site / "favicon.ico").read_bytes() == first
    favicon.ico.cache_clear()
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert drawn == [16, 32] * 2
    assert tree(site) == tree(cold)
    favicon.ico.cache_clear()


@pytest.mark.usefixtures("pages_here")
def test_a_new_dream_in_a_chain_makes_only_its_lineage_page_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lineage pages carry a key and hold LINEAGE_PAGE_TREES chains, oldest
    root first: a child of one root makes that root's page again, no other."""
    monkeypatch.setattr(render, "LINEAGE_PAGE_TREES", 1)
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    roots = [tp.add("ada", 1, lineage={"generation": 0})[0] for _ in range(3)]
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    # One build admits in id order, so find the page of the first root.
    (holder,) = [
        str(p.relative_to(site))
        for p in sorted((site / "lineage").rglob("index.html"))
        if roots[0] in p.read_text()
    ]
    made: list[str] = []
    page = render._page

    def counted(model: Any, path: str, *args: Any, **kwargs: Any) -> bytes:
        made.append(path)
        return page(model, path, *args, **kwargs)

    monkeypatch.setattr(render, "_page", counted)
    tp.add("bob", 1, lineage={"parent": roots[0], "generation": 1})
    buildmod.build(tp.content, site, signer=signer)
    assert [p for p in made if p.startswith("lineage/")] == [holder]
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert tree(site) == tree(cold)
    from tests.test_links import broken_links

    assert (cold / "lineage" / "3" / "index.html").is_file() and broken_links(cold, "/") == []


def test_the_patterns_are_counted_again_only_when_what_they_read_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patterns the page shows are kept in the store under the key of their
    inputs (patterns.inputs_key): a build after no new dream, or only a guest's,
    reads no words and counts nothing. A member's new dream is added to the last
    build's counts (patterns.add_new: its words alone are read), as is nothing
    when only the patterns' row is lost; a changed tier, or a lost store, counts
    every dream again. Every build gives a cold build's bytes."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # every dream in one month
    monkeypatch.setattr(assemble, "BACKGROUND_PATTERNS_LIMIT", -1)  # here, to be seen
    counted: list[tuple[str, int]] = []
    full, add = patterns.count, patterns.add_new

    def counting(model: Any, **kw: Any) -> patterns.Counts:
        counted.append(("all", len(model.dreams)))
        return full(model, **kw)

    def adding(kept: Any, model: Any, words: Any) -> patterns.Counts | None:
        def read(new: Any) -> Any:
            counted.append(("new", len(new)))
            return words(new)

        return add(kept, model, read)

    monkeypatch.setattr(patterns, "count", counting)
    monkeypatch.setattr(patterns, "add_new", adding)
    words_loaded = []
    load = buildcache.BuildCache._load

    def loading(self: Any, name: str) -> Any:
        words_loaded.append(name == "words")
        return load(self, name)

    monkeypatch.setattr(buildcache.BuildCache, "_load", loading)
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    site = tmp_path / "site"
    for author in ("ada", "bob"):
        tp.add(author, 2, tags=["databases"])
        set_tier(tp.content, key_id_of(author), "member")
    store = tmp_path / ".site.builds" / "cache" / buildcache.STORE

    def built() -> list[tuple[str, int]]:
        words_loaded.clear()
        before = len(counted)
        buildmod.build(tp.content, site, signer=signer)
        # Every dream's words are read by a full count, and only then.
        assert any(words_loaded) == any(kind == "all" for kind, _ in counted[before:])
        cold = tmp_path / "cold"
        shutil.rmtree(cold, ignore_errors=True)
        shutil.rmtree(tmp_path / ".cold.builds", ignore_errors=True)
        with monkeypatch.context() as m:
            m.setattr(patterns, "count", full)
            m.setattr(patterns, "add_new", add)
            buildmod.build(tp.content, cold, signer=None)
        assert tree(site) == tree(cold)
        assert "databases" in (site / "patterns" / "index.html").read_text(encoding="utf-8")
        return counted

    assert built() == [("all", 4)]
    assert built() == [("all", 4)]  # no new dream
    tp.add("墨子", 1, tags=["databases"])  # a guest's
    assert built() == [("all", 4)]
    tp.add("ada", 1)
    assert built() == [("all", 4), ("new", 1)]  # the other dreams' words are not read
    set_tier(tp.content, key_id_of("墨子"), "member")
    assert built() == [("all", 4), ("new", 1), ("all", 6)]
    db = sqlite3.connect(store, isolation_level=None)
    db.execute(
        "UPDATE patterns SET v = CAST(replace(CAST(v AS TEXT), 'databases', 'databasez') AS BLOB)"
    )
    db.close()
    assert built() == [("all", 4), ("new", 1), ("all", 6), ("new", 0)]
    store.unlink()
    assert built()[-1] == ("all", 6)


@pytest.mark.parametrize("damage", ["deleted", "garbage", "truncated"])
def test_a_damaged_build_cache_costs_time_only(tmp_path: Path, damage: str) -> None:
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    tp.add("ada", 20)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    tp.add("bob", 2)
    store = tmp_path / ".site.builds" / "cache" / buildcache.STORE
    assert store.is_file()
    if damage == "deleted":
        store.unlink()
    elif damage == "garbage":
        store.write_bytes(store.read_bytes()[:100] + os.urandom(store.stat().st_size))
    else:
        store.write_bytes(store.read_bytes()[:3000])
    report = buildmod.build(tp.content, site, signer=signer)
    # The 20 logged dreams are taken by their leaves, the two new ones verified.
    assert (report.verified, report.committed, report.rendered) == (2, 20, 22)
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert tree(site) == tree(cold)


def test_compiled_templates_are_never_read_from_disk(tmp_path: Path) -> None:
    """T44: Jinja's bytecode cache is marshalled code, which runs when loaded;
    the build kept one in its cache folder, where a pull request could plant
    it. Templates are compiled ahead of time into the installed package now
    (builder.site.templates_compiled, tests/test_compiled_templates.py), or
    in memory by each build: a build in a new process leaves no compiled code
    beside the output, and one planted there is removed unread."""
    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    site = tmp_path / "site"
    env = {**os.environ, "DREAMPOOL_LOG_KEY": tp.log_key}
    subprocess.run(_build_cmd(tp, site), check=True, env=env, capture_output=True)
    cache = tmp_path / ".site.builds" / "cache"
    assert sorted(p.name for p in cache.iterdir()) == [buildcache.STORE]
    assert render._ENV.bytecode_cache is None
    planted = cache / "jinja" / ("0" * 32)
    planted.mkdir(parents=True)
    (planted / "x.cache").write_bytes(b"j2\x00" + os.urandom(64))
    tp.add("bob", 1)
    proc = subprocess.run(_build_cmd(tp, site), env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not (cache / "jinja").exists()


def test_a_full_disk_is_a_clear_error_and_keeps_the_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno

    from builder.cli import main as cli
    from builder.site import writer

    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    before = tree(site)
    tp.add("bob", 1)

    def full(self: writer.SiteWriter, rel: str, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", f"{self.gen}/{rel}")

    monkeypatch.setattr(writer.SiteWriter, "store", full)
    monkeypatch.setenv("DREAMPOOL_LOG_KEY", tp.log_key)
    code = cli.main(["build", "--content", str(tp.content), "--out", str(site), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert "No space left on device" in err and "hint: free some space" in err
    assert "Traceback" not in err
    assert tree(site) == before


def test_a_failed_build_leaves_no_folder_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A build that fails before its site goes live leaves no `.<out>.builds/`, nor a
    parent it made for --out: not for a folder that is no pool, not for a first build
    without the log key, not for one that fails writing its first site. A live site
    and its folder stay when a later build fails."""
    import errno

    from builder.cli import main as cli
    from builder.site import writer

    def names() -> list[str]:
        return sorted(p.name for p in tmp_path.iterdir())

    def build(content: Path, out: Path) -> tuple[int, str]:
        code = cli.main(["build", "--content", str(content), "--out", str(out), "--quiet"])
        return code, capsys.readouterr().err

    tp = make_pool(tmp_path)
    tp.add("ada", 1)
    monkeypatch.delenv("DREAMPOOL_LOG_KEY", raising=False)
    before = names()
    code, err = build(tmp_path / "nowhere", tmp_path / "site")
    assert code == 1 and "is not a pool" in err
    assert names() == before
    for out in (tmp_path / "site", tmp_path / "new" / "dir" / "site"):
        code, err = build(tp.content, out)
        assert code == 1 and "the first build needs the log key" in err
        assert names() == before, out

    def broken(self: writer.SiteWriter, rel: str, data: bytes) -> None:
        raise OSError(errno.EIO, "Input/output error", f"{self.gen}/{rel}")

    monkeypatch.setenv("DREAMPOOL_LOG_KEY", tp.log_key)
    with monkeypatch.context() as m:
        m.setattr(writer.SiteWriter, "store", broken)
        code, err = build(tp.content, tmp_path / "site")
    assert code == 1 and "Input/output error" in err
    assert names() == before  # the log state it signed is in content/, as always
    assert (tp.content / "log" / "policy").is_file()

    assert build(tp.content, tmp_path / "site")[0] == 0
    live = tree(tmp_path / "site")
    tp.add("bob", 1)
    monkeypatch.setattr(writer.SiteWriter, "store", broken)
    assert build(tp.content, tmp_path / "site")[0] == 1
    assert tree(tmp_path / "site") == live
    assert (tmp_path / ".site.builds" / "cache").is_dir()


def test_an_emptied_manifest_costs_a_full_rewrite_only(tmp_path: Path) -> None:
    """A power cut can leave the generation not live with a zero-length
    manifest. Read as an empty one, the generation kept an erased dream's
    record (published again) and the temporary links of the files kept
    from the live generation."""
    from builder.log import erase

    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    ids = tp.add("ada", 3)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    tp.add("bob", 1)
    buildmod.build(tp.content, site, signer=signer)
    assert os.readlink(site) == ".site.builds/b"
    (tmp_path / ".site.builds" / "manifest-a").write_bytes(b"")
    erase.erase(tp.content, ids[0], "author-request")
    for _ in range(2):
        buildmod.build(tp.content, site, signer=signer)
        assert not (site / "dreams" / ids[0] / "record.json").exists()
        assert sorted(site.rglob("*.tmp")) == []
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert tree(site) == tree(cold)


def test_the_policy_gains_the_logs_url_when_a_build_first_learns_it(tmp_path: Path) -> None:
    """A first build without an https base URL (a local one, or pool.yaml's `/`)
    writes `log <vkey>` alone; the first later build given `--base-url https://…`
    adds `<url>log/` to that line, as docs/operators.md and verifiers.md show, and
    says so. The key stays, so a policy pinned before still verifies every proof,
    and a URL once there is never replaced by a build."""
    from builder.readers import lightclient

    tp = make_pool(tmp_path)
    (ada,) = tp.add("ada", 1)
    policy = tp.content / "log" / "policy"
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    pinned = policy.read_bytes()
    assert pinned == f"log {tp.vkey}\nquorum none\n".encode()
    # A preview's http address never goes into the policy.
    buildmod.build(tp.content, tmp_path / "site", signer=None, base_url="http://127.0.0.1:8000/")
    assert policy.read_bytes() == pinned

    report = buildmod.build(
        tp.content, tmp_path / "site", signer=None, base_url="https://dreams.example/pool"
    )
    learned = f"log {tp.vkey} https://dreams.example/pool/log/\nquorum none\n".encode()
    assert policy.read_bytes() == learned
    assert (tmp_path / "site" / "log" / "policy").read_bytes() == learned
    assert [n for n in report.notes if "added the log's URL" in n], report.notes
    page = tmp_path / "site" / "dreams" / ada
    for trusted in (pinned, learned):
        result = lightclient.verify_proof(
            (page / "proof.tlog-proof").read_bytes(), (page / "record.json").read_bytes(), trusted
        )
        assert result.id == ada

    again = buildmod.build(
        tp.content, tmp_path / "site", signer=None, base_url="https://elsewhere.example/"
    )
    assert policy.read_bytes() == learned
    assert not [n for n in again.notes if "added the log's URL" in n]


def test_only_this_origins_log_lines_without_a_url_gain_it() -> None:
    from builder.log.logbuild import _with_log_url

    text = (
        "# the pool's log; the old key stays after a rotation\n"
        "log a.example/p+01+AAA\n"
        "  log\ta.example/p+02+BBB  \n"
        "log a.example/p+03+CCC https://old.example/log/\n"
        "log other.example/q+04+DDD\n"
        "# log a.example/p+05+EEE\n"
        "quorum none\n"
    )
    assert _with_log_url(text, "a.example/p", "https://a.example/p/log/") == (
        "# the pool's log; the old key stays after a rotation\n"
        "log a.example/p+01+AAA https://a.example/p/log/\n"
        "  log\ta.example/p+02+BBB https://a.example/p/log/\n"
        "log a.example/p+03+CCC https://old.example/log/\n"
        "log other.example/q+04+DDD\n"
        "# log a.example/p+05+EEE\n"
        "quorum none\n"
    )


def test_dreams_are_counted_for_a_progress_bar_only(
    built: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dream files are listed to size a progress bar, and only for one: without
    a meter (quiet, not a terminal, CI: `dreampool build` passes none) the scan's
    own listing is the only one (at 100k dreams the count took 0.1 s a build)."""
    counted: list[int] = []
    real = buildmod._count_dreams

    def count(content: Path) -> int:
        counted.append(real(content))
        return counted[-1]

    monkeypatch.setattr(buildmod, "_count_dreams", count)
    signer = parse_private_key(built.log_key)
    buildmod.build(built.content, tmp_path / "quiet", signer=signer)
    assert counted == []
    totals: list[int] = []

    @contextlib.contextmanager
    def meter(total: int, label: str) -> Iterator[Any]:
        totals.append(total)
        yield types.SimpleNamespace(advance=lambda n=1: None)

    buildmod.build(built.content, tmp_path / "drawn", signer=signer, progress=meter)
    assert len(counted) == 1 and totals == counted and counted[0] >= 9  # built's nine dreams


def test_list_pages_read_each_fragment_row_once_and_hold_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dream is on many of the list pages a build renders again (home,
    archive, its author's and its tags' pages, feeds, search, the API):
    a +100 at 10k dreams read 9,956 fragment rows, 2,583 of them distinct,
    each checked over all its bytes (benchmarks/PROFILE.md, twenty-fourth
    session). Units.prefetch keeps the last rows it read, up to
    units.RECENT_BYTES of them (bytes, not rows: a long dream's row is
    50 KB, review r94): with room for all, no row is read twice; with room
    for a few, rows are read again, never more bytes than that are held,
    and neither changes a byte of the site."""
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    for author in ("ada", "bob"):
        tp.add(author, 6, tags=["shared", f"only-{author}"])
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    asked: list[str] = []
    held: list[int] = []
    real_get_many = buildcache.Rows.get_many
    real_prefetch = units.Units.prefetch

    def counting(self: buildcache.Rows, keys: Any) -> Any:
        asked.extend(keys)
        return real_get_many(self, keys)

    def prefetch(self: units.Units, dreams: Any) -> None:
        real_prefetch(self, dreams)
        held.append(self._recent_bytes)

    monkeypatch.setattr(buildcache.Rows, "get_many", counting)
    monkeypatch.setattr(units.Units, "prefetch", prefetch)
    tp.add("ada", 2, tags=["shared"])
    buildmod.build(tp.content, site, signer=signer)
    assert asked and len(asked) == len(set(asked))
    first = tree(site)
    asked.clear()
    held.clear()
    monkeypatch.setattr(units, "RECENT_BYTES", 10_000)  # a few rows of these
    tp.add("bob", 2, tags=["shared"])
    buildmod.build(tp.content, site, signer=signer)
    assert len(asked) > len(set(asked)) and 0 < max(held) <= 10_000
    cold = tmp_path / "cold"
    monkeypatch.undo()
    buildmod.build(tp.content, cold, signer=None)
    assert tree(site) == tree(cold) and first != tree(site)
