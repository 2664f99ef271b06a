"""The survey stats a sealed generation's files; the commit seals by what it touched.

Two costs of a build after one new dream that grew with the pool (issue 21,
benchmarks/PROFILE.md, fifteenth session): a ``stat`` of every file a kept
unit or page names, in the site stage (300,000 at 100k dreams), and an
``lstat`` of every folder of the new generation to seal it at commit
(108,000). The first now runs in the survey, in its own process while the
build reads the pool; the second only for the folders the build touched,
the rest taken as the survey found them before the build changed anything.

The witness for the seal is the seal itself, computed afresh over every
folder (``writer._seal`` with nothing known): after any sequence of builds
the seal a build records is the one a full ``lstat`` of the generation gives.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.site import writer
from tests.golden_update import tree


def plan_of(n: int, changed: int = -1) -> dict[str, bytes]:
    plan = {f"dreams/{i:03d}/index.html": f"page {i}".encode() for i in range(n)}
    plan["index.html"] = b"home"
    if changed >= 0:
        plan[f"dreams/{changed:03d}/index.html"] = b"edited"
    return plan


def _tagged_build(out: Path, plan: dict[str, bytes], seals: dict[str, bytes]) -> int:
    """A build of a signing pool: its seals are rows tagged with its row key."""
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        w.add_all(plan)
    return w.changed


def _full_seal(out: Path) -> bytes | None:
    """The live generation's seal from an ``lstat`` of every folder it has."""
    gen = writer.builds_dir(out) / Path(os.readlink(out)).name
    found = writer._read_manifest(writer.builds_dir(out) / f"manifest-{gen.name}")
    assert found is not None
    entries, checksum = found
    return writer._seal(gen, checksum, entries)


def _live(out: Path) -> str:
    return Path(os.readlink(out)).name


class _Counted:
    """Every ``lstat`` and ``stat`` the writer module makes, by path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lstats: list[str] = []
        self.stats: list[str] = []
        lstat, stat_ = os.lstat, os.stat

        def counted_lstat(path: object, *args: object, **kw: object) -> os.stat_result:
            self.lstats.append(str(path))
            return lstat(path, *args, **kw)  # type: ignore[arg-type]

        def counted_stat(path: object, *args: object, **kw: object) -> os.stat_result:
            self.stats.append(str(path))
            return stat_(path, *args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(writer.os, "lstat", counted_lstat)
        monkeypatch.setattr(writer.os, "stat", counted_stat)


def test_a_sealed_generations_files_are_statted_by_the_survey_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the writer has its survey, keeping what the generation holds
    asks the file system nothing per file: the survey looked at each one."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _tagged_build(out, plan_of(40), seals)
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        counted = _Counted(monkeypatch)
        files = [(rel, writer.digest(data)) for rel, data in plan_of(40).items()]
        assert w.holds_own(files)
        assert all(w.can_keep(rel, want) for rel, want in files)
        assert w.keep_all(files)
        assert counted.stats == [] and counted.lstats == []
    assert tree(out) == plan_of(40)


@pytest.mark.parametrize("how", ["same size", "other size", "touched"])
def test_a_file_edited_in_place_under_a_tagged_seal_is_written_again(
    tmp_path: Path, how: str
) -> None:
    """Editing a file's bytes does not stamp its folder's ctime, so the seal
    holds; the survey's stat of the file is what sees the edit."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _tagged_build(out, plan_of(6), seals)
    target = writer.builds_dir(out) / ("a" if _live(out) == "b" else "b")
    page = target / "dreams" / "002" / "index.html"
    if how == "touched":  # the same bytes, a new mtime
        os.utime(page, ns=(1, 1))
    else:
        page.write_bytes(b"PWNED!" if how == "same size" else b"defaced, longer")
        assert (len(page.read_bytes()) == len(b"page 2")) == (how == "same size")
    survey = writer._survey((seals, target.parent, target.name, None))
    assert survey.sealed and survey.edited == {"dreams/002/index.html"}
    assert _tagged_build(out, plan_of(6), seals) == 1
    assert tree(out) == plan_of(6)
    assert seals[_live(out)] == _full_seal(out)


def test_a_folder_emptied_and_removed_stamps_the_folder_above(tmp_path: Path) -> None:
    """(Review r63.) A folder removed at commit changes an entry of its
    parent, which no file written or removed is in."""
    out, seals = tmp_path / "site", {}
    p1 = {"index.html": b"h", "a/c.html": b"c", "a/b/d.html": b"d"}
    p2 = {"index.html": b"h", "a/c.html": b"c"}
    for plan in (p1, p1, p2, p2):
        _tagged_build(out, plan, seals)
        assert seals[_live(out)] == _full_seal(out)


def test_a_file_kept_from_the_live_generation_stamps_its_folder(tmp_path: Path) -> None:
    """(Review r63.) A file edited in place is replaced by a hard link of the
    live generation's copy (SiteWriter.keep), in a folder nothing else of
    this build changes."""
    out, seals = tmp_path / "site", {}
    plan = {"index.html": b"h", "d/x.html": b"page x", "d/y.html": b"y"}
    for _ in range(2):
        _tagged_build(out, plan, seals)
    target = writer.builds_dir(out) / ("a" if _live(out) == "b" else "b")
    (target / "d" / "x.html").write_bytes(b"defaced!")
    files = [(r, writer.digest(b)) for r, b in plan.items()]
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.keep_all(files)
    assert tree(out) == plan
    assert seals[_live(out)] == _full_seal(out)


def test_a_folder_changed_by_another_hand_during_a_build_unseals(tmp_path: Path) -> None:
    """The safety of sealing by what the build touched: a folder the build
    did not touch, changed by something else between the survey and the
    commit, keeps its value from before in the seal, so the next build of
    that generation finds it unsealed and reads it whole (T81)."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _tagged_build(out, plan_of(20), seals)
    opening = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    survey = opening.survey()
    opening._result = lambda: survey
    target = writer.builds_dir(out) / opening.target
    planted = target / "dreams" / "013" / "planted.html"
    planted.write_bytes(b"<script>")  # made and gone again: only the folder's ctime moved
    planted.unlink()
    with writer.SiteWriter(out, opening=opening) as w:
        w.add_all(plan_of(20, changed=2))
    assert seals[opening.target] != _full_seal(out)
    _tagged_build(out, plan_of(20, changed=2), seals)  # writes the other generation
    assert not writer._survey((seals, target.parent, target.name, None)).sealed


def test_the_commit_stats_only_the_folders_it_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that changes one page of a sealed generation of 200 folders
    stats that page's folder and the generation's own, not all 200, and
    records the seal a full stat gives."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _tagged_build(out, plan_of(200), seals)
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        w.add_all(plan_of(200, changed=7))
        counted = _Counted(monkeypatch)
    assert len(counted.lstats) <= 4, counted.lstats
    monkeypatch.undo()
    assert seals[_live(out)] == _full_seal(out)


_PATHS = st.lists(
    st.lists(st.sampled_from(["a", "b", "c", "d.html"]), min_size=1, max_size=4).map("/".join),
    max_size=12,
)


def _plan(paths: list[str], salt: int) -> dict[str, bytes]:
    """A plan of ``paths`` with no path both a file and a folder of another."""
    plan: dict[str, bytes] = {}
    for rel in paths:
        if any(rel.startswith(p + "/") or p.startswith(rel + "/") for p in plan):
            continue
        plan[rel] = f"{rel} {salt % 3}".encode()
    return plan


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(_PATHS, st.integers(0, 5)), min_size=1, max_size=6))
def test_the_recorded_seal_is_the_full_seal_after_any_builds(
    tmp_path_factory: pytest.TempPathFactory, builds: list[tuple[list[str], int]]
) -> None:
    """Folders made, emptied and removed, files replaced by folders and
    folders by files: after each build the seal recorded for the generation
    that went live is the one an ``lstat`` of all its folders gives, and the
    next build finds it sealed."""
    out, seals = tmp_path_factory.mktemp("seal") / "site", {}
    for paths, salt in [(["index.html"], 0), (["index.html"], 0), *builds]:
        plan = _plan(paths, salt)
        _tagged_build(out, plan, seals)
        assert tree(out) == plan
        assert seals[_live(out)] == _full_seal(out)


def test_a_signing_builds_seal_after_new_dreams_is_the_full_seal(tmp_path: Path) -> None:
    """The whole build (units and list pages stored by forked workers,
    recorded by the build's process): after a build that admits a dream,
    the seal in the store is the full seal of the generation that went
    live, and the next build finds the generation it writes sealed."""
    from builder import build as buildmod
    from builder import buildcache
    from builder.formats.note import parse_private_key
    from tests.test_store_restore import _cold, _published, site_files

    tp, origin = _published(tmp_path)
    signer = parse_private_key(tp.log_key)
    out = origin / "site"
    for i in range(3):
        if i:
            tp.add("ada", 1)
        buildmod.build(tp.content, out, signer=signer)
        store = buildcache.BuildCache(
            writer.builds_dir(out) / "cache", key=buildcache.row_key(signer.seed)
        )
        assert store["seals"][_live(out)] == _full_seal(out)
    # The generation the next build writes is found sealed (the survey, here
    # in this process), and that build writes what a cold one does.
    root = writer.builds_dir(out)
    target = "a" if _live(out) == "b" else "b"
    assert writer._survey((store["seals"], root, target, None)).sealed
    tp.add("bob", 1)
    buildmod.build(tp.content, out, signer=signer)
    assert site_files(out) == _cold(tp.content, tmp_path)


def test_the_live_manifest_is_read_by_the_survey_and_only_what_differs_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consecutive builds after one change each (what a pool's CI does): the
    generation written is one build behind, and the files the build before
    changed are lent from the live one. The survey reads the live manifest
    and hands back only its entries the generation being written does not
    hold; the writer reads no manifest itself, and lends those files as
    hard links (the same inode), never rendered again. (Here the live
    generation's seal is checked however few files it lends: the next test
    lends by reading them.)"""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", 10**9)
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _tagged_build(out, plan_of(30), seals)
    _tagged_build(out, plan_of(30, changed=4), seals)  # the live one has the edit
    reads: list[Path] = []
    read_manifest = writer._read_manifest

    def counted(path: Path) -> object:
        reads.append(path)
        return read_manifest(path)

    opening = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    survey = opening.survey()
    opening._result = lambda: survey
    assert survey.live is not None and survey.live.sealed
    assert survey.live.entries.keys() == {"dreams/004/index.html"}
    monkeypatch.setattr(writer, "_read_manifest", counted)
    live = writer.builds_dir(out) / _live(out)
    with writer.SiteWriter(out, opening=opening) as w:
        for rel, data in plan_of(30, changed=4).items():
            assert w.can_keep(rel, writer.digest(data))
            w.keep(rel, writer.digest(data))
    assert reads == []
    monkeypatch.undo()
    assert tree(out) == plan_of(30, changed=4)
    page = "dreams/004/index.html"
    assert (live / page).stat().st_ino == (writer.builds_dir(out) / _live(out) / page).stat().st_ino
    assert seals[_live(out)] == _full_seal(out)


def test_a_few_files_to_lend_are_read_not_vouched_for_by_the_live_seal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the files to lend are fewer than the live generation's folders are
    worth (writer.LSTATS_PER_READ), the survey leaves its seal unchecked (no
    ``lstat`` of its folders) and the writer reads each file it lends, as
    from a restored generation; the site is the same, the files still lent."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _tagged_build(out, plan_of(30), seals)
    _tagged_build(out, plan_of(30, changed=4), seals)
    stats: list[Path] = []
    folder_stats = writer._folder_stats

    def counted(gen: Path, *args: Any, **kwargs: Any) -> Any:
        stats.append(gen)
        return folder_stats(gen, *args, **kwargs)

    monkeypatch.setattr(writer, "_folder_stats", counted)
    opening = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    survey = opening.survey()
    opening._result = lambda: survey
    live = writer.builds_dir(out) / _live(out)
    assert live not in stats and stats  # the target's seal was checked, not the live one's
    assert survey.live is not None and not survey.live.sealed
    assert survey.live.entries.keys() == {"dreams/004/index.html"}
    reads: list[str] = []
    holds = writer._holds_at

    def read(path: str, entry: Any, *fd: int) -> Any:
        reads.append(path)
        return holds(path, entry, *fd)

    monkeypatch.setattr(writer, "_holds_at", read)
    with writer.SiteWriter(out, opening=opening) as w:
        for rel, data in plan_of(30, changed=4).items():
            assert w.can_keep(rel, writer.digest(data))
            w.keep(rel, writer.digest(data))
    monkeypatch.undo()
    # Read as the live generation holds it, then again on the descriptor linked (r82, r85).
    assert reads == [f"{live}/dreams/004/index.html"] * 2
    assert tree(out) == plan_of(30, changed=4)
    page = "dreams/004/index.html"
    assert (live / page).stat().st_ino == (writer.builds_dir(out) / _live(out) / page).stat().st_ino
    assert seals[_live(out)] == _full_seal(out)
