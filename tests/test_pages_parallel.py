"""List pages rendered by forked workers (builder.site.assemble._write_pages)
are the pages the build's own process renders, byte for byte, and what a
worker finds wrong with the store reaches the build's process.

Each test forces two workers and windows of a few pages, so a pool of a
handful of dreams goes through several forks; the witness is a build of the
same content with every page rendered in process."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache, parallel
from builder.cli import main as cli
from builder.formats.note import parse_private_key
from builder.site import agentdocs, assemble
from builder.site import units as unitsmod
from builder.site.writer import SiteWriter
from tests.pools import PoolFixture, make_pool
from tests.test_buildcache import break_table
from tests.test_store_restore import _store, site_files


def _forking(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every window of pages goes to two forked workers, three pages a window,
    a page at a time; returns the sizes of the windows that forked."""
    forked: list[int] = []
    real = parallel.imap_ordered

    def imap(func: Callable[[Any], Any], items: Any, **kw: Any) -> Any:
        if kw.get("min_items") == 1:
            forked.append(len(items))
            kw["chunk"] = 1  # both workers render pages of each window
        return real(func, items, **kw)

    monkeypatch.setattr(assemble, "PAGES_FORK_MIN", 1)
    monkeypatch.setattr(assemble, "PAGE_WINDOW", 3)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(assemble.parallel, "imap_ordered", imap)
    return forked


def _in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assemble, "PAGES_FORK_MIN", 10**9)


def _pool(root: Path) -> PoolFixture:
    tp = make_pool(root)
    tp.add("ada", 4, tags=["memory", "tools"])
    tp.add("bob", 3, tags=["memory"])
    tp.add("墨子", 2)
    return tp


def _build(tp: PoolFixture, out: Path) -> buildmod.BuildReport:
    return buildmod.build(tp.content, out, signer=parse_private_key(tp.log_key))


def _witness(tp: PoolFixture, tmp_path: Path, name: str) -> dict[str, bytes]:
    """The site of ``tp`` as it stands, every page rendered in process, cold."""
    with pytest.MonkeyPatch.context() as m:
        _in_process(m)
        out = tmp_path / name / "site"
        out.parent.mkdir()
        buildmod.build(tp.content, out, signer=None)
    return site_files(out)


def test_pages_rendered_by_workers_are_those_rendered_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp = _pool(tmp_path / "pool")
    forked = _forking(monkeypatch)
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    assert len(forked) > 3 and max(forked) == 3, forked  # several windows, each forked
    assert site_files(out) == _witness(tp, tmp_path, "cold")
    # Then incrementally: one more dream, the changed pages rendered by workers.
    tp.add("ada", 1, tags=["tools"])
    forked.clear()
    _build(tp, out)
    assert forked
    assert site_files(out) == _witness(tp, tmp_path, "after")


def test_damaged_fragments_found_by_workers_are_counted_once_and_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that finds a fragment's row damaged renders it again; the
    build's process counts the row once (however many pages and workers read
    it), puts the fragments back in the store, and the next build finds the
    store whole."""
    tp = _pool(tmp_path / "pool")
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    db = sqlite3.connect(_store(out), isolation_level=None)
    rows = db.execute('SELECT k, v FROM "fragments"').fetchall()
    assert len(rows) == 9
    for k, v in rows:
        db.execute(
            'UPDATE "fragments" SET v = ? WHERE k = ?', (v[:20] + bytes([v[20] ^ 1]) + v[21:], k)
        )
    db.close()
    forked = _forking(monkeypatch)
    report = _build(tp, out)
    # The dreams' units are kept: only pages rendered anew (the home page,
    # the feeds: no key) read the fragments back, and those went to workers.
    assert report.rendered == 0 and forked
    assert any("fragments had 9 damaged row(s)" in n for n in report.notes), report.notes
    assert site_files(out) == _witness(tp, tmp_path, "cold")
    again = _build(tp, out)
    assert not any("fragments" in n for n in again.notes), again.notes


def test_prepare_makes_the_folder_workers_will_share(tmp_path: Path) -> None:
    """Two workers storing files in one new folder would race to make it
    (the loser's mkdir fails): the build's process makes it first."""
    out = tmp_path / "site"
    with SiteWriter(out) as w:
        w.prepare("authors/ada/2/index.html", folder=True)
        gen = Path(w._gen)
        assert (gen / "authors" / "ada" / "2").is_dir()
        entry, written = w.store("authors/ada/2/index.html", b"<p>2</p>")
        w.record("authors/ada/2/index.html", entry, written)
    assert (out / "authors" / "ada" / "2" / "index.html").read_bytes() == b"<p>2</p>"


def _break_fragments_table(out: Path, table: str = "fragments") -> None:
    """Make the fragments table (or ``table``) of ``out``'s store unreadable
    (test_buildcache.break_table): the build's process first meets the damage
    when the list pages read their fragments."""
    break_table(_store(out), table)


@pytest.mark.parametrize("where", ["in process", "forked"])
def test_a_store_a_page_worker_cannot_read_is_discarded_by_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Review r45: a worker that failed to read the store discarded it itself
    (Rows._fail -> BuildCache._discard, in the child): the store's files were
    deleted under the build, the note was lost with the worker, and the
    build's process saved only what changed into a store it thought whole,
    so the next build was silently a cold one. The failure is the build's
    process's to apply: it discards the store once, says so, and saves it
    whole, as when the pages are rendered in process."""
    tp = _pool(tmp_path / "pool")
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    _break_fragments_table(out)
    discards = _discards_by(monkeypatch, tmp_path / "discarded-by")
    if where == "forked":
        forked = _forking(monkeypatch)
    else:
        _in_process(monkeypatch)
        forked = [1]
    report = _build(tp, out)
    assert forked  # the pages did go to workers
    assert discards() == [os.getpid()], f"discarded by {discards()}; the build is {os.getpid()}"
    assert sum("started it afresh" in n for n in report.notes) == 1, report.notes
    monkeypatch.undo()
    again = _build(tp, out)
    assert again.rendered == 0, again.notes  # the store was saved whole
    assert site_files(out) == _witness(tp, tmp_path, "witness")


def test_errors_in_page_workers_are_clear_and_keep_the_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An OSError storing a page, and a DreampoolError rendering one, raised in
    a forked page worker, reach the CLI as its usual error lines, with no
    traceback; the live site stays the last one; the next build (which takes
    the lock the workers' build held) runs."""
    tp = _pool(tmp_path / "pool")
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    before = site_files(out)
    tp.add("bob", 1, tags=["memory"])
    monkeypatch.setenv("DREAMPOOL_LOG_KEY", tp.log_key)
    parent = os.getpid()
    store = SiteWriter.store

    def full(self: SiteWriter, rel: str, data: bytes) -> object:
        if rel.startswith("tags/") and os.getpid() != parent:
            raise OSError(errno.ENOSPC, "No space left on device", f"{self.gen}/{rel}")
        return store(self, rel, data)

    def damaged(*args: object) -> bytes:
        raise buildcache.StoreDamaged("dream x: its row no longer holds", hint="build again")

    argv = ["build", "--content", str(tp.content), "--out", str(out), "--quiet"]
    for patch in ("store", "render"):
        with monkeypatch.context() as m:
            forked = _forking(m)
            if patch == "store":
                m.setattr(SiteWriter, "store", full)
            else:
                m.setattr(agentdocs, "_since_bytes", damaged)
            code = cli.main(argv)
        err = capsys.readouterr().err
        assert forked, patch
        assert code == 1, (patch, err)
        assert "Traceback" not in err, err
        assert ("No space left" if patch == "store" else "row no longer holds") in err, err
        assert site_files(out) == before
    assert cli.main(argv) == 0, capsys.readouterr().err


def test_a_worker_returns_only_the_findings_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r45: a forked worker inherited the findings the build's process
    had absorbed so far (Rows.damaged_keys, untagged_keys) and sent them all
    back with its first page, so every window re-sent every finding of the
    build: sets built, pickled and merged O(windows x findings) times."""
    tp = _pool(tmp_path / "pool")
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    db = sqlite3.connect(_store(out), isolation_level=None)
    rows = db.execute('SELECT k, v FROM "fragments"').fetchall()
    for k, v in rows:
        db.execute(
            'UPDATE "fragments" SET v = ? WHERE k = ?', (v[:20] + bytes([v[20] ^ 1]) + v[21:], k)
        )
    db.close()
    sent: list[int] = []
    repair = unitsmod.Units.repair

    def spy(self: unitsmod.Units, r: unitsmod.Repairs) -> None:
        sent.append(len(r.findings.damaged) + len(r.findings.untagged))
        repair(self, r)

    monkeypatch.setattr(unitsmod.Units, "repair", spy)
    forked = _forking(monkeypatch)
    report = _build(tp, out)
    assert len(forked) > 3
    assert any(f"fragments had {len(rows)} damaged" in n for n in report.notes), report.notes
    # Each damaged row is found by at most the two workers of the window that
    # first reads it; the build's process puts it back before the next window.
    assert sum(sent) <= 2 * len(rows), sent


def _discards_by(monkeypatch: pytest.MonkeyPatch, log: Path) -> Callable[[], list[int]]:
    """Each BuildCache._discard writes the pid of its process to ``log`` (a file:
    a worker's list would be its own); returns what reads them back."""
    discard = buildcache.BuildCache._discard

    def spied(self: buildcache.BuildCache, why: str) -> None:
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        discard(self, why)

    monkeypatch.setattr(buildcache.BuildCache, "_discard", spied)
    return lambda: [int(x) for x in log.read_text().split()] if log.exists() else []


def test_a_store_the_patterns_process_cannot_read_is_discarded_by_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r46: r45's fault in the other forked process. The patterns'
    process makes its Rows("words") after the fork, and a failure of the
    store there discarded it from that process: its files deleted under the
    build, the note lost, the next build silently a cold one. Its failure
    and notes now come back with the patterns (BuildCache.take_report) and
    the build's process applies them."""
    from tests.pools import key_id_of
    from tests.test_agents import set_tier

    tp = _pool(tmp_path / "pool")
    for author in ("ada", "bob"):
        set_tier(tp.content, key_id_of(author), "member")  # their dreams are counted
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    tp.add("ada", 1, tags=["tools"])  # a counted dream: its words are read (patterns.add_new)
    _break_fragments_table(out, "words")
    discards = _discards_by(monkeypatch, tmp_path / "discarded-by")
    monkeypatch.setattr(parallel, "workers", lambda: 2)  # the patterns in their own process
    report = _build(tp, out)
    assert discards() == [os.getpid()], f"discarded by {discards()}; the build is {os.getpid()}"
    assert sum("started it afresh" in n for n in report.notes) == 1, report.notes
    monkeypatch.undo()
    assert site_files(out) == _witness(tp, tmp_path, "witness")


@pytest.mark.parametrize("where", ["in process", "forked"])
def test_a_dreams_text_a_page_worker_could_not_read_back_is_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Review r46: a page that shows dreams' texts (agents/digest.md) reads them
    back from the store (buildcache._StoredBodies); when that fails, the text
    comes from the dream's file and the build says so. Forked, the note went
    to the worker's copy of the notes and was lost; a worker's notes now
    come back with its page (Repairs.store)."""
    tp = _pool(tmp_path / "pool")
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    tp.add("bob", 1, tags=["memory"])  # the digest changes: its dreams' texts are read
    if where == "forked":
        _forking(monkeypatch)
    else:
        _in_process(monkeypatch)
    opened = buildcache.BuildCache._open

    def failing(self: buildcache.BuildCache, *, any_thread: bool = False) -> sqlite3.Connection:
        if any_thread:  # _StoredBodies' connection only
            raise sqlite3.DatabaseError("database disk image is malformed")
        return opened(self, any_thread=any_thread)

    monkeypatch.setattr(buildcache.BuildCache, "_open", failing)
    report = _build(tp, out)
    assert sum("could not be read again" in n for n in report.notes) == 1, report.notes
    monkeypatch.undo()
    assert site_files(out) == _witness(tp, tmp_path, "witness")
