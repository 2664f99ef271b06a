"""Review r74 (of fa39a0e7, "Log check that stands"): the store's ``logcheck``
row (builder.log.checked), ``logbuild._standing`` and the lazy salt
(``Admitted.salt`` / ``logbuild.salt_text``).

Two defects (the first two tests, which fail on fa39a0e7):

* T80: under ``core.autocrlf=input`` git vouches for a salt's normalized blob
  while the work tree holds other bytes (CRLF); the row stands on the blob and
  ``salt_text`` then refuses the file at render time, after ``apply`` signed,
  on every build that renders that record ("changed while the build ran",
  hint "restore it from git history", which git says is clean). Before, the
  salt's text came from the store by that blob and the build passed.
* T81/T44: a scan row of a logged dream that is wrong but tagged (what a bug
  in the build itself writes: tests/test_log.py ``_own_store``) was caught by
  step 3 ("the build cache is damaged") when no stored commitment short-cut
  it; with the row standing, step 3 is skipped and the signed site publishes
  a record.json that does not recompute its leaf (and the page shows the
  wrong title).

What held (the rest): salt edited, deleted, replaced by a symlink or a folder
between the log stage and rendering (in process and in forked workers) stops
the build with a clean error and leaves the site as it was; an erased dream's
salt leaves the store once the erasure is logged (T48); ``dreampool mcp
--content`` over a StoreReader takes the row and serves the site's records;
a store restored into a fresh clone stands, an older one is checked dream by
dream; a full log prefix (``logprefix``) keeps the lines in leaf order; random
sequences of new dreams, children, erasures, CRLF/whitespace salt rewrites,
reformatted dream files, staged-only edits, .gitattributes and mtime touches
give a site equal to a cold build's whose every record recomputes its leaf.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache, parallel
from builder.agents import mcp_server
from builder.buildcache import BuildCache
from builder.content import filekeys
from builder.errors import DreampoolError, LogError
from builder.formats.b64 import b64url_encode
from builder.formats.dream import Dream
from builder.log import erase, logbuild, logstate
from builder.readers.lightclient import verify_logged_record
from builder.site import writer
from tests.gitrun import git
from tests.redteam import tree
from tests.test_log_check import _publish, _published
from tests.test_log_check import by_dream as by_dream  # the fixture


def _records_verify(site: Path, content: Path) -> None:
    """Every published record.json recomputes the leaf at its index."""
    leaves = logstate.load(content).leaves
    for rec in sorted((site.resolve() / "dreams").glob("*/record.json")):
        data = rec.read_bytes()
        index = json.loads(data)["index"]
        verify_logged_record(data, index, leaves[index])


def _cold(tp: Any, tmp_path: Path, name: str = "cold") -> dict[str, bytes]:
    cold = tmp_path / name
    buildmod.build(tp.content, cold, signer=None)
    return tree(cold)


# --- defects -------------------------------------------------------------------


def test_a_salt_git_vouches_for_under_autocrlf_input_wedges_every_build(
    tmp_path: Path, by_dream: list[int]
) -> None:
    """T80 (gitrepo.clean_blobs reads ``core.autocrlf`` with ``--bool``, which
    fails on ``input``, so it is taken as no conversion). A salt saved with
    CRLF and staged: git normalizes it to the blob it already had and calls
    the file clean, so it vouches for that blob while the disk holds other
    bytes. The row stands on the blob; when the record is rendered (here: the
    pool's title changed, every page is made again) ``salt_text`` refuses the
    file, on every build, with a message that blames a concurrent edit and a
    hint to restore a file git says is unchanged. On 7485cede the salt's text
    came from the store by the vouched blob and the build passed. Expected:
    the build passes and equals a cold build (fix: treat any autocrlf but
    false as converting, and let salt_text accept a salt whose text commits
    the dream to its leaf rather than requiring the blob)."""
    tp, signer, site, ids = _published(tmp_path)
    root = tp.content.parent
    git(root, "config", "core.autocrlf", "input")
    _publish(tp, site, signer)
    salt = tp.content / "dreams" / f"{ids[0]}.salt"
    salt.write_bytes(salt.read_bytes().strip() + b"\r\n")  # the same salt text
    git(root, "add", "content")
    assert git(root, "status", "--porcelain", "--", "content/dreams") == ""  # git: clean
    config = tp.content / "pool.yaml"
    config.write_text(config.read_text().replace("Test pool", "Another title"))
    for attempt in range(2):
        try:
            _publish(tp, site, signer)
        except LogError as exc:
            pytest.fail(f"build {attempt} refused an unchanged salt: {exc.message}")
    assert tree(site) == _cold(tp, tmp_path)
    _records_verify(site, tp.content)


def test_a_wrong_scan_row_of_a_logged_dream_is_published_when_the_row_stands(
    tmp_path: Path, by_dream: list[int]
) -> None:
    """T81/T44: tests/test_log.py's
    test_a_logged_dream_the_build_cache_garbled_is_called_cache_damage in a git
    pool, as the publish workflow runs it. A scan row that holds
    another title for a logged dream's blob, tagged with the row key (what a
    bug in the build itself writes; no tag catches it), and no stored
    commitment for the file: on 7485cede step 3 recomputed the commitment from
    the scanned body and refused ("the build cache is damaged; nothing was
    logged"). With the logcheck row standing, step 3 is skipped: the build
    signs, renders the dream (a child names it) from the wrong row and
    publishes a record.json that does not recompute its leaf. The row vouches
    for the *file's* blob, but what is published is the *scan row's* body.
    (With the stored commitment intact, 7485cede published it too: the
    commit row short-cuts the body; both are shown by this one fix: check
    commitment(body, salt) against the leaf where a record is made, or bind
    each line to the scan row's digest.) Expected: the build refuses."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    victim = ids[0]
    store = BuildCache(writer.builds_dir(site) / "cache", key=buildcache.row_key(signer.seed))
    blob, _ = filekeys.of_bytes((tp.content / "dreams" / f"{victim}.json").read_bytes())
    digest, d = store["scan"][blob]
    garbled = Dream(d.id, d.key_id, d.public_key, {**d.body, "title": "PWNED"})
    store["scan"][blob] = (digest, garbled)
    store["commit"].clear()
    store.save()
    del store
    tp.add("bob", 1, lineage={"parent": victim, "generation": 1})
    try:
        _publish(tp, site, signer)
    except LogError as exc:
        assert "build cache" in exc.message
        return
    record = json.loads((site / "dreams" / victim / "record.json").read_bytes())
    pytest.fail(
        f"published dream {victim} titled {record['dream']['title']!r} under leaf "
        f"{record['index']}, which commits to another title (by_dream={by_dream})"
    )


# --- what held -----------------------------------------------------------------


@pytest.mark.parametrize("forked", [False, True], ids=["in-process", "forked"])
@pytest.mark.parametrize("how", ["edit", "delete", "symlink", "folder"])
def test_a_salt_changed_before_rendering_stops_the_build_cleanly(
    tmp_path: Path, by_dream: list[int], monkeypatch: pytest.MonkeyPatch, how: str, forked: bool
) -> None:
    """T81 (logcheck's lazy salt, holds): the row stood (no dream checked
    again), and the parent's salt changes after the log stage, before its
    record is rendered again for a new child: a DreampoolError (LogError or
    InputError), never a traceback or a record with the new salt, and the
    site is left as it was."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    tp.add("bob", 1, lineage={"parent": ids[0], "generation": 1})
    git(tp.content.parent, "add", "content")
    git(tp.content.parent, "commit", "-q", "-m", "merge")
    salt = tp.content / "dreams" / f"{ids[0]}.salt"
    if forked:
        monkeypatch.setattr(
            parallel, "imap_ordered", functools.partial(parallel.imap_ordered, min_items=1)
        )
    real = buildmod.model.build_model

    def after_the_log_stage(*a: Any, **k: Any) -> Any:
        if how == "edit":
            salt.write_text(b64url_encode(bytes(32)) + "\n", encoding="ascii")
        else:
            data = salt.read_bytes()
            salt.unlink()
            if how == "symlink":
                (tmp_path / "elsewhere").write_bytes(data)
                salt.symlink_to(tmp_path / "elsewhere")
            elif how == "folder":
                salt.mkdir()
        return real(*a, **k)

    monkeypatch.setattr(buildmod.model, "build_model", after_the_log_stage)
    before = tree(site)
    with pytest.raises(DreampoolError):
        buildmod.build(tp.content, site, signer=signer)
    assert by_dream == [0]
    assert tree(site) == before


def test_an_erased_salt_leaves_the_store_after_standing_builds(
    tmp_path: Path, by_dream: list[int]
) -> None:
    """T48 (holds): standing builds never load the salts and commit sections,
    which hold salt texts; a preview build wrote untagged rows there. The
    build that logs an erasure checks dream by dream, so both are rewritten
    and no file of the derived folder keeps the erased dream's salt."""
    tp, signer, site, ids = _published(tmp_path)
    victim = ids[2]
    text = (tp.content / "dreams" / f"{victim}.salt").read_text().strip().encode()
    other = tp.content / "dreams" / f"{ids[3]}.salt"
    other.write_bytes(other.read_bytes().strip() + b"\r\n")
    buildmod.build(tp.content, site, signer=None)  # a preview, dream by dream
    git(tp.content.parent, "checkout", "content")
    _publish(tp, site, signer)
    _publish(tp, site, signer)
    derived = writer.builds_dir(site)
    assert text in (derived / "cache" / buildcache.STORE).read_bytes()
    for p in tp.content.parent.glob("in-*.json"):
        p.unlink()
    erase.erase(tp.content, victim, "author-request")
    _publish(tp, site, signer)
    _publish(tp, site, signer)
    # the first build, the preview, the signing build after it, the erasure
    assert by_dream == [0, 6, 6, 5]
    assert not any(text in p.read_bytes() for p in derived.rglob("*") if p.is_file())


def test_a_checkout_reader_takes_the_row_and_serves_the_sites_records(
    tmp_path: Path, by_dream: list[int]
) -> None:
    """T81/T108 (holds): content_plan over a StoreReader takes the row (no
    dream checked again) and each record it serves is the site's."""
    tp, signer, site, _ids = _published(tmp_path)
    _publish(tp, site, signer)
    by_dream.clear()
    store = buildcache.StoreReader(writer.builds_dir(site) / "cache")
    log, _ = mcp_server.content_plan(tp.content, store)
    assert by_dream == []
    for dream_id, admitted in log.dreams.items():
        record = (site.resolve() / "dreams" / dream_id / "record.json").read_bytes()
        assert logbuild.record_bytes(admitted) == record


def test_a_restored_store_stands_and_an_older_one_is_checked(
    tmp_path: Path, by_dream: list[int]
) -> None:
    """T81 (holds): in a fresh clone with the last run's derived folder the
    row stands; an older run's store (a smaller tree) is checked dream by
    dream, and every record recomputes its leaf."""
    origin = tmp_path / "origin"
    origin.mkdir()
    tp, signer, site, _ids = _published(origin)
    older = tmp_path / "older"
    shutil.copytree(writer.builds_dir(site) / "cache", older)
    tp.add("bob", 2)
    _publish(tp, site, signer)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    shutil.copytree(origin / ".site.builds", clone / ".site.builds", symlinks=True)
    os.symlink(os.readlink(origin / "site"), clone / "site")
    by_dream.clear()
    buildmod.build(clone / "content", clone / "site", signer=signer)
    assert by_dream == []
    shutil.rmtree(clone / ".site.builds" / "cache")
    shutil.copytree(older, clone / ".site.builds" / "cache")
    buildmod.build(clone / "content", clone / "site", signer=signer)
    assert by_dream == [8]
    _records_verify(clone / "site", clone / "content")


def test_a_log_prefix_keeps_the_lines_in_leaf_order(
    tmp_path: Path, by_dream: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (holds): with full shards the logged dreams come from the
    logprefix row; the row still stands, across an erasure and new dreams."""
    monkeypatch.setattr(logstate, "SHARD", 4)
    tp, signer, site, ids = _published(tmp_path, 9)
    _publish(tp, site, signer)
    _publish(tp, site, signer)
    for p in tp.content.parent.glob("in-*.json"):
        p.unlink()
    erase.erase(tp.content, ids[1], "author-request")
    _publish(tp, site, signer)
    tp.add("bob", 5)
    for _ in range(3):
        _publish(tp, site, signer)
    assert by_dream == [0, 8]
    assert tree(site) == _cold(tp, tmp_path)


@pytest.mark.parametrize("seed", range(2))
def test_random_edits_give_a_cold_builds_site(
    tmp_path: Path, by_dream: list[int], seed: int
) -> None:
    """T80 (holds): random sequences of edits git sees or not; every site
    built equals a cold build's at the end, and its records verify."""
    rng = random.Random(seed)
    tp, signer, site, _ids = _published(tmp_path, 4)
    root, dreams = tp.content.parent, tp.content / "dreams"
    ops = ["add", "child", "crlf", "reformat", "erase", "stage", "attrs", "touch", "nocommit"]
    for _ in range(8):
        op = rng.choice(ops)
        live = sorted(p.stem for p in dreams.glob("*.json"))
        victim = rng.choice(live)
        commit = True
        if op == "add":
            tp.add(rng.choice(["ada", "bob"]), rng.randint(1, 2))
        elif op == "child":
            tp.add("bob", 1, lineage={"parent": victim, "generation": 1})
        elif op in ("crlf", "stage"):
            s = dreams / f"{victim}.salt"
            s.write_bytes(s.read_bytes().strip() + rng.choice([b"\r\n", b"", b"  \n"]))
            if op == "stage":
                git(root, "add", "content")
                commit = False
        elif op == "reformat":
            f = dreams / f"{victim}.json"
            f.write_text(json.dumps(json.loads(f.read_bytes()), indent=rng.choice([None, 2])))
        elif op == "erase":
            for p in root.glob("in-*.json"):
                p.unlink()
            erase.erase(tp.content, victim, "author-request")
        elif op == "attrs":
            attrs = root / ".gitattributes"
            attrs.unlink() if attrs.exists() else attrs.write_text("*.md text\n")
        elif op == "touch":
            for suffix in (".json", ".salt"):
                os.utime(dreams / f"{victim}{suffix}")
        else:
            commit = False
        if commit:
            _publish(tp, site, signer)
        else:
            buildmod.build(tp.content, site, signer=signer)
        _records_verify(site, tp.content)
    assert tree(site) == _cold(tp, tmp_path)
