"""The build store keyed by content (builder.content.filekeys): restored into a fresh
``git clone`` (what the publish workflow does with actions/cache) it hits;
deleted, damaged or written by other code it costs time only; and a hit is
only ever the result of the bytes the build would read.

Every case compares every file of the site with a cold build's."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache, parallel
from builder.content import filekeys, gitrepo, pool
from builder.errors import DreampoolError
from builder.formats.note import parse_private_key
from builder.log import logbuild
from tests.gitrun import git
from tests.pools import PoolFixture, make_pool


def site_files(site: Path) -> dict[str, bytes]:
    """Every file of a built site (through the ``site`` link), by path."""
    root = site.resolve()
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _store(out: Path) -> Path:
    return out.parent / f".{out.name}.builds" / "cache" / buildcache.STORE


def _restore(origin: Path, clone: Path) -> None:
    """What actions/cache/restore gives a new run: the derived folder and the
    ``site`` link, as the last run left them (times kept, as tar keeps them)."""
    shutil.copytree(origin / ".site.builds", clone / ".site.builds", symlinks=True)
    os.symlink(os.readlink(origin / "site"), clone / "site")


def _published(tmp_path: Path) -> tuple[PoolFixture, Path]:
    """A pool checkout after a publish run: dreams admitted, the log state
    committed, the derived state beside it and untracked."""
    origin = tmp_path / "origin"
    tp = make_pool(origin)
    tp.add("ada", 3)
    tp.add("bob", 2)
    git(origin, "init", "-q", "-b", "main")
    buildmod.build(tp.content, origin / "site", signer=parse_private_key(tp.log_key))
    git(origin, "add", "content")
    git(origin, "commit", "-q", "-m", "published")
    return tp, origin


def _fresh_clone(tmp_path: Path, origin: Path) -> Path:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    _restore(origin, clone)
    return clone


def _cold(content: Path, tmp_path: Path) -> dict[str, bytes]:
    cold = tmp_path / "cold-out" / "site"
    cold.parent.mkdir(exist_ok=True)
    buildmod.build(content, cold, signer=None)
    return site_files(cold)


def test_a_store_restored_into_a_fresh_clone_hits(tmp_path: Path) -> None:
    _, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    report = buildmod.build(clone / "content", clone / "site", signer=None)
    assert (report.verified, report.committed, report.rendered) == (0, 0, 0), report.notes
    assert not report.notes
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


def test_a_restored_store_decodes_no_dreams_text_when_nothing_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan section's bodies are decoded only when a page shows a dream's
    text (builder.formats.dream.Dream.deferred): a build with nothing new renders
    nothing, so it decodes none, and its site is still a cold build's."""
    _, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    loaded: list[str] = []
    read = buildcache._body_in

    def counted(data: bytes, head: Any, types: Any, dream_id: str) -> Any:
        loaded.append(dream_id)
        return read(data, head, types, dream_id)

    monkeypatch.setattr(buildcache, "_body_in", counted)
    report = buildmod.build(clone / "content", clone / "site", signer=None)
    assert (report.verified, report.rendered) == (0, 0)
    assert loaded == []
    monkeypatch.undo()
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


def test_a_new_dream_in_a_fresh_clone_is_the_only_one_verified(tmp_path: Path) -> None:
    """The new dream is untracked (keyed by its SHA-256), the others by git."""
    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    content = clone / "content"
    new = PoolFixture(content, tp.log_key, tp.vkey).add("ada", 1)
    report = buildmod.build(content, clone / "site", signer=parse_private_key(tp.log_key))
    assert report.admitted == new
    assert report.verified == 1
    assert 1 <= report.rendered <= 2  # the new dream, and its parent if it names one
    assert site_files(clone / "site") == _cold(content, tmp_path)


def test_without_git_the_store_still_hits_by_sha256(tmp_path: Path) -> None:
    """A pool that is not a git checkout, copied elsewhere (new inodes, times)."""
    tp = make_pool(tmp_path / "origin")
    tp.add("ada", 3)
    origin = tmp_path / "origin"
    buildmod.build(tp.content, origin / "site", signer=parse_private_key(tp.log_key))
    copy = tmp_path / "copy"
    shutil.copytree(origin / "content", copy / "content")
    _restore(origin, copy)
    assert gitrepo.clean_blobs(copy / "content") is None
    report = buildmod.build(copy / "content", copy / "site", signer=None)
    assert (report.verified, report.rendered) == (0, 0)
    assert site_files(copy / "site") == _cold(copy / "content", tmp_path)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_in_scan_rows(path: Path) -> None:
    """One byte flipped in the value of every row of the scan section."""
    db = sqlite3.connect(path, isolation_level=None)
    rows = db.execute('SELECT k, v FROM "scan"').fetchall()
    assert rows
    for k, v in rows:
        i = len(v) // 2
        db.execute(
            'UPDATE "scan" SET v = ? WHERE k = ?', (v[:i] + bytes([v[i] ^ 1]) + v[i + 1 :], k)
        )
    db.close()


@pytest.mark.parametrize("damage", ["deleted", "truncated", "flipped"])
def test_a_deleted_or_damaged_store_builds_what_a_cold_build_does(
    tmp_path: Path, damage: str
) -> None:
    _, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    store = _store(clone / "site")
    if damage == "deleted":
        shutil.rmtree(store.parent)
    elif damage == "truncated":
        _truncate(store)
    else:
        _flip_in_scan_rows(store)
    report = buildmod.build(clone / "content", clone / "site", signer=None)
    # Every dream read from its file again (checked against its proven leaf,
    # docs/protocol.md §3.1): nothing damaged was used.
    assert report.verified + report.committed == 5
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)
    if damage != "deleted":
        assert any("build store" in n for n in report.notes), report.notes
    again = buildmod.build(clone / "content", clone / "site", signer=None)
    assert again.verified + again.committed == 0  # and the store was made whole again


def test_damaged_fragments_are_rendered_again_and_change_no_byte(tmp_path: Path) -> None:
    """A list page reads each card, diary line, feed and search entry from the
    store by its unit's key (builder.buildcache.Rows): one whose row fails its
    digest is rendered again, and the site is what a cold build makes."""
    _, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    store = _store(clone / "site")
    db = sqlite3.connect(store, isolation_level=None)
    rows = db.execute('SELECT k, v FROM "fragments"').fetchall()
    assert len(rows) == 5
    for k, v in rows:  # the card's text: what a forged or rotted row would show
        i = 20
        db.execute(
            'UPDATE "fragments" SET v = ? WHERE k = ?', (v[:i] + bytes([v[i] ^ 1]) + v[i + 1 :], k)
        )
    db.close()
    report = buildmod.build(clone / "content", clone / "site", signer=None)
    assert any("fragments had 5 damaged row(s)" in n for n in report.notes), report.notes
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)
    again = buildmod.build(clone / "content", clone / "site", signer=None)
    assert not any("fragments" in n for n in again.notes)  # made whole again


@pytest.mark.parametrize("what", ["code", "format"])
def test_a_store_of_another_builder_version_is_not_used(
    tmp_path: Path, what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:  # the publish run had other code
        if what == "code":
            m.setattr(buildcache, "code_digest", lambda: "another builder")
        else:
            m.setattr(buildcache, "FORMAT", "dreampool-store/1")
        _, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    meta = sqlite3.connect(_store(clone / "site")).execute("SELECT name, value FROM meta")
    assert dict(meta.fetchall()) != {"format": buildcache.FORMAT, "code": buildcache.code_digest()}
    report = buildmod.build(clone / "content", clone / "site", signer=None)
    assert report.verified + report.committed == 5
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


def test_a_file_edited_after_checkout_is_verified_again(tmp_path: Path) -> None:
    """Same size, mtime put back: git's index still sees the change (ctime),
    so the store's entry for the checked-out bytes is not used."""
    _, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    content = clone / "content"
    path = sorted((content / "dreams").glob("*.json"))[0]
    before = path.stat()
    data = path.read_bytes()
    i = data.index(b'"title": "') + len(b'"title": "')
    edited = data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1 :]  # a letter's case
    path.write_bytes(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    cache = buildcache.BuildCache(_store(clone / "site").parent)
    keys = filekeys.load(content)
    assert path.name not in keys.folder("dreams")
    assert f"{path.stem}.salt" in keys.folder("dreams")
    directory, _ = pool.load_keys(content, cache=cache["keys"], keys=keys)
    found, problems = pool.scan_dreams(content, directory, cache=cache["scan"], keys=keys)
    assert path.stem not in {s.dream.id for s in found}
    assert [p.file for p in problems] == [str(path)]
    with pytest.raises(DreampoolError):
        buildmod.build(content, clone / "site", signer=None)


def test_a_result_is_stored_under_the_digests_of_the_bytes_checked(tmp_path: Path) -> None:
    """Should git's word be stale (the file changed after git looked), the
    fresh result is stored under the digests of what was read, never under
    the blob id git named."""
    tp = make_pool(tmp_path)
    [dream_id] = tp.add("ada", 1)
    data = (tp.content / "dreams" / f"{dream_id}.json").read_bytes()
    blob, digest = filekeys.of_bytes(data)
    stale = filekeys.FileKeys({"dreams": {f"{dream_id}.json": "0" * 40}})
    directory, _ = pool.load_keys(tp.content)
    cache: dict[object, object] = {}
    found, problems = pool.scan_dreams(tp.content, directory, cache=cache, keys=stale)
    assert not problems and not found[0].cached
    assert list(cache) == [blob]
    assert cache[blob] == (digest, found[0].dream)
    assert found[0].digest == digest


def test_a_file_git_vouches_for_and_the_store_lacks_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold build (a fresh clone, no store): git names every dream file's blob
    id and the store has none of them, so no entry can match their bytes. The
    scan read and digested each in the build's own process before its worker
    read it again, one process for every dream of the pool."""
    tp = make_pool(tmp_path)
    ids = tp.add("ada", 3)
    vouched = {
        f"{i}{ext}": filekeys.of_bytes((tp.content / "dreams" / f"{i}{ext}").read_bytes())[0]
        for i in ids
        for ext in (".json",)
    }
    read_twice: list[str] = []
    key_of = pool._key_of
    monkeypatch.setattr(pool, "_key_of", lambda path: read_twice.append(path) or key_of(path))
    directory, _ = pool.load_keys(tp.content)
    cache: dict[object, object] = {}
    keys = filekeys.FileKeys({"dreams": vouched})
    found, problems = pool.scan_dreams(tp.content, directory, cache=cache, keys=keys)
    assert not problems and sorted(s.dream.id for s in found) == sorted(ids)
    assert read_twice == []
    assert sorted(cache) == sorted(vouched.values())  # stored under git's blob ids
    again, _ = pool.scan_dreams(tp.content, directory, cache=cache, keys=keys)
    assert all(s.cached for s in again) and read_twice == []


def test_an_entry_whose_sha256_differs_from_the_bytes_read_is_a_miss(tmp_path: Path) -> None:
    """Without git's word, the blob id only finds the entry: its SHA-256 must
    be that of the bytes read too."""
    tp = make_pool(tmp_path)
    first, second = tp.add("ada", 2)
    data = (tp.content / "dreams" / f"{first}.json").read_bytes()
    blob, digest = filekeys.of_bytes(data)
    directory, _ = pool.load_keys(tp.content)
    cache: dict[object, object] = {}
    found, _ = pool.scan_dreams(tp.content, directory, cache=cache)
    other = next(s.dream for s in found if s.dream.id == second)
    cache[blob] = ("f" * 64, other)  # as if another file's bytes had this blob id
    found, problems = pool.scan_dreams(tp.content, directory, cache=cache)
    assert not problems
    assert {s.dream.id: s.cached for s in found} == {first: False, second: True}
    assert cache[blob] == (digest, next(s.dream for s in found if s.dream.id == first))


def test_git_blob_id_is_gits(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"a dream\n")
    assert filekeys.git_blob_id(b"a dream\n") == git(tmp_path, "hash-object", "f").strip()


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "content" / "dreams").mkdir(parents=True)
    for name in ("a.json", "b.json", "c.json", "d.json", "e.json"):
        (root / "content" / "dreams" / name).write_bytes(name.encode() + b"\n")
    os.symlink("a.json", root / "content" / "dreams" / "link.json")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "content")
    git(root, "commit", "-q", "-m", "x")
    return root


def test_git_vouches_only_for_unmodified_unconverted_plain_files(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    content = root / "content"
    blobs = gitrepo.clean_blobs(content)
    assert blobs is not None
    assert set(blobs) == {f"dreams/{n}.json" for n in "abcde"}  # never the symlink's blob
    assert blobs["dreams/a.json"] == filekeys.git_blob_id(b"a.json\n")
    (content / "dreams" / "b.json").write_bytes(b"B.json\n")  # modified
    git(root, "update-index", "--assume-unchanged", "content/dreams/c.json")
    (content / "dreams" / "c.json").write_bytes(b"C.json\n")  # hidden from git's stat
    (content / "dreams" / "new.json").write_bytes(b"new\n")  # untracked
    assert set(gitrepo.clean_blobs(content) or {}) == {
        "dreams/a.json",
        "dreams/d.json",
        "dreams/e.json",
    }
    # Any attributes file of the repository's own: nothing is vouched for (T80).
    (root / ".gitattributes").write_text("d.json ident\n")
    assert gitrepo.clean_blobs(content) == {}
    (root / ".gitattributes").unlink()
    (root / "content" / "sub").mkdir()
    (root / "content" / "sub" / ".gitattributes").write_text("\n")
    assert gitrepo.clean_blobs(content) == {}
    (root / "content" / "sub" / ".gitattributes").unlink()
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "attributes").write_text("*.json ident\n")
    assert gitrepo.clean_blobs(content) == {}
    (root / ".git" / "info" / "attributes").unlink()
    assert set(gitrepo.clean_blobs(content) or {}) == {
        "dreams/a.json",
        "dreams/d.json",
        "dreams/e.json",
    }
    # core.autocrlf: any value but false converts, "input" too (review r74:
    # read with --bool, "input" failed and was taken for no conversion).
    for value in ("true", "input", "INPUT", "yes", "1", "on", "garbled"):
        git(root, "config", "core.autocrlf", value)
        assert not gitrepo.clean_blobs(content), value  # {} or, garbled, None: git fails
    for value in ("false", "no", "off", "0"):
        git(root, "config", "core.autocrlf", value)
        assert len(gitrepo.clean_blobs(content) or {}) == 3, value
    git(root, "config", "core.autocrlf", "true")
    assert gitrepo.clean_blobs(tmp_path) is None  # not a work tree: the bytes decide


def test_git_vouches_for_no_file_an_attributes_file_outside_the_repository_converts(
    tmp_path: Path,
) -> None:
    """An attributes file the repository does not hold (``core.attributesFile``:
    a user's own, or the system's) is asked through ``check-attr``: a file any
    of them converts on checkout is not vouched for; an attribute that converts
    nothing (``binary``, a macro that unsets ``text``; ``diff``) leaves it."""
    root = _repo(tmp_path)
    attributes = tmp_path / "attributes"
    attributes.write_text(
        "a.json ident\nb.json text eol=crlf\nc.json binary\nd.json diff=json\n"
        "e.json filter=own working-tree-encoding=UTF-16\n"
    )
    git(root, "config", "core.attributesFile", str(attributes))
    assert set(gitrepo.clean_blobs(root / "content") or {}) == {"dreams/c.json", "dreams/d.json"}
    attributes.write_text("*.json -text\n")
    assert set(gitrepo.clean_blobs(root / "content") or {}) == {f"dreams/{n}.json" for n in "abcde"}
    attributes.write_text("[attr]odd text\n*.json odd\n")  # a macro that sets text
    assert gitrepo.clean_blobs(root / "content") == {}


def test_git_vouches_for_each_odd_name_as_itself(tmp_path: Path) -> None:
    """clean_blobs reads git's NUL-separated records whole: a name holding a tab,
    a newline, spaces or the text of another record vouches for itself alone, with
    the blob of its own bytes; a modified one, named so, for nothing."""
    root = tmp_path / "repo"
    dreams = root / "content" / "dreams"
    dreams.mkdir(parents=True)
    fake = "H 100644 " + "0" * 40 + " 0\ta.json"
    names = ["a.json", "tab\there.json", "new\nline.json", " spaced .json", fake, "é.json"]
    for name in names:
        (dreams / name).write_bytes(name.encode() + b"\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "content")
    git(root, "commit", "-q", "-m", "x")
    blobs = gitrepo.clean_blobs(root / "content")
    assert blobs == {f"dreams/{n}": filekeys.git_blob_id(n.encode() + b"\n") for n in names}
    (dreams / fake).write_bytes(b"changed\n")
    (dreams / "new\nline.json").write_bytes(b"changed\n")
    # Hidden from git's stat, the record of the fake name starts "h ": its name,
    # which holds a record of tag H, must not be read as one.
    git(root, "update-index", "--assume-unchanged", f"content/dreams/{fake}")
    blobs = gitrepo.clean_blobs(root / "content")
    assert set(blobs or {}) == {f"dreams/{n}" for n in names} - {
        f"dreams/{fake}",
        "dreams/new\nline.json",
    }


def _nested_repo(tmp_path: Path, folder: str) -> tuple[Path, Path]:
    """A repository whose pool sits in ``folder`` below its top, with one dream."""
    root = tmp_path / "repo"
    content = root / folder / "content"
    (content / "dreams").mkdir(parents=True)
    (content / "dreams" / "a.json").write_bytes(b"a.json\n")
    (root / "other").mkdir()
    (root / "other" / "keep").write_text("x\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "x")
    return root, content


def test_only_attributes_files_that_can_apply_to_the_pool_stop_git_vouching(
    tmp_path: Path,
) -> None:
    """An attributes file applies to the files of its own folder and below
    (gitattributes(5)), so one beside the pool, such as in the build's own
    untracked output, leaves git's word standing; one in the pool, below it,
    or in any folder above it, tracked, untracked or only in the index, still
    leaves nothing vouched for (T80). Before, the whole work tree was walked
    for them, the build's 60,000 output files with it."""
    root, content = _nested_repo(tmp_path, "pool")
    vouched = {"dreams/a.json"}
    assert set(gitrepo.clean_blobs(content) or {}) == vouched
    elsewhere = [
        root / ".site.builds" / "gen-a" / ".gitattributes",
        root / "other" / ".gitattributes",
    ]
    for path in elsewhere:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("* ident\n")
    assert set(gitrepo.clean_blobs(content) or {}) == vouched
    git(root, "add", "other/.gitattributes")
    assert set(gitrepo.clean_blobs(content) or {}) == vouched
    for applies in (
        root / ".gitattributes",
        root / "pool" / ".gitattributes",
        content / ".gitattributes",
        content / "dreams" / ".gitattributes",
        content / "deep" / "er" / ".gitattributes",
    ):
        applies.parent.mkdir(parents=True, exist_ok=True)
        applies.write_text("\n")
        assert gitrepo.clean_blobs(content) == {}, applies
        applies.unlink()
        assert set(gitrepo.clean_blobs(content) or {}) == vouched, applies
    # Only in the index (removed from the work tree): git would still read it.
    (root / "pool" / ".gitattributes").write_text("\n")
    git(root, "add", "pool/.gitattributes")
    (root / "pool" / ".gitattributes").unlink()
    assert gitrepo.clean_blobs(content) == {}


def test_a_pool_folder_whose_name_reads_as_a_glob_has_the_whole_tree_searched(
    tmp_path: Path,
) -> None:
    _, content = _nested_repo(tmp_path, "p[1]")
    assert set(gitrepo.clean_blobs(content) or {}) == {"dreams/a.json"}
    (content / "x").mkdir()
    (content / "x" / ".gitattributes").write_text("\n")
    assert gitrepo.clean_blobs(content) == {}


def test_without_git_the_build_digests_and_says_why_in_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    keys = filekeys.load(root / "content")
    assert keys.folder("dreams") == {}
    assert keys.note is not None and "digests of each file read" in keys.note


def test_a_scan_puts_back_the_store_entries_it_used_as_they_were(tmp_path: Path) -> None:
    """The store writes only the entries that are not the objects it read
    (buildcache.BuildCache.save compares by identity): a scan that rebuilt
    every entry it found made a no-op build of 10k dreams rewrite 10k rows."""
    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    directory, _ = pool.load_keys(tp.content)
    cache: dict[object, object] = {}
    pool.scan_dreams(tp.content, directory, cache=cache)
    first = dict(cache)
    pool.scan_dreams(tp.content, directory, cache=cache)
    assert len(first) == 3
    assert all(cache[k] is first[k] for k in first)


def _forge_titles(store: Path, title: str) -> int:
    """Give every dream in the scan section another title, in its head and its
    body alike, each row's digest made to match: what anyone who can write the
    cache the publish workflow restores can do (the digest is public; the
    tag, keyed with the log key's row key, is left as it was)."""
    db = sqlite3.connect(store, isolation_level=None)
    rows = db.execute('SELECT k, v FROM "scan"').fetchall()
    for k, v in rows:
        first, _, rest = v.partition(b"\n")
        head, body = json.loads(first), json.loads(rest)
        head[4]["title"] = body["title"] = title
        forged = buildcache._dump(head) + b"\n" + buildcache._dump(body)
        db.execute(
            'UPDATE "scan" SET v = ?, d = ? WHERE k = ?',
            (forged, buildcache._row_digest(k, forged), k),
        )
    db.close()
    return len(rows)


def test_a_restored_store_forged_without_the_log_key_changes_no_byte(tmp_path: Path) -> None:
    """THREATS.md T81: the publish build (it holds the log key) restores a store
    whose scan rows were rewritten by someone without the key. It takes none of
    them: every dream is read from its file again, and the site is a cold
    build's, with no forged title in it."""
    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    assert _forge_titles(_store(clone / "site"), "PWNED by the cache") == 5
    report = buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    assert report.verified + report.committed == 5
    assert any("not tagged with this log key" in n for n in report.notes), report.notes
    built = site_files(clone / "site")
    assert not any(b"PWNED" in data for data in built.values())
    assert built == _cold(clone / "content", tmp_path)


def test_a_restored_generation_is_read_once_then_sealed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81's cost stays bounded: the first builds after a restore read each
    restored generation once (builder.site.writer seals), and a build after
    that reads no file of the site, with or without the log key."""
    from tests.test_writer import _count_reads

    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    reads = _count_reads(monkeypatch)
    signer = parse_private_key(tp.log_key)
    for _ in range(2):  # one build a generation
        buildmod.build(clone / "content", clone / "site", signer=signer)
    assert reads
    for key in (signer, None, signer):
        reads.clear()
        buildmod.build(clone / "content", clone / "site", signer=key)
        assert reads == []
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


@pytest.mark.parametrize("forked", [False, True], ids=["in-process", "forked"])
@pytest.mark.parametrize("signing", [False, True], ids=["keyless", "log-key"])
def test_a_cold_build_holds_no_dream_s_text_once_its_row_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forked: bool, signing: bool
) -> None:
    """A cold build (a fresh clone, no store, no output: issue 21) writes the
    scan row of each dream it takes by its logged commitment as the scan goes,
    a batch at a time, and keeps its head alone (BuildCache.kept_scan): the
    model is made from dreams none of whose text is in memory, the workers
    that render them read it from the store themselves, and the site is what
    a cold build without a store makes. Before, every dream's text was held
    to the build's end."""
    tp, origin = _published(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 2)
    if forked:  # the scan's and the units' workers, even for five dreams
        monkeypatch.setitem(parallel.imap_ordered.__kwdefaults__, "min_items", 1)
    signer = parse_private_key(tp.log_key) if signing else None
    seen: list[bool] = []
    build_model = buildmod.model.build_model

    def spy(log: Any, *args: Any, **kwargs: Any) -> Any:
        seen.extend(a.dream.loaded for a in log.dreams.values())
        return build_model(log, *args, **kwargs)

    monkeypatch.setattr(buildmod.model, "build_model", spy)
    report = buildmod.build(clone / "content", clone / "site", signer=signer)
    monkeypatch.undo()
    assert report.committed == 5 and len(seen) == 5
    assert not any(seen)
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)
    again = buildmod.build(clone / "content", clone / "site", signer=signer)
    assert (again.verified, again.committed, again.rendered) == (0, 0, 0), again.notes


def test_a_dream_to_log_keeps_the_text_it_was_verified_in(tmp_path: Path) -> None:
    """A dream verified in full (new, about to be logged) is not handed to
    BuildCache.kept_scan: the leaf signed for it commits to the text verified
    in memory, never to the store's copy read back (THREATS.md T81)."""
    tp, origin = _published(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    tp.content = clone / "content"
    tp.add("ada", 2)
    kept: list[str] = []
    cache = buildcache.BuildCache(tmp_path / "store")
    content = clone / "content"
    keys = filekeys.load(content)
    directory, _ = pool.load_keys(content, keys=keys)

    def keep(blob: str, entry: Any) -> Any:
        kept.append(entry[1].id)
        return cache.kept_scan(blob, entry)

    config = pool.load_config(content)
    proven = logbuild.prove(content, origin=config.origin, signer=None)
    found, problems = pool.scan_dreams(
        content, directory, cache=cache["scan"], keys=keys, proven=proven, keep=keep
    )
    assert not problems and len(found) == 7
    new = [s for s in found if not s.committed]
    assert len(new) == 2 and all(s.dream.loaded for s in new)
    assert sorted(kept) == sorted(s.dream.id for s in found if s.committed)


def test_git_is_asked_beside_other_work_and_done_when_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """filekeys.load_beside: git's answer and the work's, the same as one
    after the other; git runs in another thread, which has ended by the
    time it returns (the build forks next), whichever of the two raises."""
    root = _repo(tmp_path)
    content = root / "content"
    seen: list[str] = []

    def work() -> int:
        seen.append(threading.current_thread().name)
        return 7

    keys, done = filekeys.load_beside(content, work)
    assert done == 7 and keys == filekeys.load(content)
    assert seen == [threading.current_thread().name]
    assert not [t for t in threading.enumerate() if t.name.startswith("dreampool-filekeys")]

    def failing() -> int:
        raise RuntimeError("work failed")

    with pytest.raises(RuntimeError, match="work failed"):
        filekeys.load_beside(content, failing)
    assert not [t for t in threading.enumerate() if t.name.startswith("dreampool-filekeys")]

    def git_fails(folder: Path) -> None:
        raise OSError("no git")

    monkeypatch.setattr(gitrepo, "clean_blobs", git_fails)
    with pytest.raises(OSError, match="no git"):
        filekeys.load_beside(content, work)
    assert not [t for t in threading.enumerate() if t.name.startswith("dreampool-filekeys")]


def test_a_build_with_the_key_after_a_preview_without_it_says_so_once(tmp_path: Path) -> None:
    """A new user's audit (23rd session): a build without the log key (the
    local preview operators.md suggests) and then one with it printed three
    notes that its rows were "written by a build without it, or planted",
    one a section: one note now, naming the sections and the likely cause."""
    tp = make_pool(tmp_path)
    tp.add("ada", 2)
    signer = parse_private_key(tp.log_key)
    buildmod.build(tp.content, tmp_path / "site", signer=signer)
    buildmod.build(tp.content, tmp_path / "site", signer=None)
    report = buildmod.build(tp.content, tmp_path / "site", signer=signer)
    untagged = [n for n in report.notes if "not tagged with this log key" in n]
    assert len(untagged) == 1, report.notes
    assert "most likely written by a build without the key" in untagged[0]
    assert untagged[0].count(" row") <= 1
