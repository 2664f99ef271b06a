"""Review r88 of 33c4f4a9 (review r87's fixes: a live file this process may
not read is not lent; without /proc a sealed file is checked by its bytes;
the copy's refusal names the file; parallel.background computes in the
caller when fork fails).

Found:

- 33c4f4a9 says that with fork failing "every stage that forks carries on",
  but only parallel.background falls back: map_ordered and imap_ordered
  (the units' render, the pages from PAGES_FORK_MIN on, the pool's checks,
  the signatures) start a ProcessPoolExecutor whose fork raises the same
  OSError, raised bare out of the build (CLI: "error: Resource temporarily
  unavailable"). A build of 200 or more dirty dreams at a process limit
  never gets past its render. And where the first worker forks and a later
  one fails (the usual shape of RLIMIT_NPROC), the forked worker is left
  waiting on the pool's queue until the build process ends.

Guards: the scan split's inline read (fork failing) is the single read, with
damaged and untagged rows on either side; background's fallback restores the
SIGINT mask, starts no process, runs no initializer, leaves no descriptor
but the standard library's four, and its context closes once and again
without harm; a lent file whose reopen fails between the check and the copy
(mode changed) ends in the PlanError naming it, with no tmp, no descriptor
left and nothing live changed.

What was done: map_ordered and imap_ordered fork their pool's workers first
(parallel._started_pool) and, if a fork fails, end the workers forked by
then and compute in the caller, as on one core.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache, parallel
from builder.formats.note import parse_private_key
from builder.site import assemble, writer
from tests.redteam.test_r82_review import _lending, _live
from tests.redteam.test_r87_review import REL, WANT, _fds

needs_fork = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork here"
)


def _no_fork() -> int:
    raise OSError(errno.EAGAIN, "Resource temporarily unavailable")


def _fork_once() -> Any:
    """os.fork that works once, then fails as at RLIMIT_NPROC."""
    real, made = os.fork, []

    def fork() -> int:
        if made:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        made.append(1)
        return real()

    return fork


# --- defects ------------------------------------------------------------------


@needs_fork
def test_a_build_whose_pools_cannot_fork_is_still_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T40 (medium: robustness; the stated purpose of 33c4f4a9 (d)). With
    every fork failing (EAGAIN at a process limit, ENOMEM), a build whose
    render goes to the pool (imap_ordered/map_ordered: 200 or more dirty
    dreams, or PAGES_FORK_MIN pages; here the thresholds are lowered to
    reach it with a small pool) ends in a bare BlockingIOError from
    ProcessPoolExecutor's submit: parallel.background's fallback covers
    the background processes only, so "every stage that forks carries on"
    does not hold for a cold build of a real pool.
    Fix: in map_ordered and imap_ordered, an OSError from starting the
    pool (the first submit/map, where the fork context launches every
    worker) shuts the pool down, kills any worker already forked
    (pool._processes) and computes inline ([func(x) for x in items]), as
    on one core; then this build is the cold build's."""
    from tests.test_store_restore import _cold, site_files
    from tests.test_writer_opening import _restored

    tp, clone, _ = _restored(tmp_path)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setitem(parallel.imap_ordered.__kwdefaults__, "min_items", 1)
    monkeypatch.setitem(parallel.map_ordered.__kwdefaults__, "min_items", 1)
    monkeypatch.setattr(assemble, "PAGES_FORK_MIN", 1)
    monkeypatch.setattr(os, "fork", _no_fork)
    try:
        buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    finally:
        monkeypatch.undo()
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


@needs_fork
def test_a_pool_whose_second_fork_fails_leaves_no_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T40 (low: a process left behind; in the agents' server, which goes on,
    one per failed call). fork working once and then failing (RLIMIT_NPROC
    reached mid-launch): map_ordered raises a bare BlockingIOError, and the
    worker it did fork is left alive, blocked on the pool's call queue
    (pool.shutdown(wait=True) joins no manager thread, which never started,
    and ends no process). It goes only when its parent does (PDEATHSIG).
    Fix: as above: on OSError from starting the pool, kill and join the
    workers in pool._processes, then compute inline."""
    monkeypatch.setattr(parallel, "workers", lambda: 3)
    monkeypatch.setattr(os, "fork", _fork_once())
    try:
        try:
            got = parallel.map_ordered(abs, [-i for i in range(300)])
        except OSError as exc:
            got = exc  # type: ignore[assignment]
        left = [p.pid for p in multiprocessing.active_children()]
    finally:
        monkeypatch.undo()
        for p in multiprocessing.active_children():
            p.kill()
            p.join()
    assert (got, left) == (list(range(300)), [])


# --- guards -------------------------------------------------------------------


@needs_fork
@pytest.mark.parametrize(
    ("damaged", "untagged"), [([0], [11]), ([11], [0]), ([2, 9], [5, 6])], ids=str
)
def test_the_scan_split_read_inline_when_fork_fails_is_the_single_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damaged: list[int], untagged: list[int]
) -> None:
    """T40 (guard, holds): fork failing in splitting_scan (33c4f4a9 dropped
    _scan_split's own fallback, a read of every row here): the rows past
    the split are read in this process when taken (_scan_half_taken), and
    give the single read's entries, order, row digests, notes and refusals,
    with damaged and untagged rows on either side of the split."""
    from tests.test_store_split import _built, _corrupt, _read, _store

    tp, out = _built(tmp_path)
    _corrupt(_store(out), damaged, untag=untagged)
    whole = _read(out, tp)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    halves: list[int] = []
    real = buildcache._read_scan_half

    def counted(arg: Any) -> Any:
        halves.append(os.getpid())
        return real(arg)

    monkeypatch.setattr(buildcache, "_read_scan_half", counted)
    monkeypatch.setattr(os, "fork", _no_fork)
    split = _read(out, tp)
    monkeypatch.undo()
    assert halves == [os.getpid()] and not multiprocessing.active_children()
    assert split == whole


@needs_fork
def test_backgrounds_fallback_runs_inline_and_restores_what_it_touched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T40 (guard, holds): parallel.background with fork failing: no process,
    the initializer (drop_locks in the build: it must not run in the
    build's own process) never runs, the work runs here only when asked for
    and its own exception comes back as itself (as on one core); the SIGINT
    mask is as it was; no descriptor is left but the four pipes
    Popen._launch opens before its fork (the standard library's); the
    context entered on a stack closes, and closes again, without harm."""
    import contextlib

    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(os, "fork", _no_fork)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    ran: list[str] = []
    before = _fds()
    stack = contextlib.ExitStack()
    pending = parallel.background_on(
        stack, lambda x: ran.append(x) or x, "work", initializer=lambda: ran.append("init")
    )
    assert ran == [] and signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask
    assert pending() == "work" and ran == ["work"]
    pending.abandon()  # nothing to end
    stack.close()
    stack.close()

    def fails(_: object) -> None:
        raise ValueError("its own")

    with pytest.raises(ValueError, match="its own"), parallel.background(fails, None) as p:
        p()
    monkeypatch.undo()
    assert not multiprocessing.active_children()
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask
    assert len(_fds() - before) <= 8  # Popen._launch's 2 × 4, never the Pipe's


def test_a_file_unreadable_between_check_and_copy_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (guard, holds): the race 33c4f4a9's access check leaves (the mode
    changed after _may_read said yes, linkat refused: EPERM of
    protected_hardlinks): _copy_open's reopen fails, and keep() raises the
    PlanError naming the live file, never a bare PermissionError; no tmp
    file in the new generation, no descriptor left open, nothing goes live."""
    import sys

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc: the file is opened for reading, no reopen")
    monkeypatch.setattr(writer, "LSTATS_PER_READ", 10**9)  # sealed: keep reads nothing
    out, seals = _lending(tmp_path)
    published = os.readlink(out)
    real_link, real_reading = os.link, writer._reading

    def eperm(src: str, *a: object, **k: object) -> None:
        if str(src).startswith("/proc/self/fd/"):
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
        real_link(src, *a, **k)  # type: ignore[arg-type]

    def reading(fd: int) -> Any:
        if sys._getframe(1).f_code.co_name == "_copy_open":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real_reading(fd)

    refused = pytest.raises(writer.PlanError, match=f"{REL} does not hold the bytes")
    with refused, writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, WANT)
        monkeypatch.setattr(os, "link", eperm)
        monkeypatch.setattr(writer, "_reading", reading)
        before = _fds()
        try:
            w.keep(REL, WANT)
        finally:
            assert _fds() == before
            assert not list(w.gen.rglob(".*.tmp"))
    assert os.readlink(out) == published
    assert (_live(out) / REL).read_bytes() == b"edited"


def test_a_sealed_lend_still_reads_nothing_where_proc_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (guard, holds): 33c4f4a9's (b) changes nothing where /proc is
    there: a sealed generation's page is lent by its size and mtime (no
    byte read in can_keep or keep), and linked: the new generation's page
    is the live one's inode."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc: lends are copies, checked by their bytes")
    monkeypatch.setattr(writer, "LSTATS_PER_READ", 10**9)
    out, seals = _lending(tmp_path)
    reads: list[str] = []
    real = writer._holds_at

    def counted(path: str, *a: Any, **k: Any) -> Any:
        reads.append(path)
        return real(path, *a, **k)

    monkeypatch.setattr(writer, "_holds_at", counted)
    live = _live(out) / REL
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, WANT)
        w.keep(REL, WANT)
        assert os.stat(w.gen / REL).st_ino == os.stat(live).st_ino
    assert reads == []
