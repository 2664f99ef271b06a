"""Red-team review of fdb9603d: ``builder.parallel.imap_ordered`` keeps a
window of ``IMAP_WINDOW_PER_WORKER * workers()`` chunks submitted instead of
``ProcessPoolExecutor.map`` submitting every chunk at once.

``test_held_*`` pin what the review tried and found sound: order of results
and of the reports absorbed before them, early close, collection of an
unconsumed generator, worker exceptions, a worker killed (while computing and
while idle, the new path where ``submit`` itself raises), small and exact
sizes, and two threads at once. The one test not named ``held`` showed a
defect (see its docstring); it failed on fdb9603d, and the next commit fixed it.
"""

from __future__ import annotations

import concurrent.futures._base as futures_base
import contextlib
import gc
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from builder import parallel
from builder.errors import DreampoolError

pytestmark = pytest.mark.skipif(
    parallel.workers() < 2, reason="one core: builder.parallel runs everything inline"
)


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ProcessPoolExecutor]]:
    """Every executor imap_ordered makes, to look at its workers."""
    made: list[ProcessPoolExecutor] = []
    real = parallel._fork_pool

    def record(processes: int, task: Callable[[Any], Any]) -> ProcessPoolExecutor:
        pool = real(processes, task)
        made.append(pool)
        return pool

    monkeypatch.setattr(parallel, "_fork_pool", record)
    yield made


def _pids(pool: ProcessPoolExecutor, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while not pool._processes:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return list(pool._processes)


def _all_ended(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _touch(folder: Path, i: int) -> int:
    (folder / str(i)).touch()
    return i


def test_held_results_and_reports_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each chunk's reports are absorbed before its results, in chunk order,
    and the results come in input order, across many refills of the window."""
    here = os.getpid()
    found: list[int] = []
    got: list[int] = []
    monkeypatch.setattr(parallel, "_REPORTERS", [])

    def take() -> list[int]:
        assert os.getpid() != here
        mine, found[:] = list(found), []
        return mine

    parallel.report_back(take, got.extend)

    def work(x: int) -> int:
        found.append(x)
        return x

    items = list(range(1003))  # not a multiple of the chunk: a short last chunk
    out = []
    for x in parallel.imap_ordered(work, items, min_items=1, chunk=7):
        assert got == items[: min(len(items), (x // 7 + 1) * 7)]  # its chunk and those before
        out.append(x)
    assert out == items and got == items


@pytest.mark.parametrize("n", [0, 1, 5, 8, 64, 256, 257])
def test_held_small_exact_and_empty_inputs(n: int) -> None:
    """Fewer chunks than the window, exactly a multiple of the chunk size
    (no empty last chunk is sent), one over, and nothing at all."""
    items = list(range(n))
    assert list(parallel.imap_ordered(_neg, items, min_items=0, chunk=8)) == [-x for x in items]
    assert list(parallel.imap_ordered(_neg, range(n), min_items=0, chunk=8)) == [-x for x in items]


def _neg(x: int) -> int:
    return -x


def test_held_early_close_cancels_the_rest_and_ends_the_workers(
    tmp_path: Path, pools: list[ProcessPoolExecutor]
) -> None:
    """close() at a yield: what was not started is cancelled, the workers are
    joined, nothing hangs, and no more than the window (plus the call queue)
    was ever computed."""

    def slow_touch(i: int) -> int:
        time.sleep(0.002)
        return _touch(tmp_path, i)

    done = parallel.imap_ordered(slow_touch, list(range(5000)), chunk=4)
    assert next(done) == 0
    pids = _pids(pools[0])
    time.sleep(0.5)
    t = time.monotonic()
    done.close()
    assert time.monotonic() - t < 10
    assert _all_ended(pids)
    n = parallel.workers()
    assert len(list(tmp_path.iterdir())) <= (parallel.IMAP_WINDOW_PER_WORKER * n + 1) * 4


def test_held_an_unconsumed_generator_collected_ends_its_workers(
    pools: list[ProcessPoolExecutor],
) -> None:
    done = parallel.imap_ordered(_neg, list(range(5000)), chunk=4)
    assert next(done) == 0
    pids = _pids(pools[0])
    del done
    gc.collect()
    assert _all_ended(pids)


def test_held_consumer_raising_under_closing_ends_the_workers(
    pools: list[ProcessPoolExecutor],
) -> None:
    pids: list[int] = []
    done = parallel.imap_ordered(_neg, list(range(5000)), chunk=4)
    with pytest.raises(ZeroDivisionError), contextlib.closing(done):
        for x in done:
            if x == 0:
                pids = _pids(pools[0])
            if x == -100:
                1 / 0  # noqa: B018
    assert pids and _all_ended(pids)


def _raise_at_600(x: int) -> int:
    if x == 600:
        raise KeyError("boom")
    return x


def test_held_a_worker_exception_keeps_its_type_and_shuts_the_pool(
    pools: list[ProcessPoolExecutor],
) -> None:
    out: list[int] = []
    with pytest.raises(KeyError, match="boom") as raised:
        for x in parallel.imap_ordered(_raise_at_600, list(range(2000)), chunk=8):
            out.append(x)
    assert out == list(range(600))  # every result before the failing chunk's
    assert raised.value.__cause__ is not None  # the worker's traceback, as with map
    assert pools[0]._processes is None  # shut down


def _kill_self_at_300(x: int) -> int:
    if x == 300:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.001)
    return x


def test_held_a_worker_killed_while_computing_is_a_dreampool_error() -> None:
    out: list[int] = []
    with pytest.raises(DreampoolError, match="died"):
        for x in parallel.imap_ordered(_kill_self_at_300, list(range(3000)), chunk=8):
            out.append(x)
    assert out == list(range(len(out)))


def test_held_a_worker_killed_while_idle_fails_the_next_submit_as_a_dreampool_error(
    pools: list[ProcessPoolExecutor],
) -> None:
    """The new path: the window full and computed, the workers idle, one is
    killed (the OOM killer picks by size, not by activity); the next
    ``submit`` raises BrokenProcessPool, made a DreampoolError, not a
    RuntimeError nor a hang."""
    done = parallel.imap_ordered(_neg, list(range(5000)), chunk=4)
    assert next(done) == 0
    pool = pools[0]
    pids = _pids(pool)
    time.sleep(0.5)  # the window computed
    os.kill(pids[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not pool._broken:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(DreampoolError, match="died"):
        for _ in done:
            pass
    assert _all_ended(pids)


def test_held_two_threads_at_once_keep_their_own_functions() -> None:
    """The agents' server calls builder.parallel from tool threads: two
    windowed runs at once, each submitting from its own thread while the
    other's manager thread runs, neither deadlocks nor mixes results."""
    results: dict[str, list[int]] = {}

    def run(name: str, func: Callable[[int], int]) -> None:
        results[name] = list(parallel.imap_ordered(func, list(range(3000)), chunk=4))

    threads = [
        threading.Thread(target=run, args=("neg", _neg)),
        threading.Thread(target=run, args=("sq", lambda x: x * x)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert results["neg"] == [-x for x in range(3000)]
    assert results["sq"] == [x * x for x in range(3000)]


def test_imap_ordered_last_submit_racing_a_worker_death_does_not_hang(
    monkeypatch: pytest.MonkeyPatch, pools: list[ProcessPoolExecutor]
) -> None:
    """imap_ordered — severity: low (a rare race, but its outcome is a hang,
    what _fork_pool's executor exists to prevent).

    The window now calls ``pool.submit`` all through the run, not only at its
    start. CPython 3.11's executor manager thread, seeing a worker die, sets
    ``_broken``, fails the pending futures and clears them *without* the
    executor's ``_shutdown_lock`` (``terminate_broken``). A ``submit`` that
    passed its ``_broken`` check just before then inserts its work item after
    the clear: that future never completes. When it is the last chunk's and
    the futures ahead of it were already done (a worker killed while idle,
    the window computed), no later ``submit`` raises, and ``result()`` waits
    forever. The interleaving is forced here by pausing inside that submit
    (where the GIL may switch) until the manager has marked the pool broken.

    Fix: after each ``pool.submit`` in imap_ordered, ``if pool._broken: raise
    BrokenProcessPool(pool._broken)`` (``_broken`` is set before the pending
    futures are failed, so a submit that missed the clear sees it); or wait
    for the head with a timeout and check the pool each time round."""
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(parallel, "IMAP_WINDOW_PER_WORKER", 2)  # a window of 4 chunks
    made: list[futures_base.Future[Any]] = []
    real_future = futures_base.Future

    class Racing(real_future):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            super().__init__()
            made.append(self)
            if len(made) == 5 and threading.current_thread() is consumer:  # the last chunk's submit
                pool = pools[0]
                wait = time.monotonic() + 10
                while not all(f.done() for f in made[:4]) and time.monotonic() < wait:
                    time.sleep(0.01)
                os.kill(next(iter(pool._processes)), signal.SIGKILL)  # an idle worker
                while not pool._broken and time.monotonic() < wait:
                    time.sleep(0.01)
                time.sleep(0.3)  # the manager fails and clears what is pending

    monkeypatch.setattr(futures_base, "Future", Racing)
    outcome: list[BaseException | list[int]] = []

    def consume() -> None:
        try:
            outcome.append(list(parallel.imap_ordered(_neg, list(range(5)), min_items=1, chunk=1)))
        except BaseException as e:
            outcome.append(e)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    consumer.join(10)
    hung = consumer.is_alive()
    if hung:  # free the thread: fail the future nobody will complete
        for f in made:
            if not f.done():
                f.set_exception(RuntimeError("never completed"))
        consumer.join(20)
    assert not hung, "imap_ordered waited forever on a future the broken pool lost"
    assert isinstance(outcome[0], DreampoolError), outcome
