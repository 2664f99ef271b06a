"""Review of ``dreampool mcp --content``: the bulk tools take a checkout's logged
dreams as ``content_plan`` took them (by their commitment to the proven leaf).

Each test is an attack on what an agent is shown over a pool checkout that a pull
request reached (any file under ``content/``). A failing test is an attack that
succeeds: a bulk tool (``dream_list``, ``dream_stats``, ``dream_digest``) shows
what the published record, checked by the light client, would not.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from builder import parallel
from builder.agents import mcp_server
from builder.errors import DreampoolError
from builder.formats import merkle
from builder.formats.checkpoint import Checkpoint, sign_checkpoint
from builder.formats.note import generate_key, parse_private_key
from tests.pools import ORIGIN, PoolFixture, make_pool
from tests.redteam import build, set_tier, signed, submit
from tests.redteam.test_shortcut_review import FORGED, _append_forged_leaf_under_a_second_key


@pytest.fixture
def published(tmp_path: Path) -> tuple[PoolFixture, list[str], Path]:
    """A pool with three of ada's dreams, ada a maintainer, logged and published
    with the log key; the policy as published is kept aside (a pinned copy)."""
    tp = make_pool(tmp_path / "pool")
    ids = submit(tp, *(signed("ada", title=f"Ada's dream {n}") for n in range(3)))
    set_tier(tp, "ada", "maintainer")
    build(tp, tmp_path / "pool" / "site")
    pinned = tmp_path / "policy"
    shutil.copyfile(tp.content / "log" / "policy", pinned)
    return tp, ids, pinned


def _bulk(tools: mcp_server.Tools) -> tuple[list[str], str]:
    """The ids the bulk tools show, and all their text."""
    listed, stats, digest = tools.dream_list(limit=100), tools.dream_stats(), tools.dream_digest()
    shown = [d["id"] for d in listed.data["dreams"]] + [d["id"] for d in digest.data["dreams"]]
    return shown, listed.text + stats.text + digest.text


def test_a_second_log_key_does_not_pass_a_forged_maintainer_dream_to_the_bulk_tools(
    published: tuple[PoolFixture, list[str], Path],
) -> None:
    """T107 (T78 over ``mcp --content``, no ``--policy``): the pull request appends a
    leaf for a dream ada never signed (her real public key, a garbage signature),
    signs a checkpoint over it with a log key of its own and adds that key to
    content/log/policy beside the pool's. The reader pins the checkout's policy on
    first read, so the leaf is proven; content_plan takes the file by its
    commitment (no signature check). Before the change the bulk tools made the
    record and verified its signature, and refused it, as dream_get still does;
    taken by its commitment, it was listed as ada's, at tier maintainer, so
    unquoted: text no key signed, handed to the agent as the maintainer's."""
    tp, ids, _ = published
    forged = _append_forged_leaf_under_a_second_key(tp)
    content = tp.content
    tools = mcp_server.Tools(mcp_server.open_reader(None, content), content=content)
    shown, text = _bulk(tools)
    assert forged not in shown and FORGED not in text
    assert set(ids) <= set(shown)
    failed = [f["id"] for f in tools.dream_list(limit=100).data["failed"]]
    assert failed == [forged]
    with pytest.raises(DreampoolError):  # the light client refuses it too
        tools.dream_get(forged)


def test_signatures_checked_on_every_core_refuse_the_forged_dream_as_well(
    published: tuple[PoolFixture, list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """T107, with the bulk tools' signature checks done by forked workers
    (PoolReader.check_all), here from the first dream on: each logged dream's
    signature is checked, the forged one is left out, and the bulk tools refuse
    it, named."""
    monkeypatch.setattr(mcp_server, "SIGNATURES_FORKED", 1)
    forked = spy_forks(monkeypatch)
    tp, ids, _ = published
    forged = _append_forged_leaf_under_a_second_key(tp)
    content = tp.content
    reader = mcp_server.open_reader(None, content)
    reader.check_all([*ids, forged, "0000000000000000"])
    assert forked == [4]  # the three logged dreams and the forged one
    assert sorted(reader._checked) == sorted(ids)
    shown, text = _bulk(mcp_server.Tools(reader, content=content))
    assert forked[0] == 4 and set(forked[1:]) == {1}  # only the forged one again
    assert forged not in shown and FORGED not in text and set(ids) <= set(shown)
    failed = mcp_server.Tools(reader, content=content).dream_list(limit=100).data["failed"]
    assert [f["id"] for f in failed] == [forged]


def spy_forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many items each parallel.map_ordered call that forks is given."""
    calls: list[int] = []
    real = parallel._fork_pool
    sizes: list[int] = []
    map_ordered = parallel.map_ordered

    def sized(func: Any, items: Any, **kw: Any) -> Any:
        sizes.append(len(items))
        return map_ordered(func, items, **kw)

    def forking(n: int, *rest: Any) -> Any:
        calls.append(sizes[-1])
        return real(n, *rest)

    monkeypatch.setattr(parallel, "map_ordered", sized)
    monkeypatch.setattr(parallel, "_fork_pool", forking)
    return calls


def _resign_the_whole_log(tp: PoolFixture) -> None:
    """The log as a pull request can make it whole: a policy naming only a log key
    of its own, and every checkpoint of the history signed again with it."""
    log = tp.content / "log"
    skey, vkey = generate_key(ORIGIN)
    signer = parse_private_key(skey)
    (log / "policy").write_text(f"log {vkey}\nquorum none\n")
    leaves = (log / "leaves" / "000000.jsonl").read_bytes().splitlines()
    for line in (log / "history.jsonl").read_text().splitlines():
        size = json.loads(line)["size"]
        t = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(x) for x in leaves[:size])
        note = sign_checkpoint(Checkpoint(ORIGIN, size, t.root()), signer)
        (log / "checkpoints" / str(size)).write_bytes(note)


def test_a_log_signed_again_whole_does_not_pass_a_forged_maintainer_dream_either(
    published: tuple[PoolFixture, list[str], Path],
) -> None:
    """T107: the same forged leaf, and then the whole log state signed again by the pull
    request's key alone (T78's accepted risk for a build without the log key: its
    own word). The reader, pinning the checkout's policy, proves it; still no
    signature is forged, so the light client refuses the dream, and so must the
    bulk tools."""
    tp, ids, _ = published
    forged = _append_forged_leaf_under_a_second_key(tp)
    _resign_the_whole_log(tp)
    content = tp.content
    tools = mcp_server.Tools(mcp_server.open_reader(None, content), content=content)
    shown, text = _bulk(tools)
    assert forged not in shown and FORGED not in text
    assert set(ids) <= set(shown)


def test_with_the_policy_pinned_the_second_log_key_is_refused_whole(
    published: tuple[PoolFixture, list[str], Path],
) -> None:
    """T107: the same pull request, served with ``--policy`` pinned to the pool's own
    policy: its checkpoint does not verify under it, so nothing is served (held
    before and after the change)."""
    tp, _, pinned = published
    _append_forged_leaf_under_a_second_key(tp)
    with pytest.raises(DreampoolError):
        reader = mcp_server.open_reader(None, tp.content, pinned)
        mcp_server.Tools(reader, content=tp.content).dream_list(limit=100)
