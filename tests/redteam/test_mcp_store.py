"""Review of ``dreampool mcp --content --out``: the agents' server reads the build's
store read-only (THREATS.md T108), notices a changed checkout by a cheaper
fingerprint (T109) and keeps ``dream_stats`` per pool state.

A failing test is a claim of the change that does not hold: the reader writes a
file of the build's folder, a kept answer is changed by its caller, or an error
reaches the agent (or the operator's terminal) as a traceback instead of a
clear message.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from builder import buildcache
from builder.agents import mcp_server
from builder.buildcache import BuildCache
from builder.errors import DreampoolError
from builder.formats.dream import Dream
from builder.site import derived
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, set_tier, signed, submit


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every entry of the store folder: its bytes and mtime."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_a_store_in_wal_mode_is_read_without_making_a_file(tmp_path: Path) -> None:
    """T108: the reader "never removes, creates or writes anything". A store whose
    header says WAL (the build always sets ``journal_mode=DELETE``, but a store left
    so by an older or other tool, or restored from elsewhere, keeps the mode in its
    header) opened with ``mode=ro`` makes SQLite create ``store.sqlite-wal`` and
    ``store.sqlite-shm`` beside it, and leave them when the connection closes."""
    c = BuildCache(tmp_path)
    c["units"].update({"id0": ("key0", (("dreams/0/index.html", bytes(16)),))})
    c.save()
    db = sqlite3.connect(tmp_path / buildcache.STORE, isolation_level=None)
    assert db.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    db.close()
    before = _state(tmp_path)
    assert sorted(before) == [buildcache.STORE]
    reader = buildcache.StoreReader(tmp_path)
    reader.readable()
    reader["units"]
    assert _state(tmp_path) == before


@pytest.fixture
def pool(tmp_path: Path) -> tuple[PoolFixture, Path]:
    """Three members with two dreams each, logged and built beside the checkout."""
    tp = make_pool(tmp_path / "pool")
    submit(
        tp,
        *(
            signed(name, title=f"{name} on postgres vacuum {n}")
            for name in ("ada", "bob", "cy")
            for n in range(2)
        ),
    )
    for name in ("ada", "bob", "cy"):
        set_tier(tp, name, "member")
    site = tmp_path / "pool" / "site"
    build(tp, site)
    return tp, site


def test_the_first_stats_answer_is_a_copy_too(pool: tuple[PoolFixture, Path]) -> None:
    """T109 (what is served between reloads): dream_stats keeps its answer per pool
    state and returns "a deep copy of
    data", so a caller's change cannot reach the next caller. The first call
    returns the very dict it keeps: a caller that edits it (adds a field, drops
    ``failed``) changes every later answer of the same state."""
    tp, site = pool
    tools = mcp_server.Tools(mcp_server.open_reader(None, tp.content, out=site), content=tp.content)
    first = tools.dream_stats()
    expected = first.data["dreams"]
    first.data["dreams"] = -1
    first.data["patterns"]["k"] = 99
    again = tools.dream_stats().data
    assert (again["dreams"], again["patterns"]["k"]) == (expected, 2)


def test_an_out_below_a_file_is_a_clear_error(pool: tuple[PoolFixture, Path]) -> None:
    """T108 (reading the store beside the checkout): every failure must be a clear
    message, never a traceback. ``--out`` naming a
    path under a file (``--out README.md/site``, a slip of the operator) raises
    NotADirectoryError from ``derived.store_to_read`` (``_kind`` catches only
    FileNotFoundError): not a DreampoolError, so the SDK wrapper does not turn it
    into the server's words and the background read (``PoolReader.warm``) prints a
    traceback. A store it cannot look for should be read as none, like a missing one."""
    tp, _site = pool
    not_a_folder = tp.content / "pool.yaml" / "site"
    reader = mcp_server.open_reader(None, tp.content, out=not_a_folder)
    tools = mcp_server.Tools(reader, content=tp.content)
    try:
        data = tools.dream_list(limit=100).data
    except DreampoolError:
        return  # a clear message is as good
    assert len(data["dreams"]) == 6


def test_a_store_folder_that_cannot_be_looked_at_is_no_traceback(
    pool: tuple[PoolFixture, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """T108: the same for a builds folder the server may not look into (PermissionError
    from ``os.lstat``: a site built by another user under a folder closed to this
    one). Simulated, since the tests may run as root."""
    tp, site = pool
    builds = site.parent / f".{site.name}.builds"
    real = os.lstat

    def lstat(path: os.PathLike[str] | str, *args: object, **kw: object) -> os.stat_result:
        if str(path).startswith(str(builds)):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", lstat)
    tools = mcp_server.Tools(mcp_server.open_reader(None, tp.content, out=site), content=tp.content)
    try:
        data = tools.dream_list(limit=100).data
    except DreampoolError:
        return
    assert len(data["dreams"]) == 6


def test_a_store_git_tracks_under_another_case_is_not_read(tmp_path: Path) -> None:
    """T108 (and T45 for the build itself): "a store git tracks is not read". On a
    case-insensitive file system (macOS, Windows: git sets core.ignorecase there) a
    pull request that adds ``.SITE.builds/cache/store.sqlite`` writes the very file
    ``.site.builds/cache/store.sqlite``, but ``gitrepo.tracked`` asks git with a
    ``:(literal)`` pathspec, which compares case-sensitively whatever
    core.ignorecase says, so the planted store passes as untracked (its rows
    carry unkeyed digests anyone computes). Simulated here on a case-sensitive
    file system: the checkout has core.ignorecase set, as such a clone has, and
    git tracks the builds folder under another case."""
    out = tmp_path / "site"
    (tmp_path / ".site.builds" / "cache").mkdir(parents=True)
    planted = tmp_path / ".SITE.builds" / "cache"
    planted.mkdir(parents=True)
    (planted / buildcache.STORE).write_bytes(b"planted")
    git = ["git", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "config", "core.ignorecase", "true"], check=True)
    subprocess.run([*git, "add", "-f", ".SITE.builds"], check=True)
    assert derived.store_to_read(out) is None


def _scan_store(folder: Path, text: str = "what the build verified") -> tuple[str, Any]:
    """A store holding one dream in the scan section; its blob id and entry."""
    dream = Dream(
        "0" * 16,
        "sha256:" + "1" * 16,
        bytes(32),
        {
            "author": "ada",
            "title": "t",
            "tags": ["a"],
            "consent": {"share": True},
            "entries": [{"text": text, "type": "fact", "confidence": "likely"}],
        },
    )
    blob, entry = "1" * 40, ("2" * 64, dream)
    c = BuildCache(folder)
    c["scan"][blob] = entry
    c.save()
    return blob, entry


def test_a_deferred_body_is_not_read_through_a_wal_store_put_there_since(tmp_path: Path) -> None:
    """T108, T111: the reader checks the store's file once (StoreReader._prepare:
    no link, no hard link, no WAL header) and then opens it again whenever a
    deferred dream's body is first asked for (_StoredBodies, review r39): in the
    agents' server, hours later. A store put in WAL mode meanwhile (restored
    from elsewhere, another tool) is then opened ``mode=ro`` anyway, and SQLite
    leaves ``store.sqlite-wal`` and ``-shm`` beside it: the reader wrote files."""
    blob, _ = _scan_store(tmp_path)
    reader = buildcache.StoreReader(tmp_path)
    assert reader.readable()
    held = reader["scan"][blob][1]
    db = sqlite3.connect(tmp_path / buildcache.STORE, isolation_level=None)
    assert db.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    db.close()
    before = _state(tmp_path)
    assert sorted(before) == [buildcache.STORE]
    with contextlib.suppress(DreampoolError):
        _ = held.body
    assert _state(tmp_path) == before


def test_a_deferred_body_is_not_read_through_a_link_put_there_since(tmp_path: Path) -> None:
    """T108 ("opens no link"): the store replaced by a symbolic link after the
    reader checked it. The body read again follows the link, and a row of the
    linked store with a valid digest, whose head matches, is shown as the text
    of the dream the build verified."""
    store = tmp_path / "cache"
    elsewhere = tmp_path / "elsewhere"
    blob, (_, dream) = _scan_store(store)
    _scan_store(elsewhere, text="FORGED through a link")
    reader = buildcache.StoreReader(store)
    held = reader["scan"][blob][1]
    (store / buildcache.STORE).unlink()
    (store / buildcache.STORE).symlink_to(elsewhere / buildcache.STORE)
    try:
        body = held.body
    except DreampoolError:
        return  # refused, as the section read refuses a link
    assert body == dream.body, body["entries"][0]["text"]


def test_a_deferred_body_after_a_fork_and_a_store_gone_is_no_traceback(tmp_path: Path) -> None:
    """T108 (a store it cannot use reads as empty; an error is a message, not a
    traceback): the agents' server reads a body in a thread (its connection
    closed before check_all forks), then the store is gone (a build started it
    afresh, the operator removed it) and a section read sets the reader's
    folder to None (StoreReader._damaged). The next body that thread reads
    reopens its connection with no path: an AssertionError, where the dream's
    file (dream_files, as ContentSite._open_store sets it) has its body."""
    body = {
        "author": "ada",
        "title": "t",
        "consent": {"share": True},
        "entries": [{"text": "x", "type": "fact", "confidence": "likely"}],
    }
    dreams = {
        f"{i:040x}": (f"{i:064x}", Dream(f"{i:016x}", "k", bytes(32), body)) for i in range(3)
    }
    c = BuildCache(tmp_path)
    c["scan"].update(dreams)
    c.save()
    reader = buildcache.StoreReader(tmp_path)
    reader.dream_files = lambda dream_id, sha: dict(dreams[f"{int(dream_id, 16):040x}"][1].body)
    section = reader["scan"]
    _ = section["0" * 40][1].body
    pid = os.fork()  # PoolReader.check_all forks its signature workers
    if pid == 0:  # pragma: no cover - the child only leaves
        os._exit(0)
    os.waitpid(pid, 0)
    (tmp_path / buildcache.STORE).unlink()
    assert reader["words"] == {}
    try:
        body = section["0" * 39 + "1"][1].body
    except DreampoolError:
        return
    assert body == dreams["0" * 39 + "1"][1].body
