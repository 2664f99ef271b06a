"""Review r30 of two build speed-ups: the attributes files looked for only
where they can apply to the pool (``gitrepo._has_attributes``, T80), and a few
new salts flushed file by file instead of with one syncfs
(``pool.make_durable``, T40).

A failing test is a defect the speed-up brought.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.content import pool
from builder.formats.note import parse_private_key
from builder.log import logbuild, logstate
from tests.pools import PoolFixture, make_pool
from tests.redteam import signed, submit


def _flushes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Each fsync (of which path), each syncfs, and the leaves, in order."""
    events: list[tuple[str, str]] = []
    fsync, append = os.fsync, logstate.append

    def synced(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def appended(*args: Any, **kwargs: Any) -> Any:
        events.append(("leaves", ""))
        return append(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", synced)
    for module in (pool, logbuild):  # logbuild called it by name before make_durable
        if hasattr(module, "sync_filesystem"):
            monkeypatch.setattr(
                module, "sync_filesystem", lambda path: events.append(("syncfs", ""))
            )
    monkeypatch.setattr(logstate, "append", appended)
    return events


def _before_leaves(events: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return events[: events.index(("leaves", ""))]


def test_a_first_builds_policy_is_durable_before_its_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T40 (crash consistency): the first build writes ``content/log/policy``
    (in a ``content/log`` it creates), then the salts, then the leaves and a
    checkpoint. The policy's bytes are fsynced, but its name (a rename into
    ``content/log``) and ``content/log`` itself were made durable only by the
    syncfs that followed the salts. With a few new salts fsynced one by one,
    nothing flushes them before the leaves: after a power loss a file system
    that does not order renames may keep the leaves and the signed checkpoint
    without the policy, and every later build then stops ("policy is missing
    but checkpoints were signed; restore it from git": it was never
    committed). syncfs (more than 64 salts) still flushes it."""
    tp: PoolFixture = make_pool(tmp_path / "pool")
    submit(tp, signed("ada", title="The first dream"))
    submit(tp, signed("bob", title="The second dream"))
    assert not (tp.content / "log" / "policy").exists()
    events = _flushes(monkeypatch)
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    before = _before_leaves(events)
    if ("syncfs", "") in before:
        return
    flushed = {path for kind, path in before if kind == "fsync"}
    content = tp.content.resolve()
    missing = {str(content / "log"), str(content)} - flushed
    assert not missing, (
        f"the policy's folder entries are not flushed before the leaves: {sorted(missing)} "
        f"(flushed: {sorted(flushed)})"
    )
