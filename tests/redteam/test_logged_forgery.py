"""A pull request swaps a logged dream's file for a forgery (THREATS.md T78).

A build takes a logged dream by its commitment, without verifying its
signature again (docs/protocol.md §3.1). These attacks
try to get that shortcut to publish text its author never signed: every one
must leave the log and the live site as they were. Builds here are cold (no
build store), as in a fresh CI checkout, where the shortcut is taken most.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.errors import DreampoolError
from builder.formats import leaf as leaffmt
from builder.formats import merkle
from builder.formats.checkpoint import Checkpoint, sign_checkpoint
from builder.formats.note import generate_key, parse_private_key
from builder.log import logbuild
from tests.pools import ORIGIN, PoolFixture, make_pool
from tests.redteam import build, dump, signed, submit, tree

FORGED = "Transfer the funds to the new account"


@pytest.fixture
def victim(tmp_path: Path) -> tuple[PoolFixture, str, Path]:
    """A pool with three logged dreams, built; the victim is ada's first."""
    tp = make_pool(tmp_path / "pool")
    ids = submit(tp, *(signed("ada", title=f"Ada's dream {n}") for n in range(3)))
    build(tp, tmp_path / "pool" / "site")
    # The shortcut these attacks aim at: a cold build takes all three by their leaves.
    assert build(tp, tmp_path / "untouched", key=False).committed == 3
    return tp, ids[0], tmp_path / "pool" / "site"


def _forge(tp: PoolFixture, dream_id: str) -> tuple[dict[str, object], str]:
    """The victim's file with a new title (old signature kept) and a salt of
    the forger's beside it; returns both."""
    path = tp.content / "dreams" / f"{dream_id}.json"
    obj = json.loads(path.read_bytes())
    obj["title"] = FORGED
    path.write_bytes(dump(obj))
    salt = logbuild.new_salt(dream_id)
    path.with_suffix(".salt").write_text(salt + "\n")
    return obj, salt


def _rewrite_leaf(tp: PoolFixture, dream_id: str, obj: dict[str, object], salt: str) -> list[bytes]:
    """The dream's leaf made to commit to ``obj`` and ``salt``; returns every leaf."""
    shard = tp.content / "log" / "leaves" / "000000.jsonl"
    leaves = shard.read_bytes().splitlines()
    for n, line in enumerate(leaves):
        if json.loads(line).get("id") == dream_id:
            leaves[n] = leaffmt.encode(leaffmt.DreamLeaf(dream_id, logbuild.commitment(obj, salt)))
    shard.write_bytes(b"".join(x + b"\n" for x in leaves))
    return leaves


def _nothing_shown(tp: PoolFixture, site: Path, out: Path, *, key: bool) -> None:
    """The build refuses; the log, the live site and the new output hold no forged text."""
    log = tree(tp.content / "log")
    live = tree(site)
    with pytest.raises(DreampoolError):
        build(tp, out, key=key)
    assert tree(tp.content / "log") == log
    assert tree(site) == live
    assert not out.exists() or FORGED not in json.dumps(
        {k: v.decode("utf-8", "replace") for k, v in tree(out).items()}
    )


@pytest.mark.parametrize("key", [True, False])
def test_a_forged_file_under_a_logged_id_is_not_shown(
    victim: tuple[PoolFixture, str, Path], tmp_path: Path, key: bool
) -> None:
    """T78: the victim's file with a new title and its old signature (it
    parses, its signature looks right): the commitment fails, the file is
    checked in full, its signature fails, and the logged dream counts as
    missing: the build refuses, with or without the log key."""
    tp, dream_id, site = victim
    path = tp.content / "dreams" / f"{dream_id}.json"
    obj = json.loads(path.read_bytes())
    obj["title"] = FORGED
    path.write_bytes(dump(obj))
    _nothing_shown(tp, site, tmp_path / "cold", key=key)


def test_a_forged_file_with_a_chosen_salt_is_not_shown(
    victim: tuple[PoolFixture, str, Path], tmp_path: Path
) -> None:
    """T78: the forger replaces the salt too; without a SHA-256 collision no
    salt gives the forged object the logged commitment."""
    tp, dream_id, site = victim
    _forge(tp, dream_id)
    _nothing_shown(tp, site, tmp_path / "cold", key=True)


def test_a_dream_the_forger_signed_under_a_logged_name_is_not_shown(
    victim: tuple[PoolFixture, str, Path], tmp_path: Path
) -> None:
    """T78: a dream validly signed (by ada's own key, even) put in the
    victim's file: its id is not the file's, and it commits to nothing logged."""
    tp, dream_id, site = victim
    forged = signed("ada", title=FORGED)
    (tp.content / "dreams" / f"{dream_id}.json").write_bytes(dump(forged))
    _nothing_shown(tp, site, tmp_path / "cold", key=True)


def test_a_leaf_rewritten_for_the_forgery_is_not_proven(
    victim: tuple[PoolFixture, str, Path], tmp_path: Path
) -> None:
    """T78: the forger also rewrites the dream's leaf to commit to the
    forged file and a salt of their own: the stored tree no longer gives the
    signed root, so the build stops before any dream is read."""
    tp, dream_id, site = victim
    _rewrite_leaf(tp, dream_id, *_forge(tp, dream_id))
    _nothing_shown(tp, site, tmp_path / "cold", key=False)


def test_a_whole_forged_log_is_refused_with_the_log_key(
    victim: tuple[PoolFixture, str, Path], tmp_path: Path
) -> None:
    """T78: the forger rewrites the leaf and signs a new history with a log
    key of their own (policy, checkpoint, history): the build holding the
    pool's log key refuses a policy that does not name it, before any dream is
    read. (A build without the log key would prove the forged log against the
    forged policy: the check gate refuses any change under content/log, and
    readers pin the policy and verify every dream's signature, docs/protocol.md §5.)"""
    tp, dream_id, site = victim
    leaves = _rewrite_leaf(tp, dream_id, *_forge(tp, dream_id))
    log = tp.content / "log"
    skey, vkey = generate_key(ORIGIN)
    (log / "policy").write_text(f"log {vkey}\nquorum none\n")
    t = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(x) for x in leaves)
    for old in (log / "checkpoints").iterdir():
        old.unlink()
    note = sign_checkpoint(Checkpoint(ORIGIN, t.size, t.root()), parse_private_key(skey))
    (log / "checkpoints" / str(t.size)).write_bytes(note)
    entry = {"size": t.size, "time": "2026-01-01T00:00:00Z"}
    (log / "history.jsonl").write_text(json.dumps(entry) + "\n")
    live = tree(site)
    with pytest.raises(DreampoolError, match="is not the one in"):
        build(tp, tmp_path / "cold", key=True)
    assert tree(site) == live
    assert not (tmp_path / "cold").exists()
