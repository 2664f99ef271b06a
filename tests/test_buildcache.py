"""The build cache's file format: whole sections, appended deltas, and
damage that costs time only (builder.buildcache); fragments kept deflated
(builder.units)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder import build as buildmod
from builder import buildcache, units
from builder.buildcache import BuildCache
from builder.note import parse_private_key
from tests.pools import make_pool


def _reload(folder: Path, name: str) -> dict[object, object]:
    return BuildCache(folder)[name]


def _fill(folder: Path, n: int) -> dict[object, object]:
    c = BuildCache(folder)
    section = c["units"]
    section.update({f"id{i}": (f"key{i}", b"x" * 50) for i in range(n)})
    c.save()
    return dict(section)


def test_a_small_change_appends_a_delta_that_reads_back(tmp_path: Path) -> None:
    want = _fill(tmp_path, 100)
    size = (tmp_path / "units").stat().st_size
    c = BuildCache(tmp_path)
    section = c["units"]
    section["id3"] = ("changed", b"y")
    section["new"] = ("key", b"z")
    del section["id7"]
    c.save()
    grown = (tmp_path / "units").stat().st_size
    assert size < grown < size + 400  # a delta of three entries, not the section again
    want.update({"id3": ("changed", b"y"), "new": ("key", b"z")})
    del want["id7"]
    assert _reload(tmp_path, "units") == want


def test_a_hard_linked_copy_of_the_cache_is_left_as_it_was(tmp_path: Path) -> None:
    # A snapshot made with hard links (cp -al, rsync --link-dest) shares the
    # section file: the next save must replace it, never append to it.
    want = _fill(tmp_path / "cache", 100)
    (tmp_path / "copy").mkdir()
    os.link(tmp_path / "cache" / "units", tmp_path / "copy" / "units")
    before = (tmp_path / "copy" / "units").read_bytes()
    c = BuildCache(tmp_path / "cache")
    c["units"]["new"] = ("key", b"z")
    c.save()
    assert (tmp_path / "copy" / "units").read_bytes() == before
    assert _reload(tmp_path / "copy", "units") == want
    assert _reload(tmp_path / "cache", "units") == {**want, "new": ("key", b"z")}
    assert (tmp_path / "cache" / "units").stat().st_nlink == 1


def test_an_unchanged_section_is_not_written(tmp_path: Path) -> None:
    _fill(tmp_path, 10)
    before = (tmp_path / "units").stat()
    c = BuildCache(tmp_path)
    c["units"]["id1"] = c["units"]["id1"]  # the same object: no change
    c.save()
    after = (tmp_path / "units").stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_a_replaced_section_saves_only_what_differs(tmp_path: Path) -> None:
    # units.Units and site._write_pages build a new dict from the old values
    _fill(tmp_path, 100)
    size = (tmp_path / "units").stat().st_size
    c = BuildCache(tmp_path)
    old = c["units"]
    c.sections["units"] = {**old, "id0": ("other", b"")}
    c.save()
    assert (tmp_path / "units").stat().st_size < size + 200
    assert _reload(tmp_path, "units")["id0"] == ("other", b"")


def test_many_deltas_are_compacted_into_one_frame(tmp_path: Path) -> None:
    want = _fill(tmp_path, 8)
    for round in range(5):  # each changes 1 of 8 entries: past a quarter by the third
        c = BuildCache(tmp_path)
        c["units"][f"id{round}"] = want[f"id{round}"] = ("round", round)
        c.save()
    data = (tmp_path / "units").read_bytes()
    assert data.startswith(buildcache.FORMAT)
    assert len(list(buildcache._frames(memoryview(data)))) <= 3
    assert _reload(tmp_path, "units") == want


def test_a_torn_delta_keeps_what_came_before_and_is_rewritten(tmp_path: Path) -> None:
    want = _fill(tmp_path, 100)
    path = tmp_path / "units"
    c = BuildCache(tmp_path)
    c["units"]["id1"] = want["id1"] = ("one", 1)
    c.save()
    whole = path.read_bytes()
    c = BuildCache(tmp_path)
    c["units"]["id2"] = ("two", 2)
    c.save()
    path.write_bytes(path.read_bytes()[:-5])  # a build killed while appending
    assert _reload(tmp_path, "units") == want  # id2's delta is lost: a miss, not an error
    c = BuildCache(tmp_path)
    c["units"]["id4"] = want["id4"] = ("four", 4)
    c.save()
    assert len(path.read_bytes()) < len(whole) + 100  # written whole, without the torn tail
    assert _reload(tmp_path, "units") == want


def test_a_delta_from_other_code_ends_the_section(tmp_path: Path) -> None:
    want = _fill(tmp_path, 10)
    with open(tmp_path / "units", "ab") as f:
        f.write(buildcache._frame(("another version", {"id1": "wrong"}, [])))
    assert _reload(tmp_path, "units") == want


def test_garbage_and_foreign_files_read_as_empty(tmp_path: Path) -> None:
    for data in (b"", b"junk", buildcache.FORMAT + os.urandom(64), b"dreampool-cache/1\n"):
        (tmp_path / "units").write_bytes(data)
        assert _reload(tmp_path, "units") == {}
    (tmp_path / "units").write_bytes(buildcache.FORMAT + buildcache._frame(("old code", {"a": 1})))
    assert _reload(tmp_path, "units") == {}


def test_a_unit_key_leaves_out_only_what_the_leaf_hash_binds() -> None:
    # builder.units keys a dream's unit by its leaf hash instead of its text;
    # that holds only for view fields copied from the signed body unchanged.
    import dataclasses

    from builder import model, units

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


def test_a_flipped_byte_anywhere_reads_as_a_miss_never_as_a_wrong_entry(tmp_path: Path) -> None:
    # A bit flipped inside a pickled string still unpickles, into an entry the
    # build trusts; each frame's digest makes it a torn frame instead.
    base = _fill(tmp_path, 6)
    path = tmp_path / "units"
    first = len(path.read_bytes())
    c = BuildCache(tmp_path)
    c["units"]["id1"] = ("changed", b"y" * 20)
    c.save()
    data = path.read_bytes()
    for i in range(len(buildcache.FORMAT), len(data)):
        damaged = bytearray(data)
        damaged[i] ^= 0x04
        path.write_bytes(bytes(damaged))
        # the first frame damaged: nothing; the delta: what came before it
        assert _reload(tmp_path, "units") == ({} if i < first else base), i
    c = BuildCache(tmp_path)
    c["units"]["id2"] = ("two", b"")  # a damaged section is written whole again
    c.save()
    assert _reload(tmp_path, "units") == {**base, "id2": ("two", b"")}
    assert len(list(buildcache._frames(memoryview(path.read_bytes())))) == 1


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("section", ["scan", "units", "notes"])
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
    if section == "notes":  # a byte of the root of the first checkpoint
        old = base64.b64decode(note.split(b"\n")[2])
    else:  # a letter of a dream's title (in its body, and in its rendered card)
        title = json.loads((tp.content / "dreams" / f"{first}.json").read_bytes())["title"]
        old = title.encode()
    path = tmp_path / ".site.builds" / "cache" / section
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, old[:5] + bytes([old[5] ^ 0x01]) + old[6:], 1))
    buildmod.build(tp.content, site, signer=None)
    cold = tmp_path / "cold"
    buildmod.build(tp.content, cold, signer=None)
    assert _tree(site) == _tree(cold)
