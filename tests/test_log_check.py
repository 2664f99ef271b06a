"""The log stage takes every logged dream as the last build checked it when
each file and salt is the one it checked (builder.log.checked): a build after
one new dream reads no salt and no stored commitment of the others. Anything
else is checked dream by dream, as before, and every site here equals a cold
build's."""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache
from builder.buildcache import BuildCache
from builder.errors import LogError
from builder.formats import dream as dreamfmt
from builder.formats.b64 import b64url_encode
from builder.formats.note import Signer, parse_private_key
from builder.log import checked, erase, logbuild, logstate
from builder.site import writer
from tests.gitrun import git
from tests.pools import PoolFixture, make_pool
from tests.test_site_build import tree


@pytest.fixture
def by_dream(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many logged dreams each build that checked them dream by dream
    found in order (-1: the check failed); a build whose log check stood
    adds nothing."""
    counts: list[int] = []
    check = logbuild._check_logged

    def counted(*args: Any, **kw: Any) -> Any:
        counts.append(-1)
        result = check(*args, **kw)
        counts[-1] = len(result[1])
        return result

    monkeypatch.setattr(logbuild, "_check_logged", counted)
    return counts


def _published(tmp_path: Path, n: int = 6) -> tuple[PoolFixture, Signer, Path, list[str]]:
    """A git pool built once and twice, each build's log state committed, as
    the publish workflow leaves it."""
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    ids = tp.add("ada", n)
    git(tmp_path, "init", "-q", "-b", "main")
    site = tmp_path / "site"
    _publish(tp, site, signer)
    return tp, signer, site, ids


def _publish(tp: PoolFixture, site: Path, signer: Signer | None) -> buildmod.BuildReport:
    """Merge what is under content/, build, commit the log state."""
    root = tp.content.parent
    git(root, "add", "content")
    git(root, "commit", "-q", "--allow-empty", "-m", "merge")
    report = buildmod.build(tp.content, site, signer=signer)
    git(root, "add", "content")
    git(root, "commit", "-q", "--allow-empty", "-m", "log state")
    return report


def _same_as_cold(
    tp: PoolFixture, site: Path, tmp_path: Path, step: str, counts: list[int]
) -> None:
    """The site equals a cold build's (whose own check is not counted)."""
    cold, before = tmp_path / f"cold-{step}", len(counts)
    buildmod.build(tp.content, cold, signer=None)
    del counts[before:]
    assert tree(site) == tree(cold), step


def _store(site: Path, signer: Signer) -> BuildCache:
    return BuildCache(writer.builds_dir(site) / "cache", key=buildcache.row_key(signer.seed))


def test_a_build_after_a_new_dream_checks_no_logged_dream_again(
    tmp_path: Path, by_dream: list[int]
) -> None:
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    assert by_dream == [0]  # nothing logged yet; then the first build's row stood
    # A child of the first dream: the parent's record is rendered again, and
    # its salt is read for it (logbuild.salt_text).
    retained: list[object] = []
    tp.add("bob", 1, lineage={"parent": ids[0], "generation": 1})
    root = tp.content.parent
    git(root, "add", "content")
    git(root, "commit", "-q", "-m", "merge")
    report = buildmod.build(tp.content, site, signer=signer, retain=retained)
    assert by_dream == [0]
    assert report.rendered == 2
    cache = retained[0]
    assert isinstance(cache, BuildCache)
    assert "commit" not in cache.sections and "salts" not in cache.sections
    record = json.loads((site / "dreams" / ids[0] / "record.json").read_text())
    salt = (tp.content / "dreams" / f"{ids[0]}.salt").read_text().strip()
    assert record["salt"] == salt
    _same_as_cold(tp, site, tmp_path, "child", by_dream)
    # The row now covers the child too: the next build checks nothing again.
    git(root, "add", "content")
    git(root, "commit", "-q", "-m", "log state")
    _publish(tp, site, signer)
    assert by_dream == [0]


@pytest.mark.parametrize("committed", [True, False])
def test_a_logged_file_changed_since_is_checked_and_refused(
    tmp_path: Path, by_dream: list[int], committed: bool
) -> None:
    tp, signer, site, ids = _published(tmp_path)
    """A logged dream's file whose title changed (it still parses; its
    signature no longer holds) is refused by the scan, so the row does not
    stand and the log stage names the leaf, as it always has."""
    path = tp.content / "dreams" / f"{ids[2]}.json"
    obj = json.loads(path.read_bytes())
    obj["title"] = "A title the author never signed"
    path.write_text(json.dumps(obj), encoding="utf-8")
    if committed:  # git then vouches for the new bytes
        git(tp.content.parent, "commit", "-q", "-am", "edit")
    before = tree(site)
    with pytest.raises(LogError, match=f"{ids[2]}.json was refused"):
        buildmod.build(tp.content, site, signer=signer)
    assert tree(site) == before


@pytest.mark.parametrize("committed", [True, False])
def test_a_logged_salt_changed_since_is_checked_and_refused(
    tmp_path: Path, by_dream: list[int], committed: bool
) -> None:
    tp, signer, site, ids = _published(tmp_path)
    salt = tp.content / "dreams" / f"{ids[1]}.salt"
    salt.write_text(b64url_encode(bytes(32)) + "\n", encoding="ascii")
    if committed:
        git(tp.content.parent, "commit", "-q", "-am", "edit the salt")
    with pytest.raises(LogError, match="changed after it was logged"):
        buildmod.build(tp.content, site, signer=signer)
    assert by_dream == [0, -1]  # checked dream by dream, and refused


def test_a_salt_read_later_must_commit_the_dream_to_its_leaf(tmp_path: Path) -> None:
    """The salt's text, read when a page shows it, must give the leaf's
    commitment with the dream the build holds (review r74): not only the
    blob the check took."""
    tp, _signer, _site, ids = _published(tmp_path)
    state = logstate.load(tp.content)
    path = tp.content / "dreams" / f"{ids[0]}.salt"
    text = path.read_text().strip()
    d = dreamfmt.parse((tp.content / "dreams" / f"{ids[0]}.json").read_bytes(), "x")
    index = next(i for i, leaf in enumerate(state.leaves) if ids[0].encode() in leaf)
    want = dreamfmt.commitment(d.body, text)
    assert logbuild.salt_text(tp.content, ids[0], index, d, want) == text
    path.write_bytes(text.encode() + b"\r\n")  # other bytes, the same salt
    assert logbuild.salt_text(tp.content, ids[0], index, d, want) == text
    with pytest.raises(LogError, match="changed after it was logged"):
        logbuild.salt_text(tp.content, ids[0], index, d, "0" * 64)
    other = dreamfmt.Dream(d.id, d.key_id, d.public_key, {**d.body, "title": "not signed"})
    with pytest.raises(LogError, match="the build cache is damaged"):
        logbuild.salt_text(tp.content, ids[0], index, other, want)
    path.write_text(b64url_encode(bytes(32)) + "\n", encoding="ascii")
    with pytest.raises(LogError, match="changed after it was logged"):
        logbuild.salt_text(tp.content, ids[0], index, d, want)
    path.unlink()
    with pytest.raises(LogError, match="lost its salt"):
        logbuild.salt_text(tp.content, ids[0], index, d, want)


def test_an_erasure_is_checked_dream_by_dream_then_stands_again(
    tmp_path: Path, by_dream: list[int]
) -> None:
    tp, signer, site, ids = _published(tmp_path)
    for p in tp.content.parent.glob("in-*.json"):
        p.unlink()  # the submitted copies, which erase would find as residue
    erase.erase(tp.content, ids[3], "author-request")
    report = _publish(tp, site, signer)
    assert report.erased == [ids[3]]
    assert by_dream == [0, 5]
    _same_as_cold(tp, site, tmp_path, "erased", by_dream)
    _publish(tp, site, signer)
    assert by_dream == [0, 5]  # the row written after the erasure stood


def test_a_row_of_another_tree_or_other_lines_does_not_stand(
    tmp_path: Path, by_dream: list[int]
) -> None:
    tp, signer, site, _ids = _published(tmp_path)
    store = _store(site, signer)
    row = checked.decode(store["logcheck"][checked.ROW])
    assert row is not None and row.size == 7  # a key leaf, then six dreams
    assert row.digest != row.public  # by each row's tag, and by its public digest
    for other in (
        checked.Checked(row.size, bytes(32), row.digest, row.public),
        checked.Checked(row.size - 1, row.root, row.digest, row.public),
        checked.Checked(row.size, row.root, bytes(16), row.public),
        checked.Checked(row.size, row.root, row.public, row.digest),  # the other digest
    ):
        store = _store(site, signer)
        store["logcheck"][checked.ROW] = checked.encode(other)
        store.save()
        by_dream.clear()
        _publish(tp, site, signer)
        assert by_dream == [6]
        assert checked.decode(_store(site, signer)["logcheck"][checked.ROW]) == row
    _same_as_cold(tp, site, tmp_path, "rows", by_dream)


@pytest.mark.parametrize("data", [b"", b"{}", bytes(71), bytes(73)])
def test_a_row_that_does_not_decode_is_named_and_written_again(
    tmp_path: Path, by_dream: list[int], data: bytes
) -> None:
    tp, signer, site, _ids = _published(tmp_path)
    store = _store(site, signer)
    row = store["logcheck"][checked.ROW]
    store["logcheck"][checked.ROW] = data
    store.save()
    report = _publish(tp, site, signer)
    assert by_dream == [0, 6]
    assert any("logcheck row was not one this build writes" in n for n in report.notes)
    assert _store(site, signer)["logcheck"][checked.ROW] == row


def test_a_row_written_without_the_log_key_is_not_taken_by_a_signing_build(
    tmp_path: Path, by_dream: list[int]
) -> None:
    """T81: a build with the log key takes only rows tagged with its row key;
    one a build without it wrote (here, the very row) is checked again."""
    tp, signer, site, _ids = _published(tmp_path)
    row = _store(site, signer)["logcheck"][checked.ROW]
    untagged = BuildCache(writer.builds_dir(site) / "cache")
    untagged["logcheck"][checked.ROW] = row + b"\0"  # a change, so it is written
    untagged.save()
    untagged = BuildCache(writer.builds_dir(site) / "cache")
    untagged["logcheck"][checked.ROW] = row
    untagged.save()
    report = _publish(tp, site, signer)
    assert by_dream == [0, 6]
    assert any("logcheck" in n for n in report.notes), report.notes
    assert _store(site, signer)["logcheck"][checked.ROW] == row


def test_without_git_every_logged_dream_is_checked(tmp_path: Path, by_dream: list[int]) -> None:
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    tp.add("ada", 4)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    tp.add("bob", 1)
    buildmod.build(tp.content, site, signer=signer)
    assert by_dream == [0, 4]
    _same_as_cold(tp, site, tmp_path, "no-git", by_dream)


def test_a_row_is_72_bytes_and_nothing_else_decodes() -> None:
    row = checked.Checked(2**40, bytes(range(32)), bytes(range(16)), bytes(range(16, 32)))
    assert len(checked.encode(row)) == 72
    assert checked.decode(checked.encode(row)) == row
    assert checked.decode(None) is None
    assert checked.decode(checked.encode(row) + b"\0") is None
    assert checked.decode(checked.encode(row)[:-1]) is None


def test_a_line_names_blob_ids_and_its_scan_row() -> None:
    blob, row = "0" * 40, bytes(range(16))
    assert checked.line("0123456789abcdef", 3, blob, blob, row) == (
        f"0123456789abcdef\t3\t{blob}\t{blob}\t{row.hex()}\n".encode()
    )
    with pytest.raises(ValueError):
        checked.line("0123456789abcdef", 3, blob + "\t", blob, row)
    with pytest.raises(ValueError):
        checked.line("0123456789abcdef", 3, blob, "0" * 39, row)
    lines = [("0123456789abcdef", 3, blob, blob), ("fedcba9876543210", 5, "1" * 40, blob)]
    rows = {blob: row, "1" * 40: bytes(16)}
    assert (
        checked.digest(lines, rows.get)
        == hashlib.blake2b(
            b"".join(checked.line(*x, rows[x[2]]) for x in lines), digest_size=16
        ).digest()
    )
    assert checked.digest(lines, rows.get) != checked.digest(lines, {**rows, blob: bytes(16)}.get)
    assert checked.digest(lines, {blob: row}.get) is None  # a row neither read nor written
    assert checked.digest([], {}.get) == checked.digest([], {blob: row}.get)


def test_the_store_names_each_scan_row_as_it_read_or_wrote_it(tmp_path: Path) -> None:
    """BuildCache.scan_row: the digest of the row under a blob as the build
    read it or wrote it, whether written by save() or a batch at a time
    (kept_scan's Rows): the tag SQLite holds for it, with the log key (the
    one the row is taken by: review r76), else its public digest."""
    tp, signer, site, _ids = _published(tmp_path)
    # A cold build of the logged pool: its dreams are taken by their leaves
    # and their rows written a batch at a time (kept_scan); the row it
    # records then stands.
    other = tmp_path / "other"
    retained: list[object] = []
    buildmod.build(tp.content, other, signer=signer, retain=retained)
    cache = retained[0]
    assert isinstance(cache, BuildCache)
    with sqlite3.connect(writer.builds_dir(other) / "cache" / buildcache.STORE) as db:
        held = dict(db.execute('SELECT k, a FROM "scan"'))
    assert held and {blob: cache.scan_row(blob) for blob in held} == held
    assert checked.decode(_store(other, signer)["logcheck"].get(checked.ROW)) is not None
    store = _store(site, signer)
    scan = store["scan"]
    folder = writer.builds_dir(site) / "cache"
    with sqlite3.connect(folder / buildcache.STORE) as db:
        held = dict(db.execute('SELECT k, a FROM "scan"'))
        public = dict(db.execute('SELECT k, d FROM "scan"'))
    assert held and {blob: store.scan_row(blob) for blob in scan} == held
    reader = BuildCache(folder)  # without the key: the public digest
    assert {blob: reader.scan_row(blob) for blob in reader["scan"]} == public
    blob = next(iter(scan))
    digest, d = scan[blob]
    body = d.body
    other = dreamfmt.Dream(d.id, d.key_id, d.public_key, {**body, "title": "again"})
    scan[blob] = (digest, other)
    store.save()
    with sqlite3.connect(folder / buildcache.STORE) as db:
        (written,) = db.execute('SELECT a FROM "scan" WHERE k = ?', (blob,)).fetchone()
    assert store.scan_row(blob) == written != held[blob]
    del scan[blob]
    store.save()
    assert store.scan_row(blob) is None


class _Rows:
    """A stand-in for the store's scan rows (checked.ScanRows)."""

    def __init__(self, tagged: bool, rows: dict[str, Any], public: dict[str, Any]) -> None:
        self.tagged, self.rows, self.public = tagged, rows, public

    def scan_row(self, blob: str) -> bytes | None:
        return self.rows.get(blob)

    def scan_row_public(self, blob: str) -> bytes | None:
        return self.public.get(blob) if self.tagged else self.rows.get(blob)


def _reference(lines: list[checked.Line], rows: _Rows) -> tuple[bytes, bytes] | None:
    """checked.digest over every line, as a build recorded the row before
    Hashing kept its state: the naive witness Hashing is held to."""
    digest = checked.digest(lines, rows.scan_row)
    if digest is None:
        return None
    if not rows.tagged:
        return digest, digest
    return digest, checked.digest(lines, rows.scan_row_public) or bytes(16)


@pytest.mark.parametrize("seed", range(40))
def test_hashing_from_its_kept_state_equals_the_digest_of_every_line(seed: int) -> None:
    """Checked.Hashing, appended to and asked again with rows written again,
    removed, or their public digests set to anything in between, gives what
    checked.digest gives over all its lines each time."""
    rng = random.Random(seed)
    blobs = [hashlib.sha1(bytes([i])).hexdigest() for i in range(12)]
    tagged = rng.random() < 0.7
    rows = _Rows(
        tagged,
        {b: rng.randbytes(16) for b in blobs},
        {b: rng.randbytes(16) for b in blobs},
    )
    lines: list[checked.Line] = []
    hashing = checked.Hashing()
    for step in range(25):
        for _ in range(rng.randrange(3)):
            line = (f"dream{len(lines):04d}", len(lines), rng.choice(blobs), rng.choice(blobs))
            lines.append(line)
            hashing.append(line)
        change = rng.random()
        blob = rng.choice(blobs)
        if change < 0.3:
            rows.rows[blob] = rng.randbytes(16)  # written again
        elif change < 0.4:
            rows.rows.pop(blob, None)  # deleted, or never read
        elif change < 0.5:
            rows.public[blob] = rng.choice([rng.randbytes(16), None, "x", rows.rows.get(blob)])
        elif change < 0.55:
            rows.tagged = not rows.tagged
        elif change < 0.6:
            rows.rows[blob] = rng.randbytes(16)
            rows.public[blob] = rng.randbytes(16)
        assert hashing.digests(rows) == _reference(lines, rows), (seed, step)
        assert len(hashing) == len(lines)


def test_hashing_again_after_a_row_came_back_counts_every_line_once() -> None:
    """A row missing when asked (None) leaves the state as it was: asked
    again once the row is there, no line is hashed twice."""
    blob, other = "a" * 40, "b" * 40
    rows = _Rows(True, {blob: bytes(16)}, {blob: bytes(range(16))})
    lines: list[checked.Line] = [("x", 0, blob, blob), ("y", 1, other, blob)]
    hashing = checked.Hashing(lines[:1])
    assert hashing.digests(rows) == _reference(lines[:1], rows)
    hashing.append(lines[1])
    assert hashing.digests(rows) is None
    rows.rows[other], rows.public[other] = bytes(range(1, 17)), bytes(range(2, 18))
    assert hashing.digests(rows) == _reference(lines, rows)


def test_a_build_whose_check_stands_writes_each_line_once_for_each_digest(
    tmp_path: Path, by_dream: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A +1 whose check stands writes each standing line's text once for
    each of the row's two digests (with the row's tag, with its public
    digest) and the new dream's twice, not every line again when the row is
    recorded: at 100k dreams each pass built and hashed 100k lines."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    assert by_dream == [0]
    tp.add("bob", 1)
    texts: list[str] = []
    write = checked._text

    def counted(*args: Any) -> str:
        texts.append(args[0])
        return write(*args)

    monkeypatch.setattr(checked, "_text", counted)
    _publish(tp, site, signer)
    assert by_dream == [0]
    assert len(texts) == 2 * (len(ids) + 1)
    assert set(Counter(texts).values()) == {2} and set(ids) < set(texts)
    monkeypatch.setattr(checked, "_text", write)
    _same_as_cold(tp, site, tmp_path, "plus one", by_dream)
    _publish(tp, site, signer)
    assert by_dream == [0]  # the row recorded from the kept state stands
