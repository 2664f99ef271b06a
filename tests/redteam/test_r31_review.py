"""Review r31: a dream's text decoded only when a page shows it (940121a), an
admitted dream's commitment stored as it is computed (e8f9856) and the page key
of agents/digest.md (b516baa).

A failing test is a defect found in review.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any

import pytest

from builder.formats.dream import Dream


@pytest.mark.parametrize("statements", [1, 2])
def test_two_threads_reading_a_deferred_body_both_get_it(statements: int) -> None:
    """T108: the agents' server reads the build's store and runs tools in
    worker threads, and ``Dream.body`` says a race between two first reads
    "loads it twice, equal". It did not: the second reader took ``_body``
    (None), the first then stored the body and cleared ``_load``, and the
    second's ``assert self._load is not None`` failed — an AssertionError
    traceback from a sound row. The interleaving is forced here with a trace
    function that holds the second reader after the first (or second) statement of the getter
    until the first reader is done."""
    body = {"author": "ada", "title": "t", "entries": [{"type": "fact"}]}
    d = Dream.deferred(
        "0" * 16,
        "sha256:" + "1" * 16,
        bytes(32),
        {"author": "ada", "title": "t"},
        ("fact",),
        lambda: body,
    )
    getter = Dream.body.fget
    assert getter is not None
    code = getter.__code__
    paused = threading.Event()
    done = threading.Event()
    got: list[Any] = []
    lines: list[int] = []

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            lines.append(frame.f_lineno)
            if len(lines) == statements + 1:  # that many of the getter's statements ran
                paused.set()
                done.wait(5)
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    def second() -> None:
        sys.settrace(tracer)
        try:
            got.append(d.body)
        except BaseException as exc:  # the defect is any exception
            got.append(exc)
        finally:
            sys.settrace(None)

    t = threading.Thread(target=second)
    t.start()
    assert paused.wait(5)
    assert d.body == body  # the first reader loads it while the second is held
    done.set()
    t.join(5)
    assert got == [body]
