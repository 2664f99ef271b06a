"""Review r36 of commit ade84f5 (THREATS.md T118: docs/protocol.md §3's rules
across leaves, applied to every leaf by the build's replay and the server's index).

A failing test is an attack that succeeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.agents import mcp_server
from builder.errors import DreampoolError
from builder.formats import dream as dreamfmt
from builder.formats import leaf as leaffmt
from builder.formats import merkle
from builder.formats.checkpoint import Checkpoint, sign_checkpoint
from builder.formats.ed25519 import public_key_of
from builder.formats.note import generate_key, parse_private_key
from builder.log import logbuild
from tests.independent_verifier import VerificationError, verify_site
from tests.pools import ORIGIN, PoolFixture, make_pool
from tests.redteam import build, seed_of, signed, submit


@pytest.fixture
def published(tmp_path: Path) -> tuple[PoolFixture, list[str], Path]:
    """Three of ada's dreams, logged and published with the log key."""
    tp = make_pool(tmp_path / "pool")
    ids = submit(tp, *(signed("ada", title=f"Ada's dream {n}") for n in range(3)))
    out = tmp_path / "pool" / "site"
    build(tp, out)
    verify_site(out, tp.vkey)
    return tp, ids, out


def _append_under_a_second_key(tp: PoolFixture, leaves: list[bytes]) -> None:
    """What the pull request adds to the log: ``leaves`` after the signed log, a
    checkpoint over them signed by a log key of its own, its history line, and that
    key as a second ``log`` line of content/log/policy (THREATS.md T78)."""
    log = tp.content / "log"
    shard = log / "leaves" / "000000.jsonl"
    everything = [*shard.read_bytes().splitlines(), *leaves]
    shard.write_bytes(b"".join(x + b"\n" for x in everything))
    skey, vkey = generate_key(ORIGIN)
    (log / "policy").write_text((log / "policy").read_text() + f"log {vkey}\n")
    tree = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(x) for x in everything)
    note = sign_checkpoint(Checkpoint(ORIGIN, tree.size, tree.root()), parse_private_key(skey))
    (log / "checkpoints" / str(tree.size)).write_bytes(note)
    with (log / "history.jsonl").open("a") as f:
        f.write(json.dumps({"size": tree.size, "time": "2026-12-01T00:00:00Z"}) + "\n")


def _bob_logged(tp: PoolFixture, key_leaf: str) -> str:
    """Bob's dream, validly signed and submitted (his key file in content/keys), with
    a salt and a dream leaf the pull request appends under its own log key; his key
    leaf ``key_leaf``: "none" (not logged), "after" (after the dream leaf), or
    "other-author" (before it, naming another author)."""
    obj = signed("bob", title="Bob's dream, logged by the pull request")
    [dream_id] = submit(tp, obj)
    salt = logbuild.new_salt(dream_id)
    (tp.content / "dreams" / f"{dream_id}.salt").write_text(salt + "\n")
    dream_leaf = leaffmt.encode(leaffmt.DreamLeaf(dream_id, dreamfmt.commitment(obj, salt)))
    public = public_key_of(seed_of("bob"))
    key_id = dreamfmt.key_id(public)
    pub = public
    leaves = {
        "none": [dream_leaf],
        "after": [dream_leaf, leaffmt.encode(leaffmt.KeyLeaf(key_id, pub, "bob"))],
        "other-author": [leaffmt.encode(leaffmt.KeyLeaf(key_id, pub, "mallory")), dream_leaf],
    }[key_leaf]
    _append_under_a_second_key(tp, leaves)
    return dream_id


@pytest.mark.parametrize("key_leaf", ["none", "after", "other-author"])
def test_the_pool_key_does_not_sign_a_dream_leaf_without_its_authors_key_leaf_before_it(
    published: tuple[PoolFixture, list[str], Path], key_leaf: str
) -> None:
    """T118, docs/protocol.md §3: the key leaf of a dream's sig.keyId comes before the
    dream's leaf, and the dream's author equals that key leaf's author; a site
    verifier MUST refuse a record that breaks it. sequence_problem leaves that rule
    out ("the build checks it from the dream"), but the build checks it only for
    an unsigned tail (_check_unsigned_tail): for a signed leaf, _check_logged
    compares commitments and _check_retired judges only retirement. The pull
    request logs bob's validly signed dream under its own log key (T78) with no
    key leaf, or with the key leaf after it, or before it naming another author;
    then ada submits a new dream. The build with the pool's log key checks bob's
    dream in full (§3.1: it lies past what its key signed), takes it, appends ada's
    leaf and signs the whole tree with the pool's key: the independent verifier
    refuses the site it published, and since the log is append-only only erasing
    bob's dream ever makes the site verify again."""
    tp, _, out = published
    bob = _bob_logged(tp, key_leaf)
    submit(tp, signed("ada", title="Ada's honest new dream"))
    try:
        report = build(tp, out)
    except DreampoolError:
        return  # refused, named: the defence holds
    assert report.signed and not any(bob in p.file for p in report.refused)
    try:
        verify_site(out)  # the site's own policy: the rules across leaves alone
    except VerificationError as exc:
        pytest.fail(f"the pool's key signed a log the independent verifier refuses: {exc}")


def test_the_servers_index_of_a_checkout_refuses_the_same_log(
    published: tuple[PoolFixture, list[str], Path],
) -> None:
    """T118 says PoolReader._index applies §3's rules across leaves. The same pull
    request as above (no key leaf of bob's key in the log at all) over
    ``dreampool mcp --content``: the log is proven under the checkout's policy,
    bob's signature verifies (T107), and the bulk tools list his dream, which a site
    verifier of the same log refuses. It should be a named error, as the other
    rules across leaves now are."""
    tp, _, out = published
    bob = _bob_logged(tp, "none")
    reader = mcp_server.open_reader(None, tp.content, lazy=True, out=out)
    tools = mcp_server.Tools(reader, content=tp.content)
    try:
        listed = tools.dream_list(limit=100)
    except DreampoolError:
        return  # refused, named
    assert bob not in [d["id"] for d in listed.data["dreams"]], (
        "mcp --content shows a dream whose key leaf the log does not hold"
    )
