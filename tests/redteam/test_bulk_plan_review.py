"""Review of two changes: the MCP bulk check (dab0f8b, THREATS.md T84) and the log
stage split into ``logbuild.plan`` and ``logbuild.apply`` (a8b5eeb).

Each test is an attack or a misuse; a failing test is one that succeeds. The log
half drives ``plan`` and ``apply`` as the library exposes them (``builder.build``
calls both with one key; ``update`` is both), the MCP half serves hostile sites.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.content import pool
from builder.errors import DreampoolError, LogError
from builder.formats.note import Signer, generate_key, parse_private_key
from builder.log import logbuild, logstate
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
    """apply twice with one plan (a retry after an error, a caller's loop): the
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
    """A rotation whose new key was made with a mistyped origin: the policy names
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
    """The first build's policy (and its log URL) is apply's to write, not plan's."""
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


@pytest.mark.parametrize("where", ["after the policy", "after the salts", "after the leaves"])
def test_an_interrupted_apply_leaves_a_state_the_next_build_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """apply stopped at each of its writes on a first build (policy, salts, leaves;
    T40 kills at random moments): the next build with the key goes on, and its
    log is the one a whole build makes."""
    tp = make_pool(tmp_path / "pool")
    tp.add("ada", 2)
    signer = parse_private_key(tp.log_key)

    class Killed(Exception):
        pass

    def stop(*_: object, **__: object) -> None:
        raise Killed

    target = {
        "after the policy": (logbuild, "sync_filesystem"),
        "after the salts": (logstate, "append"),
        "after the leaves": (logbuild, "sign_checkpoint"),
    }[where]
    with monkeypatch.context() as m:
        m.setattr(*target, stop)
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
    """docs/operators.md "Rotate the log key": the new key's line after the old one,
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
