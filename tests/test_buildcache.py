"""The build cache's file format: whole sections, appended deltas, and
damage that costs time only (builder.buildcache); fragments kept deflated
(builder.units)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from builder import buildcache, units
from builder.buildcache import BuildCache


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
    with open(tmp_path / "units", "rb") as f:
        assert f.read(len(buildcache.FORMAT)) == buildcache.FORMAT
        pickle.load(f)
        frames = 1
        while f.peek(1):
            pickle.load(f)
            frames += 1
    assert frames <= 3
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
        f.write(pickle.dumps(("another version", {"id1": "wrong"}, []), protocol=5))
    assert _reload(tmp_path, "units") == want


def test_garbage_and_foreign_files_read_as_empty(tmp_path: Path) -> None:
    for data in (b"", b"junk", buildcache.FORMAT + os.urandom(64), b"dreampool-cache/1\n"):
        (tmp_path / "units").write_bytes(data)
        assert _reload(tmp_path, "units") == {}
    (tmp_path / "units").write_bytes(
        buildcache.FORMAT + pickle.dumps(("old code", {"a": 1}), protocol=5)
    )
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
