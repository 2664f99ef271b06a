"""The store's scan section read in two processes (builder.buildcache.BuildCache.splitting_scan).

A build reads the scan rows up to the middle rowid itself while a process
forked before it reads and checks the rest. These tests hold that read
to the one-process read of the same store: the same entries in the same
order, the same row digests, the same refusals and notes, whatever rows are
damaged or untagged on either side, and when the forked process dies. A
build that splits gives the bytes a build that does not split gives.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache, parallel
from builder.formats.note import parse_private_key
from tests.pools import PoolFixture, make_pool
from tests.test_store_restore import site_files

needs_two_cores = pytest.mark.skipif(
    parallel.workers() < 2, reason="the section is read in one process on one core"
)


def _built(tmp_path: Path) -> tuple[PoolFixture, Path]:
    tp = make_pool(tmp_path / "pool")
    for author, n in (("ada", 5), ("bob", 4), ("墨子", 3)):
        tp.add(author, n)
    out = tmp_path / "pool" / "site"
    buildmod.build(tp.content, out, signer=parse_private_key(tp.log_key))
    return tp, out


def _store(out: Path) -> Path:
    return out.parent / f".{out.name}.builds" / "cache" / buildcache.STORE


def _read(
    out: Path, tp: PoolFixture
) -> tuple[list[Any], dict[str, bytes], dict[str, bytes], list[str], list[Any]]:
    """What a signing build's store gives of its scan section: the entries as
    (blob, digest, dream id, key id, key, head, types), in order, the two row
    digest maps, the notes and the refused keys."""
    signer = parse_private_key(tp.log_key)
    cache = buildcache.BuildCache(_store(out).parent, key=buildcache.row_key(signer.seed))
    with cache.splitting_scan():
        section = cache["scan"]
    entries = [
        (blob, digest, d.id, d.key_id, d.public_key, dict(d.head), d.entry_types)
        for blob, (digest, d) in section.items()
    ]
    # A body is still read back from its row when asked for.
    for _, (_, d) in section.items():
        assert d.body["title"] == d.head["title"]
    return (
        entries,
        dict(cache._scan_digests),
        dict(cache._scan_public),
        list(cache.notes),
        sorted(cache._refused.get("scan", [])),
    )


@needs_two_cores
def test_a_split_read_gives_what_one_process_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, out = _built(tmp_path)
    whole = _read(out, tp)
    assert len(whole[0]) == 12
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    assert _read(out, tp) == whole


@needs_two_cores
def test_the_rows_past_the_split_are_read_by_the_forked_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, out = _built(tmp_path)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    parent = os.getpid()
    real = buildcache._read_scan_half

    def marked(arg: Any) -> Any:
        half = real(arg)
        # A mark only the forked process sets: its count of untagged rows.
        half.refused.untagged += os.getpid() != parent
        return half

    monkeypatch.setattr(buildcache, "_read_scan_half", marked)
    entries, *_, notes, _ = _read(out, tp)
    assert len(entries) == 12
    assert notes == [buildcache.untagged_note("scan", 1)]


def _corrupt(store: Path, which: list[int], *, untag: list[int] = ()) -> None:  # type: ignore[assignment]
    """Flip a byte in the value of the scan rows at positions ``which`` (by
    rowid order); clear the tag of those at ``untag`` (their digest kept)."""
    db = sqlite3.connect(store, isolation_level=None)
    rows = db.execute('SELECT rowid, k, v FROM "scan" ORDER BY rowid').fetchall()
    for i in which:
        rowid, _, v = rows[i]
        j = len(v) // 3
        db.execute(
            'UPDATE "scan" SET v = ? WHERE rowid = ?',
            (v[:j] + bytes([v[j] ^ 1]) + v[j + 1 :], rowid),
        )
    for i in untag:
        db.execute('UPDATE "scan" SET a = NULL WHERE rowid = ?', (rows[i][0],))
    db.close()


@needs_two_cores
@pytest.mark.parametrize(
    ("damaged", "untagged"), [([0], [11]), ([11], [0]), ([2, 9], [5, 6]), ([], [0, 11])]
)
def test_damaged_and_untagged_rows_on_either_side_are_refused_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damaged: list[int], untagged: list[int]
) -> None:
    tp, out = _built(tmp_path)
    _corrupt(_store(out), damaged, untag=untagged)
    whole = _read(out, tp)
    assert len(whole[0]) == 12 - len(damaged) - len(untagged)
    assert len(whole[4]) == len(damaged) + len(untagged)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    assert _read(out, tp) == whole


@needs_two_cores
def test_a_forked_reader_that_dies_leaves_its_rows_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, out = _built(tmp_path)
    _corrupt(_store(out), [10])
    whole = _read(out, tp)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    parent = os.getpid()
    real = buildcache._read_scan_half

    def dies(arg: Any) -> Any:
        if os.getpid() != parent:
            os._exit(3)  # the OOM killer, say
        return real(arg)

    monkeypatch.setattr(buildcache, "_read_scan_half", dies)
    assert _read(out, tp) == whole


@needs_two_cores
def test_a_build_that_splits_its_read_builds_the_same_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A +1 and a no-op build with the store's read split, against a cold build."""
    tp, out = _built(tmp_path)
    tp.add("ada", 1)
    signer = parse_private_key(tp.log_key)
    monkeypatch.setattr(buildcache, "SCAN_SPLIT_MIN", 0)
    report = buildmod.build(tp.content, out, signer=signer)
    assert (report.verified, report.notes) == (1, [])
    report = buildmod.build(tp.content, out, signer=signer)
    assert (report.verified, report.rendered, report.notes) == (0, 0, [])
    monkeypatch.undo()
    cold = tmp_path / "cold" / "site"
    cold.parent.mkdir()
    buildmod.build(tp.content, cold, signer=None)
    assert site_files(out) == site_files(cold)
