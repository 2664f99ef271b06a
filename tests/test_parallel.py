"""A build's worker processes end with it (builder.parallel).

Killed builds (SIGKILL, the OOM killer) used to leave their forked workers
waiting forever on a pipe, holding memory and the build lock.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from builder import parallel

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    parallel.workers() < 2, reason="one core: builder.parallel runs everything inline"
)

SCRIPT = """
import os, sys, time
sys.path.insert(0, {repo!r})
from builder import parallel

folder = {folder!r}

def mark(x):
    open(os.path.join(folder, str(os.getpid())), "w").close()
    time.sleep(0.05)
    return x

if {mode!r} == "pool":
    for _ in parallel.imap_ordered(mark, list(range(100_000))):
        pass
else:
    with parallel.background(lambda _: (mark(0), time.sleep(600)), None) as pending:
        pending()
"""


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return "\nState:\tZ" not in status  # a zombie has ended, whoever reaps it


@pytest.mark.parametrize("mode", ["pool", "background"])
def test_workers_end_when_the_build_is_killed(tmp_path: Path, mode: str) -> None:
    script = SCRIPT.format(repo=str(REPO), folder=str(tmp_path), mode=mode)
    proc = subprocess.Popen([sys.executable, "-c", script])
    want = 2 if mode == "pool" else 1
    deadline = time.monotonic() + 30
    while len(list(tmp_path.iterdir())) < want:
        assert proc.poll() is None, "the script ended before its workers started"
        assert time.monotonic() < deadline, "workers never started"
        time.sleep(0.05)
    workers = [int(p.name) for p in tmp_path.iterdir()]
    assert proc.pid not in workers
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:  # do not leave them behind even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert left == []


def _negated(x: int) -> int:
    return -x


@pytest.mark.parametrize("how", ["map_ordered", "imap_ordered"])
def test_a_fork_leaves_the_callers_collector_as_it_found_it(how: str) -> None:
    """Objects are frozen out of the garbage collector for a fork (so its workers
    do not copy them page by page). The agents' server runs for hours and forks
    for bulk tools: left frozen after each, what it held then (a replaced
    snapshot, a reloaded log) would never be collected once it became cyclic
    garbage. A caller that froze its own objects (the build) keeps them frozen."""
    items = list(range(300))
    run = getattr(parallel, how)
    gc.unfreeze()
    try:
        assert list(run(_negated, items, min_items=1)) == [-x for x in items]
        assert gc.get_freeze_count() == 0
        gc.freeze()
        held = gc.get_freeze_count()
        assert list(run(_negated, items, min_items=1)) == [-x for x in items]
        assert gc.get_freeze_count() >= held
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("how", ["map", "imap", "background"])
def test_what_a_worker_reports_comes_back_to_the_process_that_forked_it(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """report_back: each forked process's take() reaches absorb() in this
    process, before the results it came with (so a result never outruns
    what its worker found); in this process, take() is never called."""
    here = os.getpid()
    found: list[int] = []  # appended to in the workers: each its own copy
    got: list[object] = []
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(parallel, "_REPORTERS", [])

    def take() -> list[int]:
        assert os.getpid() != here, "take() ran in the process that forked"
        mine, found[:] = list(found), []
        return mine

    parallel.report_back(take, got.extend)

    def work(x: int) -> int:
        found.append(x)
        return x * 2

    items = list(range(40))
    if how == "map":
        assert parallel.map_ordered(work, items, min_items=1) == [x * 2 for x in items]
    elif how == "imap":
        for x in parallel.imap_ordered(work, items, min_items=1, chunk=4):
            assert x // 2 in got  # its worker's report came first
    else:
        with parallel.background(lambda n: work(n), 7) as pending:
            assert pending() == 14 and pending() == 14
        items = [7]
    assert sorted(got) == items  # each reported once
    assert found == []  # nothing ran here
    assert parallel.map_ordered(work, [1, 2], min_items=10) == [2, 4]  # in process: no take()


def _touch(folder: Path, i: int) -> int:
    (folder / str(i)).touch()  # a file per item done: counted across the forks
    return i


def test_imap_ordered_computes_only_a_window_ahead_of_its_consumer(tmp_path: Path) -> None:
    """A consumer slower than the workers (the build writing each rendered
    page) must not have every result computed and held for it: with all
    chunks submitted at once (Executor.map), the results of a whole pool
    piled up in memory while the first were being written (at 10k dreams the
    largest share of a cold build's traced peak; principle: memory stays
    bounded when streaming)."""
    if parallel.workers() < 2:
        pytest.skip("needs two cores to fork workers")
    items = list(range(2000))
    done = parallel.imap_ordered(lambda i: _touch(tmp_path, i), items, chunk=4)
    try:
        assert next(done) == 0
        time.sleep(1.0)  # the consumer busy: workers may run ahead, but only so far
        ahead = len(list(tmp_path.iterdir()))
        assert ahead <= parallel.IMAP_WINDOW_PER_WORKER * parallel.workers() * 4 + 4 * 4, ahead
        assert list(done) == items[1:]  # the rest, in order, all of them
    finally:
        done.close()


def _handler_name(_: object) -> str:
    handler = signal.getsignal(signal.SIGINT)
    return getattr(handler, "__name__", type(handler).__name__)


@contextlib.contextmanager
def _another_thread() -> Iterator[Callable[[], None]]:
    """A thread that does not block SIGINT (started before any window: a
    thread inherits its creator's mask), and a way to send it one: CPython's
    C handler runs in that thread and the main thread's Python handler at
    its next bytecode, as with a Ctrl-C the kernel gave that thread."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()

    def interrupt() -> None:
        assert other.ident is not None
        signal.pthread_kill(other.ident, signal.SIGINT)
        time.sleep(0.05)  # the main thread passes bytecodes meanwhile

    try:
        yield interrupt
    finally:
        stop.set()
        other.join()


def test_an_interrupt_held_off_across_a_fork_reaches_the_callers_own_handler() -> None:
    """T40 (review r85): while SIGINT is held off in the main thread, one taken
    by another thread is noted, not raised there; given back, the caller's
    own handler gets it once, and is the handler again."""
    calls: list[int] = []

    def own(signum: int, frame: object) -> None:
        calls.append(signum)

    before = signal.signal(signal.SIGINT, own)
    try:
        with _another_thread() as interrupt:
            held = parallel._sigint_held()
            interrupt()
            assert calls == [], "the caller's handler ran inside the window"
            parallel._sigint_given_back(held)
        time.sleep(0.01)
        assert calls == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, before)


def test_an_ignored_interrupt_stays_ignored_across_a_fork() -> None:
    """T40: a process that ignores SIGINT (a shell's background job) still
    ignores it after a window in which another thread took one."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _another_thread() as interrupt:
            held = parallel._sigint_held()
            interrupt()
            parallel._sigint_given_back(held)
        time.sleep(0.01)  # nothing raised
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_process_forked_while_sigint_is_held_off_has_the_callers_handler() -> None:
    """T40 (guard): the forked process (a background one, a pool's worker)
    runs with the handler its parent had before the window, not the one
    that notes."""
    # A background job (CI's, run under nohup) starts with SIGINT ignored.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with parallel.background(_handler_name, None) as pending:
            assert pending() == "default_int_handler"
        assert (
            parallel.map_ordered(_handler_name, list(range(400)), min_items=1)
            == ["default_int_handler"] * 400
        )
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)
