"""Review r76 (of 113831c7, "Log check: each line names the scan row the
build took the dream from").

Defects (fail on 113831c7; fixed: a line names each scan row by the digest
the build took it by, its tag under the row key, else its public digest,
which a reader without the key checks itself; the row keeps one digest of
each kind):

* T81: under a row key ``_sound`` verifies a row's tag ``a`` over (k, v) and
  never looks at its ``d`` column, yet ``_load`` notes ``d`` as the row's
  digest and ``checked.digest`` calls ``d.hex()``. Whoever can write the
  store (a cache restored from another workflow, T81) sets ``d`` of one
  tagged scan row to TEXT or an INTEGER (SQLite keeps any type in a BLOB
  column): the row is still taken, and every signing build ends in an
  AttributeError traceback, after the site was swapped, with no logcheck
  row recorded (the row is never written again, being "sound").
* T81/T44: the same unverified ``d`` lets anyone without the key make a
  wrong but tagged scan row (r74/r75's case, what a bug in the build
  writes) stand: copy the good row's public digest into the wrong row's
  ``d`` and the line the build computes is the one recorded, so step 3 is
  skipped and the wrong text is published (agents/digest.md, api/) under
  the signed checkpoint: exactly what 113831c7 meant to stop.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from builder.content import filekeys
from builder.errors import LogError
from builder.site import writer
from tests.redteam.test_r74_review import _records_verify
from tests.redteam.test_r74_review import by_dream as by_dream  # the fixture
from tests.redteam.test_r75_review import _garble, _holding
from tests.test_log_check import _publish, _published


def _db(site: Path) -> sqlite3.Connection:
    return sqlite3.connect(writer.builds_dir(site) / "cache" / "store.sqlite")


def _blob(content: Path, dream_id: str) -> str:
    blob, _ = filekeys.of_bytes((content / "dreams" / f"{dream_id}.json").read_bytes())
    return blob


def _set_d(site: Path, blob: str, d: Any) -> None:
    """What anyone who can write the store does, without the key: one column."""
    db = _db(site)
    try:
        with db:
            assert db.execute('UPDATE "scan" SET d = ? WHERE k = ?', (d, blob)).rowcount == 1
    finally:
        db.close()


def _d_of(site: Path, blob: str) -> bytes:
    db = _db(site)
    try:
        (d,) = db.execute('SELECT d FROM "scan" WHERE k = ?', (blob,)).fetchone()
    finally:
        db.close()
    assert isinstance(d, bytes)
    return d


# --- defects -------------------------------------------------------------------


@pytest.mark.parametrize("d", ["not a digest", 7], ids=["text", "integer"])
def test_a_tagged_scan_row_with_a_d_of_another_type_crashes_every_signing_build(
    tmp_path: Path, d: Any
) -> None:
    """T81 (store damage or planting is a miss, never an error). The ``d``
    column of one tagged scan row holds TEXT (or an INTEGER); its tag still
    verifies, so the row is taken and its ``d`` noted, and ``checked.digest``
    calls ``.hex()`` on it: AttributeError in ``_standing`` (a logcheck row
    stands to be checked), and in ``_record_log_check`` on every build after.
    Expected: the build passes and the site equals a cold build's."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)  # the logcheck row is recorded
    _set_d(site, _blob(tp.content, ids[0]), d)
    for _ in range(2):  # not once: every build
        tp.add("bob", 1)
        _publish(tp, site, signer)
    _records_verify(site, tp.content)


def test_a_wrong_tagged_row_stands_once_its_d_names_the_good_row(
    tmp_path: Path, by_dream: list[int]
) -> None:
    """T81/T44 (113831c7's argument: "only the holder of the key writes a row
    that is taken, and it writes the digest of that row"). The tag covers
    (k, v) only; ``d`` is a public function of the good row, which anyone
    computes (or reads before the row is replaced). r75's wrong but tagged
    scan row, with ``d`` copied from the good one: the line names the good
    row, the logcheck row stands (no dream checked again), and a new,
    unrelated dream publishes the wrong title in agents/digest.md and the
    API shard. Expected, as for r75: the build refuses (the build cache is
    damaged) or publishes nothing of the wrong row (fix: under a row key,
    note the verified tag, or the digest computed from v, never the column)."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    victim = ids[-1]
    blob = _blob(tp.content, victim)
    good = _d_of(site, blob)
    _garble(site, signer, tp.content, victim, title="PWNED by the store")
    assert _d_of(site, blob) != good  # what 113831c7 catches ...
    _set_d(site, blob, good)  # ... undone without the key
    tp.add("bob", 1)
    del by_dream[:]
    try:
        _publish(tp, site, signer)
    except LogError as exc:
        assert "build cache" in exc.message
        return
    _records_verify(site, tp.content)
    assert by_dream == [], "the row did not stand"  # it stood: nothing checked again
    assert _holding(site, b"PWNED by the store") == []


# --- what held -----------------------------------------------------------------


def test_a_tagged_scan_row_with_other_digest_bytes_costs_one_check(
    tmp_path: Path, by_dream: list[int]
) -> None:
    """T81 (holds): ``d`` of a tagged row rewritten to other bytes (the row's
    value untouched): at most one build checks the logged dreams again (on
    113831c7 the line no longer matches), the next build stands, and every
    record recomputes its leaf."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    _set_d(site, _blob(tp.content, ids[0]), b"\0" * 32)
    del by_dream[:]
    tp.add("bob", 1)
    _publish(tp, site, signer)
    assert by_dream in ([len(ids)], [])
    checked_before = list(by_dream)
    _publish(tp, site, signer)
    assert by_dream == checked_before  # stood
    _records_verify(site, tp.content)
