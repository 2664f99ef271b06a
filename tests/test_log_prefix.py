"""The proven prefix of the log the store keeps (builder.log.prefix): a build
parses and hashes only the leaves after the full shards, and takes exactly
what a proof of every leaf would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from builder import buildcache
from builder.buildcache import BuildCache
from builder.errors import LogError
from builder.formats import leaf as leaffmt
from builder.formats import merkle, strictjson
from builder.formats.note import parse_private_key
from builder.log import logbuild, logstate, prefix
from builder.site import writer
from tests.pools import ORIGIN, PoolFixture, make_pool
from tests.test_log import do_build, tree_files

SHARD = 4  # a few dreams fill shards


@pytest.fixture
def tp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PoolFixture:
    monkeypatch.setattr(logstate, "SHARD", SHARD)
    return make_pool(tmp_path)


def calls_to(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """The argument of each call of ``module.name`` (a one-argument function)
    from now on; it still does what it did."""
    seen: list[Any] = []
    function = getattr(module, name)

    def counted(arg: Any) -> Any:
        seen.append(arg)
        return function(arg)

    monkeypatch.setattr(module, name, counted)
    return seen


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The leaves leaffmt.parse is handed from now on."""
    return calls_to(monkeypatch, leaffmt, "parse")


def _proven(tp: PoolFixture, prefixes: dict[str, bytes] | None) -> logbuild.ProvenLog:
    return logbuild.prove(
        tp.content, origin=ORIGIN, signer=parse_private_key(tp.log_key), prefixes=prefixes
    )


def _same(a: logbuild.ProvenLog, b: logbuild.ProvenLog) -> None:
    """Two proofs of one log agree on everything they hand on."""
    assert a.tree.size == b.tree.size
    for level in range(a.tree.size.bit_length()):
        assert a.tree.level_bytes(level) == b.tree.level_bytes(level)
    la, lb = a._take(), b._take()
    for name in ("dreams", "commitments", "keys", "authors", "erasures", "retired_at", "current"):
        assert list(getattr(la, name).items()) == list(getattr(lb, name).items()), name
    assert a.dreams() == b.dreams()


def _store(tp: PoolFixture, out: Path) -> BuildCache:
    key = buildcache.row_key(parse_private_key(tp.log_key).seed)
    return BuildCache(writer.builds_dir(out) / "cache", key=key)


def test_a_proof_from_the_kept_prefix_is_a_proof_of_every_leaf(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp.add("ada", 5)
    tp.add("bob", 3)
    do_build(tp, tmp_path / "site")
    tp.add("ada", 3)
    do_build(tp, tmp_path / "site")
    size = len(logstate.load(tp.content).leaves)
    assert size > 2 * SHARD and size % SHARD  # full shards and an open one
    rows: dict[str, bytes] = {}
    whole = _proven(tp, None)
    first = _proven(tp, rows)  # no row yet: every leaf parsed, the row made
    assert len(rows) == 1
    (row,) = rows.values()
    seen = _parses(monkeypatch)
    again = _proven(tp, rows)
    kept = size // SHARD * SHARD
    assert seen == logstate.load(tp.content).leaves[kept:]
    assert rows == {prefix.key(logstate.load(tp.content).shard_digests[: kept // SHARD]): row}
    assert next(iter(rows.values())) is row  # taken, not written again
    _same(whole, again)
    _same(_proven(tp, None), first)


def test_a_build_parses_only_the_leaves_after_the_full_shards(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp.add("ada", 6)
    out = tmp_path / "site"
    do_build(tp, out)
    do_build(tp, out)  # the store now holds the prefix row
    tp.add("bob", 1)
    seen = _parses(monkeypatch)
    do_build(tp, out)
    leaves = logstate.load(tp.content).leaves
    before = len(leaves) - 2  # bob's key leaf and dream leaf are new
    # The proof parses the signed leaves after the full shards (the new ones
    # the build makes itself).
    assert before % SHARD and seen == leaves[before // SHARD * SHARD : before]


def test_builds_with_and_without_the_prefix_are_byte_identical(
    tp: PoolFixture, tmp_path: Path
) -> None:
    tp.add("ada", 5)
    tp.add("bob", 4)
    out = tmp_path / "site"
    do_build(tp, out)
    tp.add("ada", 3)
    do_build(tp, out)
    assert _store(tp, out)["logprefix"]
    kept = tree_files(out)
    shutil.rmtree(writer.builds_dir(out))
    (out).unlink()
    do_build(tp, out)  # no store: every leaf parsed
    assert tree_files(out) == kept


def _row_of(tp: PoolFixture, out: Path) -> tuple[str, bytes, int]:
    (key, row), *_ = _store(tp, out)["logprefix"].items()
    size = len(logstate.load(tp.content).leaves) // SHARD * SHARD
    return key, row, size


def _edited(row: bytes, change: Any) -> bytes:
    head, _, hashes = row.partition(b"\n")
    obj = json.loads(head)
    change(obj)
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n" + hashes


@pytest.mark.parametrize(
    "damage",
    [
        lambda row: row[:-1],  # a hash cut short
        lambda row: row + bytes(32),  # one too many
        lambda row: b"[]" + row[row.index(b"\n") :],  # not the object
        lambda row: _edited(row, lambda o: o.update(size=o["size"] - 1)),
        lambda row: _edited(row, lambda o: o.update(format="dreampool-log-prefix/2")),
        lambda row: _edited(row, lambda o: o["dreams"][1].__setitem__(0, 0)),  # index twice
        lambda row: _edited(row, lambda o: o["dreams"][1].__setitem__(0, True)),  # not an int
        lambda row: _edited(row, lambda o: o["dreams"][2].pop()),  # columns of unequal length
        lambda row: _edited(row, lambda o: o["keys"].pop()),  # a leaf nobody holds
        lambda row: _edited(row, lambda o: o["keys"][0].__setitem__(1, 10**6)),  # past the size
        lambda row: _edited(row, lambda o: o["dreams"][0].__setitem__(1, o["dreams"][0][0])),
        lambda row: _edited(row, lambda o: o["dreams"][1].reverse()),  # not in log order
        lambda row: _edited(row, lambda o: o.update(extra=1)),
    ],
)
def test_a_row_of_another_shape_is_not_taken(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Any
) -> None:
    tp.add("ada", 5)
    tp.add("bob", 4)
    out = tmp_path / "site"
    do_build(tp, out)
    do_build(tp, out)
    key, row, size = _row_of(tp, out)
    assert prefix.decode(row, size) is not None
    bad = damage(row)
    assert prefix.decode(bad, size) is None
    rows = {key: bad}
    seen = _parses(monkeypatch)
    proven = _proven(tp, rows)
    assert len(seen) == logstate.load(tp.content).signed_size  # every leaf parsed
    assert rows[key] == row  # and the row made again
    _same(proven, _proven(tp, None))


def test_a_row_of_the_very_shape_lists_what_it_was_made_from(
    tp: PoolFixture, tmp_path: Path
) -> None:
    """A row decodes to the leaves it was encoded from: the dreams and keys
    it names, in log order, and the tree's hashes."""
    tp.add("ada", 5)
    tp.add("bob", 4)
    out = tmp_path / "site"
    do_build(tp, out)
    do_build(tp, out)
    _key, row, size = _row_of(tp, out)
    got = prefix.decode(row, size)
    assert got is not None
    leaves = [json.loads(x) for x in logstate.load(tp.content).leaves[:size]]
    assert [(d[0], d[1]) for d in got.dreams] == [
        (x["id"], i) for i, x in enumerate(leaves) if x["kind"] == "dream"
    ]
    assert [(k[0], k[1]) for k in got.keys] == [
        (x["keyId"], i) for i, x in enumerate(leaves) if x["kind"] == "key"
    ]
    reference = merkle.MerkleTree.from_leaf_hashes(
        merkle.leaf_hash(x) for x in logstate.load(tp.content).leaves[:size]
    )
    assert got.tree.root() == reference.root()
    assert prefix.encode(got) == row


def test_a_planted_row_is_not_taken_by_a_build_with_the_log_key(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81: the publish workflow restores the store from a cache others can
    write. A prefix row of the very shape, naming the dreams' commitments
    swapped, written without the row key (its digest right), is a miss for a
    build with the log key: it parses every leaf, and logs nothing wrong."""
    tp.add("ada", 5)
    tp.add("bob", 4)
    out = tmp_path / "site"
    do_build(tp, out)
    do_build(tp, out)
    key, row, size = _row_of(tp, out)
    forged = _edited(row, lambda o: o["dreams"][2].reverse())
    assert prefix.decode(forged, size) is not None
    planted = BuildCache(writer.builds_dir(out) / "cache")  # no row key: anyone's
    planted["logprefix"][key] = forged
    planted.save("logprefix")
    site = tree_files(out)
    seen = _parses(monkeypatch)
    report = do_build(tp, out)
    assert len(seen) >= size
    assert tree_files(out) == site and not report.admitted
    assert _store(tp, out)["logprefix"] == {key: row}


def test_from_levels_holds_what_hashes_at_gave() -> None:
    leaves = [merkle.leaf_hash(b"%d" % i) for i in range(13)]
    tree = merkle.MerkleTree.from_leaf_hashes(leaves)
    for size in (1, 2, 8, 12):
        levels = [tree.hashes_at(k, 0, size >> k) for k in range(size.bit_length())]
        again = merkle.MerkleTree.from_levels(levels, size)
        assert again.root() == tree.root(size)
        again.extend(leaves[size:])
        assert again.root() == tree.root()
        assert again.inclusion_proof(3) == tree.inclusion_proof(3)
    with pytest.raises(ValueError):
        merkle.MerkleTree.from_levels([tree.hashes_at(0, 0, 4)], 4)  # a level missing
    with pytest.raises(ValueError):
        merkle.MerkleTree.from_levels(
            [tree.hashes_at(0, 0, 4), tree.hashes_at(1, 0, 2), bytes(31)], 4
        )


def test_the_key_names_the_shards_in_order() -> None:
    a, b = bytes(32), bytes([1]) * 32
    assert prefix.key([a, b]) != prefix.key([b, a]) != prefix.key([a])
    assert len(prefix.key([])) == 64
    with pytest.raises(ValueError):
        prefix.key([bytes(16)])


def test_the_shards_a_build_writes_are_not_checked_line_by_line_again(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build checks each line of a shard it has no digest of (canonical JSON,
    RFC 8785); the shards it writes are its own lines and lines it checked, so
    the next build checks none: before, the last shard's were checked in every
    build after one that appended (up to 4,096 lines, 0.13 s at 10k dreams)."""
    tp.add("ada", 6)
    out = tmp_path / "site"
    do_build(tp, out)
    tp.add("bob", 1)
    checked = calls_to(monkeypatch, strictjson, "is_canonical")
    do_build(tp, out)  # appends bob's key and dream: its two new leaves checked as written
    assert len(checked) == 2
    checked.clear()
    do_build(tp, out)
    assert checked == []
    # An edited line is a shard of other bytes, checked again (and refused).
    last = sorted((tp.content / "log" / "leaves").iterdir())[-1]
    last.write_bytes(last.read_bytes().replace(b'{"', b'{ "', 1))
    with pytest.raises(LogError, match="not canonical"):
        do_build(tp, out)
