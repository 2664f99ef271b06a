"""Review r35 of commit 9edc52f (THREATS.md T117: the log prefix a signing build
attests, read by ``dreampool mcp --content``).

No way was found to make the bulk tools skip the signature of a dream no build
holding the log key verified (see the review's report). What follows is a defect
the review met on the way, older than 9edc52f but reached by the tools under
review: a failing test is an attack that succeeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.agents import mcp_server
from builder.errors import DreampoolError
from builder.formats import leaf as leaffmt
from builder.formats import merkle
from builder.formats.checkpoint import Checkpoint, sign_checkpoint
from builder.formats.note import generate_key, parse_private_key
from tests.pools import ORIGIN, PoolFixture
from tests.redteam.test_attested import published  # noqa: F401  (the fixture)


def _append_under_a_second_key(tp: PoolFixture, leaf: bytes) -> None:
    """What the pull request adds: ``leaf`` after the signed log, a checkpoint over
    it signed by a log key of its own, its history line, and that key as a second
    ``log`` line of content/log/policy (THREATS.md T78, T107)."""
    log = tp.content / "log"
    shard = log / "leaves" / "000000.jsonl"
    leaves = [*shard.read_bytes().splitlines(), leaf]
    shard.write_bytes(b"".join(x + b"\n" for x in leaves))
    skey, vkey = generate_key(ORIGIN)
    (log / "policy").write_text((log / "policy").read_text() + f"log {vkey}\n")
    tree = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(x) for x in leaves)
    note = sign_checkpoint(Checkpoint(ORIGIN, tree.size, tree.root()), parse_private_key(skey))
    (log / "checkpoints" / str(tree.size)).write_bytes(note)
    with (log / "history.jsonl").open("a") as f:
        f.write(json.dumps({"size": tree.size, "time": "2026-12-01T00:00:00Z"}) + "\n")


def test_an_erasure_leaf_of_a_dream_never_logged_is_a_named_error_not_a_key_error(
    published: tuple[PoolFixture, list[str], Path],  # noqa: F811
) -> None:
    """docs/protocol.md §3: an erasure leaf names a dream leaf at a lower index. The
    pull request appends one naming an id no leaf logs, under its own log key. The
    leaf parses, every checkpoint verifies under the checkout's policy, and
    content_plan's logbuild._index_log then looks the id up in the logged dreams:
    KeyError, not a DreampoolError. Every tool call over the checkout fails with
    an exception the server does not name (the SDK tells the agent only "Error
    executing tool dream_list"; the warm-up thread prints a traceback), where
    every other broken log is a LogError that names the leaf. (Older than 9edc52f;
    a `dreampool build` over the same checkout, with or without the log key,
    stops with the same KeyError.)"""
    tp, _, out = published
    _append_under_a_second_key(tp, leaffmt.encode(leaffmt.ErasureLeaf("0123456789abcdef", "legal")))
    tools = mcp_server.Tools(mcp_server.open_reader(None, tp.content, out=out), content=tp.content)
    with pytest.raises(DreampoolError):
        tools.dream_list(limit=100)
