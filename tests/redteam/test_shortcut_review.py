"""Review of the two shortcuts: content keys for the build store (T80, T81) and
the commitment trust for logged dreams (T78, T79).

Each test is an attack by a hostile pull request (any file under content/,
anything force-added in the checkout) on a build that holds the log key, as
publish does. A failing test is an attack that succeeds.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.content import filekeys, gitrepo
from builder.errors import DreampoolError
from builder.formats import dream as dreamfmt
from builder.formats import leaf as leaffmt
from builder.formats import merkle
from builder.formats.b64 import b64url_encode
from builder.formats.checkpoint import Checkpoint, sign_checkpoint
from builder.formats.ed25519 import public_key_of
from builder.formats.note import generate_key, parse_private_key
from builder.log import logbuild
from tests.gitrun import git
from tests.pools import ORIGIN, PoolFixture, make_pool
from tests.redteam import build, dump, published_with_id_keyword, seed_of, signed, submit, tree

FORGED = "Transfer the funds to the new account"


def _site_text(out: Path) -> str:
    """Every file of a built site as one string (through the ``site`` link)."""
    root = out.resolve()
    return "\n".join(
        p.read_bytes().decode("utf-8", "replace") for p in sorted(root.rglob("*")) if p.is_file()
    )


@pytest.fixture
def published(tmp_path: Path) -> tuple[PoolFixture, list[str], Path]:
    """A pool with three of ada's dreams, logged and published with the log key."""
    tp = make_pool(tmp_path / "pool")
    ids = submit(tp, *(signed("ada", title=f"Ada's dream {n}") for n in range(3)))
    site = tmp_path / "pool" / "site"
    build(tp, site)
    return tp, ids, site


# --- T78: a second log key in the policy ------------------------------------


def _forged_dream(author: str = "ada") -> dict[str, object]:
    """A dream under ``author``'s real public key whose signature is garbage:
    its author never signed it, and no signature check would pass it."""
    obj = signed(author, title=FORGED)
    sig = dict(obj["sig"])  # type: ignore[arg-type]
    sig["value"] = b64url_encode(bytes(range(1, 33)) + bytes(32))  # 64 bytes, S = 0
    obj["sig"] = sig
    return obj


def _append_forged_leaf_under_a_second_key(tp: PoolFixture) -> str:
    """What the pull request adds: a forged dream and a salt of its own, one
    dream leaf committing to them, a checkpoint over the grown tree signed by
    the forger's own log key, its history line, and that key as a second
    ``log`` line of the policy (as a rotation lists old and new key). Nothing
    that was signed before is touched, and the pool's own key stays named."""
    obj = _forged_dream()
    dream_id = dreamfmt.dream_id(dreamfmt.b64url_decode(obj["sig"]["value"]))  # type: ignore[index]
    salt = logbuild.new_salt(dream_id)
    dreams = tp.content / "dreams"
    (dreams / f"{dream_id}.json").write_bytes(dump(obj))
    (dreams / f"{dream_id}.salt").write_text(salt + "\n")
    log = tp.content / "log"
    shard = log / "leaves" / "000000.jsonl"
    leaf = leaffmt.encode(leaffmt.DreamLeaf(dream_id, dreamfmt.commitment(obj, salt)))
    leaves = [*shard.read_bytes().splitlines(), leaf]
    shard.write_bytes(b"".join(x + b"\n" for x in leaves))
    skey, vkey = generate_key(ORIGIN)
    policy = (log / "policy").read_text()
    (log / "policy").write_text(policy + f"log {vkey}\n")
    t = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(x) for x in leaves)
    note = sign_checkpoint(Checkpoint(ORIGIN, t.size, t.root()), parse_private_key(skey))
    (log / "checkpoints" / str(t.size)).write_bytes(note)
    with (log / "history.jsonl").open("a") as f:
        f.write(json.dumps({"size": t.size, "time": "2026-12-01T00:00:00Z"}) + "\n")
    return dream_id


def test_a_second_log_key_in_the_policy_lets_a_forged_dream_in(
    published: tuple[PoolFixture, list[str], Path], tmp_path: Path
) -> None:
    """T78: the pull request appends a leaf for a dream ada never signed (her
    public key, a garbage signature) and a checkpoint signed by its own log
    key, which it adds to content/log/policy beside the pool's (the policy
    may list several log keys of the origin, for a rotation). The build with
    the pool's log key only checks that the policy *names* its key, proves
    each checkpoint with whichever listed key signed it, and so takes the
    forged dream by its commitment: no signature check, no redaction review.
    The site shows text under ada's name that she never signed."""
    tp, _, _ = published
    forged_id = _append_forged_leaf_under_a_second_key(tp)
    out = tmp_path / "publish" / "site"
    out.parent.mkdir()
    try:
        report = build(tp, out)
    except DreampoolError:
        return  # refused: the defence holds
    shown = out.exists() and FORGED in _site_text(out)
    assert not shown, (
        f"forged dream {forged_id} published under ada's name "
        f"(committed={report.committed}, verified={report.verified})"
    )


def test_the_pool_log_key_then_signs_over_the_forged_leaf(
    published: tuple[PoolFixture, list[str], Path], tmp_path: Path
) -> None:
    """T78: the same pull request also brings a genuine new dream, so the
    publish build signs a checkpoint with the pool's own log key: that
    signature now covers the forged leaf, and any verifier that pins the
    pool's key alone accepts the forged dream's leaf as logged."""
    tp, _, _ = published
    forged_id = _append_forged_leaf_under_a_second_key(tp)
    [new] = submit(tp, signed("bob", title="Bob's honest dream"))
    out = tmp_path / "publish" / "site"
    out.parent.mkdir()
    try:
        report = build(tp, out)
    except DreampoolError:
        return
    leaves = (tp.content / "log" / "leaves" / "000000.jsonl").read_text()
    assert not (report.signed and forged_id in leaves and new in report.admitted), (
        "the pool's log key signed a checkpoint over a leaf of a dream nobody signed"
    )


# --- T80: git vouches for a file an attribute converted on checkout ----------


# The pull request's .gitattributes, committed as UTF-8 (with plumbing): on
# checkout git reads it from the index, so `ident` expands $Id$ in the dream
# files; but it re-encodes the work-tree copy of itself to UTF-16, which git
# cannot parse when it reads attributes from the work tree, as `check-attr`
# (and the racy-git content check) do afterwards.
_ATTRIBUTES = b".gitattributes working-tree-encoding=UTF-16LE-BOM\ncontent/dreams/*.json ident\n"


def _pr_with_self_hiding_attributes(tmp_path: Path) -> tuple[PoolFixture, Path, str]:
    """A pool published (store beside it) with a dream whose text holds
    ``$Id$``; then a pull request that adds only the .gitattributes above."""
    origin = tmp_path / "origin"
    tp, dream_id = published_with_id_keyword(origin)
    blob = git(origin, "hash-object", "-w", "--no-filters", "--stdin", stdin=_ATTRIBUTES).strip()
    git(origin, "update-index", "--add", "--cacheinfo", f"100644,{blob},.gitattributes")
    (origin / "zz-last").write_text("the last path a checkout writes\n")
    git(origin, "add", "zz-last")
    git(origin, "commit", "-q", "-m", "a pull request: attributes")
    return tp, origin, dream_id


def _slow_clone(tmp_path: Path, origin: Path) -> Path:
    """A fresh clone whose checkout takes over a second, as a large pool's
    does (simulated by a smudge filter on the last path, configured for this
    clone command only): the files written first are then not racily clean,
    so git trusts their stat. The derived state is restored from origin, as
    actions/cache does."""
    attrs = tmp_path / "slow-attributes"
    attrs.write_text("zz-last filter=slow\n")
    clone = tmp_path / "clone"
    git(
        tmp_path,
        "-c", f"core.attributesFile={attrs}",
        "-c", "filter.slow.smudge=sleep 1.5; cat",
        "-c", "filter.slow.clean=cat",
        "clone", "-q", str(origin), str(clone),
    )  # fmt: skip
    shutil.copytree(origin / ".site.builds", clone / ".site.builds", symlinks=True)
    os.symlink(os.readlink(origin / "site"), clone / "site")
    return clone


def test_git_vouches_for_a_dream_file_its_own_attributes_converted(tmp_path: Path) -> None:
    """T80: clean_blobs must name a blob id only for a file that holds that
    blob's bytes ("no converting attribute"). A pull request's .gitattributes
    that converts the dream files on checkout and hides itself from
    `check-attr` (it re-encodes its own work-tree copy) makes git vouch for a
    dream file whose bytes are not the blob's."""
    _, origin, dream_id = _pr_with_self_hiding_attributes(tmp_path)
    clone = _slow_clone(tmp_path, origin)
    content = clone / "content"
    data = (content / "dreams" / f"{dream_id}.json").read_bytes()
    assert b"$Id: " in data  # converted on checkout
    vouched = gitrepo.clean_blobs(content) or {}
    wrong = {
        path: blob
        for path, blob in vouched.items()
        if filekeys.git_blob_id((content / path).read_bytes()) != blob
    }
    assert not wrong, f"git vouches for converted files: {sorted(wrong)}"


def test_a_converted_dream_file_is_taken_from_the_store_by_its_blob(tmp_path: Path) -> None:
    """T80: the same pull request, then the publish build with the restored
    store: the dream file no longer holds the bytes the store's entry was
    computed from (a cold build reads it, finds it commits to nothing and
    refuses the pool), yet the warm build takes the stale entry by the blob
    id git named and publishes as if nothing changed."""
    tp, origin, dream_id = _pr_with_self_hiding_attributes(tmp_path)
    clone = _slow_clone(tmp_path, origin)
    content = clone / "content"
    signer = parse_private_key(tp.log_key)
    cold = tmp_path / "cold" / "site"
    cold.parent.mkdir()
    with pytest.raises(DreampoolError):
        buildmod.build(content, cold, signer=signer)
    try:
        report = buildmod.build(content, clone / "site", signer=signer)
    except DreampoolError:
        return  # the warm build reads the file too: the defence holds
    raise AssertionError(
        f"the warm build used the store's entry for {dream_id}.json, whose bytes changed "
        f"(verified={report.verified}, committed={report.committed}); a cold build refuses"
    )


# --- T79: recheck and the rules it applies ----------------------------------


def test_recheck_lists_a_logged_dream_the_anonymity_rule_now_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T79 (the review T78's shortcut relies on): a dream that asks for
    anonymity but is signed under its author's name and key was logged before
    the anonymity rule (docs/protocol.md §1.2); its record publishes the name
    it asked to hide. The build takes it by its commitment, and `recheck`,
    "today's full admission review", must list it as a candidate for erasure."""
    from builder.content import anonymity
    from builder.log import recheck

    tp = make_pool(tmp_path / "pool")
    submit(tp, signed("bob", title="Bob's dream"))
    with monkeypatch.context() as m:  # admitted by a dreampool before the rule
        m.setattr(anonymity, "refusals", lambda new, logged: {})
        [named] = submit(
            tp,
            signed(
                "ada",
                title="Please do not name me",
                consent={"share": True, "derivatives": False, "anonymize": True},
            ),
        )
        build(tp, tmp_path / "pool" / "site")
    assert build(tp, tmp_path / "cold", key=False).committed == 2
    report = recheck.recheck(tp.content)
    assert named in [c.dream_id for c in report.candidates], (
        "recheck passes a logged dream today's admission refuses (anonymize under a name)"
    )


def test_recheck_still_reviews_a_pool_whose_key_fork_the_build_settles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T79 (the review T78's shortcut relies on): a key fork let onto main by
    a stale green check (T61) is settled
    by the build, which sets the unlogged branch aside and publishes the
    rest, logged dreams taken by their commitments. `recheck` refuses the
    whole pool on the same key directory (load_keys' problems, unsettled),
    so a logged dream today's redaction review refuses is never listed."""
    from builder.content import pool
    from builder.log import recheck
    from builder.text import readerview, redact
    from tests.redteam.test_rotation import NEW, OLD, THIRD, kid, place, rotation, submit_files

    tp = make_pool(tmp_path)
    with monkeypatch.context() as m:  # admitted by an older review
        m.setattr(redact, "redact_dream", lambda body: (body, []))
        m.setattr(redact, "changes", lambda body: ())
        m.setattr(readerview, "problems", lambda body, file: [])
        [leaky] = submit(
            tp, signed("ada", seed=OLD, title="Mail ada.lovelace@example.org for access")
        )
        build(tp, tmp_path / "site")
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="With my new key"))
    build(tp, tmp_path / "site")  # NEW logged
    entry = pool.KeyEntry(kid(THIRD), "ada", public_key_of(THIRD), "guest", "2026-01-01", kid(OLD))
    (tp.content / "keys" / f"{kid(THIRD)[7:]}.yaml").write_bytes(pool.format_key_entry(entry))
    (tp.content / "rotations" / f"{kid(THIRD)[7:]}.json").write_bytes(dump(rotation(OLD, THIRD)))
    place(tp, signed("ada", seed=THIRD, title="Ada's name is mine"))
    for path in tmp_path.glob("in-*.json"):
        path.unlink()
    report = build(tp, tmp_path / "site")  # the build goes on: the fork is set aside
    assert report.set_aside
    try:
        found = recheck.recheck(tp.content)
    except DreampoolError as exc:
        raise AssertionError(
            f"recheck refuses a pool the build publishes, and lists no candidate: {exc}"
        ) from None
    assert leaky in [c.dream_id for c in found.candidates]


# --- what held (kept as passing tests that pin the defence) -----------------


def test_salts_swapped_between_two_logged_dreams_are_refused(
    published: tuple[PoolFixture, list[str], Path], tmp_path: Path
) -> None:
    """T78 (holds): each logged dream keeps its file, but the two salts trade
    places: neither commits to its leaf, both are checked in full, and the
    build refuses; the live site and the log stay as they were."""
    tp, (first, second, _), site = published
    dreams = tp.content / "dreams"
    a, b = (dreams / f"{first}.salt").read_bytes(), (dreams / f"{second}.salt").read_bytes()
    (dreams / f"{first}.salt").write_bytes(b)
    (dreams / f"{second}.salt").write_bytes(a)
    log, live = tree(tp.content / "log"), tree(site)
    with pytest.raises(DreampoolError):
        build(tp, tmp_path / "out" / "site")
    assert tree(tp.content / "log") == log and tree(site) == live


@pytest.mark.parametrize("variant", ["escaped", "duplicate"])
def test_a_byte_variant_of_a_logged_dream_shows_the_logged_text_or_is_refused(
    published: tuple[PoolFixture, list[str], Path], tmp_path: Path, variant: str
) -> None:
    """T78 (holds): the logged file rewritten with every character escaped
    (\\u002F, \\u0041 …) parses to the same value, so it commits to its leaf
    and the site shows exactly the logged text; with a duplicate "title"
    member (the forged one first, the logged one last, as Python's json
    keeps) the strict reader refuses it, the file is checked in full, and
    the build refuses."""
    tp, (first, _, _), site = published
    path = tp.content / "dreams" / f"{first}.json"
    obj = json.loads(path.read_bytes())
    if variant == "escaped":
        text = json.dumps(obj, ensure_ascii=True).replace("/", "\\u002F")
        text = text.replace('"Ada', '"\\u0041da')
        path.write_text(text)
        out = tmp_path / "out" / "site"
        out.parent.mkdir()
        report = build(tp, out)
        assert report.committed == 3 and not report.refused
        assert _site_text(out) == _site_text(site)
    else:
        body = json.dumps(obj, ensure_ascii=False)
        path.write_text('{"title": ' + json.dumps(FORGED) + ", " + body[1:])
        live = tree(site)
        with pytest.raises(DreampoolError):
            build(tp, tmp_path / "out" / "site")
        assert tree(site) == live


def test_recheck_lists_a_logged_dream_whose_key_left_the_directory(
    published: tuple[PoolFixture, list[str], Path],
) -> None:
    """T78/T79 (holds): the build takes a logged dream by its commitment, but
    still asks the key directory; recheck names a dream whose key file was
    removed, without echoing any text."""
    from builder.log import recheck

    tp, ids, _ = published
    key_id = dreamfmt.key_id(public_key_of(seed_of("ada")))
    (tp.content / "keys" / f"{key_id[7:]}.yaml").unlink()
    found = recheck.recheck(tp.content)
    assert sorted(c.dream_id for c in found.candidates) == sorted(ids)
    assert all("not in the key directory" in str(c.findings) for c in found.candidates)


# --- T81: a store the pull request force-adds --------------------------------


def _forge_store(origin: Path, tp: PoolFixture, victim: str) -> None:
    """Rows a forger writes into origin's store, well formed and digested as
    the build writes them: the victim's file (by its blob id and SHA-256)
    gives a dream with a forged title, and that file with its salt gives the
    commitment of the victim's leaf."""
    from builder import buildcache

    path = tp.content / "dreams" / f"{victim}.json"
    data = path.read_bytes()
    blob, sha = filekeys.of_bytes(data)
    salt = path.with_suffix(".salt").read_text().strip()
    real = dreamfmt.parse(data, str(path))
    forged = dreamfmt.Dream(real.id, real.key_id, real.public_key, {**real.body, "title": FORGED})
    cache = buildcache.BuildCache(origin / ".site.builds" / "cache")
    cache["scan"][blob] = (sha, forged)
    cache["commit"][(sha, salt)] = dreamfmt.commitment(real.body, salt)
    cache["units"].clear()
    cache["pages"].clear()
    cache.save()


@pytest.mark.parametrize("tracked", [True, False])
def test_a_store_the_pull_request_force_adds_is_not_used(tmp_path: Path, tracked: bool) -> None:
    """T81 (holds): the pull request force-adds .site.builds/cache/store.sqlite
    holding forged scan and commit rows for a logged dream; in a fresh
    checkout the build sees git tracks it, discards the folder and builds
    afresh: the forged title is not shown. Untracked, the same store, as a
    forged cache entry in main's scope would be restored, was used (the
    forged rows hit) until rows were tagged with the log key's row key: the
    build, which holds the key, now takes none of them (T81)."""
    origin = tmp_path / "origin"
    tp = make_pool(origin)
    [victim, _] = submit(tp, signed("ada", title="Ada's dream"), signed("bob", title="Bob's"))
    git(origin, "init", "-q", "-b", "main")
    build(tp, origin / "site")
    git(origin, "add", "content")
    git(origin, "commit", "-q", "-m", "published")
    _forge_store(origin, tp, victim)
    if tracked:
        git(origin, "add", "-f", ".site.builds/cache/store.sqlite")
        git(origin, "commit", "-q", "-m", "a pull request: a store")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    if not tracked:
        shutil.copytree(origin / ".site.builds", clone / ".site.builds", symlinks=True)
    out = clone / "site"
    report = buildmod.build(clone / "content", out, signer=parse_private_key(tp.log_key))
    if tracked:
        assert any("git tracks" in n for n in report.notes), report.notes
        assert FORGED not in _site_text(out)
    else:
        assert any("not tagged with this log key" in n for n in report.notes), report.notes
        assert FORGED not in _site_text(out)
