"""Review of two changes: the MCP bulk check (dab0f8b, THREATS.md T84) and the log
stage split into ``logbuild.plan`` and ``logbuild.apply`` (a8b5eeb).

Each test is an attack or a misuse; a failing test is one that succeeds. The log
half drives ``plan`` and ``apply`` as the library exposes them (``builder.build``
calls both with one key; ``update`` is both), the MCP half serves hostile sites.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.agents import mcp_server
from builder.content import pool
from builder.errors import DreampoolError, LogError
from builder.formats.note import Signer, generate_key, parse_private_key
from builder.log import erase, logbuild, logstate
from tests.pools import ORIGIN, PoolFixture, make_pool
from tests.redteam import build, signed, submit, tree
from tests.redteam.test_shortcut_review import FORGED, _append_forged_leaf_under_a_second_key

# --- helpers ----------------------------------------------------------------------


def _scan(tp: PoolFixture, proven: logbuild.ProvenLog | None = None) -> list[pool.ScannedDream]:
    directory = pool.load_keys(tp.content)[0]
    return pool.scan_dreams(tp.content, directory, proven=proven)[0]


def _plan(
    tp: PoolFixture, signer: Signer | None, *, prove_with: Signer | None = None
) -> logbuild.LogPlan:
    """The build's log stage up to the plan: prove (with ``prove_with``), scan, plan."""
    proven = logbuild.prove(tp.content, origin=ORIGIN, signer=prove_with)
    return logbuild.plan(tp.content, _scan(tp, proven), origin=ORIGIN, signer=signer, proven=proven)


def _kinds(tp: PoolFixture) -> list[str]:
    return [json.loads(x)["kind"] for x in logstate.load(tp.content).leaves]


@pytest.fixture
def published(tmp_path: Path) -> tuple[PoolFixture, Path]:
    """ada's two dreams, logged and published with the log key."""
    tp = make_pool(tmp_path / "pool")
    submit(tp, *(signed("ada", title=f"Ada's dream {n}") for n in range(2)))
    site = tmp_path / "pool" / "site"
    build(tp, site)
    return tp, site


# --- log: plan and apply ------------------------------------------------------------


def test_a_plan_applied_twice_logs_its_leaves_once(
    published: tuple[PoolFixture, Path], tmp_path: Path
) -> None:
    """T25: apply twice with one plan (a retry after an error, a caller's loop): the
    second appends the same key and dream leaves again and the pool's key signs
    them. The log then holds bob's keyId and dream id twice (docs/protocol.md §3:
    each at most once, a site verifier refuses it), his second key leaf retires
    his own key, and every later build refuses the pool for good (a signed leaf
    stays). A plan, like the ProvenLog it consumed, must be used once."""
    tp, site = published
    submit(tp, signed("bob", title="Bob's dream"))
    signer = parse_private_key(tp.log_key)
    planned = _plan(tp, signer, prove_with=signer)
    logbuild.apply(tp.content, planned, signer=signer)
    once = tree(tp.content / "log")
    with pytest.raises((LogError, RuntimeError)):
        logbuild.apply(tp.content, planned, signer=signer)
    assert tree(tp.content / "log") == once
    assert _kinds(tp) == ["key", "dream", "dream", "key", "dream"]
    build(tp, site)  # the pool goes on


@pytest.mark.parametrize("proven_by", ["no key", "the pool's key"])
def test_apply_signs_only_with_the_key_the_plan_was_proven_with(
    published: tuple[PoolFixture, Path], proven_by: str
) -> None:
    """T78 through the split: a pull request adds a forged dream leaf under a log key
    of its own, listed in the policy beside the pool's. Proven without the pool's
    key, the log trusts that leaf (docs/protocol.md §3.1: a keyless build trusts
    the last checkpoint any policy key signed), so the scan takes the forged dream
    by its commitment. apply then accepts the pool's key ("the key the plan was
    checked with, or another": it only checks that the policy names it) and signs
    a checkpoint over the forged leaf. apply must sign only with the key the plan
    (and the proof it consumed) trusted leaves by."""
    tp, _ = published
    forged = _append_forged_leaf_under_a_second_key(tp)
    submit(tp, signed("bob", title="Bob's honest dream"))
    signer = parse_private_key(tp.log_key)
    plan_key = None if proven_by == "no key" else signer
    log_before = tree(tp.content / "log")
    try:
        planned = _plan(tp, plan_key, prove_with=None)
        log = logbuild.apply(tp.content, planned, signer=signer)
    except DreampoolError:
        assert tree(tp.content / "log") == log_before  # refused before writing
        return
    text = json.dumps(log.dreams[forged].dream.body) if forged in log.dreams else ""
    shown = FORGED in text
    assert not log.signed_now, f"the pool's key signed over forged dream {forged} (shown: {shown})"


def test_apply_refuses_a_log_key_named_for_another_origin_before_writing(
    published: tuple[PoolFixture, Path], tmp_path: Path
) -> None:
    """T52: A rotation whose new key was made with a mistyped origin: the policy names
    it (a `log` line of its own name beside the origin's), so plan and apply's key
    check pass; apply then writes salts and leaves and only the signature refuses
    the key (the checkpoint's origin is pool.yaml's, the key's name another). The
    key apply will sign with must be checked before anything is written."""
    tp, site = published
    skey, vkey = generate_key("alice.example/typo")
    policy = tp.content / "log" / "policy"
    text = policy.read_text(encoding="utf-8")
    policy.write_text(text.replace("quorum none", f"log {vkey}\nquorum none"), encoding="utf-8")
    submit(tp, signed("bob", title="Bob's dream"))
    wrong = parse_private_key(skey)
    before = tree(tp.content)
    with pytest.raises(DreampoolError):
        buildmod.build(tp.content, tmp_path / "wrong", signer=wrong)
    assert tree(tp.content) == before, "a build with a key the origin does not name wrote"
    assert _kinds(tp) == ["key", "dream", "dream"]
    build(tp, site)


def test_plan_writes_nothing_on_a_first_build(tmp_path: Path) -> None:
    """T40: The first build's policy (and its log URL) is apply's to write, not plan's."""
    tp = make_pool(tmp_path / "pool")
    tp.add("ada", 1)
    signer = parse_private_key(tp.log_key)
    before = tree(tp.content)
    proven = logbuild.prove(tp.content, origin=ORIGIN, signer=signer)
    planned = logbuild.plan(
        tp.content,
        _scan(tp, proven),
        origin=ORIGIN,
        signer=signer,
        log_url="https://pool.example/log/",
        proven=proven,
    )
    assert tree(tp.content) == before and not (tp.content / "log").exists()
    assert planned.policy_text is not None and "https://pool.example/log/" in planned.policy_text
    logbuild.apply(tp.content, planned, signer=signer)
    assert (tp.content / "log" / "policy").read_text() == planned.policy_text


@pytest.mark.parametrize(
    "where", ["after the policy", "after the salts", "before the leaves", "after the leaves"]
)
def test_an_interrupted_apply_leaves_a_state_the_next_build_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """apply stopped at each of its writes on a first build (the policy, the salts
    not yet synced, the leaves, the checkpoint; T40 kills at random moments): the
    next build with the key goes on, and its log is the one a whole build makes."""
    tp = make_pool(tmp_path / "pool")
    tp.add("ada", 2)
    signer = parse_private_key(tp.log_key)

    class Killed(Exception):
        pass

    def stop(*_: object, **__: object) -> None:
        raise Killed

    write = logbuild.atomic_write

    def no_salt(path: Path, data: bytes, **kw: bool) -> None:
        if path.suffix == ".salt":
            raise Killed
        write(path, data, **kw)

    target = {
        "after the policy": (logbuild, "atomic_write", no_salt),
        "after the salts": (logbuild, "make_durable", stop),
        "before the leaves": (logstate, "append", stop),
        "after the leaves": (logbuild, "sign_checkpoint", stop),
    }[where]
    with monkeypatch.context() as m:
        m.setattr(*target)
        with pytest.raises(Killed):
            buildmod.build(tp.content, tmp_path / "site", signer=signer)
    assert (tp.content / "log" / "policy").exists()
    report = buildmod.build(tp.content, tmp_path / "site", signer=signer)
    assert report.signed and report.size == 3  # (an unsigned tail's dreams: not "admitted")
    assert _kinds(tp) == ["key", "dream", "dream"]
    assert logbuild.verify_state(tp.content, _scan(tp)) == 3


def test_with_two_log_lines_the_checkpoint_names_the_origin(
    published: tuple[PoolFixture, Path], tmp_path: Path
) -> None:
    """T32: docs/operators.md "Rotate the log key": the new key's line after the old one,
    both of the origin. The next build signs with the new key a checkpoint of the
    origin (not of either key's line), the old checkpoints still verify, and the
    log URL is added to both lines."""
    tp, site = published
    skey, vkey = generate_key(ORIGIN)
    policy = tp.content / "log" / "policy"
    text = policy.read_text(encoding="utf-8")
    policy.write_text(text.replace("quorum none", f"log {vkey}\nquorum none"), encoding="utf-8")
    submit(tp, signed("bob", title="Bob's dream"))
    new = parse_private_key(skey)
    planned = _plan(tp, new, prove_with=new)
    log = logbuild.apply(tp.content, planned, signer=new)
    assert log.signed_now and log.checkpoint is not None and log.checkpoint.origin == ORIGIN
    note = (tp.content / "log" / "checkpoints" / str(log.tree.size)).read_text()
    assert note.startswith(ORIGIN + "\n") and f"— {ORIGIN} " in note
    buildmod.build(tp.content, site, signer=new, base_url="https://pool.example/")
    lines = [x for x in policy.read_text().splitlines() if x.startswith("log ")]
    assert len(lines) == 2 and all(x.endswith(" https://pool.example/log/") for x in lines)


# --- MCP: the bulk check (dream_list, dream_stats, dream_digest) ------------------------


def _bulk(tools: mcp_server.Tools) -> dict[str, dict[str, object]]:
    """What the three bulk tools return, as data."""
    return {
        "list": tools.dream_list(limit=100).data,
        "stats": tools.dream_stats().data,
        "digest": tools.dream_digest().data,
    }


def _shown(data: dict[str, object]) -> list[str]:
    """The ids a tool shows (dream_stats shows none by id: its count is checked apart)."""
    dreams = data.get("dreams")
    return [d["id"] for d in dreams] if isinstance(dreams, list) else []


def _live(site: Path) -> Path:
    return site.resolve()


@pytest.fixture
def three(tmp_path: Path) -> tuple[PoolFixture, list[str], Path]:
    """ada's three dreams, logged and published."""
    tp = make_pool(tmp_path / "pool")
    ids = submit(tp, *(signed("ada", title=f"Ada's lesson {n}") for n in range(3)))
    site = tmp_path / "pool" / "site"
    build(tp, site)
    return tp, ids, site


def test_an_erased_dreams_record_left_on_the_site_is_never_shown_or_counted(
    three: tuple[PoolFixture, list[str], Path],
) -> None:
    """T17, T84: The site keeps (or puts back) record.json of a dream the log erased: it
    recomputes its own leaf exactly, so only the log's erasure leaf can keep it out.
    Under its own id and under another dream's, no bulk tool shows or counts it."""
    tp, ids, site = three
    erased = ids[0]
    record = (_live(site) / "dreams" / erased / "record.json").read_bytes()
    erase.erase(tp.content, erased, "legal", None)
    build(tp, site)
    (_live(site) / "dreams" / erased / "record.json").write_bytes(record)
    tools = mcp_server.Tools(mcp_server.open_reader(str(site), None))
    out = _bulk(tools)
    assert all(erased not in _shown(d) for d in out.values())
    assert out["stats"]["dreams"] == 2 and out["stats"]["erased"] == 1
    assert out["list"]["matched"] == 2 and out["list"]["failed"] == []
    with pytest.raises(mcp_server.ReaderError, match="not in the log"):
        tools.reader.checked(erased)
    (_live(site) / "dreams" / ids[1] / "record.json").write_bytes(record)  # under another id
    again = _bulk(mcp_server.Tools(mcp_server.open_reader(str(site), None)))
    assert [f["id"] for f in again["stats"]["failed"]] == [ids[1]]  # type: ignore[index]
    assert "Ada's lesson 0" not in json.dumps(again)


@pytest.mark.parametrize("leaf", ["key", "erasure", "past the tree"])
def test_a_record_whose_index_names_a_key_or_erasure_leaf_is_refused(
    three: tuple[PoolFixture, list[str], Path], leaf: str
) -> None:
    """T30, T84: A logged dream's record, unchanged but for its index, made to name the key
    leaf, the erasure leaf or an index past the tree: refused by every bulk tool."""
    tp, ids, site = three
    erase.erase(tp.content, ids[0], "legal", None)
    build(tp, site)
    kinds = _kinds(tp)
    index = {"key": 0, "erasure": kinds.index("erasure"), "past the tree": len(kinds)}[leaf]
    path = _live(site) / "dreams" / ids[1] / "record.json"
    obj = json.loads(path.read_bytes())
    obj["index"] = index
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    out = _bulk(mcp_server.Tools(mcp_server.open_reader(str(site), None)))
    for data in out.values():
        assert ids[1] not in _shown(data)
        assert [f["id"] for f in data["failed"]] == [ids[1]]  # type: ignore[attr-defined, index]


def test_a_site_swapped_for_a_fork_after_the_refresh_shows_only_what_the_read_log_commits(
    tmp_path: Path,
) -> None:
    """T28, T84: Snapshot consistency: the reader reads log A; the served folder then points
    at a fork B the pool's key also signed (same size, other dreams). Records are
    fetched after the refresh, from B: each must recompute A's leaf, so a dream of
    B alone is never shown, and the next refresh reports the fork and shows nothing,
    cached dreams included."""
    base = make_pool(tmp_path / "a" / "pool")
    submit(base, *(signed("ada", title=f"Ada's lesson {n}") for n in range(2)))
    build(base, tmp_path / "a" / "pool" / "site")
    shutil.copytree(tmp_path / "a", tmp_path / "b", symlinks=True)
    fork = PoolFixture(tmp_path / "b" / "pool" / "content", base.log_key, base.vkey)
    [honest] = submit(base, signed("bob", title="Bob's honest lesson"))
    [forked] = submit(fork, signed("bob", title="Bob's forked lesson"))
    build(base, tmp_path / "a" / "pool" / "site")
    build(fork, tmp_path / "b" / "site")
    served = tmp_path / "served"
    served.symlink_to(_live(tmp_path / "a" / "pool" / "site"))
    reader = mcp_server.open_reader(str(served), None)
    tools = mcp_server.Tools(reader)
    snap = reader.snapshot
    assert honest in snap.dreams and forked not in snap.dreams
    served.unlink()
    served.symlink_to(_live(tmp_path / "b" / "site"))
    for dream_id in snap.dreams:  # checked against A's leaves, fetched from B
        if dream_id == honest:
            with pytest.raises(mcp_server.ReaderError):
                reader.checked(dream_id)
        else:
            assert reader.checked(dream_id).body["title"].startswith("Ada's lesson")
    for call in (lambda: tools.dream_list(limit=100), tools.dream_stats, tools.dream_digest):
        with pytest.raises(mcp_server.ReaderError, match="fork"):
            call()


def test_a_checkout_edited_after_the_first_read_is_refused_not_shown(
    three: tuple[PoolFixture, list[str], Path],
) -> None:
    """T78, T84: --content: the bulk tools cached ada's dreams; then a logged dream's file is
    edited in the checkout (its signature kept). The checkout is built again on the
    next call, which refuses it (the file no longer commits to its leaf) rather
    than show the edit or answer from the cache."""
    tp, ids, _ = three
    tools = mcp_server.Tools(mcp_server.open_reader(None, tp.content), content=tp.content)
    assert len(_shown(tools.dream_list(limit=100).data)) == 3
    path = tp.content / "dreams" / f"{ids[0]}.json"
    obj = json.loads(path.read_bytes())
    obj["title"] = FORGED
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    for call in (lambda: tools.dream_list(limit=100), tools.dream_stats, tools.dream_digest):
        try:
            out = call()
        except DreampoolError:
            continue
        assert FORGED not in json.dumps(out.data, ensure_ascii=False) + out.text


def test_a_plan_made_stale_by_another_apply_does_not_sign_a_fork(
    published: tuple[PoolFixture, Path],
) -> None:
    """T28: Two plans of one log state (two proves of the same checkout, one process: the
    pool lock, poollock, is per build, not per plan), each applied once. The second
    apply writes its leaves after the leaves *it* read, over the first's, rewrites
    history.jsonl from its own, and signs a checkpoint of the same size with another
    root: the pool's key signs a fork (the first checkpoint may be published by
    then). apply must refuse a plan whose log state is no longer the one on disk."""
    tp, _ = published
    submit(tp, signed("bob", title="Bob's dream"))
    signer = parse_private_key(tp.log_key)
    first = _plan(tp, signer, prove_with=signer)
    second = _plan(tp, signer, prove_with=signer)
    log = logbuild.apply(tp.content, first, signer=signer)
    assert log.checkpoint is not None
    signed_first = (tp.content / "log" / "checkpoints" / str(log.tree.size)).read_bytes()
    with pytest.raises(LogError):
        logbuild.apply(tp.content, second, signer=signer)
    size = log.tree.size
    assert (tp.content / "log" / "checkpoints" / str(size)).read_bytes() == signed_first
    assert _kinds(tp) == ["key", "dream", "dream", "key", "dream"]
