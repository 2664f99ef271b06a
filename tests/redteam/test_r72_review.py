"""Review r72 (of the scan body split, 37a78085, since reverted): what of it
holds for the store as it is.

A scan row holds a dream's head line, a newline, then its body (buildcache
``_scan_out``); the body is decoded when a page first reads it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from builder import buildcache
from tests.pools import make_pool
from tests.redteam import build, signed, submit


def _store(site: Path) -> Path:
    return site.parent / f".{site.name}.builds" / "cache" / buildcache.STORE


def _deep() -> bytes:
    depth = 200_000
    return b'{"entries":' + b"[" * depth + b"]" * depth + b"}"


def test_a_deeply_nested_scan_body_is_store_damaged_not_a_traceback(tmp_path: Path) -> None:
    """T108/T44 (r31: a body of another shape is the named StoreDamaged with its
    hint; r69: a deeply nested row is no traceback). A scan row whose digest
    holds but whose body nests 200,000 arrays deep made ``json.loads`` raise
    RecursionError, which ``_body_in`` (catching ValueError only) let through:
    ``dreampool build`` without the log key, and the agents' reader reading
    the dream's text, stopped with a traceback. Expected: StoreDamaged, which
    names the dream and says to delete the store."""
    tp = make_pool(tmp_path / "pool")
    [dream_id] = submit(tp, signed("ada", title="One"))
    site = tmp_path / "pool" / "site"
    build(tp, site)
    db = sqlite3.connect(_store(site), isolation_level=None)
    for k, v in db.execute('SELECT k, v FROM "scan"').fetchall():
        forged = v.partition(b"\n")[0] + b"\n" + _deep()
        db.execute(
            'UPDATE "scan" SET v = ?, d = ? WHERE k = ?',
            (forged, buildcache._row_digest(k, forged), k),
        )
    db.execute('DELETE FROM "units"')  # the dream's page is rendered again: its body read
    db.close()
    reader = buildcache.StoreReader(_store(site).parent)
    [(_, d)] = reader["scan"].values()
    with pytest.raises(buildcache.StoreDamaged):
        _ = d.body
    with pytest.raises(buildcache.StoreDamaged) as caught:
        build(tp, site, key=False)
    assert dream_id in caught.value.message
    assert "delete the build store" in (caught.value.hint or "")
