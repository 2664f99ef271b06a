"""Review of "a key rotation retires the old key" (commits 9ef8556..9ac16bf).

Each test is a finding: it fails against the code as reviewed. The setting
is tests/redteam/test_rotation.py's: ``ada`` logged a dream with her first
key ``OLD``, then rotated to ``NEW``; the attacker holds ``OLD``, or sends
pull requests. Docstrings name T61, the threat they extend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.content import pool
from builder.errors import InputError
from builder.formats import statement
from builder.formats.ed25519 import public_key_of
from builder.log import erase, logbuild
from tests.pools import PoolFixture, make_pool
from tests.redteam import dump, seed_of, signed, submit
from tests.redteam.test_gate import _check, _commit, _git
from tests.redteam.test_rotation import (
    NEW,
    OLD,
    THIRD,
    Run,
    by_old_key,
    kid,
    logged_ids,
    place,
    rotated_pool,
    rotation,
    signer,
    submit_files,
)


def _clean_inputs(root: Path) -> None:
    for path in root.glob("in-*.json"):
        path.unlink()


# --- the gate lets a pool into a state that every later publish fails on ----------


def test_a_rotation_pull_request_that_passes_the_gate_leaves_main_checkable(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T61: main holds a dream of ada's OLD key that was merged but is not
    logged yet (the publish run is queued, or failed for another reason):
    `check` on main is ok. Ada's rotation pull request (what `dreampool
    submit` writes: key, statement, a dream by NEW) passes `check --base`,
    which looks only at what the pull request adds. Once merged, `check` on
    main fails and every `dreampool build` reports the old dream as refused
    and exits 1 (publish.yml then skips the upload and deploy). A pull
    request that passes the gate must leave main passing `check`; the gate
    judged the rotation alone, not what it retires."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", seed=OLD, title="Before the leak"))
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    submit(tp, by_old_key("Merged, waiting for the next publish"))
    _clean_inputs(tmp_path)
    (tmp_path / ".gitignore").write_text("/site\n/.site.builds/\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    _commit(tmp_path, "base")
    monkeypatch.chdir(tmp_path)
    assert run("check", "--content", "content").code == 0
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="With my new key"))
    _clean_inputs(tmp_path)
    _commit(tmp_path, "pull request: rotate")
    gate = _check(run)
    whole = run("check", "--content", "content")
    assert gate.code != 0 or whole.code == 0, (gate, whole)


MALLORY_1 = seed_of("mallory")
MALLORY_2 = seed_of("mallory, second key")


def _main_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, author: str, seed: bytes
) -> PoolFixture:
    """A pool in git whose main branch logged one dream of ``author``'s ``seed``."""
    tp = make_pool(tmp_path)
    submit(tp, signed(author, seed=seed, title="Before the leak"))
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    _clean_inputs(tmp_path)
    (tmp_path / ".gitignore").write_text("/site\n/.site.builds/\n/log.key\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    _commit(tmp_path, "base")
    monkeypatch.chdir(tmp_path)
    return tp


@pytest.mark.parametrize(
    ("author", "old", "new"),
    [("ada", OLD, NEW), ("mallory", MALLORY_1, MALLORY_2)],
    ids=["thief-with-adas-leaked-key", "any-contributor-with-own-keys"],
)
def test_a_dream_merged_on_a_stale_green_check_does_not_wedge_publishing(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch, author: str, old: bytes, new: bytes
) -> None:
    """T61: a pull request adds a dream signed by ``old``; its `check --base`
    runs against main before a rotation from ``old`` lands, so it is green,
    and GitHub does not run it again when main moves (docs/operators.md
    step 7 does not require branches to be up to date). The rotation merges
    (ada's own, when the thief holds her leaked key; or, with no leak at
    all, any contributor's second pull request rotating their own key),
    then the green pull request. The build rightly refuses the dream, but
    the file stays in content/dreams and `dreampool build` exits 1 on every
    run from then on, so publish.yml skips its upload and deploy steps: an
    honest contributor's dream merged next is logged but never published,
    until a maintainer finds and deletes the file by hand. Since the
    rotation, a gate-passing pull request can stop the site."""
    tp = _main_with(tmp_path, monkeypatch, author, old)
    _git(tmp_path, "switch", "-q", "-c", "dream")
    place(tp, signed(author, seed=old, title="Send your tokens to mallory"))
    _commit(tmp_path, "pull request: a dream")
    assert _check(run).code == 0
    _git(tmp_path, "switch", "-q", "main")
    submit_files(tp, rotation(old, new, author), signed(author, seed=new, title="My new key"))
    _clean_inputs(tmp_path)
    _commit(tmp_path, "pull request: rotate")
    assert _check(run).code == 0
    _git(tmp_path, "merge", "-q", "--no-edit", "dream")
    key = ("--log-key", _key_file(tp))
    first = run("build", "--content", "content", "--out", "site", *key)
    assert first.code == 1 and "retired" in first.err  # refused, as it should be
    _commit(tmp_path, "log state")  # publish.yml commits it even so
    # An honest contributor's pull request merges next: its publish run.
    submit(tp, signed("carol", title="An honest dream"))
    _clean_inputs(tmp_path)
    _commit(tmp_path, "pull request: carol")
    assert _check(run).code == 0
    later = run("build", "--content", "content", "--out", "site", *key)
    assert later.code == 0, later


def test_a_fork_merged_on_a_stale_green_check_does_not_wedge_every_pull_request(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T61: the thief holding OLD sees ada's rotation pull request and opens
    his own, OLD → THIRD (key file, statement, a dream by THIRD). Each is
    checked against main without the other: both green. Ada's merges; the
    thief's (stale green, or merged by a maintainer who took it for ada's
    retry) merges after it. From then on load_keys reports the fork for
    the whole directory, so `dreampool build` refuses the whole pool
    (nothing logged or deployed) and `check --base`, which reports every
    key-directory problem, fails every honest pull request, until a
    maintainer removes the right one of two ada key files by hand. One
    stale pull request turns a leaked key into a stop of the whole pool;
    the gate should blame only what a pull request adds, and the build
    should keep the rotation the log already holds."""
    tp = _main_with(tmp_path, monkeypatch, "ada", OLD)
    _git(tmp_path, "switch", "-q", "-c", "thief")
    submit_files(tp, rotation(OLD, THIRD), signed("ada", seed=THIRD, title="Ada's name is mine"))
    _clean_inputs(tmp_path)
    _commit(tmp_path, "pull request: rotate ada to THIRD")
    assert _check(run).code == 0
    _git(tmp_path, "switch", "-q", "main")
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="With my new key"))
    _clean_inputs(tmp_path)
    _commit(tmp_path, "pull request: rotate ada to NEW")
    assert _check(run).code == 0
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))  # publish: NEW logged
    _commit(tmp_path, "log state")
    _git(tmp_path, "merge", "-q", "--no-edit", "thief")
    # An honest contributor's pull request on top (`dreampool submit` refuses
    # to run on the broken directory, so carol writes what it would).
    carol = signed("carol", title="An honest dream")
    with pytest.raises(InputError, match="also rotated"):
        submit(tp, carol)
    _clean_inputs(tmp_path)
    carol_seed = seed_of("carol")
    entry = pool.KeyEntry(
        kid(carol_seed), "carol", public_key_of(carol_seed), "guest", "2026-01-01"
    )
    (tp.content / "keys" / f"{kid(carol_seed)[7:]}.yaml").write_bytes(pool.format_key_entry(entry))
    place(tp, carol)
    _commit(tmp_path, "pull request: carol")
    gate = _check(run)
    assert gate.code == 0, gate


def _key_file(tp: PoolFixture) -> Path:
    path = tp.content.parent / "log.key"
    path.write_text(tp.log_key + "\n")
    return path


def test_the_gate_refuses_a_rotation_without_a_dream_by_its_new_key(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T61: docs/protocol.md §7 says a rotation statement is stored with the
    first dream its new key signs, whose key leaf then retires the old key
    in the log too, and `submit` refuses a rotation without such a dream.
    `check --base` takes a pull request that adds only the new key's file
    and the statement: the pool then retires OLD but the log never shows
    it (no key leaf of NEW), so a site verifier cannot apply §3's rule."""
    tp, _ = rotated_pool(tmp_path)
    third = bytes(range(32))
    with pytest.raises(InputError, match="dream signed by the new key"):
        submit_files(tp, rotation(NEW, third))
    _clean_inputs(tmp_path)
    (tmp_path / ".gitignore").write_text("/site\n/.site.builds/\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    _commit(tmp_path, "base")
    monkeypatch.chdir(tmp_path)
    entry = pool.KeyEntry(kid(third), "ada", public_key_of(third), "guest", "2026-01-01", kid(NEW))
    (tp.content / "keys" / f"{kid(third)[7:]}.yaml").write_bytes(pool.format_key_entry(entry))
    (tp.content / "rotations" / f"{kid(third)[7:]}.json").write_bytes(dump(rotation(NEW, third)))
    _commit(tmp_path, "pull request: a bare rotation")
    gate = _check(run)
    assert gate.code == 1 and "dream" in gate.err, gate


# --- what else a retired key still signs -------------------------------------------


def test_erase_refuses_an_erasure_request_signed_by_a_retired_key(tmp_path: Path) -> None:
    """T61: after ada rotated, the thief signs a `dreampool.erase/v1`
    request with OLD for ada's logged dream and mails it to the
    maintainers. `dreampool erase ID --reason author-request --request
    FILE` checks only that the dream's key signed it, takes it, deletes the
    dream and stores the thief's request as the record proving the author
    asked. The docs say the pool refuses anything a retired key signs from
    the rotation on (README, docs/protocol.md §7)."""
    tp, (first,) = rotated_pool(tmp_path)
    request = tmp_path / "erase-request.json"
    request.write_bytes(
        dump(
            statement.sign({"type": statement.ERASE, "id": first, "reason": "author-request"}, OLD)
        )
    )
    with pytest.raises(InputError, match="retired"):
        erase.erase(tp.content, first, "author-request", request)
    assert (tp.content / "dreams" / f"{first}.json").exists()


# --- the log stage -----------------------------------------------------------------


def test_a_killed_builds_old_key_leaf_still_signs_after_the_rotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T61: a build appends ada's pending OLD dream (leaf before any key leaf
    of NEW) and is killed before it signs; the unsigned leaves are committed
    (publish.yml commits the log state after a failed build step). Ada's
    rotation then merges. The next build refuses the whole log: the unsigned
    tail's dream leaf now counts as 'not a leaf a build writes', because the
    directory's retirement is applied to a leaf the log already holds,
    before the rotation's key leaf. In log order (the only order that
    counts, §7) the dream came first, so the tail is valid and should be
    signed as it is; instead every build and `check` stop."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", seed=OLD, title="Before the leak"))
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    (pending,) = submit(tp, by_old_key("Written before the rotation"))

    class Killed(Exception):
        pass

    def killed(*args: Any, **kwargs: Any) -> Any:
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(logbuild, "sign_checkpoint", killed)
        with pytest.raises(Killed):
            buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    assert pending in logged_ids(tp)  # appended, not signed
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="With my new key"))
    report = buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    assert pending in report.admitted or pending in logged_ids(tp)


def test_submit_refuses_a_rotation_whose_new_key_signs_as_another_author(
    tmp_path: Path, run: Run
) -> None:
    """T61: `submit rotate.json dream.json` where the statement moves 'ada'
    (OLD) to NEW but the dream NEW signs says author 'bob', a name another
    key holds. check_key_rules waves the dream through because its key is
    a rotation's target (whatever name the rotation is for), and submit
    writes NEW's key file as bob's, rotatedFrom OLD, with the statement.
    The directory it wrote is broken (`check` names the statement's
    author) and, worse, now says OLD was retired by 'bob'. `submit` is all
    or nothing and should refuse it before writing."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", seed=OLD, title="Ada's"), signed("bob", title="Bob's"))
    keys_before = sorted(p.name for p in (tp.content / "keys").iterdir())
    with pytest.raises(InputError):
        submit_files(tp, rotation(OLD, NEW), signed("bob", seed=NEW, title="I am bob now"))
    assert sorted(p.name for p in (tp.content / "keys").iterdir()) == keys_before
    assert run("check", "--content", tp.content).code == 0


def test_the_build_keeps_the_rotation_the_log_holds_and_sets_the_fork_aside(
    tmp_path: Path, run: Run
) -> None:
    """T61: the fork above, at the build: the rotation whose new key the log
    holds (NEW) stays, the other (THIRD) and the dream it signed are set
    aside, named with what to remove, and the rest of the pool is logged and
    deployed: the build does not refuse the whole pool or fail the publish."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", seed=OLD, title="Before the leak"))
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="With my new key"))
    buildmod.build(tp.content, tmp_path / "site", signer=signer(tp))  # NEW logged
    (carol,) = submit(tp, signed("carol", title="An honest dream"))  # merged, not logged
    third = signed("ada", seed=THIRD, title="Ada's name is mine")
    entry = pool.KeyEntry(kid(THIRD), "ada", public_key_of(THIRD), "guest", "2026-01-01", kid(OLD))
    (tp.content / "keys" / f"{kid(THIRD)[7:]}.yaml").write_bytes(pool.format_key_entry(entry))
    (tp.content / "rotations" / f"{kid(THIRD)[7:]}.json").write_bytes(dump(rotation(OLD, THIRD)))
    bad = place(tp, third)
    _clean_inputs(tmp_path)
    result = run(
        "build",
        "--content",
        tp.content,
        "--out",
        tmp_path / "site",
        "--log-key",
        _key_file(tp),
    )
    assert result.code == 0, result.err
    assert carol in logged_ids(tp) and bad not in logged_ids(tp)
    assert f"keys/{kid(THIRD)[7:]}.yaml" in result.err and f"dreams/{bad}.json" in result.err
    assert "set aside" in result.err and kid(NEW) in result.err, result


def test_the_current_key_signs_the_erasure_request_of_a_retired_keys_dream(
    tmp_path: Path,
) -> None:
    """T61: after the rotation, ada asks to erase a dream her old key signed:
    her current key signs the request (the retired one may not)."""
    tp, (first,) = rotated_pool(tmp_path)
    request = tmp_path / "erase-request.json"
    obj = {"type": statement.ERASE, "id": first, "reason": "author-request"}
    request.write_bytes(dump(statement.sign(obj, NEW)))
    erase.erase(tp.content, first, "author-request", request)
    assert not (tp.content / "dreams" / f"{first}.json").exists()
