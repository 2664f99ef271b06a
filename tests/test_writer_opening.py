"""The generation a build writes is surveyed while the build reads the pool
(builder.site.writer.Opening): its manifest read, its seal checked and, when
the seal does not hold (a generation restored from the publish workflow's
cache, THREATS.md T81), its files read, in a forked process. Surveying
changes nothing: a build that fails before its site stage leaves the output
as it was, lock released. Every case compares the site with a cold build's."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from builder import build as buildmod
from builder import parallel
from builder.errors import InputError
from builder.formats.note import parse_private_key
from builder.site import writer
from tests.pools import PoolFixture
from tests.test_store_restore import _cold, _fresh_clone, _published, site_files


def _restored(tmp_path: Path) -> tuple[PoolFixture, Path, Path]:
    """A fresh clone of a published pool with its derived folder restored (new
    inodes: no seal holds), a new dream in it, and the generation it will write."""
    tp, origin = _published(tmp_path)
    # The second build writes the other generation: both have a manifest.
    buildmod.build(tp.content, origin / "site", signer=parse_private_key(tp.log_key))
    clone = _fresh_clone(tmp_path, origin)
    PoolFixture(clone / "content", tp.log_key, tp.vkey).add("ada", 1)
    live = os.readlink(clone / "site").rpartition("/")[2]
    target = writer.GENERATIONS[1] if live == writer.GENERATIONS[0] else writer.GENERATIONS[0]
    return tp, clone, clone / ".site.builds" / target


def test_a_build_that_fails_before_its_site_stage_leaves_the_output_as_it_was(
    tmp_path: Path,
) -> None:
    tp, clone, target = _restored(tmp_path)
    manifest = target.parent / f"manifest-{target.name}"
    planted = target / "planted.html"  # no manifest lists it: the writer removes it
    planted.write_text("<p>not the build's</p>")
    before = {p: p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file()}
    listed = manifest.read_bytes()
    bad_key = clone / "content" / "keys" / "0000000000000000.key"
    bad_key.write_text("not a key")
    signer = parse_private_key(tp.log_key)
    with pytest.raises(InputError):
        buildmod.build(clone / "content", clone / "site", signer=signer)
    # Surveyed (read) while the build failed, and nothing of it changed.
    assert manifest.read_bytes() == listed
    assert {p: p.read_bytes() for p in sorted(target.rglob("*")) if p.is_file()} == before
    bad_key.unlink()
    # The lock was released: the next build runs, and removes what was planted.
    buildmod.build(clone / "content", clone / "site", signer=signer)
    assert not planted.exists()
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


def test_a_restored_generation_is_read_in_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a second core, the files of the unsealed generation are read while
    the build proves, scans and models the pool: in the survey's process."""
    if parallel.workers() < 2:
        pytest.skip("one core: the survey runs in the build's process")
    tp, clone, _ = _restored(tmp_path)
    pids = tmp_path / "pids"
    real = writer._check_generation

    def noted(gen: str, listed: dict[str, writer.Entry]) -> writer._Checked:
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(gen, listed)

    monkeypatch.setattr(writer, "_check_generation", noted)
    buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    assert [int(p) for p in pids.read_text().split()] != [os.getpid()]
    assert len(pids.read_text().split()) == 1
    monkeypatch.undo()
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


def test_on_one_core_the_survey_is_made_in_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp, clone, target = _restored(tmp_path)
    (target / "planted.html").write_text("<p>not the build's</p>")
    monkeypatch.setattr(parallel, "workers", lambda: 1)
    pids: list[int] = []
    real = writer._check_generation

    def noted(gen: str, listed: dict[str, writer.Entry]) -> writer._Checked:
        pids.append(os.getpid())  # seen only if it ran in this process
        return real(gen, listed)

    monkeypatch.setattr(writer, "_check_generation", noted)
    buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    monkeypatch.undo()
    assert pids == [os.getpid()]
    assert not (target / "planted.html").exists()
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


def test_a_survey_whose_process_dies_is_made_again_in_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OOM killer may end the survey's process: the build surveys again
    itself rather than stop."""
    if parallel.workers() < 2:
        pytest.skip("one core: the survey runs in the build's process")
    tp, clone, target = _restored(tmp_path)
    (target / "planted.html").write_text("<p>not the build's</p>")
    build_pid = os.getpid()
    real = writer._survey

    def dies_in_the_background(args: object) -> writer.Survey:
        if os.getpid() != build_pid:
            os._exit(9)
        return real(args)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_survey", dies_in_the_background)
    buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    monkeypatch.undo()
    assert not (target / "planted.html").exists()
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


def _built_twice(tmp_path: Path) -> tuple[PoolFixture, Path]:
    """A checkout built twice: both generations have a manifest and a seal."""
    tp, origin = _published(tmp_path)
    buildmod.build(tp.content, origin / "site", signer=parse_private_key(tp.log_key))
    return tp, origin


def test_a_sealed_generation_is_surveyed_once_the_store_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its survey waits until git and the store's scan rows have had both
    cores (build.py: ``opening.begin()``); it still runs in its own process
    and the site is a cold build's."""
    if parallel.workers() < 2:
        pytest.skip("one core: the survey runs in the build's process")
    tp, origin = _built_twice(tmp_path)
    PoolFixture(tp.content, tp.log_key, tp.vkey).add("bob", 1)
    times = tmp_path / "times"
    real_survey, real_load = writer._survey, buildmod.filekeys.load_beside

    def survey(args: object) -> writer.Survey:
        with open(times, "a") as f:
            f.write(f"survey {os.getpid()} {time.monotonic()}\n")
        return real_survey(args)  # type: ignore[arg-type]

    def load_beside(*args: object) -> object:
        got = real_load(*args)  # type: ignore[arg-type]
        with open(times, "a") as f:
            f.write(f"read {os.getpid()} {time.monotonic()}\n")
        return got

    monkeypatch.setattr(writer, "_survey", survey)
    monkeypatch.setattr(buildmod.filekeys, "load_beside", load_beside)
    buildmod.build(tp.content, origin / "site", signer=parse_private_key(tp.log_key))
    monkeypatch.undo()
    seen = {
        what: (int(pid), float(t))
        for what, pid, t in map(str.split, times.read_text().splitlines())
    }
    assert seen["read"][0] == os.getpid() != seen["survey"][0]
    assert seen["read"][1] < seen["survey"][1]
    assert site_files(origin / "site") == _cold(tp.content, tmp_path)


def _opening(out: Path, seals: dict[str, bytes]) -> writer.Opening:
    return writer.Opening(out, seals=seals, seals_tagged=True, defer=True)


def test_a_deferred_survey_starts_once_and_not_after_close(tmp_path: Path) -> None:
    if parallel.workers() < 2:
        pytest.skip("one core: the survey runs in the build's process")
    _, origin = _built_twice(tmp_path)
    out = origin / "site"
    live = os.readlink(out).rpartition("/")[2]
    target = writer.GENERATIONS[1] if live == writer.GENERATIONS[0] else writer.GENERATIONS[0]
    # No seal on record for the generation to write: surveyed at once.
    with _opening(out, {}) as opening:
        assert opening._pending is not None
    # One on record: when begun, once.
    with _opening(out, {target: b"\0" * writer.SEAL_SIZE}) as opening:
        assert opening._pending is None
        opening.begin()
        pending = opening._pending
        assert pending is not None
        opening.begin()
        assert opening._pending is pending
        assert not opening.survey().sealed  # not the seal of what is there
    closed = _opening(out, {target: b"\0" * writer.SEAL_SIZE})
    closed.close()
    closed.begin()
    assert closed._pending is None
    # Never begun: surveyed in this process when asked for.
    with _opening(out, {target: b"\0" * writer.SEAL_SIZE}) as opening:
        assert opening.survey().manifest
        assert opening._pending is None
