"""Review r71 of efde3047 (the commit's folders found once).

``SiteWriter.commit`` under a tagged seal now computes ``_folders(self.written)``
once and hands the same dict to ``_untouched`` and to ``_seal(...,
folders_given=True)``, where before each computed it afresh. The claim: the
same seals and the same behaviour. Every test here is a GUARD (it passes on
efde3047): no defect was found. They pin the claim so a later change that
mutates the dict between its two uses, passes the wrong thing with
``folders_given``, or changes ``self.written`` after the folders were found,
fails here:

* a differential check inside every commit: the dict both callees get is one
  object, equal in content *and order* to ``_folders(self.written)`` at each
  use and after the commit, and the seal computed from it equals the seal the
  code before efde3047 computed (``_seal(gen, checksum, self.written, known)``);
* the seal recorded equals a full seal from scratch (``writer._seal(gen,
  checksum, entries)``, nothing known) after random sequences of builds that
  write, keep their own files, lend from the live generation, store as a
  forked worker does, empty and remove folders, turn files into folders and
  back, and have files edited in place or replaced as tar does between builds;
* the other callers of ``_seal`` / ``_folder_stats`` (the survey, ``_sealed``)
  are unchanged: without ``folders_given`` they still take file entries.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.site import writer
from tests.golden_update import tree
from tests.test_writer_seal_delta import _PATHS, _plan


def _live(out: Path) -> str:
    return Path(os.readlink(out)).name


def _other(out: Path) -> str:
    return "a" if _live(out) == "b" else "b"


def _full_seal(out: Path) -> bytes | None:
    """The live generation's seal from an ``lstat`` of every folder it has."""
    gen = writer.builds_dir(out) / _live(out)
    found = writer._read_manifest(writer.builds_dir(out) / f"manifest-{gen.name}")
    assert found is not None
    entries, checksum = found
    return writer._seal(gen, checksum, entries)


class _Spy:
    """Watches each commit's folders: what ``_untouched`` and ``_seal`` get,
    checked against ``_folders(self.written)`` and the pre-efde3047 seal."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.commits = 0
        self.compared = 0
        self.surveyed = 0  # seals under the survey's folder stats (known given)
        self.delta = 0  # of them, seals that took a folder as the survey found it
        self._writer: writer.SiteWriter | None = None
        self._now: Any = None
        self._order: list[str] = []
        untouched = writer.SiteWriter._untouched
        seal = writer._seal
        replaced_kept = writer.SiteWriter._replaced_kept
        commit = writer.SiteWriter.commit
        spy = self

        def spied_untouched(w: writer.SiteWriter, now: Any) -> dict[str, bytes] | None:
            spy._writer, spy._now = w, now
            spy._order = list(now)
            assert isinstance(now, dict)
            assert spy._order == list(writer._folders(w.written)), "not _folders(written)"
            result = untouched(w, now)
            assert list(now) == spy._order, "_untouched changed the folders"
            return result

        def spied_seal(
            folder: Path,
            checksum: bytes,
            entries: Any,
            known: Mapping[str, bytes] | None = None,
            **kw: Any,
        ) -> bytes | None:
            if not kw.get("folders_given"):
                # The survey and _sealed: file entries, as before efde3047.
                return seal(folder, checksum, entries, known, **kw)
            w = spy._writer
            assert w is not None, "_seal with folders_given outside a commit"
            assert entries is spy._now, "_seal got other folders than _untouched"
            assert list(entries) == spy._order, "the folders changed between the two uses"
            assert list(entries) == list(writer._folders(w.written)), "written changed"
            got = seal(folder, checksum, entries, known, **kw)
            before = seal(folder, checksum, w.written, known)  # the code before efde3047
            assert got == before
            if known is None:
                assert got == seal(folder, checksum, w.written)
            spy.compared += 1
            spy.surveyed += known is not None
            spy.delta += bool(known)
            return got

        def spied_replaced_kept(w: writer.SiteWriter, known: Any) -> bool:
            result = replaced_kept(w, known)
            if spy._now is not None:
                assert list(spy._now) == spy._order, "_replaced_kept changed the folders"
            return result

        def spied_commit(w: writer.SiteWriter) -> None:
            spy._writer, spy._now, spy._order = None, None, []
            commit(w)
            spy.commits += 1
            if spy._now is not None:
                # Nothing after the seal changed what it was taken of.
                assert list(spy._now) == spy._order
                assert list(writer._folders(w.written)) == spy._order

        monkeypatch.setattr(writer.SiteWriter, "_untouched", spied_untouched)
        monkeypatch.setattr(writer, "_seal", spied_seal)
        monkeypatch.setattr(writer.SiteWriter, "_replaced_kept", spied_replaced_kept)
        monkeypatch.setattr(writer.SiteWriter, "commit", spied_commit)


def _build(out: Path, plan: dict[str, bytes], how: str, **kw: Any) -> writer.SiteWriter:
    """One build of ``plan`` the way builder.site may make it."""
    with writer.SiteWriter(out, **kw) as w:
        files = [(rel, writer.digest(data)) for rel, data in plan.items()]
        if how == "add":
            w.add_all(plan)
        elif how == "keep":  # keep own or lent, else write
            for (rel, d), data in zip(files, plan.values(), strict=True):
                if w.can_keep(rel, d):
                    w.keep(rel, d)
                else:
                    w.add(rel, data)
        elif how == "keep_all":  # a unit's files together, as units.py does
            for (rel, d), data in zip(files, plan.values(), strict=True):
                if not w.keep_all([(rel, d)]):
                    w.add(rel, data)
        else:  # "forked": claimed here, stored (as in a worker), recorded here
            for rel in plan:
                w.prepare(rel, folder=True)
            stored = [(rel, *w.store(rel, data)) for rel, data in plan.items()]
            for rel, entry, changed in stored:
                w.record(rel, entry, changed)
    return w


def _tamper(out: Path, how: str, pick: int) -> None:
    """Change a file of the generation the next build writes, between builds."""
    if how == "none" or not out.is_symlink():
        return
    found = writer._read_manifest(writer.builds_dir(out) / f"manifest-{_other(out)}")
    if found is None or not found[0]:
        return
    rels = sorted(found[0])
    page = writer.builds_dir(out) / _other(out) / rels[pick % len(rels)]
    if not page.is_file() or page.is_symlink():
        return
    st_ = os.stat(page)
    if how == "edit":  # in place: its folder's ctime stays
        page.write_bytes(page.read_bytes() + b"!")
    else:  # "tar": unlinked and written anew with the old mtime
        data = page.read_bytes()
        page.unlink()
        page.write_bytes(b"X" * len(data))
        os.utime(page, ns=(st_.st_atime_ns, st_.st_mtime_ns))


_BUILDS = st.lists(
    st.tuples(
        _PATHS,
        st.integers(0, 5),
        st.sampled_from(["add", "keep", "keep_all", "forked"]),
        st.sampled_from(["none", "none", "edit", "tar"]),
        st.integers(0, 50),
    ),
    min_size=1,
    max_size=7,
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_BUILDS)
def test_guard_the_seal_from_the_folders_found_once_is_the_full_seal_after_any_builds(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    builds: list[tuple[list[str], int, str, str, int]],
) -> None:
    """GUARD, T81 (passes on efde3047). Random builds under a tagged seal:
    in every commit the one dict of folders is ``_folders(written)`` in
    order, unchanged between ``_untouched`` and ``_seal`` and after, and its
    seal is the one the code before efde3047 computed; the seal recorded is
    the full seal from scratch, and the next build finds it sealed. A file
    edited in place or replaced as tar does between builds never leaves a
    seal that vouches for it."""
    with monkeypatch.context() as m:
        spy = _Spy(m)
        out = tmp_path_factory.mktemp("r71") / "site"
        seals: dict[str, bytes] = {}
        first = [(["index.html"], 0, "add", "none", 0)] * 3
        for paths, salt, how, tamper, pick in [*first, *builds]:
            _tamper(out, tamper, pick)
            plan = _plan(paths, salt)
            _build(out, plan, how, seals=seals, seals_tagged=True)
            assert tree(out) == plan
            live = _live(out)
            assert live in seals, "a build with nothing changed behind it recorded no seal"
            assert seals[live] == _full_seal(out)
            root = writer.builds_dir(out)
            assert writer._survey((seals, root, live, None)).sealed
        assert spy.commits == len(first) + len(builds)
        assert spy.compared == spy.commits
        assert spy.surveyed >= 1  # the third build's generation was sealed


@pytest.mark.parametrize("tagged", [True, False])
def test_guard_an_untagged_or_unsurveyed_commit_seals_every_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tagged: bool
) -> None:
    """GUARD, T81 (passes on efde3047). Without the survey's folder stats
    (``known`` None: an untagged seal, or an unsealed generation) the seal
    from the folders found once is the full seal, over every folder."""
    spy = _Spy(monkeypatch)
    out = tmp_path / "site"
    seals: dict[str, bytes] = {}
    kept = {"k/e/p.html": b"untouched"}
    plans = [
        {"index.html": b"h", "a/b/c/x.html": b"x", "a/y.html": b"y", **kept},
        {"index.html": b"h", "a/b/c/x.html": b"x", "a/y.html": b"y", **kept},
        {"index.html": b"h2", "a/y.html": b"y", **kept},  # a/b/c and a/b emptied, removed
        {"index.html": b"h2", "a/b": b"now a file", **kept},
        {},  # an empty site: the generation's own folder only
        {"z/index.html": b"z"},
    ]
    for plan in plans:
        _build(out, plan, "keep", seals=seals, seals_tagged=tagged)
        assert tree(out) == plan
        assert seals[_live(out)] == _full_seal(out)
    assert spy.compared == spy.commits == len(plans)
    # Tagged, the third and fourth builds took k and k/e as the survey found them.
    assert (spy.delta >= 2) if tagged else (spy.surveyed == 0)


def test_guard_a_folder_removed_by_another_hand_during_a_build_unseals(
    tmp_path: Path,
) -> None:
    """GUARD, T81 (passes on efde3047). A folder the build did not touch,
    emptied and removed by another hand after the survey: the folders found
    once at commit (from what the build wrote) still name it, the seal takes
    it as the survey found it, and the next survey of that generation finds
    it gone: unsealed, read whole."""
    out = tmp_path / "site"
    seals: dict[str, bytes] = {}
    plan = {f"dreams/{i:02d}/index.html": f"page {i}".encode() for i in range(8)}
    plan["index.html"] = b"home"
    for _ in range(2):
        _build(out, plan, "add", seals=seals, seals_tagged=True)
    opening = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    survey = opening.survey()
    opening._result = lambda: survey
    target = writer.builds_dir(out) / opening.target
    (target / "dreams" / "05" / "index.html").unlink()
    (target / "dreams" / "05").rmdir()
    changed = dict(plan, **{"dreams/01/index.html": b"edited"})
    with writer.SiteWriter(out, opening=opening) as w:
        for rel, data in changed.items():
            if rel == "dreams/05/index.html":
                continue  # kept, as the manifest and the survey say it is there
            w.add(rel, data)
        assert w.keep_all([("dreams/05/index.html", writer.digest(plan["dreams/05/index.html"]))])
    assert opening.target not in seals or seals[opening.target] != _full_seal(out)
    assert not writer._survey((seals, target.parent, target.name, None)).sealed


def test_guard_the_survey_and_sealed_still_take_file_entries(tmp_path: Path) -> None:
    """GUARD, T81 (passes on efde3047). The other callers of ``_seal`` and
    ``_folder_stats`` pass file entries without ``folders_given``: the same
    folders, the same order, the same seal as with the folders given."""
    gen = tmp_path / "g"
    entries = ["x/y/z.html", "index.html", "x/w.html", "q/r/s/t.html", "x/y/u.html"]
    for rel in entries:
        (gen / rel).parent.mkdir(parents=True, exist_ok=True)
        (gen / rel).write_bytes(b"")
    folders = writer._folders(entries)
    assert list(folders) == ["", "x/y", "x", "q/r/s", "q/r", "q"]
    by_entries = writer._folder_stats(gen, entries)
    by_folders = writer._folder_stats(gen, folders, folders_given=True)
    assert by_entries is not None and by_folders is not None
    assert list(by_entries.items()) == list(by_folders.items())
    checksum = b"\x01" * writer.DIGEST_SIZE
    assert writer._seal(gen, checksum, entries) == writer._seal(
        gen, checksum, folders, folders_given=True
    )
    # File paths passed as folders would be a mistake the commit never makes:
    # they are not folders, so no seal (never a seal of the wrong things).
    assert writer._seal(gen, checksum, entries, folders_given=True) is None
