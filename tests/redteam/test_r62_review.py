"""Review r62 of f9b170a4 (parallel.background: a forked Process and a pipe).
Scenarios that could hang run in a subprocess."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import builder.buildcache  # noqa: F401  (registers the store's reporter, as every build does)
from builder import parallel
from builder.errors import DreampoolError
from tests.isolated import run_isolated

REPO = Path(__file__).resolve().parents[2]

needs_fork = pytest.mark.skipif(parallel.workers() < 2, reason="one core: nothing forked")


def _unpicklable(_: object) -> object:
    return lambda: None  # a result pickle refuses


class _Unrebuildable(Exception):
    """Pickles (as its args) but cannot be rebuilt from them."""

    def __init__(self, a: str, b: str) -> None:
        super().__init__(f"{a} {b}")


def _raise_unrebuildable(_: object) -> object:
    raise _Unrebuildable("x", "y")


@needs_fork
def test_a_result_that_cannot_be_pickled_is_a_dreampool_error() -> None:
    """T40: _run_background's fallback sends (True, DreampoolError, []) with no
    reports; the parent's _absorb(zip(..., strict=True)) then raises
    ValueError before the error is raised: the fallback can never work while
    any reporter is registered (buildcache always registers one)."""
    with parallel.background(_unpicklable, None) as pending, pytest.raises(DreampoolError):
        pending()


@needs_fork
def test_an_error_that_cannot_be_rebuilt_is_a_dreampool_error() -> None:
    """T40: An exception pickled in the child but not rebuilt in the parent: recv()
    raises TypeError, which result() does not catch (only EOFError, OSError).
    On f9b170a4~1 the executor reported BrokenProcessPool, made _died()
    (a DreampoolError), which Opening.survey() answers by surveying inline."""
    with parallel.background(_raise_unrebuildable, None) as pending, pytest.raises(DreampoolError):
        pending()


_INTERRUPT_AFTER_FORK = textwrap.dedent(
    """
    import os, sys, time
    from multiprocessing import context
    from builder import parallel

    real = context.ForkProcess.start
    def start(self):  # Ctrl-C lands just after the fork, before background's try
        real(self)
        print("child", self.pid, flush=True)
        raise KeyboardInterrupt
    context.ForkProcess.start = start

    def slow(_):
        time.sleep(30)
        return 1

    t = time.monotonic()
    try:
        with parallel.background(slow, None) as pending:
            pass
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print("done", flush=True)
    """
)


@needs_fork
def test_an_interrupt_just_after_the_fork_ends_the_process_and_the_build_exits() -> None:
    """T40: process.start() runs before the try whose finally kills and joins it: an
    interrupt landing between the fork and that try (in Process.start after
    the fork, or in sender.close()) leaves the process running unkilled and
    unjoined, and multiprocessing's atexit joins every non-daemon child: the
    interrupted build does not exit until the background work is done (30 s
    here; a survey reading a gigabyte, or patterns counting, for real)."""
    out, hung = run_isolated(_INTERRUPT_AFTER_FORK, timeout=15)
    if hung:
        pytest.fail(f"the interrupted process did not exit within 15 s\n{out}")
    assert "interrupted" in out and "done" in out, out
