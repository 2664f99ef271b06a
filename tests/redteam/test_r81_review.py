"""Review r81 (of e609d6d3, "Store: read the scan section's rows in two
processes").

One defect (the first test, which fails on e609d6d3; fixed by forking the
reader before load_beside starts its thread: BuildCache.splitting_scan):

* T40/T81: the build reads its store's scan section inside
  ``filekeys.load_beside``, i.e. while the filekeys thread (and
  ``clean_blobs``' git threads) run. e609d6d3 forks the scan reader from
  there, so every build whose scan rows span ``SCAN_SPLIT_MIN`` rowids
  (every large pool) forks with those threads alive: the very thing
  ``load_beside`` ("the thread has ended when this returns (the caller
  forks later)") and ``clean_blobs`` ("the build forks later") promise, and
  r75 guarded (``test_r75_review.py::test_no_filekeys_thread_is_alive_at_any_fork_of_a_build``,
  which passes only because its pool is too small to split). The child
  inherits git's in-flight descriptors (Popen's error pipe: a child forked
  in that window stalls the git call until it exits) and any lock a thread
  held at the fork (CPython 3.12+ warns on such a fork).

What held (guards below, passing): the split read equals the whole one for
sparse, negative, extreme rowids and a split falling on a row; a reader
(``StoreReader``) never forks; an SQLite error in the forked reader is the
build's own read's, applied once (corrupt: discarded; busy: left); an
interrupt in the build's half ends the forked reader.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from builder import buildcache, parallel
from builder.formats.note import parse_private_key
from tests.test_log_check import _publish, _published
from tests.test_store_split import _built, _read, _store

needs_two_cores = pytest.mark.skipif(
    parallel.workers() < 2, reason="the section is read in one process on one core"
)

_SEEN: list[list[str]] | None = None


def _before_fork() -> None:
    if _SEEN is not None:
        _SEEN.append(sorted(t.name for t in threading.enumerate()))


os.register_at_fork(before=_before_fork)


@needs_two_cores
def test_the_scan_reader_is_not_forked_while_the_filekeys_threads_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T40, T81: no build forks while load_beside's thread or clean_blobs'
    git threads run, the scan section's split read included (a pool whose
    rows span SCAN_SPLIT_MIN rowids; 0 here)."""
    global _SEEN
    tp, signer, site, _ids = _published(tmp_path)
    tp.add("bob", 2)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    forked: list[int] = []
    real = parallel.background

    def counted(func: Any, arg: Any, **kw: Any) -> Any:
        if func is buildcache._read_scan_half:
            forked.append(1)
        return real(func, arg, **kw)

    monkeypatch.setattr(parallel, "background", counted)
    _SEEN = []
    try:
        _publish(tp, site, signer)
        seen = _SEEN
    finally:
        _SEEN = None
    assert forked, "the scan section was not read in two processes"
    for names in seen:
        assert not [n for n in names if n.startswith(("dreampool-filekeys", "dreampool-git"))]


def _renumber(store: Path, rowids: list[int]) -> None:
    db = sqlite3.connect(store, isolation_level=None)
    old = [r for (r,) in db.execute('SELECT rowid FROM "scan" ORDER BY rowid')]
    assert len(old) == len(rowids)
    # Out of the way first (no two rows may share a rowid meanwhile).
    for i, r in enumerate(old):
        db.execute('UPDATE "scan" SET rowid = ? WHERE rowid = ?', (10_000 + i, r))
    for i, r in enumerate(rowids):
        db.execute('UPDATE "scan" SET rowid = ? WHERE rowid = ?', (r, 10_000 + i))
    db.close()


@needs_two_cores
@pytest.mark.parametrize(
    "rowids",
    [
        # min -2**63, max 2**63-1: the split is -1, a row on it and one past it
        [-(2**63), -(2**40), -7, -2, -1, 0, 1, 2, 3, 2**31, 2**62, 2**63 - 1],
        # the split (0) falls exactly on a row; sparse on both sides
        [-10, -9, -5, -3, 0, 1, 2, 4, 6, 7, 9, 10],
        # one row below the split, eleven past it
        [1, *(10**9 + i for i in range(10)), 2 * 10**9],
    ],
)
def test_guard_sparse_and_extreme_rowids_read_as_one_process_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rowids: list[int]
) -> None:
    """T81 (e609d6d3 holds): wherever the rows sit, the split read gives the
    whole read's entries, digests, notes and refusals, in its order."""
    tp, out = _built(tmp_path)
    _renumber(_store(out), rowids)
    with monkeypatch.context() as one:
        one.setattr(parallel, "workers", lambda: 1)
        whole = _read(out, tp)
    assert len(whole[0]) == 12
    forked: list[int] = []
    real = parallel.background

    def counted(func: Any, arg: Any, **kw: Any) -> Any:
        forked.append(1)
        return real(func, arg, **kw)

    monkeypatch.setattr(parallel, "background", counted)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    assert _read(out, tp) == whole
    assert forked == [1]


def test_guard_a_store_reader_never_forks_to_read_the_scan_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (e609d6d3 holds): ``dreampool mcp``'s reader keeps its one-process
    read, whatever SCAN_SPLIT_MIN says."""
    _, out = _built(tmp_path)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)

    def no_fork(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a StoreReader forked")

    monkeypatch.setattr(parallel, "background", no_fork)
    reader = buildcache.StoreReader(_store(out).parent)
    assert len(reader["scan"]) == 12 and reader.notes == []


@needs_two_cores
@pytest.mark.parametrize("busy", [False, True])
def test_guard_an_sqlite_error_in_the_forked_reader_is_the_builds_own_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, busy: bool
) -> None:
    """T44 (e609d6d3 holds): the error comes back once; a damaged store is
    discarded by the build's process (one note), a busy one left as it is."""
    tp, out = _built(tmp_path)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    parent = os.getpid()
    real = buildcache._read_scan_half
    exc = (
        sqlite3.OperationalError("database is locked")
        if busy
        else sqlite3.DatabaseError("database disk image is malformed")
    )

    def fails(arg: Any) -> Any:
        if os.getpid() != parent:
            raise exc
        return real(arg)

    monkeypatch.setattr(buildcache, "_read_scan_half", fails)
    signer = parse_private_key(tp.log_key)
    cache = buildcache.BuildCache(_store(out).parent, key=buildcache.row_key(signer.seed))
    with cache.splitting_scan():
        assert cache["scan"] == {}
    assert len(cache.notes) == 1
    assert ("busy" in cache.notes[0]) is busy
    assert _store(out).exists() is busy
    assert cache._scan_digests == {} or busy


@needs_two_cores
def test_guard_an_interrupt_in_the_builds_half_ends_the_forked_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T40 (e609d6d3 holds): no forked reader outlives an interrupted read."""
    tp, out = _built(tmp_path)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    parent = os.getpid()
    real = buildcache.BuildCache._sound

    def interrupted(self: Any, *row: Any) -> bool:
        if os.getpid() == parent:
            raise KeyboardInterrupt
        return bool(real(self, *row))

    monkeypatch.setattr(buildcache.BuildCache, "_sound", interrupted)
    signer = parse_private_key(tp.log_key)
    cache = buildcache.BuildCache(_store(out).parent, key=buildcache.row_key(signer.seed))
    children = Path(f"/proc/self/task/{threading.get_native_id()}/children")
    # Only a child made here counts: the suite may have left one of its own.
    before = set(children.read_text().split()) if children.exists() else set()
    with pytest.raises(KeyboardInterrupt), cache.splitting_scan():
        cache["scan"]
    if children.exists():
        assert set(children.read_text().split()) - before == set()
