"""The output writer: two generations behind a symlink, manifests, only changed files written."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.site import writer
from tests.golden_update import tree


def plan_of(n: int, changed: int = -1) -> dict[str, bytes]:
    plan = {f"dreams/{i:03d}/index.html": f"page {i}".encode() for i in range(n)}
    plan["index.html"] = b"home"
    if changed >= 0:
        plan[f"dreams/{changed:03d}/index.html"] = b"edited"
    return plan


def test_out_is_a_symlink_to_a_generation_holding_exactly_the_plan(tmp_path: Path) -> None:
    out = tmp_path / "site"
    writer.write_tree(out, plan_of(5))
    assert out.is_symlink() and os.readlink(out) == ".site.builds/a"
    assert tree(out) == plan_of(5)
    writer.write_tree(out, plan_of(3))
    assert os.readlink(out) == ".site.builds/b"
    assert tree(out) == plan_of(3)
    assert not (out / "dreams" / "004").exists(), "a folder the site no longer has stays"


def test_only_changed_files_are_written_once_both_generations_exist(tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert writer.write_tree(out, plan_of(50)) == 51
    assert writer.write_tree(out, plan_of(50)) == 51  # the second generation starts empty
    assert writer.write_tree(out, plan_of(50)) == 0
    assert writer.write_tree(out, plan_of(50, changed=7)) == 1
    # The other generation is one build behind: it gets the edit and nothing else.
    assert writer.write_tree(out, plan_of(50, changed=7)) == 1
    assert tree(out) == plan_of(50, changed=7)


def test_a_file_edited_in_place_in_the_site_is_written_again(tmp_path: Path) -> None:
    out = tmp_path / "site"
    for _ in range(3):
        writer.write_tree(out, plan_of(4))
    page = out / "dreams" / "002" / "index.html"
    page.write_bytes(b"defaced!")  # same size as nothing in particular; the mtime moves
    os.utime(page, ns=(1, 1))
    writer.write_tree(out, plan_of(4))
    writer.write_tree(out, plan_of(4))
    assert tree(out) == plan_of(4)


@pytest.mark.parametrize(
    "damage", ["missing", "garbage", "cut", "empty", "lines cut", "zeros", "old format"]
)
def test_a_generation_without_a_sound_manifest_is_rewritten_in_full(
    tmp_path: Path, damage: str
) -> None:
    out = tmp_path / "site"
    writer.write_tree(out, plan_of(6))
    writer.write_tree(out, plan_of(6))
    builds = tmp_path / ".site.builds"
    (builds / "a" / "stray.html").write_bytes(b"left by a killed build")
    manifest = builds / "manifest-a"
    text = manifest.read_bytes()
    if damage == "missing":
        manifest.unlink()
    elif damage == "garbage":
        manifest.write_bytes(b"\xff\xfe not a manifest")
    elif damage == "cut":
        manifest.write_bytes(text[:-5])
    elif damage == "empty":  # what a power cut can leave of a file renamed unsynced
        manifest.write_bytes(b"")
    elif damage == "lines cut":  # cut at a line's end: every line left is sound
        manifest.write_bytes(b"".join(text.splitlines(keepends=True)[:2]))
    elif damage == "zeros":  # the size reached the disk, the blocks did not
        manifest.write_bytes(bytes(len(text)))
    else:  # "<digest> <size> <mtime> <path>" lines with nothing around them
        entries = {"index.html": (writer.digest(b"home"), 4, 0)}
        manifest.write_text("".join(f"{d.hex()} {n} {t} {r}\n" for r, (d, n, t) in entries.items()))
    assert writer.write_tree(out, plan_of(6)) == 7
    assert tree(out) == plan_of(6)


def test_a_plain_folder_from_an_older_build_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "site"
    (out / "old").mkdir(parents=True)
    (out / "old" / "page.html").write_bytes(b"old")
    writer.write_tree(out, plan_of(2))
    assert out.is_symlink() and tree(out) == plan_of(2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".site.builds", "site"]


def test_kept_files_come_from_the_live_generation(tmp_path: Path) -> None:
    out = tmp_path / "site"
    writer.write_tree(out, {"a.html": b"A", "b.html": b"B"})
    with writer.SiteWriter(out) as w:
        want = writer.digest(b"A")
        assert w.can_keep("a.html", want)
        assert not w.can_keep("a.html", writer.digest(b"other"))
        assert not w.can_keep("c.html", want)
        w.keep("a.html", want)
        w.add("b.html", b"B2")
    assert tree(out) == {"a.html": b"A", "b.html": b"B2"}


def test_keep_all_keeps_a_whole_unit_or_nothing(tmp_path: Path) -> None:
    out = tmp_path / "site"
    files = {"d/index.html": b"page", "d/record.json": b"{}", "x.html": b"x"}
    writer.write_tree(out, files)
    writer.write_tree(out, files)  # both generations hold them now
    digests = {rel: writer.digest(data) for rel, data in files.items()}
    unit = [(rel, digests[rel]) for rel in ("d/index.html", "d/record.json")]
    with writer.SiteWriter(out) as w:
        # the generation being built holds both: kept without a link
        assert w.keep_all(unit)
        assert w.keep_all([("x.html", digests["x.html"])])
    assert tree(out) == files
    # edited in place in the generation about to be built: kept from the
    # live one instead, and the edit is undone
    target = tmp_path / ".site.builds" / ("a" if os.readlink(out).endswith("b") else "b")
    (target / "d" / "record.json").write_bytes(b"edited!")
    with writer.SiteWriter(out) as w:
        assert w.keep_all(unit)
        assert w.keep_all([("x.html", digests["x.html"])])
    assert tree(out) == files
    # one file of the unit held nowhere with that digest: none is kept, and
    # the caller may write them all
    with writer.SiteWriter(out) as w:
        assert not w.keep_all([unit[0], ("d/record.json", writer.digest(b"new"))])
        w.add("d/index.html", b"page")
        w.add("d/record.json", b"new")
        w.add("x.html", b"x")
    assert tree(out)["d/record.json"] == b"new"


def test_a_refused_write_leaves_the_live_site(tmp_path: Path) -> None:
    out = tmp_path / "site"
    writer.write_tree(out, plan_of(3))
    with pytest.raises(writer.PlanError, match="written twice"), writer.SiteWriter(out) as w:
        w.add("index.html", b"new")
        w.add("index.html", b"again")
    assert tree(out) == plan_of(3)
    writer.write_tree(out, plan_of(2))
    assert tree(out) == plan_of(2)


def test_one_build_at_a_time(tmp_path: Path) -> None:
    out = tmp_path / "site"
    with writer.SiteWriter(out), pytest.raises(writer.PlanError, match="another build"):
        writer.SiteWriter(out)
    writer.write_tree(out, plan_of(1))  # the lock went with the first writer
    assert tree(out) == plan_of(1)


def _tmp_names(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.tmp"))


def _kept_from_live(out: Path, files: dict[str, bytes]) -> None:
    """One build that keeps every file of ``files`` from the live generation."""
    with writer.SiteWriter(out) as w:
        assert w.keep_all([(rel, writer.digest(data)) for rel, data in files.items()])


def test_an_empty_manifest_over_shared_files_leaves_no_stray_file(tmp_path: Path) -> None:
    """Both generations share their files (kept by hard link); the one not
    live lost its manifest's bytes. Its next build must empty it: the files
    the site no longer has were published again, and each kept file left its
    temporary link (rename(2) of a link onto its own inode does nothing)."""
    out = tmp_path / "site"
    files = {"d/index.html": b"page", "d/record.json": b"{}", "gone.html": b"erased"}
    writer.write_tree(out, files)
    _kept_from_live(out, files)  # b, hard links to a's files
    builds = tmp_path / ".site.builds"
    (builds / "manifest-a").write_bytes(b"")
    del files["gone.html"]
    _kept_from_live(out, files)  # a
    assert os.readlink(out) == ".site.builds/a"
    assert tree(out) == files
    _kept_from_live(out, files)  # b
    assert _tmp_names(builds) == []


def test_keeping_a_file_onto_its_own_inode_leaves_no_link(tmp_path: Path) -> None:
    out = tmp_path / "site"
    files = {"d/index.html": b"page"}
    writer.write_tree(out, files)
    _kept_from_live(out, files)  # b, a link to a's file; a is the next target
    builds = tmp_path / ".site.builds"
    # a holds the file but its manifest forgot it: keep links b's file, the same inode
    writer._write_manifest(builds / "manifest-a", {})
    _kept_from_live(out, files)
    assert tree(out) == files
    assert _tmp_names(builds) == []


def test_a_leftover_link_to_a_live_file_is_never_written_into(tmp_path: Path) -> None:
    """A temporary name left in the generation being built may be a hard
    link to a file the live site serves: writing through it would change
    the live site before the swap (and tear it if the build is killed)."""
    out = tmp_path / "site"
    files = {"d/index.html": b"page"}
    writer.write_tree(out, files)
    _kept_from_live(out, files)  # b live; a and b share d/index.html
    builds = tmp_path / ".site.builds"
    os.link(builds / "b" / "d" / "index.html", builds / "a" / "d" / ".index.html.tmp")
    with writer.SiteWriter(out) as w:
        w.add("d/index.html", b"a new page")
        assert (builds / "b" / "d" / "index.html").read_bytes() == b"page"
    assert tree(out) == {"d/index.html": b"a new page"}
    assert tree(builds / "b") == files
    assert _tmp_names(builds) == []


def test_a_manifest_reaches_the_disk_before_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    fsync, replace = os.fsync, os.replace

    def synced(fd: int) -> None:
        events.append("fsync")
        fsync(fd)

    def renamed(src: str, dst: str) -> None:
        events.append(f"rename to {Path(dst).name}")
        replace(src, dst)

    monkeypatch.setattr(os, "fsync", synced)
    monkeypatch.setattr(os, "replace", renamed)
    writer.write_tree(tmp_path / "site", plan_of(1))
    at = events.index("rename to manifest-a")
    assert at > 0 and events[at - 1] == "fsync"


# --- seals: a generation restored from elsewhere (THREATS.md T81) -----------


def _sealed_build(out: Path, plan: dict[str, bytes], seals: dict[str, bytes]) -> int:
    with writer.SiteWriter(out, seals=seals) as w:
        w.add_all(plan)
    return w.changed


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file the writer reads to check its bytes, by path."""
    reads: list[str] = []
    holds = writer._holds_at  # _holds reads through it too

    def counted(path: str, entry: writer.Entry, *fd: int) -> tuple[writer.Entry, int] | None:
        reads.append(path)
        return holds(path, entry, *fd)

    monkeypatch.setattr(writer, "_holds_at", counted)
    return reads


def _restored(tmp_path: Path, out: Path) -> Path:
    """A copy of ``out`` and its generations as a cache restore makes it:
    every folder and file new, sizes and mtimes as they were."""
    import shutil

    copy = tmp_path / "restored"
    copy.mkdir()
    shutil.copytree(writer.builds_dir(out), copy / f".{out.name}.builds", symlinks=True)
    os.symlink(os.readlink(out), copy / out.name)
    return copy / out.name


def _target(out: Path) -> Path:
    return writer.builds_dir(out) / ("a" if os.readlink(out).endswith("b") else "b")


def test_the_store_keeps_seals_as_the_writer_makes_them() -> None:
    from builder import buildcache

    assert buildcache.SEAL_SIZE == writer.SEAL_SIZE
    assert buildcache._GENERATIONS == writer.GENERATIONS


@given(
    st.lists(
        st.lists(st.sampled_from(["a", "b", "c.html", "dreams", "x"]), min_size=1, max_size=5).map(
            "/".join
        ),
        max_size=30,
    )
)
def test_a_seal_covers_every_folder_above_every_file(paths: list[str]) -> None:
    """writer._folders against the naive set of every folder above every path:
    the same folders, the generation's own first, each once."""
    naive = {""} | {"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 1)}
    got = list(writer._folders(paths))
    assert got[0] == "" and len(got) == len(set(got)) and set(got) == naive
    assert list(writer._folders(paths)) == got  # the same order every time


def _tagged_build(out: Path, plan: dict[str, bytes], seals: dict[str, bytes]) -> int:
    """A build of a signing pool: its seals are rows tagged with its row key."""
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        w.add_all(plan)
    return w.changed


def _count_walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every generation the writer walks to remove links from."""
    walks: list[str] = []
    remove_links = writer._remove_links

    def counted(gen: str) -> frozenset[str]:
        walks.append(gen)
        return remove_links(gen)

    monkeypatch.setattr(writer, "_remove_links", counted)
    return walks


def test_a_generation_under_a_tagged_seal_is_not_walked_for_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signing build's seal, which only a holder of the log key wrote, says the
    generation's folders are as its writer left them, with no link: walking
    its 41,000 entries at 10k dreams was a tenth of a build after one dream.
    A seal anyone who writes the store could forge (a build without the log
    key), or none, is no such evidence: the generation is walked."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _tagged_build(out, plan_of(20), seals)
    walks = _count_walks(monkeypatch)
    _tagged_build(out, plan_of(20, changed=3), seals)
    assert walks == []
    _sealed_build(out, plan_of(20), seals)  # the same seals, taken untagged
    assert walks == [str(writer.builds_dir(out) / Path(os.readlink(out)).name)]  # the one made
    walks.clear()
    writer.write_tree(out, plan_of(20))  # no seals at all
    assert len(walks) == 1


@pytest.mark.parametrize("where", ["folder", "file"])
def test_a_link_planted_under_a_tagged_seal_breaks_the_seal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """What lets the tagged seal stand for the walk: a link made in a sealed
    generation, in place of a folder or of a file, stamps its folder's ctime,
    so the seal no longer holds and the generation is read and swept whole.
    No write leads outside, and no link is left."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _tagged_build(out, plan_of(20), seals)
    target = _target(out)
    outside = tmp_path / "outside"
    outside.mkdir()
    if where == "folder":
        folder = target / "dreams" / "001"
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()
        folder.symlink_to(outside, target_is_directory=True)
    else:
        page = target / "dreams" / "001" / "index.html"
        page.unlink()
        page.symlink_to(outside / "index.html")
    reads = _count_reads(monkeypatch)
    _tagged_build(out, plan_of(20, changed=1), seals)
    assert list(outside.iterdir()) == []
    assert tree(out) == plan_of(20, changed=1)
    assert not any(p.is_symlink() for p in target.rglob("*"))
    assert len(reads) > 0  # unsealed: read before any file of it was kept


def test_a_sealed_generation_is_kept_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _sealed_build(out, plan_of(20), seals)
    assert set(seals) == {"a", "b"}
    reads = _count_reads(monkeypatch)
    assert _sealed_build(out, plan_of(20), seals) == 0
    assert _sealed_build(out, plan_of(20, changed=3), seals) == 1
    assert reads == []


def test_a_restored_generation_is_read_whole_and_only_what_it_lists_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81: tar restores every size and mtime as its archive says; a page
    edited with both kept, a file the manifest does not list, and a link
    are all gone from the generation that goes live."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _sealed_build(out, plan_of(20), seals)
    restored = _restored(tmp_path, out)
    target = _target(restored)
    page = target / "dreams" / "004" / "index.html"
    st = page.stat()
    page.write_bytes(b"PWNED!")  # the same size as "page 4"
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
    (target / "static").mkdir()
    (target / "static" / "pwn.js").write_text("alert(1)")
    (target / "dreams" / "000" / "x.html").symlink_to("/etc/passwd")
    reads = _count_reads(monkeypatch)
    assert _sealed_build(restored, plan_of(20), seals) == 1  # the edited page
    assert tree(restored) == plan_of(20)
    assert not (target / "static" / "pwn.js").exists()
    assert len(reads) == 21  # every file the manifest lists, each once
    # Sealed again: what this build made is taken unread next time but one
    # (the other generation was restored too, and is read once).
    _sealed_build(restored, plan_of(20), seals)
    reads.clear()
    _sealed_build(restored, plan_of(20), seals)
    assert reads == []


def test_a_restored_live_file_is_kept_only_once_read(tmp_path: Path) -> None:
    """The live generation, restored, lends a file to the new one (a hard
    link) only if its bytes are the digest its manifest records."""
    out, seals = tmp_path / "site", {}
    with writer.SiteWriter(out, seals=seals) as w:
        w.add_all({"a.html": b"AAAA", "b.html": b"BBBB"})
    restored = _restored(tmp_path, out)
    live = restored.resolve()
    st = (live / "a.html").stat()
    (live / "a.html").write_bytes(b"EVIL")
    os.utime(live / "a.html", ns=(st.st_atime_ns, st.st_mtime_ns))
    with writer.SiteWriter(restored, seals=seals) as w:
        assert not w.can_keep("a.html", writer.digest(b"AAAA"))
        assert w.keep_all([("b.html", writer.digest(b"BBBB"))])
        w.add("a.html", b"AAAA")
    assert tree(restored) == {"a.html": b"AAAA", "b.html": b"BBBB"}


def test_a_seal_binds_the_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A manifest other than the one the seal names (its checksum is public,
    so anyone can write a sound one) makes the generation unsealed: read whole."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _sealed_build(out, plan_of(5), seals)
    target = _target(out).name
    seals[target] = bytes(16) + seals[target][16:]
    reads = _count_reads(monkeypatch)
    assert _sealed_build(out, plan_of(5), seals) == 0
    assert len(reads) == 6


def test_a_writer_that_fails_to_open_releases_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r33: a SiteWriter whose setup raised kept the build lock, and
    every later build in the same process said another build was writing."""
    out = tmp_path / "site"
    for _ in range(2):  # both generations made: the one to write is read as it opens
        writer.write_tree(out, plan_of(2))

    def broken(gen: str, listed: object) -> writer._Checked:
        raise OSError("disk gone")

    monkeypatch.setattr(writer, "_check_generation", broken)
    with pytest.raises(OSError, match="disk gone"):
        writer.SiteWriter(out, seals={})
    monkeypatch.undo()
    writer.write_tree(out, plan_of(3))
    assert tree(out) == plan_of(3)


class _Abort(Exception):
    """Leaves a writer uncommitted: the site stays as it was."""


_UNIT_FILES = {
    "d/index.html": b"page",
    "d/record.json": b"{}",
    "e/index.html": b"other",
    "x.html": b"x",
    "y.html": b"y",
}


def _claims(out: Path, batch: list[list[tuple[str, bytes]]], each: bool) -> tuple[Any, ...]:
    """What a writer keeps of ``batch`` (by keep_each, or keep_all unit by unit,
    as a build without standing keys asks): the answers, then the entries it
    claimed, or the error it raised; never committed."""
    try:
        with writer.SiteWriter(out) as w:
            try:
                answers = w.keep_each(batch) if each else [w.keep_all(u) for u in batch]
            except writer.PlanError as exc:
                result: tuple[Any, ...] = ("refused", str(exc))
            else:
                result = (answers, dict(w.written))
            raise _Abort
    except _Abort:
        return result


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(sorted(_UNIT_FILES)), st.booleans()),
            min_size=1,
            max_size=3,
        ),
        max_size=6,
    ),
    st.sampled_from([None, "d/record.json", "x.html"]),
)
def test_keep_each_keeps_and_claims_as_keep_all_does_unit_by_unit(
    units: list[list[tuple[str, bool]]], edited: str | None
) -> None:
    """SiteWriter.keep_each (a build whose unit keys stand) gives the answers
    and claims of keep_all asked of each unit in turn: a unit its generation
    holds as recorded, one with a file of another digest, one claimed before
    (a path twice: refused the same way), one edited in place there (kept
    from the live generation)."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        out = base / "site"
        writer.write_tree(out, _UNIT_FILES)
        writer.write_tree(out, _UNIT_FILES)  # both generations hold them
        if edited is not None:
            target = base / ".site.builds" / ("a" if os.readlink(out).endswith("b") else "b")
            (target / edited).write_bytes(b"edited in place")
        batch = [
            [(rel, writer.digest(_UNIT_FILES[rel] if same else b"new")) for rel, same in unit]
            for unit in units
        ]
        # Each on its own copy (mtimes kept): an uncommitted writer has
        # removed its generation's manifest.
        answers = []
        for each in (True, False):
            copy = Path(tmp) / str(each)
            shutil.copytree(base, copy, symlinks=True)
            answers.append(_claims(copy / "site", batch, each=each))
            assert tree(copy / "site") == _UNIT_FILES
        assert answers[0] == answers[1]
