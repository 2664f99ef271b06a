"""What a build makes durable, and when: for tests of the log's write order."""

from __future__ import annotations

import os
from typing import Any

import pytest

from builder.content import pool
from builder.log import logstate

Event = tuple[str, str]


def record(monkeypatch: pytest.MonkeyPatch) -> list[Event]:
    """The events of what runs next, in order: ``("fsync", path)`` for each
    fsync (its path from ``/proc``, so Linux only), ``("syncfs", "")`` for each
    flush of a whole file system, ``("leaves", "")`` when the log's leaves are
    written."""
    events: list[Event] = []
    fsync, append = os.fsync, logstate.append

    def synced(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def appended(*args: Any, **kwargs: Any) -> Any:
        events.append(("leaves", ""))
        return append(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", synced)
    monkeypatch.setattr(pool, "sync_filesystem", lambda path: events.append(("syncfs", "")))
    monkeypatch.setattr(logstate, "append", appended)
    return events


def before_leaves(events: list[Event]) -> list[Event]:
    """The events before the leaves were written."""
    return events[: events.index(("leaves", ""))]
