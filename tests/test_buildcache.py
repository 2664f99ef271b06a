"""The build store (builder.buildcache): data only, rows written only when
they change, damage and links that cost time only; fragments kept deflated
(builder.site.units)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pickle
import shutil
import sqlite3
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder import build as buildmod
from builder import buildcache
from builder.buildcache import BuildCache
from builder.formats.checkpoint import Checkpoint
from builder.formats.dream import Dream
from builder.formats.note import parse_private_key
from builder.log import checked
from builder.site import units
from tests.pools import make_pool


def _reload(folder: Path, name: str) -> dict[object, object]:
    return BuildCache(folder)[name]


def _unit(i: int, tag: str = "key") -> tuple[str, tuple[tuple[str, bytes], ...]]:
    """A units row: a unit key (32 hex, a digest of ``tag`` and ``i`` here) and its files."""
    key = hashlib.blake2b(f"{tag}{i}".encode(), digest_size=16).hexdigest()
    return (key, ((f"dreams/{i:016x}/index.html", bytes(16)),))


def _key(i: int) -> str:
    """A unit's key, as the fragments section is keyed (builder.site.units.Units.key)."""
    return f"{i:032x}"


FRAGMENTS = (b"card", units.squeeze(b"diary"), b"entry", b"search")


def _fill(folder: Path, n: int) -> dict[object, object]:
    c = BuildCache(folder)
    section = c["units"]
    section.update({f"id{i}": _unit(i) for i in range(n)})
    c.save()
    return dict(section)


def _db(folder: Path) -> sqlite3.Connection:
    return sqlite3.connect(folder / buildcache.STORE, isolation_level=None)


def _blob(i: int) -> str:
    """A git blob id, as the scan, salts and keys sections are keyed (builder.content.filekeys)."""
    return f"{i:040x}"


def _sha(i: int) -> str:
    """A SHA-256 in hex, as each of their entries carries."""
    return f"{i:064x}"


SAMPLES: dict[str, tuple[object, object]] = {
    "scan": (
        _blob(1),
        (
            _sha(1),
            Dream(
                "0" * 16,
                "sha256:" + "1" * 16,
                bytes(32),
                {
                    "author": "ada",
                    "title": "t",
                    "tags": ["a"],
                    "entries": [{"text": "x", "type": "fact", "confidence": "confirmed"}],
                    # every verified dream has one, and the site model reads it
                    "consent": {"share": True, "anonymize": False},
                },
            ),
        ),
    ),
    "commit": ((_sha(2), "salt"), "commitment"),
    "salts": (_blob(3), (_sha(3), "c2FsdA")),
    "keys": (_blob(4), (_sha(4), {"author": "ada", "tier": "guest"})),
    "shards": (bytes(range(32)), True),
    "notes": (bytes(32), Checkpoint("example.org/pool", 7, bytes(32), ("ext",))),
    "units": ("0123456789abcdef", _unit(5)),
    "fragments": (_key(5), FRAGMENTS),
    "pages": ("tags/a/index.html", ("key", bytes(16))),
    "words": ("0123456789abcdef", (("parser", "tokens"), (("fact", ("parser",)),))),
    "patterns": (_sha(5), b'[2,"member",0,[],[],[],[]]'),
    "counts": ("member", b'["dreampool-pattern-counts/1","member",0,"",[],[],[],[],[]]'),
    "seals": ("b", bytes(range(32))),
    "attested": ("log", (12, bytes(range(32)))),
    "logprefix": (_sha(6), b'{"format":"dreampool-log-prefix/1"}\n' + bytes(range(64))),
    "unitbasis": ("units", b'{"size":0}'),
    "logcheck": ("log", bytes(72)),
}


def test_every_section_reads_back_what_it_stored(tmp_path: Path) -> None:
    assert set(SAMPLES) == set(BuildCache.SECTIONS)
    c = BuildCache(tmp_path)
    for name, (key, value) in SAMPLES.items():
        c[name][key] = value
    c.save()
    again = BuildCache(tmp_path)
    for name, (key, value) in SAMPLES.items():
        assert again[name] == {key: value}, name
    assert again.notes == []


def test_a_dream_read_back_decodes_its_text_only_when_it_is_read(tmp_path: Path) -> None:
    """The scan section keeps a dream's head apart from its body: list pages and
    unit keys read the head, and the text of a dream no page renders again
    stays undecoded (a build after one new dream renders a few)."""
    blob, (digest, dream) = SAMPLES["scan"]
    c = BuildCache(tmp_path)
    c["scan"][blob] = (digest, dream)
    c.save()
    again_digest, again = _reload(tmp_path, "scan")[blob]  # type: ignore[misc]
    assert again_digest == digest
    assert (again.id, again.key_id, again.public_key) == (dream.id, dream.key_id, dream.public_key)
    assert (again.author, again.title, again.entry_types) == ("ada", "t", ("fact",))
    assert again.head == {
        "author": "ada",
        "title": "t",
        "tags": ["a"],
        "consent": {"share": True, "anonymize": False},
    }
    assert not again.loaded
    assert again.body == dream.body and again.loaded
    assert again == dream


def _long_dream(i: int) -> Dream:
    """A dream whose text is long (eight entries of 600 characters) beside its head."""
    entries = [
        {"text": f"{i} {j} " + "lorem ipsum dolor " * 33, "type": "fact", "confidence": "likely"}
        for j in range(8)
    ]
    body = {
        "author": "ada",
        "title": f"dream {i}",
        "tags": ["a", "b"],
        "summary": "s" * 600,
        "entries": entries,
        "consent": {"share": True, "anonymize": False},
    }
    return Dream(f"{i:016x}", "sha256:" + "1" * 16, bytes(32), body)


def test_a_dream_read_back_keeps_no_copy_of_its_text(tmp_path: Path) -> None:
    """The scan section is read whole, one row a dream, and each deferred body
    is read from the store again when first asked for (issue 21: the store is
    the build's memory). Held from the rows, the bodies were 150 MB of a no-op
    build's 1.08 GB at 100k dreams, for the few dreams a build renders."""
    n = 300
    dreams = {_blob(i): (_sha(i), _long_dream(i)) for i in range(n)}
    c = BuildCache(tmp_path)
    c["scan"].update(dreams)
    c.save()
    body_bytes = len(json.dumps(_long_dream(0).body))
    assert body_bytes > 5000
    tracemalloc.start()
    try:
        section = BuildCache(tmp_path)["scan"]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(section) == n
    assert held / n < 2500, f"{held / n:.0f} bytes a dream, for a body of {body_bytes}"
    # Each body is still there when asked for, and the very one stored.
    for blob, (_, dream) in dreams.items():
        assert section[blob][1].body == dream.body


def test_dreams_read_back_share_what_they_hold_alike(tmp_path: Path) -> None:
    """An author's name and key, tag names, a consent and entry types are one
    object each across the section's dreams (a build holds every dream's head);
    equal values only, and each head still equal to its body's."""
    c = BuildCache(tmp_path)
    c["scan"].update({_blob(i): (_sha(i), _long_dream(i)) for i in range(3)})
    odd = _long_dream(3)
    odd_body = {**odd.body, "consent": {"share": True, "anonymize": False, "x": 1}}
    c["scan"][_blob(3)] = (_sha(3), Dream(odd.id, odd.key_id, odd.public_key, odd_body))
    c.save()
    section = BuildCache(tmp_path)["scan"]
    a, b, _, d = (section[_blob(i)][1] for i in range(4))
    assert a.head["author"] is b.head["author"] and a.key_id is b.key_id
    assert a.public_key is b.public_key and a.entry_types[0] is b.entry_types[0]
    assert all(x is y for x, y in zip(a.head["tags"], b.head["tags"], strict=True))
    assert a.head["consent"] is b.head["consent"]
    assert d.head["consent"] == {"share": True, "anonymize": False, "x": 1}
    assert d.head["consent"] is not a.head["consent"]
    for i in range(3):
        dream = section[_blob(i)][1]
        assert dream.body == _long_dream(i).body and dream.title == f"dream {i}"


def test_a_body_read_again_is_checked_as_the_row_was(tmp_path: Path) -> None:
    """The body read when first asked for is the store's row as it is then: its
    digest must hold (a row that no longer holds is named, not trusted), and
    a row that is gone names the dream and says to build again."""
    blob, entry = SAMPLES["scan"]
    c = BuildCache(tmp_path)
    c["scan"][blob] = entry
    c.save()
    damaged = BuildCache(tmp_path)["scan"][blob][1]
    gone = BuildCache(tmp_path)["scan"][blob][1]
    db = _db(tmp_path)
    db.execute('UPDATE "scan" SET d = ? WHERE k = ?', (bytes(16), blob))
    with pytest.raises(buildcache.StoreDamaged, match="dream 0000000000000000") as caught:
        _ = damaged.body
    assert "build again" in (caught.value.hint or "")
    db.execute('DELETE FROM "scan" WHERE k = ?', (blob,))
    db.close()
    with pytest.raises(buildcache.StoreDamaged, match="dream 0000000000000000: its row"):
        _ = gone.body


def test_a_body_whose_row_is_gone_is_read_from_the_dream_file(tmp_path: Path) -> None:
    """With its row gone (or the store busy), a deferred body comes from
    ``dream_files`` (the build's: the dream file, if its bytes are those the
    row was made from), asked with the dream's id and the row's SHA-256, and
    is held to the stored head as a row's body is."""
    blob, (digest, dream) = SAMPLES["scan"]
    c = BuildCache(tmp_path)
    c["scan"][blob] = (digest, dream)
    c.save()
    asked: list[tuple[str, str]] = []

    def files(dream_id: str, sha: str) -> Any:
        asked.append((dream_id, sha))
        return json.loads(json.dumps(dream.body))

    reader, other = BuildCache(tmp_path), BuildCache(tmp_path)
    reader.dream_files = files
    other.dream_files = lambda dream_id, sha: {**dream.body, "title": "PWNED"}
    found, forged = reader["scan"][blob][1], other["scan"][blob][1]
    db = _db(tmp_path)
    db.execute('DELETE FROM "scan"')
    db.close()
    assert found.body == dream.body and asked == [(dream.id, digest)]
    with pytest.raises(buildcache.StoreDamaged, match="does not match the head"):
        _ = forged.body


def _forge_scan_row(folder: Path, edit: Any) -> None:
    """Rewrite every scan row's body with ``edit(body)``, its digest made to match:
    what only a process that writes the store itself can do."""
    db = _db(folder)
    for k, v in db.execute('SELECT k, v FROM "scan"').fetchall():
        head, _, body = v.partition(b"\n")
        forged = head + b"\n" + json.dumps(edit(json.loads(body))).encode()
        db.execute(
            'UPDATE "scan" SET v = ?, d = ? WHERE k = ?',
            (forged, buildcache._row_digest(k, forged), k),
        )
    db.close()


@pytest.mark.parametrize(
    "edit",
    [
        lambda b: {**b, "title": "PWNED"},  # the head says otherwise
        lambda b: {**b, "entries": [{"type": "rule"}]},  # so do the entry types
        lambda b: {**b, "entries": "fact"},  # not the list of entries the types count
    ],
    ids=["title", "entry-types", "entries-not-a-list"],
)
def test_a_body_that_disagrees_with_its_stored_head_is_named_when_read(
    tmp_path: Path, edit: Any
) -> None:
    """T44: a row whose digest holds but whose body and head disagree (only a
    writer of the store makes one) stops the read, naming the dream."""
    blob, entry = SAMPLES["scan"]
    c = BuildCache(tmp_path)
    c["scan"][blob] = entry
    c.save()
    _forge_scan_row(tmp_path, edit)
    _, again = _reload(tmp_path, "scan")[blob]  # type: ignore[misc]
    assert again.title == "t"  # the head reads as stored
    with pytest.raises(buildcache.StoreDamaged) as caught:
        _ = again.body
    assert "0" * 16 in caught.value.message and "build store" in caught.value.message
    assert "delete the build store" in (caught.value.hint or "")


def test_the_store_holds_data_only(tmp_path: Path) -> None:
    """T44: every value is data (JSON text, text, or lengths and the bytes they
    count); nothing in the file is a pickle (or any format that runs code when read)."""
    c = BuildCache(tmp_path)
    for name, (key, value) in SAMPLES.items():
        c[name][key] = value
    c.save()
    for name in SAMPLES:
        for (v,) in _db(tmp_path).execute(f'SELECT v FROM "{name}"'):
            if name == "units":  # lengths, then the bytes they count
                assert buildcache._unit_in(v) == SAMPLES["units"][1]
            elif name == "fragments":
                assert buildcache._fragments_in(v) == SAMPLES["fragments"][1]
            elif name == "scan":  # a dream's head, then its body
                head, body = v.split(b"\n")
                json.loads(head), json.loads(body)
            elif name == "seals":  # fixed-size bytes, read by slicing
                assert buildcache._seal_in(v) == SAMPLES["seals"][1]
            elif name == "attested":  # a size and a root in hex
                assert v == b"12 " + bytes(range(32)).hex().encode()
            elif name == "logprefix":  # a line of JSON, then hashes (builder.log.prefix)
                head, _, hashes = v.partition(b"\n")
                json.loads(head)
                assert len(hashes) % 32 == 0
            elif name == "commit":  # a text row: its UTF-8
                assert v == b"commitment"
            elif name == "salts":  # the file's digest, then the text
                assert v == b'["' + _sha(3).encode() + b'",c2FsdA]'
            elif name == "logcheck":  # a size, a root and a digest: fixed-size bytes
                assert checked.decode(v) == checked.Checked(0, bytes(32), bytes(16), bytes(16))
            else:
                json.loads(v)
    assert b"\x80\x05" not in (tmp_path / buildcache.STORE).read_bytes()  # pickle's protocol 5


def test_a_shape_the_store_does_not_keep_is_computed_again(tmp_path: Path) -> None:
    c = BuildCache(tmp_path)
    c["keys"][_blob(1)] = (_sha(1), {"added": object()})  # not plain text: not stored
    c["keys"][_blob(2)] = (_sha(2), {"author": "ada"})
    c.save()
    assert _reload(tmp_path, "keys") == {_blob(2): (_sha(2), {"author": "ada"})}


def test_a_save_writes_only_the_rows_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = _fill(tmp_path, 100)
    c = BuildCache(tmp_path)
    section = c["units"]
    section["id3"] = _unit(3, "changed")
    section["new"] = _unit(7, "new")
    del section["id7"]
    written = []
    digest = buildcache._row_digest
    monkeypatch.setattr(buildcache, "_row_digest", lambda k, v: written.append(k) or digest(k, v))
    c.save()
    monkeypatch.undo()
    assert sorted(written) == ["id3", "new"]
    want.update({"id3": _unit(3, "changed"), "new": _unit(7, "new")})
    del want["id7"]
    assert _reload(tmp_path, "units") == want


def test_an_unchanged_section_is_not_written(tmp_path: Path) -> None:
    _fill(tmp_path, 10)
    before = (tmp_path / buildcache.STORE).stat()
    c = BuildCache(tmp_path)
    c["units"]["id1"] = c["units"]["id1"]  # the same object: no change
    c.sections["pages"] = {}
    c.save()
    after = (tmp_path / buildcache.STORE).stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_a_deleted_row_leaves_no_bytes_in_the_file(tmp_path: Path) -> None:
    """T48: an erased dream's rows are overwritten, not only unlinked from the
    b-tree (secure_delete), and no journal is left beside the store."""
    c = BuildCache(tmp_path)
    c["pages"]["erasedcanary/index.html"] = ("erasedcanarykey", bytes(16))
    c["pages"]["kept/index.html"] = ("kept", bytes(16))
    c.save()
    assert b"erasedcanary" in (tmp_path / buildcache.STORE).read_bytes()
    c = BuildCache(tmp_path)
    del c["pages"]["erasedcanary/index.html"]
    c.save()
    assert b"erasedcanary" not in (tmp_path / buildcache.STORE).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == [buildcache.STORE]


def test_a_store_of_other_code_reads_as_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(tmp_path, 3)
    monkeypatch.setattr(buildcache, "code_digest", lambda: "0" * 64)
    assert _reload(tmp_path, "units") == {}


@pytest.mark.parametrize(
    "data", [b"", b"junk", b"SQLite format 3\x00" + os.urandom(4000), os.urandom(8192)]
)
def test_garbage_and_foreign_files_read_as_empty_and_are_replaced(
    tmp_path: Path, data: bytes
) -> None:
    (tmp_path / buildcache.STORE).write_bytes(data)
    c = BuildCache(tmp_path)
    assert c["units"] == {}
    c["units"]["id1"] = _unit(1)
    c.save()
    assert _reload(tmp_path, "units") == {"id1": _unit(1)}


def test_a_damaged_row_is_a_miss_and_the_others_stay(tmp_path: Path) -> None:
    want = _fill(tmp_path, 5)
    db = _db(tmp_path)
    (v,) = db.execute("SELECT v FROM units WHERE k = 'id2'").fetchone()
    db.execute("UPDATE units SET v = ? WHERE k = 'id2'", (v[:-1] + bytes([v[-1] ^ 1]),))
    db.close()
    c = BuildCache(tmp_path)
    del want["id2"]
    assert c["units"] == want
    assert c.notes == ["the build store's units had 1 damaged row(s); ignored"]


def test_a_planted_row_of_another_shape_is_a_miss(tmp_path: Path) -> None:
    """T44: a row whose digest is right but whose value is not what the build
    writes (here a pickle's bytes, and a dream whose key is not 32 bytes) is
    never decoded into an entry."""
    _fill(tmp_path, 1)
    db = _db(tmp_path)
    bad = {
        "units": ("x", b"\x80\x05K\x01."),
        "scan": (_blob(9), json.dumps([_sha(9), ["0" * 16, "k", "AAAA", {}]]).encode()),
    }
    for table, (k, v) in bad.items():
        db.execute(
            f"INSERT INTO {table} VALUES (?, ?, ?, NULL)", (k, v, buildcache._row_digest(k, v))
        )
    db.close()
    c = BuildCache(tmp_path)
    assert "x" not in c["units"] and c["scan"] == {}
    assert len(c.notes) == 2


def test_links_in_the_store_folder_are_removed_never_followed(tmp_path: Path) -> None:
    """T45: the store file, a journal name or the folder itself as a symlink,
    and the store as a hard link to a file elsewhere: each is removed as a
    link, and what it named is left as it was."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"keep me")
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / buildcache.STORE).symlink_to(victim)
    (folder / (buildcache.STORE + "-journal")).symlink_to(victim)
    c = BuildCache(folder)
    c["units"]["id1"] = _unit(1)
    c.save()
    assert victim.read_bytes() == b"keep me"
    assert not (folder / buildcache.STORE).is_symlink()
    shutil.rmtree(folder)
    folder.symlink_to(outside)
    c = BuildCache(folder)
    c["units"]["id1"] = _unit(1)
    c.save()
    assert folder.is_dir() and not folder.is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]
    shutil.rmtree(folder)
    folder.mkdir()
    os.link(victim, folder / buildcache.STORE)
    c = BuildCache(folder)
    assert c["units"] == {}
    c["units"]["id1"] = _unit(1)
    c.save()
    assert victim.read_bytes() == b"keep me"
    assert any("link" in n for n in c.notes)


def test_files_of_the_pickle_cache_are_removed_unread(tmp_path: Path) -> None:
    for name in ("scan", "units", "jinja"):
        (tmp_path / name).write_bytes(b"dreampool-cache/3\n")
    c = BuildCache(tmp_path)
    assert c["scan"] == {}
    c.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == [buildcache.STORE]


def test_a_unit_key_leaves_out_only_what_the_leaf_hash_binds() -> None:
    # builder.site.units keys a dream's unit by its leaf hash instead of its text;
    # that holds only for view fields copied from the signed body unchanged.
    import dataclasses

    from builder.site import model, units

    names = {f.name for f in dataclasses.fields(model.DreamView)}
    assert names >= units.BODY_FIELDS
    assert set(units.VIEW_FIELDS) == names - units.BODY_FIELDS
    assert {"tags", "tier", "children", "parent_in_pool", "author_slug"} <= set(units.VIEW_FIELDS)


@given(st.binary(max_size=4096))
def test_a_squeezed_fragment_reads_back_as_rendered(fragment: bytes) -> None:
    stored = units.squeeze(fragment)
    assert stored[:1] == units.SQUEEZED
    assert units.unsqueeze(stored) == fragment


@given(st.binary(max_size=512).filter(lambda b: b[:1] != units.SQUEEZED))
def test_a_raw_fragment_reads_back_unchanged(fragment: bytes) -> None:
    # Caches written below SQUEEZE_ABOVE hold raw fragments; a pool that
    # grows past it reads them beside squeezed ones.
    assert units.unsqueeze(fragment) is fragment


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("section", ["scan", "notes"])
def test_a_garbled_byte_in_a_section_builds_what_a_cold_build_does(
    tmp_path: Path, section: str
) -> None:
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    [first, *_] = tp.add("ada", 3)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    note = (site / "log" / "checkpoint").read_bytes()
    tp.add("bob", 1)
    buildmod.build(tp.content, site, signer=signer)  # opens the first checkpoint: notes
    if section == "notes":  # the root of the first checkpoint, as the store keeps it
        old = base64.b64encode(base64.b64decode(note.split(b"\n")[2]))
    else:  # a letter of a dream's title (in its body)
        title = json.loads((tp.content / "dreams" / f"{first}.json").read_bytes())["title"]
        old = title.encode()
    path = tmp_path / ".site.builds" / "cache" / buildcache.STORE
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, old[:5] + bytes([old[5] ^ 0x01]) + old[6:], 1))
    buildmod.build(tp.content, site, signer=None)
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert _tree(site) == _tree(cold)


@given(
    st.text(alphabet="0123456789abcdef", min_size=32, max_size=32),
    st.lists(st.binary(max_size=64), min_size=4, max_size=4),
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=20).filter(lambda t: "\n" not in t),
            st.binary(min_size=16, max_size=16),
        ),
        max_size=3,
    ),
)
def test_a_unit_row_reads_back_and_any_cut_of_it_is_refused(
    key: str, fragments: list[bytes], files: list[tuple[str, bytes]]
) -> None:
    """The binary unit and fragments records: what is written reads back
    equal; a record cut anywhere, or grown by a byte, never decodes."""
    unit = (key, tuple(files))
    data = buildcache._unit_out(unit)
    assert buildcache._unit_in(data) == unit
    for cut in (data[:-1], data + b"x", data[: len(data) // 2]):
        with pytest.raises((ValueError, UnicodeDecodeError, struct.error)):
            buildcache._unit_in(cut)
    data = buildcache._fragments_out(tuple(fragments))
    assert buildcache._fragments_in(data) == tuple(fragments)
    for cut in (data[:-1], data + b"x", data[: len(data) // 2]):
        with pytest.raises((ValueError, struct.error)):
            buildcache._fragments_in(cut)


# --- Rows: a section read and written a row at a time ------------------------


def test_rows_read_back_what_was_put_and_retain_drops_the_rest(tmp_path: Path) -> None:
    rows = BuildCache(tmp_path).rows("fragments")
    for i in range(5):
        rows.put(_key(i), (b"card%d" % i, b"", b"", b""))
    assert rows.get(_key(3))[0] == b"card3"  # from the buffer, before any flush
    rows.flush()
    rows.retain([_key(1), _key(3)])
    rows.close()
    again = BuildCache(tmp_path).rows("fragments")
    assert again.get(_key(1))[0] == b"card1" and again.get(_key(3))[0] == b"card3"
    assert again.get(_key(0)) is None and again.get(_key(4)) is None
    again.close()
    # T48: the deleted rows' text is nowhere in the file (secure_delete).
    assert b"card0" not in (tmp_path / buildcache.STORE).read_bytes()


def test_rows_are_written_in_batches_not_held(tmp_path: Path) -> None:
    rows = BuildCache(tmp_path).rows("fragments")
    for i in range(buildcache.Rows.FLUSH + 1):
        rows.put(_key(i), FRAGMENTS)
    assert len(rows._pending) == 1  # the first FLUSH rows went to the store
    stored = _db(tmp_path).execute('SELECT count(*) FROM "fragments"').fetchone()[0]
    assert stored == buildcache.Rows.FLUSH


def test_a_damaged_row_is_a_miss_and_counted(tmp_path: Path) -> None:
    rows = BuildCache(tmp_path).rows("fragments")
    rows.put(_key(1), FRAGMENTS)
    rows.put(_key(2), FRAGMENTS)
    rows.flush()
    db = _db(tmp_path)
    db.execute('UPDATE "fragments" SET v = ? WHERE k = ?', (b"\0" * 20, _key(1)))
    db.close()
    again = BuildCache(tmp_path).rows("fragments")
    assert again.get(_key(1)) is None and again.damaged == 1
    assert again.get(_key(2)) == FRAGMENTS
    again.close()


def test_rows_without_a_store_stay_in_memory(tmp_path: Path) -> None:
    rows = BuildCache(None).rows("fragments")
    for i in range(buildcache.Rows.FLUSH + 5):
        rows.put(_key(i), FRAGMENTS)
    assert rows.get(_key(0)) == FRAGMENTS


def test_rows_of_a_store_that_fails_keep_what_was_put(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    rows = cache.rows("fragments")
    rows.put(_key(1), FRAGMENTS)
    (tmp_path / buildcache.STORE).unlink(missing_ok=True)
    (tmp_path / buildcache.STORE).mkdir()  # the store's path is now a folder: sqlite fails
    cache._ready = True  # as after the build's first use of the folder
    rows.flush()
    assert rows.get(_key(1)) == FRAGMENTS
    assert any("afresh" in n or "busy" in n for n in cache.notes), cache.notes


def test_no_reading_connection_crosses_a_fork(tmp_path: Path) -> None:
    """An SQLite connection must never be copied into a forked child: Rows
    closes its own before any fork, and the next read opens another."""
    rows = BuildCache(tmp_path).rows("fragments")
    rows.put(_key(1), FRAGMENTS)
    rows.flush()
    assert rows.get_many([_key(1)]) == {_key(1): FRAGMENTS}
    assert rows._db is not None
    pid = os.fork()
    if pid == 0:  # the child: nothing open was inherited
        os._exit(0 if rows._db is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert rows._db is None
    assert rows.get(_key(1)) == FRAGMENTS  # and reading goes on
    rows.close()


# --- StoreReader: the store as another process reads it ----------------------------


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the store folder: its bytes and mtime."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_a_store_reader_reads_what_the_build_stored_and_changes_nothing(tmp_path: Path) -> None:
    stored = _fill(tmp_path, 3)
    before = _state(tmp_path)
    reader = buildcache.StoreReader(tmp_path)
    assert reader.readable()
    assert reader["units"] == stored and reader["scan"] == {} and reader.notes == []
    with pytest.raises(TypeError, match="never writes"):
        reader.save()
    assert _state(tmp_path) == before


@pytest.mark.parametrize("kind", ["other code", "garbage", "other shape", "busy"])
def test_a_store_reader_reads_a_store_it_cannot_use_as_empty_and_leaves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Where a build would start the store afresh (BuildCache._discard), a reader
    reads nothing and removes nothing: the store is the build's to replace."""
    _fill(tmp_path, 3)
    if kind == "other code":
        monkeypatch.setattr(buildcache, "code_digest", lambda: "0" * 64)
    elif kind == "garbage":
        (tmp_path / buildcache.STORE).write_bytes(b"SQLite format 3\x00" + bytes(4000))
    elif kind == "other shape":
        with _db(tmp_path) as db:
            db.execute('ALTER TABLE "units" ADD COLUMN x TEXT')
    before = _state(tmp_path)
    holder = _db(tmp_path)
    if kind == "busy":
        holder.execute("BEGIN EXCLUSIVE")
        monkeypatch.setattr(sqlite3, "connect", _quick(sqlite3.connect))
    try:
        reader = buildcache.StoreReader(tmp_path)
        assert not reader.readable()
        assert reader["units"] == {} and reader["pages"] == {}
        assert len(reader.notes) == 1 and "did without it" in reader.notes[0]
    finally:
        holder.close()
    assert _state(tmp_path) == before


def _quick(connect: Any) -> Any:
    def quick(*args: Any, **kw: Any) -> Any:
        kw["timeout"] = 0.1
        return connect(*args, **kw)

    return quick


@pytest.mark.parametrize("kind", ["link", "hard link", "missing", "folder link"])
def test_a_store_reader_opens_no_link_and_no_file_it_did_not_find(
    tmp_path: Path, kind: str
) -> None:
    real = tmp_path / "real"
    stored = _fill(real, 2)
    folder = tmp_path / "cache"
    if kind == "folder link":
        folder.symlink_to(real)
    else:
        folder.mkdir()
        if kind == "link":
            (folder / buildcache.STORE).symlink_to(real / buildcache.STORE)
        elif kind == "hard link":
            os.link(real / buildcache.STORE, folder / buildcache.STORE)
    reader = buildcache.StoreReader(folder)
    assert not reader.readable()
    assert reader["units"] == {} != stored
    assert sorted(p.name for p in real.iterdir()) == [buildcache.STORE]
    if kind == "missing":
        assert list(folder.iterdir()) == []  # nothing made


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"x": [1, "a", {"y": False}]}, {"x": [1, "a", {"y": False}]}, True),
        ({"y": False}, {"y": 0}, False),  # equal in Python, not as JSON
        ([1], [True], False),
        ([1], [1.0], False),
        ({"x": 1}, {"x": 1, "z": 2}, False),
        (["a", "b"], ["a"], False),
    ],
)
def test_a_stored_head_matches_its_body_only_as_the_same_json(a: Any, b: Any, same: bool) -> None:
    assert buildcache._same_json(a, b) is same
    assert buildcache._same_json(b, a) is same


# --- rows tagged with the log key's row key (THREATS.md T81) -----------------

SEED = bytes(range(32))
OTHER_SEED = bytes(range(1, 33))


def _keyed(folder: Path, seed: bytes = SEED) -> BuildCache:
    return BuildCache(folder, key=buildcache.row_key(seed))


def test_the_row_key_is_hmac_sha256_of_the_label_under_the_seed() -> None:
    """An independent HMAC (pyca/cryptography's) of the documented label."""
    from cryptography.hazmat.primitives import hashes, hmac

    mac = hmac.HMAC(SEED, hashes.SHA256())
    mac.update(b"dreampool build store rows v1")
    assert buildcache.row_key(SEED) == mac.finalize()
    assert buildcache.row_key(OTHER_SEED) != buildcache.row_key(SEED)


def test_a_build_with_a_row_key_takes_only_rows_tagged_with_it(tmp_path: Path) -> None:
    c = _keyed(tmp_path)
    c["units"].update({f"id{i}": _unit(i) for i in range(3)})
    c.save()
    want = {f"id{i}": _unit(i) for i in range(3)}
    assert _keyed(tmp_path)["units"] == want
    # A build without the log key (a preview) and dreampool mcp read them too:
    # they check the row's digest, which the tagged build writes as well.
    assert BuildCache(tmp_path)["units"] == want
    assert buildcache.StoreReader(tmp_path)["units"] == want
    other = _keyed(tmp_path, OTHER_SEED)
    assert other["units"] == {}
    assert other.notes == [buildcache.untagged_note("units", 3)]


def test_a_row_with_a_valid_digest_but_no_tag_is_a_miss_with_a_row_key(tmp_path: Path) -> None:
    """T81: what anyone who can write the store can make (the digest is public),
    planted beside the tagged rows: a build holding the log key ignores it and
    says so; the tagged rows still hit."""
    c = _keyed(tmp_path)
    c["units"]["id0"] = _unit(0)
    c.save()
    planted = BuildCache(tmp_path)  # no row key: the forger's
    planted["units"]["id1"] = _unit(1, "forged")
    planted.save()
    keyed = _keyed(tmp_path)
    assert keyed["units"] == {"id0": _unit(0)}
    assert keyed.notes == [buildcache.untagged_note("units", 1)]
    # A tag moved from another row does not fit this one.
    db = _db(tmp_path)
    (tag,) = db.execute('SELECT a FROM "units" WHERE k = ?', ("id0",)).fetchone()
    db.execute('UPDATE "units" SET a = ? WHERE k = ?', (tag, "id1"))
    db.close()
    assert _keyed(tmp_path)["units"] == {"id0": _unit(0)}


def test_rows_read_a_row_at_a_time_are_tagged_too(tmp_path: Path) -> None:
    rows = _keyed(tmp_path).rows("fragments")
    rows.put(_key(1), FRAGMENTS)
    rows.flush()
    rows.close()
    planted = BuildCache(tmp_path).rows("fragments")
    planted.put(_key(2), (b"forged card", b"", b"", b""))
    planted.flush()
    planted.close()
    again = _keyed(tmp_path).rows("fragments")
    assert again.get(_key(1)) == FRAGMENTS
    assert again.get(_key(2)) is None
    assert again.get_many([_key(1), _key(2)]) == {_key(1): FRAGMENTS}
    # One planted row, read twice: the note counts rows, not reads.
    assert (again.untagged, again.damaged) == (1, 0)
    again.close()


def _one_fragment(folder: Path) -> tuple[BuildCache, Path]:
    """A keyed cache whose store at ``folder`` holds one fragments row, and the store."""
    cache = _keyed(folder)
    rows = cache.rows("fragments")
    rows.put(_key(1), FRAGMENTS)
    rows.flush()
    rows.close()
    return cache, folder / buildcache.STORE


def break_table(store: Path, table: str) -> None:
    """Make ``table`` of the store at ``store`` (and its key index) unreadable:
    any query of it is "database disk image is malformed", while the other
    tables, meta and sqlite_master read as before."""
    db = sqlite3.connect(store)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    roots = [
        r for (r,) in db.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name = ?", (table,))
    ]
    db.close()
    assert roots and 1 not in roots
    with open(store, "r+b") as f:
        for root in roots:
            f.seek((root - 1) * page_size)
            f.write(b"\xff" * 8)  # not a b-tree page type


def _in_a_fork(work: Callable[[], object]) -> object:
    """What ``work`` returns when run in a process forked from this one."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.close(read)
            with os.fdopen(write, "wb") as f:
                pickle.dump(work(), f)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        got = pickle.load(f)
    os.waitpid(pid, 0)
    return got


def test_rows_findings_merge_by_key_across_processes(tmp_path: Path) -> None:
    """A forked worker's findings (Rows.take_findings) added to the build's
    (Rows.absorb) count each row once, however many processes read it; the
    worker returns only what it found, never what the build had found
    before it forked."""
    rows = _keyed(tmp_path).rows("fragments")
    rows.put(_key(1), FRAGMENTS)
    rows.flush()
    rows.close()
    planted = BuildCache(tmp_path).rows("fragments")
    planted.put(_key(2), (b"forged card", b"", b"", b""))
    planted.put(_key(3), (b"forged card", b"", b"", b""))
    planted.flush()
    planted.close()
    parent = _keyed(tmp_path).rows("fragments")
    assert parent.get(_key(3)) is None and parent.take_findings().untagged == frozenset()

    def worker() -> object:
        assert parent.get(_key(2)) is None and parent.get(_key(1)) == FRAGMENTS
        return parent.take_findings()

    found = _in_a_fork(worker)
    assert isinstance(found, buildcache.Findings)
    assert (len(found.untagged), len(found.damaged), found.failure) == (1, 0, None)
    parent.absorb(found)
    parent.absorb(found)
    assert (parent.untagged, parent.damaged) == (2, 0)
    parent.close()


def test_a_store_failing_in_a_fork_is_discarded_by_the_process_that_made_it(
    tmp_path: Path,
) -> None:
    """A forked worker whose read of the store fails records the failure and
    leaves the store alone; the process that made the Rows discards it, once,
    on absorbing it (and says so), however many workers met it."""
    cache, store = _one_fragment(tmp_path)
    break_table(store, "fragments")

    def worker() -> object:
        assert parent.get(_key(1)) is None
        return parent.take_findings()

    parent = cache.rows("fragments")
    found = [_in_a_fork(worker), _in_a_fork(worker)]
    assert store.exists() and cache.notes == []
    for f in found:
        assert isinstance(f, buildcache.Findings) and f.failure is not None
        assert isinstance(f.failure[0], sqlite3.Error)
        parent.absorb(f)
    assert not store.exists() and parent.failed
    assert [n for n in cache.notes if "started it afresh" in n] == cache.notes
    assert len(cache.notes) == 1, cache.notes


def test_a_busy_store_met_in_a_fork_is_left_in_place(tmp_path: Path) -> None:
    """A real "database is locked" met in a forked worker crosses the pipe
    (pickled in Findings) as itself, and the process that made the Rows reads
    it as busy: one note, the store left in place, not discarded."""
    cache, store = _one_fragment(tmp_path)
    holder = sqlite3.connect(store, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    parent = cache.rows("fragments")

    def worker() -> object:
        real = sqlite3.connect
        sqlite3.connect = lambda *a, **kw: real(*a, **{**kw, "timeout": 0.05})  # type: ignore[assignment]
        assert parent.get(_key(1)) is None
        return parent.take_findings()

    try:
        found = _in_a_fork(worker)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert isinstance(found, buildcache.Findings) and found.failure is not None
    assert type(found.failure[0]) is sqlite3.OperationalError
    parent.absorb(found)
    parent.absorb(found)
    assert store.exists() and parent.failed
    assert len(cache.notes) == 1 and "was busy" in cache.notes[0], cache.notes


def test_what_a_fork_finds_wrong_with_the_store_is_applied_by_its_maker(
    tmp_path: Path,
) -> None:
    """BuildCache.take_report in a forked process: the notes it added since
    the fork (never those it inherited) and a failure of the store, which
    it does not apply itself (the store stays); the process that made the
    cache adds each note once and discards the store once."""
    cache = _keyed(tmp_path)
    cache["units"].update({f"id{i}": _unit(i) for i in range(3)})
    cache.save()
    cache.notes.append("inherited")
    store = tmp_path / buildcache.STORE
    break_table(store, "words")

    def worker() -> object:
        cache.notes.append("a worker's own note")
        assert cache["words"] == {}
        return cache.take_report()

    reports = [_in_a_fork(worker), _in_a_fork(worker)]
    assert store.exists() and cache.notes == ["inherited"]
    assert cache.take_report() == buildcache.NOTHING_REPORTED  # (the maker's: nothing to take)
    for report in reports:
        assert isinstance(report, buildcache.StoreReport)
        assert report.notes == ("a worker's own note",) and report.failure is not None
        cache.absorb_report(report)
    assert not store.exists()
    assert cache.notes[:2] == ["inherited", "a worker's own note"]
    assert len(cache.notes) == 3 and "started it afresh" in cache.notes[2], cache.notes


def test_the_store_holds_neither_the_log_key_nor_its_row_key(tmp_path: Path) -> None:
    c = _keyed(tmp_path)
    c["units"].update({f"id{i}": _unit(i) for i in range(3)})
    c.save()
    rows = c.rows("fragments")
    rows.put(_key(1), FRAGMENTS)
    rows.flush()
    rows.close()
    data = (tmp_path / buildcache.STORE).read_bytes()
    assert SEED not in data and buildcache.row_key(SEED) not in data
    assert SEED.hex().encode() not in data and buildcache.row_key(SEED).hex().encode() not in data


@pytest.mark.parametrize(
    "stored",
    [b"\xff\xfe", b"\xed\xa0\x80"],  # not UTF-8; an encoded surrogate
)
def test_a_text_row_that_is_not_utf8_is_a_miss(tmp_path: Path, stored: bytes) -> None:
    """A commit or salt row is its text's UTF-8, read strictly: any other bytes,
    even under a sound digest (a row written by something else), are a miss,
    never a str no build wrote."""
    c = BuildCache(tmp_path)
    c["commit"][(_sha(2), "salt")] = "commitment"
    c.save()
    k = f"{_sha(2)} salt"
    with _db(tmp_path) as db:
        db.execute(
            'UPDATE "commit" SET v = ?, d = ? WHERE k = ?',
            (stored, buildcache._row_digest(k, stored), k),
        )
    fresh = BuildCache(tmp_path)
    assert fresh["commit"] == {}
    assert any("commit had 1 damaged row" in n for n in fresh.notes)


def test_no_store_connection_crosses_a_fork_when_another_thread_read_a_body(
    tmp_path: Path,
) -> None:
    """A deferred body is read through a connection of the reading thread
    (_StoredBodies, review r39), and every open connection is to be closed
    before any fork (_close_before_fork). The agents' server reads bodies in
    the SDK's worker threads and forks from another (PoolReader.check_all):
    closing a connection another thread made raises ProgrammingError in the
    fork hook, which Python only prints, so that connection, and any the loop
    had not reached yet, is copied into the child."""
    import sys
    import threading

    c = BuildCache(tmp_path)
    c["scan"].update({_blob(i): (_sha(i), _long_dream(i)) for i in range(3)})
    c.save()
    section = BuildCache(tmp_path)["scan"]  # of which dream 2 is never read
    read, stop = threading.Event(), threading.Event()

    def worker() -> None:  # an SDK worker thread that answered a call and waits for the next
        _ = section[_blob(0)][1].body
        read.set()
        stop.wait(30)

    thread = threading.Thread(target=worker)
    thread.start()
    unraisable: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        assert read.wait(30)
        _ = section[_blob(1)][1].body  # the forking thread's own, too
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child only leaves
            os._exit(0)
        os.waitpid(pid, 0)
    finally:
        sys.unraisablehook = hook
        stop.set()
        thread.join()
    assert not unraisable, [u.exc_value for u in unraisable]
    assert not [r for r in buildcache._OPEN if r._db is not None]
    assert not [b for b in buildcache._BODIES.values() if b._db is not None]


def test_a_deferred_dream_goes_to_a_forked_worker_unread(tmp_path: Path) -> None:
    """A deferred dream is pickled to a worker (builder.parallel) with its
    loader, not its body: the process handing it reads nothing, and the
    forked worker reads the body from the store itself."""
    import pickle

    c = BuildCache(tmp_path)
    c["scan"].update({_blob(i): (_sha(i), _long_dream(i)) for i in range(2)})
    c.save()
    section = BuildCache(tmp_path)["scan"]
    dream = section[_blob(1)][1]
    data = pickle.dumps(dream)
    assert not dream.loaded and b"lorem" not in data
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        ok = pickle.loads(data).body == _long_dream(1).body
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not dream.loaded


def test_a_dream_kept_as_the_scan_goes_is_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BuildCache.kept_scan writes the row of a dream just verified, a batch at
    a time, and gives back its head with the body left in the store (or in
    the batch not yet written); save() writes the section without it again."""
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 2)
    written: list[str] = []
    codec = buildcache.CODECS["scan"]

    def value_out(entry: Any) -> bytes:
        written.append(entry[1].id)
        return codec.value_out(entry)

    monkeypatch.setitem(
        buildcache.CODECS,
        "scan",
        buildcache.Codec(codec.key_out, codec.key_in, value_out, codec.value_in),
    )
    c = BuildCache(tmp_path)
    c["scan"]
    kept = [c.kept_scan(_blob(i), (_sha(i), _long_dream(i))) for i in range(3)]
    assert not any(d.loaded for _, d in kept)
    assert kept[2][1].body == _long_dream(2).body  # from the batch not yet written
    c["scan"].update({_blob(i): kept[i] for i in range(3)})
    c.save()
    assert sorted(written) == [_long_dream(i).id for i in range(3)]
    again = BuildCache(tmp_path)["scan"]
    assert {k: v[1].body for k, v in again.items()} == {
        _blob(i): _long_dream(i).body for i in range(3)
    }
    assert kept[0][1].body == _long_dream(0).body  # from its row
