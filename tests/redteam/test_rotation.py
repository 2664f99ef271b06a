"""A leaked author key after its author rotated away from it (issue 19, item 4).

docs/contributors.md tells an author whose key may have leaked to rotate to
a new one. The attacker holds the old key. Until this issue the old key kept
signing as its author after the rotation, and could itself "rotate" the name
to a third key (the attacker's), while ``check`` stayed ok throughout.

Each pool here: ``ada`` logs a dream with her first key (``OLD``), then
rotates to ``NEW`` with a dream signed by it; the attacker holds ``OLD``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.content import pool
from builder.errors import InputError, LogError
from builder.formats import dream as dreamfmt
from builder.formats import leaf as leaffmt
from builder.formats import statement
from builder.formats.b64 import b64url_encode
from builder.formats.checkpoint import Checkpoint, sign_checkpoint
from builder.formats.ed25519 import public_key_of
from builder.formats.merkle import MerkleTree, leaf_hash
from builder.formats.note import parse_private_key
from builder.log import logbuild, logstate
from tests.independent_verifier import VerificationError as IndependentError
from tests.independent_verifier import verify_site
from tests.pools import ORIGIN, PoolFixture, make_pool
from tests.redteam import dump, seed_of, signed, submit
from tests.redteam.test_gate import _check, _commit, _git

OLD = seed_of("ada")
NEW = seed_of("ada, second key")
THIRD = seed_of("mallory's key for ada")

Run = Callable[..., Any]


def kid(seed: bytes) -> str:
    return dreamfmt.key_id(public_key_of(seed))


def rotation(old: bytes, new: bytes, author: str = "ada") -> dict[str, Any]:
    """A dreampool.rotate/v1 statement signed by ``old`` (docs/protocol.md §7)."""
    new_pub = public_key_of(new)
    return statement.sign(
        {
            "type": statement.ROTATE,
            "author": author,
            "oldKeyId": kid(old),
            "newKeyId": dreamfmt.key_id(new_pub),
            "newPublicKey": b64url_encode(new_pub),
        },
        old,
    )


def submit_files(tp: PoolFixture, *objs: dict[str, Any]) -> pool.SubmitResult:
    """``pool.submit`` of statements and dreams, as files beside the pool."""
    files = []
    for obj in objs:
        path = tp.content.parent / f"in-{hashlib.sha256(dump(obj)).hexdigest()[:16]}.json"
        path.write_bytes(dump(obj))
        files.append(path)
    return pool.submit(tp.content, files)


def place(tp: PoolFixture, obj: dict[str, Any]) -> str:
    """A dream file written straight into content/dreams, as a pull request can."""
    d = dreamfmt.parse(dump(obj), "x")
    (tp.content / "dreams" / f"{d.id}.json").write_bytes(dump(obj))
    return d.id


def signer(tp: PoolFixture) -> Any:
    return parse_private_key(tp.log_key)


def rotated_pool(root: Path, *, build: bool = True) -> tuple[PoolFixture, list[str]]:
    """``ada`` logged one dream with OLD, then rotated to NEW (a dream by NEW
    with it); with ``build``, both builds ran, so the rotation is logged."""
    tp = make_pool(root)
    first = submit(tp, signed("ada", title="Before the leak"))
    if build:
        buildmod.build(tp.content, root / "site", signer=signer(tp))
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="With my new key"))
    if build:
        buildmod.build(tp.content, root / "site", signer=signer(tp))
    for path in root.glob("in-*.json"):
        path.unlink()
    return tp, first


def by_old_key(title: str = "Send your tokens to mallory") -> dict[str, Any]:
    return signed("ada", seed=OLD, title=title)


def logged_ids(tp: PoolFixture) -> set[str]:
    return set(logbuild.logged_dreams(logstate.load(tp.content).leaves))


def _says_retired(text: str, file: str) -> None:
    """The refusal names the file, the retired key, the rotation that retired
    it and what to do."""
    assert file in text, text
    assert kid(OLD) in text and "retired" in text, text
    assert kid(NEW) in text and f"rotations/{kid(NEW)[7:]}.json" in text, text
    assert "sign" in text and "current key" in text, text


def test_a_retired_key_cannot_submit_as_its_author(tmp_path: Path) -> None:
    """T61: after ada's logged rotation, `submit` took a dream the old
    key signed as ada. Now it is refused, naming the rotation."""
    tp, _ = rotated_pool(tmp_path)
    before = sorted((tp.content / "dreams").iterdir())
    with pytest.raises(InputError) as caught:
        submit_files(tp, by_old_key())
    _says_retired("".join(map(str, caught.value.problems)), "in-")
    assert sorted((tp.content / "dreams").iterdir()) == before


def test_check_and_build_refuse_a_dream_of_a_retired_key(tmp_path: Path, run: Run) -> None:
    """T61: the old key's dream put in content/dreams (as a pull request
    does) passed `check` and was logged by `build` as ada's."""
    tp, _ = rotated_pool(tmp_path)
    bad = place(tp, by_old_key())
    result = run("check", "--content", tp.content)
    assert result.code == 1, result
    _says_retired(result.err, f"dreams/{bad}.json")
    report = buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    assert bad not in report.admitted and bad not in logged_ids(tp)
    # The log had retired the key before this build: refused, set aside (named
    # every build, failing none: T56 review).
    _says_retired("\n".join(map(str, report.set_aside)), f"dreams/{bad}.json")
    assert not (tmp_path / "site" / "dreams" / bad).exists()


def _git_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PoolFixture:
    tp, _ = rotated_pool(tmp_path)
    (tmp_path / ".gitignore").write_text("/site\n/.site.builds/\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    _commit(tmp_path, "base")
    monkeypatch.chdir(tmp_path)
    return tp


def test_check_base_refuses_a_dream_of_a_retired_key(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T61: a pull request adding a dream the retired key signed passed
    `check --base`."""
    tp = _git_pool(tmp_path, monkeypatch)
    bad = place(tp, by_old_key())
    _commit(tmp_path, "pull request")
    result = _check(run)
    assert result.code == 1, result
    _says_retired(result.err, f"content/dreams/{bad}.json")


def _third_key_files(tp: PoolFixture) -> None:
    """What `submit` would write for a rotation OLD → THIRD: the key file, the
    statement and a dream by THIRD, written by hand (submit refuses them)."""
    entry = pool.KeyEntry(kid(THIRD), "ada", public_key_of(THIRD), "guest", "2026-01-01", kid(OLD))
    key_file = tp.content / "keys" / f"{kid(THIRD)[7:]}.yaml"
    key_file.write_bytes(pool.format_key_entry(entry))
    (tp.content / "rotations").mkdir(exist_ok=True)
    stmt = tp.content / "rotations" / f"{kid(THIRD)[7:]}.json"
    stmt.write_bytes(dump(rotation(OLD, THIRD)))
    place(tp, signed("ada", seed=THIRD, title="Ada's name is mine now"))


def test_a_retired_key_cannot_move_the_name_again(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T61: the retired key signed a second rotation, ada → the
    attacker's key: `submit`, `check`, `check --base` and `build` took it,
    and the attacker's key signed as ada from then on. Only the current key
    may rotate the name: the chain of keys for a name is linear."""
    tp = _git_pool(tmp_path, monkeypatch)
    with pytest.raises(InputError) as caught:
        submit_files(
            tp, rotation(OLD, THIRD), signed("ada", seed=THIRD, title="Ada's name is mine now")
        )
    text = "".join(map(str, caught.value.problems))
    assert kid(OLD) in text and "retired" in text and kid(NEW) in text, text
    _third_key_files(tp)
    _commit(tmp_path, "pull request")
    gate = _check(run)
    assert gate.code == 1, gate
    assert f"content/keys/{kid(THIRD)[7:]}.yaml" in gate.err and "retired" in gate.err, gate
    whole = run("check", "--content", "content")
    assert whole.code == 1 and "retired" in whole.err, whole
    # The build keeps the rotation the log holds (NEW) and sets the other
    # aside with what it signed, rather than refusing the whole pool (T56 review).
    report = buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    aside = "\n".join(map(str, report.set_aside))
    assert f"keys/{kid(THIRD)[7:]}.yaml" in aside and "retired" in aside, aside
    assert not report.admitted and not report.refused, report
    assert kid(THIRD) not in logbuild.logged_keys(tp.content)


def test_an_old_key_dream_that_comes_with_the_rotation_is_refused(tmp_path: Path, run: Run) -> None:
    """T61: the rotation says the old key may have leaked, so a dream it
    signed that comes in the same submission (or pull request, or build) as
    the rotation is refused, wherever it sorts, and nothing is written."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", title="Before the leak"))
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    before = sorted(p.name for p in (tp.content / "dreams").iterdir())
    with pytest.raises(InputError) as caught:
        submit_files(tp, by_old_key(), rotation(OLD, NEW), signed("ada", seed=NEW, title="New key"))
    _says_retired("".join(map(str, caught.value.problems)), "in-")
    assert sorted(p.name for p in (tp.content / "dreams").iterdir()) == before
    # Written by hand beside the rotation: check and the build refuse it.
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="New key"))
    bad = place(tp, by_old_key())
    result = run("check", "--content", tp.content)
    assert result.code == 1, result
    _says_retired(result.err, f"dreams/{bad}.json")
    report = buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    assert len(report.admitted) == 1 and bad not in logged_ids(tp)


def test_an_unlogged_dream_of_the_old_key_is_refused_once_the_rotation_lands(
    tmp_path: Path,
) -> None:
    """T61: an old-key dream that was merged before the rotation but not
    yet logged is refused by the build that logs the rotation: only the
    log's order counts (a key file's `added` date, like anything an author
    writes, proves nothing about when a dream was signed)."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", title="Before the leak"))
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    (pending,) = submit(tp, by_old_key("Written before the rotation, it says"))
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="New key"))
    report = buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    assert pending not in report.admitted and pending not in logged_ids(tp)
    _says_retired("\n".join(map(str, report.refused)), f"dreams/{pending}.json")


def test_two_rotations_from_one_key_are_refused(tmp_path: Path, run: Run) -> None:
    """T61: one key rotated twice (to the author's new key and to the
    attacker's) forks the name; the second is refused, in one submission
    or in two before any build."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", title="Before the leak"))
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    with pytest.raises(InputError) as caught:
        submit_files(
            tp,
            rotation(OLD, NEW),
            signed("ada", seed=NEW, title="New key"),
            rotation(OLD, THIRD),
            signed("ada", seed=THIRD, title="Third key"),
        )
    assert kid(OLD) in "".join(map(str, caught.value.problems))
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="New key"))
    with pytest.raises(InputError, match="retired"):
        submit_files(tp, rotation(OLD, THIRD), signed("ada", seed=THIRD, title="Third key"))
    _third_key_files(tp)  # by hand: check names the fork
    result = run("check", "--content", tp.content)
    assert result.code == 1 and "retired" in result.err, result


def test_a_rotation_to_a_key_the_pool_knows_is_refused(tmp_path: Path) -> None:
    """T61: a rotation to a key the pool already holds (another author's,
    or the author's own retired key, which would bring it back) was taken
    by `submit` and silently dropped: exit 0, nothing written. It is refused,
    saying why; so is a rotation that comes without a dream by its new key."""
    tp, _ = rotated_pool(tmp_path)
    submit(tp, signed("bob", title="Bob's own"))
    bob = seed_of("bob")
    for target, holder in ((bob, "'bob'"), (OLD, "retired")):
        with pytest.raises(InputError) as caught:
            submit_files(tp, rotation(NEW, target))
        text = "".join(map(str, caught.value.problems))
        assert "/newKeyId" in text and kid(target) in text and holder in text, text
    with pytest.raises(InputError) as caught:
        submit_files(tp, rotation(NEW, THIRD))
    assert "dream signed by the new key" in "".join(map(str, caught.value.problems))


def test_logged_dreams_of_the_retired_key_stay(tmp_path: Path, run: Run) -> None:
    """T61: what the old key signed before the rotation was logged stays
    (the log is append-only); the site verifies."""
    tp, (first,) = rotated_pool(tmp_path)
    assert run("check", "--content", tp.content).code == 0
    assert first in logged_ids(tp)
    assert (tmp_path / "site" / "dreams" / first / "record.json").exists()
    verify_site(tmp_path / "site", tp.vkey)


# --- the rule in the log (docs/protocol.md §3) ---------------------------------


def _log_by_hand(tp: PoolFixture, obj: dict[str, Any]) -> str:
    """What a pool built before this issue did: log a dream the retired key
    signed after the rotation's key leaf, salt and all, and sign it."""
    dream_id = place(tp, obj)
    salt = b64url_encode(hashlib.sha256(dream_id.encode()).digest())
    (tp.content / "dreams" / f"{dream_id}.salt").write_text(salt + "\n")
    state = logstate.load(tp.content)
    leaf = leaffmt.encode(leaffmt.DreamLeaf(dream_id, logbuild.commitment(obj, salt)))
    logstate.append(tp.content, state, [leaf])
    tree = MerkleTree.from_leaf_hashes(leaf_hash(x) for x in state.leaves)
    note = sign_checkpoint(Checkpoint(ORIGIN, tree.size, tree.root()), signer(tp))
    logstate.record_checkpoint(tp.content, state, tree.size, note, "2026-01-02T00:00:00Z")
    return dream_id


def test_a_site_verifier_refuses_a_dream_its_retired_key_signed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T62: a log whose dream leaf, after the key leaf of ada's new key,
    holds a dream her old key signed: the independent site verifier took it.
    It now applies docs/protocol.md §3's rule (a later key leaf of the same
    author retires every earlier key from that leaf on)."""
    tp, _ = rotated_pool(tmp_path)
    bad = _log_by_hand(tp, by_old_key())
    # The pool's own replay refuses such a log (next test); publish it anyway.
    monkeypatch.setattr(logbuild, "_check_key_rules", lambda *a, **k: None)
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    assert (tmp_path / "site" / "dreams" / bad / "record.json").exists()
    with pytest.raises(IndependentError) as caught:
        verify_site(tmp_path / "site", tp.vkey)
    text = str(caught.value)
    assert f"dreams/{bad}/record.json" in text and kid(OLD) in text and "retired" in text, text


def test_the_pool_names_a_logged_dream_of_a_retired_key_and_erasing_it_clears_it(
    tmp_path: Path, run: Run
) -> None:
    """T62: `check` and `build` replayed such a log without a word; now
    they name the leaf and say to erase the dream, after which the site
    verifies (an erased dream has no record to judge)."""
    tp, _ = rotated_pool(tmp_path)
    bad = _log_by_hand(tp, by_old_key())
    result = run("check", "--content", tp.content)
    assert result.code == 1, result
    assert bad in result.err and kid(OLD) in result.err and "retired" in result.err, result
    assert f"dreampool erase {bad}" in result.err, result
    with pytest.raises(LogError, match="retired"):
        buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    assert run("erase", bad, "--reason", "abuse", "--content", tp.content).code == 0
    report = buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    assert report.erased == [bad]
    assert run("check", "--content", tp.content).code == 0
    verify_site(tmp_path / "site", tp.vkey)
