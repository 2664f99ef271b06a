"""Review r73 (of 5b0d11a0, "Units: take a stored unit key where nothing it
hashes can have moved"): the store's ``unitbasis`` row and ``Units._standing``.

What held (not repeated here): through random sequences of new dreams, late
parents, lineage chains, anonymized children, tier edits, a rotation,
erasures, witness cosignatures of old checkpoints, title and base URL changes,
author and tag slug collisions, builds with and without the log key, a save
cut short between the units and unitbasis sections, and an older tagged store
restored, every key a build took as standing equalled the key computed afresh
and the site equalled a cold build's. What follows is how the store is read.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache
from builder.buildcache import BuildCache
from builder.formats.note import parse_private_key
from builder.site import unitbasis, writer
from tests.pools import make_pool
from tests.redteam import tree


def _store(site: Path, key: bytes | None) -> BuildCache:
    return BuildCache(writer.builds_dir(site) / "cache", key=key)


@pytest.mark.parametrize("signing", [True, False], ids=["with-log-key", "without"])
def test_a_basis_row_the_store_takes_but_that_does_not_decode_is_named(
    tmp_path: Path, signing: bool
) -> None:
    """T81/T44 (review r72's lesson: a row refused anywhere is named in the
    build's notes and written again). A ``unitbasis`` row whose digest (and,
    for a signing build, tag) holds but which ``unitbasis.decode`` refuses is
    dropped silently: ``Units._standing`` (builder/site/units.py, the
    ``unitbasis.decode(...)`` line) turns it into None, every key is
    computed, and no note says the store held a row it could not use. The
    row is written again (that part holds). Every other refusal of the store
    (damaged, untagged) is named by ``BuildCache._load``; this one is not,
    because the row passes the store's checks and is refused one layer up.
    Expected: a note naming the unitbasis row."""
    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    log_key = parse_private_key(tp.log_key)
    signer = log_key if signing else None
    key = buildcache.row_key(log_key.seed) if signing else None
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=log_key)
    buildmod.build(tp.content, site, signer=signer)
    store = _store(site, key)
    store["unitbasis"][unitbasis.ROW] = b'{"size": 1}'
    store.save()
    del store
    report = buildmod.build(tp.content, site, signer=signer)
    assert unitbasis.decode(_store(site, key)["unitbasis"][unitbasis.ROW]) is not None
    assert any("unitbasis" in note for note in report.notes), report.notes


def test_a_forged_unit_key_under_a_matching_basis_is_a_miss_not_a_traceback(
    tmp_path: Path,
) -> None:
    """T44/T108 (reviews r69, r72: a row with a valid digest but a shape the
    build never writes is a miss or the named StoreDamaged, never a
    traceback). A build without the log key checks digests only, so anyone
    who can write the store can set a dream's ``units`` row to a key that is
    not a unit key (``_unit_in`` checks only that it is ASCII) and write a
    ``unitbasis`` row whose digest covers it (``unitbasis.digest`` is
    unkeyed over public values). Before 5b0d11a0 such a units row was a
    miss: the stored key was only ever compared with the computed one. Now
    ``Units._standing`` returns it as the dream's key
    (``{d.id: old[d.id][0] ...}``), ``write`` takes it (``standing.get(d.id)
    or key_of(d)``), and the first list page asks the fragments section for
    it: ``Rows.get_many`` → ``_unit_key`` raises ``ValueError: not a unit
    key`` and ``dreampool build`` stops with a traceback. Expected: the row
    is a miss (the key must be 32 lowercase hex, checked in ``_unit_in`` or
    before ``_standing`` takes it) and the site equals a cold build's."""
    tp = make_pool(tmp_path)
    ids = tp.add("ada", 3)
    signer = parse_private_key(tp.log_key)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    kept: list[Any] = []
    buildmod.build(tp.content, site, signer=None, retain=kept)
    view = kept[4]
    kept.clear()
    store = _store(site, None)  # digest only, as a build without the log key reads it
    units = store["units"]
    units[ids[1]] = ("not a unit key", units[ids[1]][1])
    basis = unitbasis.decode(store["unitbasis"][unitbasis.ROW])
    assert basis is not None
    lines = [
        unitbasis.line(d.id, d.index, d.tier, d.author_slug, units[d.id][0])
        for d in reversed(view.dreams)
    ]
    forged = dataclasses.replace(basis, digest=unitbasis.digest(lines))
    store["unitbasis"][unitbasis.ROW] = unitbasis.encode(forged)
    store.save()
    del store, view
    buildmod.build(tp.content, site, signer=None)
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert tree(site) == tree(cold)
