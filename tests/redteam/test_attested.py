"""THREATS.md T117: the prefix of the log a build holding the log key attests in its
store, which ``dreampool mcp --content`` uses to skip verifying those dreams'
signatures again.

A build given the log key records (size, root) of the longest prefix of the log
inside a checkpoint that key signed; the agents' server takes a dream of that
prefix by its commitment alone only if the tree it proved has that very prefix.
Each attack below is a pull request that reached the checkout after such a build
(any file under ``content/``); a failing test is an attack that succeeds: a bulk
tool shows a dream whose signature does not verify.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from builder import buildcache
from builder.agents import mcp_server
from builder.errors import DreampoolError
from builder.formats import dream as dreamfmt
from builder.formats import leaf as leaffmt
from builder.formats import merkle
from builder.log import logbuild
from builder.site import writer
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, dump, set_tier, signed, submit
from tests.redteam.test_mcp_checkout import _bulk, _resign_the_whole_log
from tests.redteam.test_r36_review import _append_under_a_second_key
from tests.redteam.test_shortcut_review import (
    FORGED,
    _append_forged_leaf_under_a_second_key,
    _forged_dream,
)


@pytest.fixture
def published(tmp_path: Path) -> tuple[PoolFixture, list[str], Path]:
    """Three of ada's dreams, ada a maintainer, logged and built with the log key
    into ``site`` beside the checkout (whose store the server reads)."""
    tp = make_pool(tmp_path / "pool")
    ids = submit(tp, *(signed("ada", title=f"Ada's dream {n}") for n in range(3)))
    set_tier(tp, "ada", "maintainer")
    out = tmp_path / "pool" / "site"
    build(tp, out)
    return tp, ids, out


def _attested(out: Path) -> dict[Any, Any]:
    return dict(buildcache.StoreReader(writer.builds_dir(out) / "cache")["attested"])


def _log_leaves(tp: PoolFixture) -> list[bytes]:
    return (tp.content / "log" / "leaves" / "000000.jsonl").read_bytes().splitlines()


def _root(leaves: list[bytes]) -> bytes:
    return merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(x) for x in leaves).root()


def _spy_signatures(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the dreams whose signature the server verifies."""
    seen: list[str] = []
    holds = mcp_server._signature_holds

    def spied(body: Any) -> bool:
        seen.append(dreamfmt.dream_id(dreamfmt.b64url_decode(body["sig"]["value"])))
        return holds(body)

    monkeypatch.setattr(mcp_server, "_signature_holds", spied)
    monkeypatch.setattr(mcp_server, "SIGNATURES_FORKED", 10**9)  # in this process
    return seen


def test_a_build_with_the_log_key_attests_the_log_it_signed(
    published: tuple[PoolFixture, list[str], Path], tmp_path: Path
) -> None:
    """T117: a build given the log key attests the log it signed, one without writes none."""
    tp, _, out = published
    leaves = _log_leaves(tp)
    assert _attested(out) == {"log": (len(leaves), _root(leaves))}
    # A build without the key writes none (a fresh builds folder).
    other = tmp_path / "other" / "site"
    other.parent.mkdir()
    build(tp, other, key=False)
    assert _attested(other) == {}


def test_a_build_with_the_log_key_does_not_attest_leaves_another_key_signed(
    published: tuple[PoolFixture, list[str], Path],
) -> None:
    """T117, T78's second key: the pull request's leaf lies past the last checkpoint the
    pool's key signed. The build refuses the forged dream, signs nothing (the tree
    did not grow), and attests the prefix its own key signed, not the forged leaf."""
    tp, _, out = published
    before = _log_leaves(tp)
    forged = _append_forged_leaf_under_a_second_key(tp)
    with pytest.raises(DreampoolError) as refused:  # the forged dream: refused whole
        build(tp, out)
    assert forged in refused.value.message
    assert _attested(out) == {"log": (len(before), _root(before))}


def _log_under_a_second_key(tp: PoolFixture, obj: dict[str, Any]) -> str:
    """The dream ``obj``, its salt, and its leaf appended under a second log key
    (test_r36_review's helper); its id."""
    dream_id = dreamfmt.dream_id(dreamfmt.b64url_decode(obj["sig"]["value"]))
    salt = logbuild.new_salt(dream_id)
    (tp.content / "dreams" / f"{dream_id}.json").write_bytes(dump(obj))
    (tp.content / "dreams" / f"{dream_id}.salt").write_text(salt + "\n")
    leaf = leaffmt.encode(leaffmt.DreamLeaf(dream_id, dreamfmt.commitment(obj, salt)))
    _append_under_a_second_key(tp, [leaf])
    return dream_id


def test_a_signing_build_that_signs_nothing_attests_only_what_its_key_signed(
    published: tuple[PoolFixture, list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """T117: the second key's leaf is a dream its author did sign: the build with the
    pool's key verifies it in full and takes it, and signs nothing (the tree did not
    grow). It attests the prefix its own key signed, and the server verifies the
    dream past it (and shows it: its signature holds)."""
    tp, ids, out = published
    before = _log_leaves(tp)
    extra = _log_under_a_second_key(tp, signed("ada", title="Ada signed this one too"))
    report = build(tp, out)
    assert not report.signed and extra not in report.admitted
    assert _attested(out) == {"log": (len(before), _root(before))}
    seen = _spy_signatures(monkeypatch)
    tools = mcp_server.Tools(mcp_server.open_reader(None, tp.content, out=out), content=tp.content)
    shown, _ = _bulk(tools)
    assert set(shown) == {*ids, extra} and set(seen) == {extra}


def test_dreams_the_store_attests_are_served_without_verifying_signatures_again(
    published: tuple[PoolFixture, list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """T117: over the store of a signing build, no signature is verified again, and
    the bulk tools show what they show with every signature verified (T107)."""
    tp, ids, out = published
    seen = _spy_signatures(monkeypatch)
    tools = mcp_server.Tools(mcp_server.open_reader(None, tp.content, out=out), content=tp.content)
    shown, _ = _bulk(tools)
    assert set(shown) == set(ids) and seen == []
    listed = tools.dream_list(limit=100)
    assert [d["tier"] for d in listed.data["dreams"]] == ["maintainer"] * 3
    # Without the store every signature is verified, and the same dreams are shown.
    plain = mcp_server.Tools(mcp_server.open_reader(None, tp.content), content=tp.content)
    assert _bulk(plain)[0] == shown and sorted(seen) == sorted(ids)


def test_a_second_log_key_past_the_attested_prefix_is_verified_and_refused(
    published: tuple[PoolFixture, list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """T117, T107 over an attesting store: the forged leaf (ada's public key, a garbage
    signature) is appended under the pull request's own log key, added to the
    policy. The prefix the store attests is unchanged, so ada's dreams are taken;
    the forged one lies past it, its signature is verified, and it is refused."""
    tp, ids, out = published
    forged = _append_forged_leaf_under_a_second_key(tp)
    seen = _spy_signatures(monkeypatch)
    tools = mcp_server.Tools(mcp_server.open_reader(None, tp.content, out=out), content=tp.content)
    shown, text = _bulk(tools)
    assert forged not in shown and FORGED not in text and set(ids) <= set(shown)
    assert set(seen) == {forged}
    failed = [f["id"] for f in tools.dream_list(limit=100).data["failed"]]
    assert failed == [forged]


def test_a_log_signed_again_whole_keeps_only_the_prefix_it_did_not_change(
    published: tuple[PoolFixture, list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """T117, T107: the forged leaf appended, then every checkpoint signed again by the pull
    request's key alone: the attested prefix still hashes to its root, the forged
    dream past it is verified and refused."""
    tp, ids, out = published
    forged = _append_forged_leaf_under_a_second_key(tp)
    _resign_the_whole_log(tp)
    seen = _spy_signatures(monkeypatch)
    tools = mcp_server.Tools(mcp_server.open_reader(None, tp.content, out=out), content=tp.content)
    shown, text = _bulk(tools)
    assert forged not in shown and FORGED not in text and set(ids) <= set(shown)
    assert set(seen) == {forged}


def test_a_log_rewritten_inside_the_attested_prefix_is_attested_no_more(
    published: tuple[PoolFixture, list[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """T117: the pull request puts the forged dream's leaf in place of one of ada's,
    inside the prefix the store attests, and signs the whole log again with a key
    of its own. The prefix no longer hashes to the attested root, so nothing is
    attested: every signature is verified, and the forged dream is refused."""
    tp, ids, out = published
    obj = _forged_dream()
    forged = dreamfmt.dream_id(dreamfmt.b64url_decode(obj["sig"]["value"]))  # type: ignore[index]
    salt = logbuild.new_salt(forged)
    (tp.content / "dreams" / f"{forged}.json").write_bytes(dump(obj))
    (tp.content / "dreams" / f"{forged}.salt").write_text(salt + "\n")
    shard = tp.content / "log" / "leaves" / "000000.jsonl"
    leaves = shard.read_bytes().splitlines()
    index = next(i for i, x in enumerate(leaves) if isinstance(leaffmt.parse(x), leaffmt.DreamLeaf))
    replaced = leaffmt.parse(leaves[index]).id  # type: ignore[union-attr]
    leaves[index] = leaffmt.encode(leaffmt.DreamLeaf(forged, dreamfmt.commitment(obj, salt)))
    shard.write_bytes(b"".join(x + b"\n" for x in leaves))
    _resign_the_whole_log(tp)
    seen = _spy_signatures(monkeypatch)
    reader = mcp_server.open_reader(None, tp.content, out=out)
    shown, text = _bulk(mcp_server.Tools(reader, content=tp.content))
    assert reader._attested_leaves == 0
    assert forged not in shown and FORGED not in text
    assert set(shown) == set(ids) - {replaced}
    assert forged in seen and set(ids) - {replaced} <= set(seen)


def test_an_attested_prefix_longer_than_the_log_attests_nothing(
    published: tuple[PoolFixture, list[str], Path],
) -> None:
    """T117: a store attesting more leaves than the checkout's log holds (a store of a
    later state of the pool, or of another pool) attests none of them."""
    tp, _, out = published
    leaves = _log_leaves(tp)
    cache = buildcache.BuildCache(writer.builds_dir(out) / "cache")
    cache["attested"]["log"] = (len(leaves) + 1, _root([*leaves, leaves[-1]]))
    cache.save()
    reader = mcp_server.open_reader(None, tp.content, out=out)
    reader.refresh()
    assert reader._attested_leaves == 0


def test_a_pinned_policy_needs_no_attestation(
    published: tuple[PoolFixture, list[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T117, T107: with --policy pinned nothing is attested, and nothing verified again."""
    tp, ids, out = published
    pinned = tmp_path / "policy"
    shutil.copyfile(tp.content / "log" / "policy", pinned)
    seen = _spy_signatures(monkeypatch)
    reader = mcp_server.open_reader(None, tp.content, pinned, out=out)
    shown, _ = _bulk(mcp_server.Tools(reader, content=tp.content))
    assert set(shown) == set(ids) and seen == [] and reader._attested_leaves == 0


def test_the_server_reads_the_store_a_later_build_wrote(
    published: tuple[PoolFixture, list[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T117's row, written by a build that changes nothing under ``content/``: the
    first build with the log key over a site built without it. The server takes
    the new store at its next reload (review r35: it kept the old one until it was
    restarted), and reads nothing of the checkout again for it."""
    tp, _, _ = published
    out = tmp_path / "pool" / "unsigned-site"
    build(tp, out, key=False)
    site = mcp_server.ContentSite(tp.content, out)
    site.reload()
    assert site.attested() is None
    plans: list[Path] = []
    plan = mcp_server.content_plan

    def counted(content: Path, store: Any = None) -> Any:
        plans.append(content)
        return plan(content, store)

    monkeypatch.setattr(mcp_server, "content_plan", counted)
    log = sorted((p, p.read_bytes()) for p in (tp.content / "log").rglob("*") if p.is_file())
    build(tp, out)
    # Nothing new to sign: content/ is as it was.
    assert (
        sorted((p, p.read_bytes()) for p in (tp.content / "log").rglob("*") if p.is_file()) == log
    )
    site.reload()
    leaves = _log_leaves(tp)
    assert site.attested() == (len(leaves), _root(leaves))
    assert plans == []
