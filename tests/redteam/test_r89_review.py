"""Review r89 of 4d0a64bb (parallel._started_pool: map_ordered and
imap_ordered fork their pool's workers first, with an empty chunk, and on
OSError kill those forked and compute in the caller).

Found:

- The launch that _started_pool guards does more than fork: it then starts
  the executor's manager thread, whose first put starts the call queue's
  feeder thread. On Linux threads count against the same limits as forks
  (RLIMIT_NPROC, a cgroup's pids.max), and a thread that cannot be started
  is a RuntimeError, not an OSError. The manager thread's failure is a bare
  RuntimeError out of the build, with every worker left forked and blocked
  on the call queue; since the workers are not daemonic, multiprocessing's
  exit handler joins them and the process never exits. The feeder thread's
  failure kills the manager thread: map_ordered waits forever (r55, r61).
- A KeyboardInterrupt during the launch (a SIGINT to the build's process
  alone) leaves the workers forked so far; the process then hangs at exit
  the same way. background() blocks SIGINT around its fork (r84);
  _started_pool does not.
- Each fallback leaves four descriptors open: the two pipes
  multiprocessing's Popen._launch opens before the fork that failed. r88
  let background() keep them as "the standard library's"; in the agents'
  server, which goes on, every tool call at the limit adds four, until
  EMFILE.

Guards: the empty chunk's reports are never lost (a reporter of what a
worker did since it last reported counts every item once, and the results
keep their order); two threads whose pools' forks fail at once both get
their results and leave no process; an imap_ordered that fell back and is
closed early computes no more, leaves no process and thaws the collector.
The normal path costs the same as 33c4f4a9's (2,000 trivial items: about
7 ms for map_ordered, 13 ms for imap_ordered, either way; not tested here).

What was done: _started_pool blocks SIGINT in the main thread across the
launch, waits for the empty chunk's answer while the manager thread lives,
and on OSError or RuntimeError (or a dead manager thread) kills and reaps
the workers forked, closes the failed launch's pipes (_close_launch_pipes,
also in background()) and computes in the caller.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pytest

from builder import parallel
from builder.errors import DreampoolError

needs_fork = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="no fork here"
)
ITEMS = [-i for i in range(300)]
WANT = list(range(300))


@contextlib.contextmanager
def _no_children_left() -> Iterator[None]:
    """Whatever the code under test leaves, ended after it (else pytest's own
    exit would join them forever)."""
    try:
        yield
    finally:
        for p in multiprocessing.active_children():
            p.kill()
            p.join()


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _threads_failing(monkeypatch: pytest.MonkeyPatch, failing: Any) -> None:
    """threading's thread start failing, as at RLIMIT_NPROC or pids.max, for
    the threads ``failing(thread)`` picks."""
    real = threading._start_new_thread  # type: ignore[attr-defined]

    def start(function: Any, args: Any, *rest: Any) -> Any:
        if failing(getattr(function, "__self__", None)):
            raise RuntimeError("can't start new thread")
        return real(function, args, *rest)

    monkeypatch.setattr(threading, "_start_new_thread", start)


# --- defects ------------------------------------------------------------------


@needs_fork
def test_a_manager_thread_that_cannot_start_leaves_no_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T40 (medium: robustness; a build that never exits). At a process limit
    (RLIMIT_NPROC and pids.max count threads too) the forks may succeed and
    the executor's manager thread, started right after them in the same
    submit, fail: a RuntimeError ("can't start new thread"), not the OSError
    _started_pool catches. map_ordered raises it bare, and the workers it
    forked are left blocked on the call queue; they are not daemonic, so
    multiprocessing's exit handler joins them and the process hangs at exit.
    Fix: in _started_pool, a RuntimeError from the first submit is the same
    condition as an OSError: kill and join pool._processes, shut the pool
    down and compute inline (or raise _died()); either way no worker left."""
    monkeypatch.setattr(parallel, "workers", lambda: 3)
    _threads_failing(monkeypatch, lambda t: type(t).__name__ == "_ExecutorManagerThread")
    with _no_children_left():
        try:
            got: Any = parallel.map_ordered(abs, ITEMS)
        except DreampoolError:
            got = WANT  # an error the CLI reports is as good as the fallback
        except RuntimeError as exc:
            got = exc
        left = len(multiprocessing.active_children())
        monkeypatch.undo()
    assert (got, left) == (WANT, 0)


@needs_fork
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_feeder_thread_that_cannot_start_does_not_hang_map_ordered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T40 (medium: a hang, r55/r61's kind; in the agents' server a tool's
    thread waits forever with the reader's lock). The thread that fails at
    the limit may be the call queue's feeder, started by the manager
    thread's first put (the empty chunk's): the manager thread dies of the
    RuntimeError, no future is ever answered, and map_ordered waits forever
    (here: more than 3 s for 300 trivial items; rescued by failing the
    futures by hand).
    Fix: _started_pool waits for the empty chunk's result (it proves the
    workers, the manager thread and the feeder are up), polling with a
    short timeout and, if the manager thread is no longer alive, killing
    and joining pool._processes and computing inline (or raising _died())."""
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    pools: list[ProcessPoolExecutor] = []
    real_pool = parallel._fork_pool

    def recorded(*a: Any) -> ProcessPoolExecutor:
        pools.append(real_pool(*a))
        return pools[-1]

    monkeypatch.setattr(parallel, "_fork_pool", recorded)
    _threads_failing(monkeypatch, lambda t: getattr(t, "name", "") == "QueueFeederThread")
    out: list[Any] = []

    def call() -> None:
        try:
            out.append(parallel.map_ordered(abs, ITEMS))
        except DreampoolError:
            out.append(WANT)
        except BaseException as exc:
            out.append(exc)

    with _no_children_left():
        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        caller.join(3)
        hung = caller.is_alive()
        monkeypatch.undo()
        if hung:  # answer its futures, so that the thread ends
            for item in list((pools[-1]._pending_work_items or {}).values()):  # type: ignore[attr-defined]
                if not item.future.done():
                    item.future.set_exception(BrokenProcessPool("rescued by the test"))
            caller.join(10)
    assert (hung, out) == (False, [WANT])


@needs_fork
def test_an_interrupt_during_the_launch_leaves_no_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T40 (low: a build that never exits after a SIGINT sent to its process
    alone: kill -INT, a supervisor; a terminal's Ctrl-C reaches the workers
    too). A KeyboardInterrupt after the first worker's fork, before the last
    (simulated as raised by the second fork): _started_pool catches OSError
    only, so the worker already forked is left on the call queue, and the
    interpreter's exit joins it forever.
    Fix: as background() does (r84), block SIGINT in the main thread around
    the first submit (no worker forked but not yet in pool._processes), and
    on any BaseException kill and join pool._processes before re-raising
    what is not an OSError."""
    monkeypatch.setattr(parallel, "workers", lambda: 3)
    real, made = os.fork, []

    def fork() -> int:
        if made:
            raise KeyboardInterrupt
        made.append(1)
        return real()

    monkeypatch.setattr(os, "fork", fork)
    with _no_children_left():
        with pytest.raises(KeyboardInterrupt):
            parallel.map_ordered(abs, ITEMS)
        monkeypatch.undo()
        left = len(multiprocessing.active_children())
    assert left == 0


@needs_fork
def test_the_fallback_leaves_no_descriptor(monkeypatch: pytest.MonkeyPatch) -> None:
    """T40 (low: descriptors leaked in a process that goes on). Each call
    that falls back leaves the four pipe ends multiprocessing's
    Popen._launch opened before the fork that failed (here 10 calls, 40
    descriptors): in the agents' server at a process limit every bulk tool
    call adds four, until EMFILE fails the server's every open.
    Fix: in _started_pool's OSError path, close them: they are the int
    locals parent_r, child_w, child_r, parent_w of the popen_fork.Popen
    _launch frame in the exception's traceback (or fork through a
    ForkContext whose Popen._launch closes its pipes when os.fork raises);
    background()'s fallback can use the same helper."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc")
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    warm = parallel.map_ordered(abs, ITEMS)  # the module's own first-use descriptors
    before = _fds()

    def no_fork() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    with _no_children_left():
        got = [parallel.map_ordered(abs, ITEMS) for _ in range(10)]
        monkeypatch.undo()
    gc.collect()
    assert warm == WANT and got == [WANT] * 10
    assert len(_fds() - before) == 0


# --- guards -------------------------------------------------------------------


@needs_fork
@pytest.mark.parametrize("kind", ["map", "imap"])
def test_the_empty_chunk_loses_no_report(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """T40 (guard, holds): the empty chunk's reports are never absorbed, but
    it runs first on a worker just forked (the call queue is FIFO), which
    has done nothing to report: a reporter of what a worker did since it
    last reported (as BuildCache.take_report) has every item counted once,
    and the results keep their order."""
    done: list[int] = []  # in a worker: items since the last report
    absorbed: list[int] = []

    def task(x: int) -> int:
        done.append(x)
        return -x

    def take() -> list[int]:
        taken = list(done)
        done.clear()
        return taken

    monkeypatch.setattr(parallel, "workers", lambda: 3)
    monkeypatch.setattr(parallel, "_REPORTERS", [(take, absorbed.extend)])
    items = list(range(1000))
    with _no_children_left():
        if kind == "map":
            got = parallel.map_ordered(task, items)
        else:
            got = list(parallel.imap_ordered(task, items, chunk=7))
    assert got == [-x for x in items]
    assert sorted(absorbed) == items and not done


@needs_fork
def test_two_threads_whose_forks_fail_both_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    """T40 (guard, holds): the agents' server's two tool threads calling
    map_ordered at once, every other fork failing: each pool kills only its
    own workers, both calls give their results, no process is left."""
    monkeypatch.setattr(parallel, "workers", lambda: 3)
    real, count, lock = os.fork, [0], threading.Lock()

    def fork() -> int:
        with lock:
            count[0] += 1
            failing = count[0] % 2 == 0
        if failing:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        return real()

    monkeypatch.setattr(os, "fork", fork)
    out: dict[int, Any] = {}

    def call(k: int) -> None:
        for _ in range(3):
            out[k] = parallel.map_ordered(lambda x: abs(x) + k, ITEMS)

    with _no_children_left():
        threads = [threading.Thread(target=call, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        monkeypatch.undo()
        left = len(multiprocessing.active_children())
    assert out == {k: [w + k for w in WANT] for k in (0, 1)} and left == 0


@needs_fork
def test_an_imap_that_fell_back_closes_early(monkeypatch: pytest.MonkeyPatch) -> None:
    """T40 (guard, holds): imap_ordered falling back (fork failing), closed
    after three results (contextlib.closing, as pool.py and units.py do):
    nothing computed past them, no process, the collector thawed."""
    monkeypatch.setattr(parallel, "workers", lambda: 2)

    def no_fork() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    seen: list[int] = []

    def task(x: int) -> int:
        seen.append(x)
        return -x

    gc.unfreeze()  # as a caller that froze nothing: another test's freeze (background()) stays
    frozen = gc.get_freeze_count()
    with _no_children_left():
        with contextlib.closing(parallel.imap_ordered(task, list(range(300)))) as results:
            got = [next(results) for _ in range(3)]
        monkeypatch.undo()
        left = len(multiprocessing.active_children())
    assert (got, seen, left) == ([0, -1, -2], [0, 1, 2], 0)
    assert gc.get_freeze_count() == frozen
