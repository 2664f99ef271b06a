"""Run a pure function over many items on every core, keeping their order.

The build's heavy stages (verifying dreams, rendering dream pages) are pure
per item, so they split across processes. Workers are forked, so they inherit
the function and everything it closes over (the Jinja environment, the site
model) without pickling it; only the items and the results cross the pipe.
Small inputs stay in this process, where forking would cost more than it saves.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import gc
import itertools
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar, cast

from builder.errors import DreampoolError

T = TypeVar("T")
R = TypeVar("R")

MIN_ITEMS = 200  # below this, a fork costs more than it saves
# Chunks imap_ordered keeps submitted per worker: enough that no worker waits
# for its next chunk while the consumer takes a result, few enough that the
# results computed ahead of a slow consumer stay a bounded few.
IMAP_WINDOW_PER_WORKER = 4
_TASK: Callable[[Any], Any] | None = None
# What a forked process hands back besides its results (report_back).
_REPORTERS: list[tuple[Callable[[], Any], Callable[[Any], None]]] = []


def report_back(take: Callable[[], Any], absorb: Callable[[Any], None]) -> None:
    """Have every forked worker and background process return ``take()`` with
    each batch of results, and hand it to ``absorb`` in the process that
    forked it, before those results. For state a worker may change that its
    parent must know of: the build store's notes and failures
    (:mod:`builder.buildcache`), which a worker must never act on itself. In
    a process that did not fork, ``take`` is never called: what it would
    return is already where it belongs. When a worker raises, the reports
    of its batch (from :func:`map_ordered`, of every batch) are lost with
    the results: an error ends the build before it saves the store, and
    the agents' server, which goes on, reads the store without acting on
    what it finds (``StoreReader``). A :func:`background` process's come
    back with its exception, and are absorbed before it is raised."""
    _REPORTERS.append((take, absorb))


def _reports() -> list[Any]:
    return [take() for take, _ in _REPORTERS]


def _absorb(reports: Sequence[Any]) -> None:
    for (_, absorb), report in zip(_REPORTERS, reports, strict=True):
        absorb(report)


def workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def map_ordered(
    func: Callable[[T], R], items: Sequence[T], *, min_items: int = MIN_ITEMS
) -> list[R]:
    """``[func(x) for x in items]``, computed on all cores when there are enough items."""
    n = workers()
    if len(items) < min_items or n < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [func(x) for x in items]
    size = -(-len(items) // (n * 4))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    with _frozen():
        pool = _started_pool(n, func)
        if pool is None:
            return [func(x) for x in items]
        try:
            parts = list(pool.map(_run_chunk, chunks))
        except BrokenProcessPool:
            raise _died() from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    for _, reports in parts:
        _absorb(reports)
    return [r for part, _ in parts for r in part]


def imap_ordered(
    func: Callable[[T], R], items: Sequence[T], *, min_items: int = MIN_ITEMS, chunk: int = 32
) -> Generator[R, None, None]:
    """``func(x) for x in items``, computed on all cores, yielded in order as
    they are done: the caller consumes results (writes files) while the
    workers compute the next ones, and never holds them all. A caller that
    can stop early (an error in its loop) closes it (``contextlib.closing``):
    its workers end then, not whenever the generator is collected."""
    n = workers()
    if len(items) < min_items or n < 2 or "fork" not in multiprocessing.get_all_start_methods():
        yield from (func(x) for x in items)
        return
    with _frozen():
        pool = _started_pool(n, func)
        if pool is None:
            yield from (func(x) for x in items)
            return
        try:
            # Not pool.map, which submits every chunk at once: workers faster than
            # the consumer (the build writing each page) then left every result
            # of the pool in memory, waiting for it. A window of chunks is kept
            # submitted, the next one sent as the oldest is taken.
            chunks = _chunks(items, chunk)
            window = collections.deque(
                _submit(pool, c) for c in itertools.islice(chunks, IMAP_WINDOW_PER_WORKER * n)
            )
            while window:
                part, reports = window.popleft().result()
                following = next(chunks, None)
                if following is not None:
                    window.append(_submit(pool, following))
                _absorb(reports)
                yield from part
        except BrokenProcessPool:
            raise _died() from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _submit(pool: ProcessPoolExecutor, chunk: Sequence[Any]) -> Future[Any]:
    """``pool.submit`` of a chunk, for a pool that may break meanwhile. When a
    worker dies, CPython (3.11) marks the pool broken and fails the futures it
    holds without the lock submit takes: a chunk submitted just then is never
    failed, and a caller waiting for it waited forever (review r55). The mark
    is set before the futures are failed, so a submit that missed them sees it."""
    future = pool.submit(_run_chunk, chunk)
    broken = getattr(pool, "_broken", False)  # ProcessPoolExecutor's own flag
    if broken:
        future.cancel()
        raise BrokenProcessPool(broken)
    return future


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class Pending(Generic[R]):
    """The result of :func:`background`: call it to wait for the result;
    :meth:`abandon` it when the result is no longer wanted."""

    def __init__(self, result: Callable[[], R], abandon: Callable[[], None] | None = None) -> None:
        self._result = result
        self._abandon = abandon

    def __call__(self) -> R:
        return self._result()

    def abandon(self) -> None:
        """End the process now (SIGKILL; its own workers end with it) rather
        than when the context is left: a build that fails early should not
        wait for work it will never use."""
        if self._abandon is not None:
            self._abandon()


def background_on(
    stack: contextlib.ExitStack,
    func: Callable[[T], R],
    arg: T,
    *,
    initializer: Callable[[], None] | None = None,
) -> Pending[R]:
    """:func:`background`, entered on ``stack``, whose closing ends the
    process: registered before the fork, so an interrupt landing as the
    context's ``__enter__`` returns (and, in the main thread, during the fork:
    see :func:`background`) leaves no process that closing ``stack`` cannot
    end (reviews r62, r82, r83, r84)."""
    context = background(func, arg, initializer=initializer)
    stack.callback(context.gen.close)  # the generator's finally ends the process
    return context.__enter__()


@contextlib.contextmanager
def background(
    func: Callable[[T], R],
    arg: T,
    *,
    enabled: bool = True,
    initializer: Callable[[], None] | None = None,
) -> Iterator[Pending[R]]:
    """Start ``func(arg)`` in a forked process; yield a :class:`Pending` that
    waits for its result. Without a second core (or ``enabled=False``) it runs
    inline, when the result is first asked for. ``initializer`` runs first in
    the process. A result never asked for is not waited for: leaving the
    context kills the process (an error, or an interrupt, ended the caller's
    use of it).

    ``func`` and ``arg`` reach the process through the fork, never pickled:
    pickling the site model took seconds at 100k dreams, and ran in a thread
    beside the caller, which may change ``arg`` meanwhile. Only the result
    (and what :func:`report_back` asks for) comes back, through a pipe whose
    writing end only the process holds, so its death (the OOM killer, or
    :meth:`Pending.abandon`) ends the pipe, even halfway through a result,
    and the wait raises :func:`_died`. (A ``ProcessPoolExecutor`` was used:
    its own thread read the results, and a process killed while sending one
    left that thread waiting forever for the rest, and the build with it:
    review r61.)"""
    if not enabled or workers() < 2 or "fork" not in multiprocessing.get_all_start_methods():
        yield Pending(functools.partial(func, arg))
        return
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    gc.freeze()
    process = context.Process(
        target=_run_background,
        args=(os.getpid(), initializer, functools.partial(func, arg), sender),
    )
    taken: list[Any] = []

    def result() -> R:
        if not taken:
            try:
                failed, value, reports = receiver.recv()
            except (EOFError, OSError):
                raise _died() from None
            except Exception as exc:  # sent, but not to be rebuilt here (review r62)
                raise _failed(exc) from None
            _absorb(reports)
            taken.append((failed, value))
        failed, value = taken[0]
        if failed:
            raise value
        return cast(R, value)

    # Started inside the try: an interrupt just after the fork still ends it
    # (review r62); the pipe's ends are closed whatever happens.
    try:
        # No KeyboardInterrupt between the fork and Process.start() storing
        # its Popen (process.pid None: the finally below could neither kill
        # nor join the child), whichever thread takes a Ctrl-C (reviews r84,
        # r85); the child gives back the handler and unblocks it first.
        held = _sigint_held()
        try:
            process.start()
            forked = True
        except OSError as exc:
            # No process to be had (fork's EAGAIN at a process limit, ENOMEM):
            # computed here when asked for, as on one core (review r87).
            _close_launch_pipes(exc)
            forked = False
        finally:
            sender.close()  # the process's copy is the only one
            _sigint_given_back(held)
        yield Pending(result, process.kill) if forked else Pending(functools.partial(func, arg))
    finally:
        try:
            if process.pid is not None:  # forked
                if not taken:
                    process.kill()  # not waited for: nobody will take its result
                process.join()
        finally:
            receiver.close()


def _run_background(
    parent: int,
    initializer: Callable[[], None] | None,
    work: Callable[[], Any],
    sender: Any,
) -> None:
    """The forked process of :func:`background`: its result, or the exception
    it raised, and its reports, sent once."""
    _start_worker(parent, initializer)
    try:
        failed, value = False, work()
    except BaseException as exc:
        failed, value = True, exc
    reports = _reports()
    try:
        sender.send((failed, value, reports))
    except Exception as exc:  # a result or an exception that cannot be pickled
        sender.send((True, _failed(exc), reports))
    sender.close()


def _failed(exc: BaseException) -> DreampoolError:
    return DreampoolError(
        f"a process computing in the background failed: {exc!r}", hint="report this"
    )


def _died() -> DreampoolError:
    return DreampoolError(
        "a process computing in the background died (out of memory?)",
        hint="build again; on a small machine a large pool may need more memory",
    )


@contextlib.contextmanager
def _frozen() -> Iterator[None]:
    """The caller's objects frozen out of the garbage collector while its workers
    are forked (:func:`_fork_pool`), and thawed after unless the caller had frozen
    some itself (the build freezes each stage's, :mod:`builder.build`): the agents'
    server forks for its bulk tools for hours, and what it held at a fork, left
    frozen, would never be collected once it became cyclic garbage."""
    thawed = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if thawed:
            gc.unfreeze()


def _fork_pool(processes: int, task: Callable[[Any], Any]) -> ProcessPoolExecutor:
    """An executor of forked workers that run ``task`` (:func:`_run_chunk`): not a
    ``multiprocessing.Pool``, which never answers ``map`` once a worker dies (the
    OOM killer; CPython bpo-22393), so its caller waited forever, in the agents'
    server with the reader's lock held; the executor raises
    :class:`BrokenProcessPool`, made a :class:`DreampoolError` here. Call it
    within :func:`_frozen`: the parent's objects must be out of the garbage
    collector when the workers fork, else a collection in a worker walks (and,
    by writing to their headers, copies page by page) every object the build
    holds, which made workers twice as slow as the same work inline.

    ``task`` reaches each worker through the fork, as an argument of its
    initializer (a forked process is never sent its arguments, so nothing is
    pickled), never through a global of this module: the agents' server runs
    tools in threads, and two of them forking at once (``dream_stats`` counting
    words, a bulk tool checking signatures) made one call's workers run the
    other's function."""
    return ProcessPoolExecutor(
        processes,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(os.getpid(), None, task),
    )


def _started_pool(processes: int, task: Callable[[Any], Any]) -> ProcessPoolExecutor | None:
    """:func:`_fork_pool` with its workers forked and answering (the executor
    forks them all on its first submit, then starts its manager thread, whose
    first put starts the call queue's feeder thread); None if a fork or one
    of those threads cannot be had (EAGAIN at a process limit, ENOMEM; on
    Linux threads count against the same limits), every worker forked by
    then ended: the caller computes in its own process, as on one core.
    Before, the build ended on a bare OSError (review r88), or RuntimeError
    with every worker left waiting on its queue, so the process never
    exited, or waited forever for an answer no thread would deliver (r89)."""
    pool = _fork_pool(processes, task)
    try:
        # No KeyboardInterrupt between two forks: the workers forked so far
        # would be left (r89); a Ctrl-C meanwhile is raised once they all are.
        held = _sigint_held()
        try:
            first = pool.submit(_run_chunk, ())
        finally:
            _sigint_given_back(held)
        while True:
            try:
                _, reports = first.result(timeout=0.05)
                break
            except TimeoutError:
                manager = getattr(pool, "_executor_manager_thread", None)  # the executor's own
                if manager is not None and not manager.is_alive():
                    _end_pool(pool)  # its feeder thread could not start
                    return None
        _absorb(reports)
    except BrokenProcessPool:
        _end_pool(pool)
        raise _died() from None
    except (OSError, RuntimeError) as exc:
        _close_launch_pipes(exc)
        _end_pool(pool)
        return None
    except BaseException:
        _end_pool(pool)
        raise
    return pool


def _end_pool(pool: ProcessPoolExecutor) -> None:
    """Kill and reap the workers ``pool`` forked, and shut it down without
    waiting for its threads (which may never have started)."""
    forked = list((getattr(pool, "_processes", None) or {}).values())  # the executor's own
    for process in forked:
        with contextlib.suppress(OSError, ValueError):
            process.kill()
    for process in forked:
        with contextlib.suppress(OSError, ValueError):
            process.join()
    pool.shutdown(wait=False, cancel_futures=True)


def _close_launch_pipes(exc: BaseException) -> None:
    """Close the two pipes CPython's ``Popen._launch`` (multiprocessing.popen_fork,
    3.11) opens before a fork that then fails: it leaves them open, four
    descriptors a failure, and the agents' server, which goes on, ran out
    (review r89). Only a launch whose fork returned nothing (its ``pid``
    unset): no descriptor of it was closed, so none was given to another."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        tb = tb.tb_next
        if frame.f_code.co_name != "_launch" or not frame.f_globals.get("__name__", "").startswith(
            "multiprocessing.popen_fork"
        ):
            continue
        local = frame.f_locals
        if getattr(local.get("self"), "pid", None) is not None:
            continue
        for name in ("parent_r", "child_w", "child_r", "parent_w"):
            fd = local.get(name)
            if isinstance(fd, int):
                with contextlib.suppress(OSError):
                    os.close(fd)


class _SigintHeld:
    """SIGINT held off in the main thread across a fork (:func:`_sigint_held`):
    blocked there, and taken, should another thread take it meanwhile, by
    this handler, which only notes it; ``before`` is the handler it stands
    in for."""

    def __init__(self, before: Any) -> None:
        self.before = before
        self.taken = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.taken = True


def _sigint_held() -> tuple[Any, _SigintHeld] | None:
    """Hold off SIGINT in the main thread (the mask and the handler before, to
    give back to :func:`_sigint_given_back`); None in any other thread, which
    a Python handler never runs in.

    Blocking it is not enough where another thread lives (a thread of the
    agents' server, an embedding program's): the kernel hands a Ctrl-C to a
    thread that does not block it, CPython's C handler runs there, and the
    Python handler then raises KeyboardInterrupt in the main thread at its
    next bytecode, inside ``Popen._launch`` after the fork, leaving a child
    nothing can end (review r85). So the Python handler is this one's while
    it is held, installed before the block (a Ctrl-C between the two is
    noted, never raised with SIGINT left blocked: review r90). A handler
    installed from C (``getsignal`` None: an embedding program's) is left as
    it is, and the signal only blocked: it cannot be given back from Python."""
    if threading.current_thread() is not threading.main_thread():
        return None
    held = _SigintHeld(signal.getsignal(signal.SIGINT))
    if held.before is not None:
        signal.signal(signal.SIGINT, held)
    try:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    except BaseException:
        if held.before is not None:
            signal.signal(signal.SIGINT, held.before)
        raise
    return mask, held


def _sigint_given_back(state: tuple[Any, _SigintHeld] | None) -> None:
    """The mask and the handler as they were, in that order (one pending in
    the main thread is delivered as the mask lifts, and noted: a Ctrl-C
    between the two never leaves SIGINT blocked, review r90); a SIGINT noted
    meanwhile is then handled as it would have been: the caller's handler is
    called (not the signal raised again, which would write it to a wakeup
    fd, asyncio's, a second time), the default ends the process, an ignored
    one is ignored."""
    if state is None:
        return
    mask, held = state
    before = held.before
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if before is None:
        return
    signal.signal(signal.SIGINT, before)
    if held.taken:
        if before == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)
        elif callable(before):
            before(signal.SIGINT, sys._getframe())


def _start_worker(
    parent: int, then: Callable[[], None] | None, task: Callable[[Any], Any] | None = None
) -> None:
    """First thing in a worker: end when the build that forked it ends.

    A worker waits for tasks on a pipe whose other end its siblings also
    hold, so when the build is killed (SIGKILL, the OOM killer) it would wait
    forever, holding its memory and its copy of the build lock, and every
    later build would stop at "another build is writing". On Linux the kernel
    kills it with its parent (PR_SET_PDEATHSIG); elsewhere a thread watches
    for the parent to go."""
    # Forked while the parent held SIGINT off (_sigint_held): its handler
    # first, then the signal, pending or not, as a process of its own.
    handler = signal.getsignal(signal.SIGINT)
    if isinstance(handler, _SigintHeld):
        while isinstance(handler, _SigintHeld):
            handler = handler.before
        signal.signal(signal.SIGINT, signal.SIG_DFL if handler is None else handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    else:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)
    if then is not None:
        then()
    if task is not None:
        global _TASK
        _TASK = task  # this worker's own: set after the fork, in the worker only


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _run_chunk(chunk: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    assert _TASK is not None
    results = [_TASK(x) for x in chunk]
    return results, _reports()
