"""A build takes the stored unit keys whose inputs cannot have moved
(builder.site.unitbasis) and computes the rest: a build after one new dream
keys that dream's unit and its parent's, not every dream's.

Every build in this file is watched (the autouse fixture ``witnessed``): after
Units.write, each dream's key, stored or computed, must equal the key
computed afresh, and the test then compares the site with a cold build's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache
from builder.buildcache import BuildCache
from builder.content import pool
from builder.formats import dream as dreamfmt
from builder.formats.note import Signer, parse_private_key
from builder.log import erase
from builder.site import model, unitbasis, units, writer
from tests import pools
from tests.conftest import draft
from tests.pools import PoolFixture, cosign_stored, key_id_of, make_pool
from tests.test_agents import set_tier
from tests.test_site_build import tree

_KEY = units.Units.key  # the key as computed afresh, whatever a test patches


@pytest.fixture(autouse=True)
def witnessed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many keys each build's Units.write computed; and, for every build,
    that each key it holds (stored or computed) is the key computed afresh."""
    computed: list[int] = []
    write = units.Units.write

    def checked(self: units.Units, w: writer.SiteWriter) -> int:
        rendered = write(self, w)
        for d in self.model.dreams:
            assert self.keys[d.id] == _KEY(self, d), d.id
        computed.append(self.computed)
        return rendered

    monkeypatch.setattr(units.Units, "write", checked)
    return computed


def _same_as_cold(tp: PoolFixture, site: Path, tmp_path: Path, step: str, **kw: Any) -> None:
    cold = tmp_path / f"cold-{step}"
    buildmod.build(tp.content, cold, signer=None, **kw)
    assert tree(site) == tree(cold), step


def _store(site: Path, signer: Signer) -> BuildCache:
    return BuildCache(writer.builds_dir(site) / "cache", key=buildcache.row_key(signer.seed))


def test_a_build_after_a_new_dream_keys_only_its_unit_and_its_parent_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, witnessed: list[int]
) -> None:
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    ids = tp.add("ada", 30, tags=["shared"])
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    buildmod.build(tp.content, site, signer=signer)
    assert witnessed == [30, 0]  # the first build keyed all; the second none
    keyed: list[str] = []

    def counted(self: units.Units, d: model.DreamView) -> str:
        keyed.append(d.id)
        return _KEY(self, d)

    monkeypatch.setattr(units.Units, "key", counted)
    child = tp.add("bob", 1, lineage={"parent": ids[3], "generation": 1})
    report = buildmod.build(tp.content, site, signer=signer)
    assert sorted(keyed) == sorted([child[0], ids[3]])
    assert report.rendered == 2
    _same_as_cold(tp, site, tmp_path, "child")


def _signed_later(author: str, title: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    """A dream signed now and submitted later: its id, and its signed body."""
    body = dreamfmt.sign(draft(author=author, title=title, **fields), pools.SEEDS[author])
    return dreamfmt.parse(json.dumps(body).encode(), "x").id, body


def _submit(tp: PoolFixture, body: dict[str, Any]) -> None:
    path = tp.content.parent / f"in-{body['title']}.json"
    path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    pool.submit(tp.content, [path])


def test_stored_keys_stand_only_while_what_they_hash_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, witnessed: list[int]
) -> None:
    """Through each change a unit's key hashes, the site equals a cold build's,
    and every key the build took as standing is the key computed afresh."""
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    ids = tp.add("ada", 6, tags=["t"])
    tp.add("bob", 2, tags=["t"])
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    buildmod.build(tp.content, site, signer=signer)

    # A child logged before its parent: the parent's arrival moves the child's page.
    parent_id, parent = _signed_later("ada", "the parent, later")
    child = tp.add("bob", 1, lineage={"parent": parent_id, "generation": 1})
    buildmod.build(tp.content, site, signer=signer)
    _submit(tp, parent)
    buildmod.build(tp.content, site, signer=signer)
    assert witnessed[-1] == 2  # the parent, and its child
    assert parent_id in (site / "dreams" / child[0] / "index.html").read_text()
    _same_as_cold(tp, site, tmp_path, "parent-later")

    # A key's tier: every key is computed again.
    set_tier(tp.content, key_id_of("bob"), "member")
    buildmod.build(tp.content, site, signer=signer)
    assert witnessed[-1] == 10
    _same_as_cold(tp, site, tmp_path, "tier")

    # A witness cosigns the first checkpoint: the proofs it holds move.
    first = min(int(p.name) for p in (tp.content / "log" / "checkpoints").iterdir())
    cosign_stored(tp.content, first)
    buildmod.build(tp.content, site, signer=None)
    assert 0 < witnessed[-1] < 10
    _same_as_cold(tp, site, tmp_path, "cosigned")

    # A build with the log key takes no row a build without it wrote (T81),
    # the basis among them.
    buildmod.build(tp.content, site, signer=signer)
    assert witnessed[-1] == 10

    # A new child of the first dream, then a build without the log key.
    tp.add("ada", 1, lineage={"parent": ids[0], "generation": 1})
    buildmod.build(tp.content, site, signer=signer)
    assert witnessed[-1] == 2
    buildmod.build(tp.content, site, signer=None)
    assert witnessed[-1] == 0
    _same_as_cold(tp, site, tmp_path, "new-child")

    # An erasure: every key is computed again.
    for p in tp.content.parent.glob("in-*.json"):
        p.unlink()  # the submitted copies, which erase would find as residue
    erase.erase(tp.content, parent_id, "author-request")
    buildmod.build(tp.content, site, signer=signer)
    assert witnessed[-1] == len(witnessed_dreams(site))
    _same_as_cold(tp, site, tmp_path, "erasure")

    # A new tag whose short slug is an old tag's: both move to long slugs.
    short = model.slug
    monkeypatch.setattr(model, "slug", lambda name: short("t" if name == "u" else name))
    tp.add("ada", 1, tags=["u"])
    buildmod.build(tp.content, site, signer=signer)
    assert (site / "tags" / model.long_slug("t")).is_dir()
    assert witnessed[-1] == len(witnessed_dreams(site))
    _same_as_cold(tp, site, tmp_path, "slugs")

    # Another base URL: every key is computed again.
    url = "https://pool.example/sub/"
    buildmod.build(tp.content, site, signer=signer, base_url=url)
    assert witnessed[-1] == len(witnessed_dreams(site))
    _same_as_cold(tp, site, tmp_path, "base-url", base_url=url)


def witnessed_dreams(site: Path) -> list[str]:
    """The dreams the built site has a page for."""
    return [p.parent.name for p in (site / "dreams").glob("*/record.json")]


def test_a_basis_newer_than_its_units_keys_every_unit(tmp_path: Path, witnessed: list[int]) -> None:
    """The basis and the units are saved in two transactions, so a store may
    hold one build's basis beside another's units (a save cut short between
    them, or a restored store). Here the units of the build before the last
    sit beside the last one's basis: a dream that got a child in between has
    the older key there, and taken as standing it would keep the page that
    lacks the child's link. The basis's digest binds it to its units' keys:
    every key is computed."""
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    ids = tp.add("ada", 8)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    buildmod.build(tp.content, site, signer=signer)
    before = dict(_store(site, signer)["units"])
    child = tp.add("bob", 1, lineage={"parent": ids[2], "generation": 1})
    buildmod.build(tp.content, site, signer=signer)
    store = _store(site, signer)
    assert store["units"][ids[2]][0] != before[ids[2]][0]
    store.sections["units"] = before
    store.save()
    buildmod.build(tp.content, site, signer=signer)
    assert witnessed[-1] == 9
    assert child[0] in (site / "dreams" / ids[2] / "index.html").read_text()
    _same_as_cold(tp, site, tmp_path, "older-units")


@pytest.mark.parametrize(
    "row",
    [
        b"{",
        b"[]",
        b'{"size": 1}',
        b"\xff",
        b"[" * 100_000,
    ],
)
def test_a_basis_that_does_not_decode_keys_every_unit(
    tmp_path: Path, witnessed: list[int], row: bytes
) -> None:
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    tp.add("ada", 5)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    store = _store(site, signer)
    store["unitbasis"][unitbasis.ROW] = row
    store.save()
    report = buildmod.build(tp.content, site, signer=signer)
    assert witnessed == [5, 5]
    assert report.rendered == 0  # computed, found the same, and kept
    _same_as_cold(tp, site, tmp_path, "garbled")


def _basis() -> unitbasis.Basis:
    return unitbasis.Basis(
        size=12,
        root=bytes(range(32)),
        site=("Pool — 池", "example.org/pool", "/", "2026-12-01T00:00:00Z"),
        history=((3, "2026-12-01T00:00:00Z"), (12, "2026-12-02T00:00:00Z")),
        notes=((3, bytes(16)), (12, bytes([7] * 16))),
        erased=("d1", "d2"),
        tags=(("t", "t"), ("墨", "x-0123456789ab")),
        digest=bytes([9] * 16),
    )


def test_a_basis_reads_back_as_written_and_nothing_else_does() -> None:
    b = _basis()
    data = unitbasis.encode(b)
    assert unitbasis.decode(data) == b
    assert unitbasis.decode(None) is None
    obj = json.loads(data)
    for field, wrong in [
        ("size", -1),
        ("size", 1.0),
        ("size", True),
        ("root", "00" * 31),
        ("root", "AB" * 32),
        ("site", ["a", "b", "c"]),
        ("history", [[3]]),
        ("notes", [[3, "00" * 15]]),
        ("erased", [1]),
        ("tags", [["t"]]),
        ("digest", None),
    ]:
        assert unitbasis.decode(json.dumps({**obj, field: wrong}).encode()) is None, field
    assert unitbasis.decode(json.dumps({**obj, "extra": 1}).encode()) is None
    del obj["tags"]
    assert unitbasis.decode(json.dumps(obj).encode()) is None
