"""Review r77 (of 113831c7, c07c45ae, 1b8c0e6b: a logcheck line names each
scan row by its tag under the row key, else by its public digest; the row
keeps one digest of each kind).

No defect found: every test here holds on 1b8c0e6b (T81: whoever can write
the restored store, without the log key; T108: the agents' server).

What held: a scan row's tag ``a`` set to TEXT, an INTEGER, NULL, empty or
other bytes (a miss, rewritten); ``d`` NULL beside a tagged row (table
remade without NOT NULL); the logcheck row's k, v, d, a set to NULL, TEXT,
INTEGER or BLOB (a miss); a duplicate untagged scan row with another title
and a valid ``d`` beside the tagged one (table remade without its key; either
order): never published, records verify; preview builds between signing
builds, and a store a preview remade untagged (rows and logcheck row refused,
rewritten by INSERT OR REPLACE, also with Rows flushed before the log stage),
stand the build after and equal a cold build; ``mcp --content`` over a
tagged row whose ``d`` is TEXT; r75's wrong tagged row with the commit
section intact is refused or never published."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache
from builder.agents import mcp_server
from builder.errors import LogError
from builder.log import logbuild
from builder.site import writer
from tests.redteam.test_r74_review import _records_verify
from tests.redteam.test_r74_review import by_dream as by_dream  # the fixture
from tests.redteam.test_r75_review import _garble, _holding
from tests.redteam.test_r76_review import _blob, _db
from tests.test_log_check import _publish, _published
from tests.test_site_build import tree


def _sql(site: Path, *statements: tuple[str, tuple[Any, ...]]) -> None:
    db = _db(site)
    try:
        with db:
            for sql, args in statements:
                db.execute(sql, args)
    finally:
        db.close()


def _unconstrained(site: Path, name: str) -> None:
    """The table remade without its PRIMARY KEY and NOT NULL: the meta row
    (the only thing _ensure_schema reads) is left as it is."""
    _sql(
        site,
        (f'CREATE TABLE "x_{name}" AS SELECT * FROM "{name}"', ()),
        (f'DROP TABLE "{name}"', ()),
        (f'CREATE TABLE "{name}" (k, v, d, a)', ()),
        (f'INSERT INTO "{name}" SELECT * FROM "x_{name}"', ()),
        (f'DROP TABLE "x_{name}"', ()),
    )


def _cold_tree(tp: Any, tmp_path: Path) -> dict[str, bytes]:
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    return tree(cold)


@pytest.mark.parametrize(
    "a", ["text", 7, None, b"", b"\0" * 32], ids=["text", "int", "null", "empty", "zeros"]
)
def test_a_tag_of_another_type_is_a_miss(tmp_path: Path, a: Any) -> None:
    """T81: ``a`` of a tagged scan row rewritten to anything else."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    _sql(site, ('UPDATE "scan" SET a = ? WHERE k = ?', (a, _blob(tp.content, ids[0]))))
    for _ in range(2):
        tp.add("bob", 1)
        _publish(tp, site, signer)
    _records_verify(site, tp.content)


@pytest.mark.parametrize("column", ["d", "a", "v", "k"])
def test_logcheck_row_columns_of_other_types(tmp_path: Path, column: str) -> None:
    """T81: the logcheck row's columns set to NULL / TEXT / another type."""
    tp, signer, site, _ids = _published(tmp_path)
    _publish(tp, site, signer)
    _unconstrained(site, "logcheck")
    for value in (None, "log", 3, b"log"):
        _sql(site, (f'UPDATE "logcheck" SET {column} = ?', (value,)))
        tp.add("bob", 1)
        _publish(tp, site, signer)
    _records_verify(site, tp.content)


def test_scan_d_null_beside_a_tagged_row(tmp_path: Path, by_dream: list[int]) -> None:
    """T81: ``d`` NULL (schema remade) beside a tagged scan row."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    _unconstrained(site, "scan")
    _sql(site, ('UPDATE "scan" SET d = NULL WHERE k = ?', (_blob(tp.content, ids[0]),)))
    for _ in range(2):
        tp.add("bob", 1)
        _publish(tp, site, signer)
    _records_verify(site, tp.content)


@pytest.mark.parametrize("order", ["forged_first", "forged_last"])
def test_a_duplicate_untagged_scan_row_beside_the_tagged_one(
    tmp_path: Path, by_dream: list[int], order: str
) -> None:
    """T81: the scan table remade without its key; beside the tagged row of a
    logged dream, an untagged copy with another title (a valid ``d``)."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    victim = ids[-1]
    blob = _blob(tp.content, victim)
    db = _db(site)
    try:
        (v,) = db.execute('SELECT v FROM "scan" WHERE k = ?', (blob,)).fetchone()
    finally:
        db.close()
    assert b"PWNED" not in v
    title = v.split(b'"title":"', 1)[1].split(b'"', 1)[0]
    forged = v.replace(b'"title":"' + title + b'"', b'"title":"PWNED by the store"', 1)
    assert forged != v
    _unconstrained(site, "scan")
    d = buildcache._row_digest(blob, forged)
    if order == "forged_first":
        _sql(
            site,
            ('CREATE TABLE t AS SELECT * FROM "scan"', ()),
            ('DELETE FROM "scan"', ()),
            ('INSERT INTO "scan" VALUES (?, ?, ?, NULL)', (blob, forged, d)),
            ('INSERT INTO "scan" SELECT * FROM t', ()),
            ("DROP TABLE t", ()),
        )
    else:
        _sql(site, ('INSERT INTO "scan" VALUES (?, ?, ?, NULL)', (blob, forged, d)))
    for _ in range(3):
        tp.add("bob", 1)
        try:
            _publish(tp, site, signer)
        except LogError as exc:
            assert "build cache" in exc.message
        _records_verify(site, tp.content)
        assert _holding(site, b"PWNED by the store") == []


def test_preview_builds_between_signing_builds(tmp_path: Path, by_dream: list[int]) -> None:
    """T81: a build without the key into the same site, then signing builds:
    the preview's untagged rows and logcheck row are never taken."""
    tp, signer, site, _ids = _published(tmp_path)
    _publish(tp, site, signer)
    for _ in range(2):
        _publish(tp, site, None)
        _publish(tp, site, None)
        tp.add("bob", 1)
        _publish(tp, site, signer)
        _publish(tp, site, None)
        _publish(tp, site, signer)
        _records_verify(site, tp.content)
    assert tree(site) == _cold_tree(tp, tmp_path)


def test_mcp_reader_over_a_tagged_row_with_bad_d(tmp_path: Path, by_dream: list[int]) -> None:
    """T81/T108: content_plan over a StoreReader, ``d`` of a tagged scan row
    set to TEXT: no traceback; every record the site's."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    _sql(site, ('UPDATE "scan" SET d = ? WHERE k = ?', ("x", _blob(tp.content, ids[0]))))
    tp.add("bob", 1)
    _publish(tp, site, signer)
    store = buildcache.StoreReader(writer.builds_dir(site) / "cache")
    log, _ = mcp_server.content_plan(tp.content, store)
    for dream_id, admitted in log.dreams.items():
        record = (site.resolve() / "dreams" / dream_id / "record.json").read_bytes()
        assert logbuild.record_bytes(admitted) == record


def test_garbled_tagged_row_with_commit_intact(tmp_path: Path, by_dream: list[int]) -> None:
    """T81/T44 (holds): r75's wrong tagged row, the commit section kept."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    victim = ids[-1]
    _garble(site, signer, tp.content, victim, title="PWNED by the store")
    tp.add("bob", 1)
    try:
        _publish(tp, site, signer)
    except LogError as exc:
        assert "build cache" in exc.message
        return
    assert _holding(site, b"PWNED by the store") == []


@pytest.mark.parametrize("flush", [None, 2], ids=["batched", "flush2"])
def test_a_store_a_preview_remade_untagged_then_signing_builds(
    tmp_path: Path, by_dream: list[int], monkeypatch: pytest.MonkeyPatch, flush: int | None
) -> None:
    """T81: the store lost, a build without the key makes it again (every
    row untagged, its logcheck row too); the signing builds after it refuse
    all of it, write every row again (INSERT OR REPLACE over the untagged
    ones; with FLUSH 2, before the log stage) and stand the build after."""
    if flush is not None:
        monkeypatch.setattr(buildcache.Rows, "FLUSH", flush)
    tp, signer, site, _ids = _published(tmp_path)
    _publish(tp, site, signer)
    (writer.builds_dir(site) / "cache" / buildcache.STORE).unlink()
    _publish(tp, site, None)
    del by_dream[:]
    _publish(tp, site, signer)
    assert by_dream == [6]
    _publish(tp, site, signer)
    assert by_dream == [6]  # stood
    tp.add("bob", 1)
    _publish(tp, site, signer)
    assert by_dream == [6]
    _records_verify(site, tp.content)
    assert tree(site) == _cold_tree(tp, tmp_path)
