"""Review r82 of 2ba60c2f (writer.Opening(defer=True) and begin(): a sealed
generation's survey starts after the store's read) and 4d130d6d (a few files
to lend are read, not vouched for by the live seal).

Two defects found: a lent page replaced between its check and its link was
published (fixed for a file lent by its bytes by reading it again as linked;
on both paths, and on the sealed one older than this change, by linking the
very file checked, through its descriptor: r85's suggestion); an
interrupt in begin() could leave the survey running (fixed: the stack is the
Opening's before the fork). The other tests guard what held.
"""

from __future__ import annotations

import inspect
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from builder import parallel
from builder.site import writer
from tests.golden_update import tree
from tests.isolated import run_isolated

needs_fork = pytest.mark.skipif(parallel.workers() < 2, reason="one core: nothing forked")


def _plan(changed: bool = False, n: int = 40) -> dict[str, bytes]:
    plan = {f"dreams/{i:03d}/index.html": f"page {i}".encode() for i in range(n)}
    plan["index.html"] = b"home"
    if changed:
        plan["dreams/004/index.html"] = b"edited"
    return plan


def _live(out: Path) -> Path:
    return writer.builds_dir(out) / os.readlink(out).rsplit("/", 1)[1]


def _lending(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A signing pool's site whose live generation holds a page (004, b"edited")
    the other generation does not: the next build of the same plan lends it."""
    out, seals = tmp_path / "site", {}
    for plan in (_plan(), _plan(), _plan(changed=True)):
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            w.add_all(plan)
    return out, seals


def _replace_as_tar_does(page: Path, data: bytes) -> None:
    st = os.stat(page)
    page.unlink()
    page.write_bytes(data)
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("per_read", [writer.LSTATS_PER_READ, 10**9], ids=["read", "sealed"])
@pytest.mark.parametrize("how", ["file", "folder"])
def test_a_lent_page_replaced_between_its_check_and_its_link_is_not_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, per_read: int
) -> None:
    """T81 (T45): 4d130d6d says each file lent is read and digested before it is
    linked, but keep() links whatever the live path names when it links:
    can_keep() read (or stat-ed) the page, then it is replaced as tar does
    (same size and mtime), or its folder by a link to a folder outside
    (review r34), and keep() hard-links that other inode into the generation
    the signing build publishes, records it under the verified digest, and
    the commit seals it in. Both paths (read, and sealed by size/mtime)."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    out, seals = _lending(tmp_path)
    outside = tmp_path / "outside" / "004"
    outside.mkdir(parents=True)
    (outside / "index.html").write_bytes(b"PWNED!")  # the size of b"edited"
    rel, want = "dreams/004/index.html", writer.digest(b"edited")
    published = os.readlink(out)
    try:
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            assert w.can_keep(rel, want)  # checked: the live page holds b"edited"
            page = _live(out) / rel
            if how == "file":
                _replace_as_tar_does(page, b"PWNED!")
            else:
                os.utime(outside / "index.html", ns=(0, os.stat(page).st_mtime_ns))
                shutil.rmtree(page.parent)
                page.parent.symlink_to(outside, target_is_directory=True)
            w.keep(rel, want)
            for other, data in _plan(changed=True).items():
                if other != rel:
                    w.add(other, data)
    except writer.PlanError as exc:  # the build stops: nothing it wrote goes live
        assert "changed while this build ran" in str(exc) or "is a link" in str(exc), exc
        assert os.readlink(out) == published
        return
    assert tree(out)[rel] == b"edited"


def test_a_few_pages_lent_by_reading_are_the_cold_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (guard, holds): under 4d130d6d's threshold a lent page is read, a
    page replaced before the check is not lent (written instead), links are
    never followed, the manifest records each file as it is, and the seal the
    commit records is the full seal of what is there."""
    out, seals = _lending(tmp_path)
    live = _live(out)
    _replace_as_tar_does(live / "dreams/004/index.html", b"PWNED!")
    (live / "dreams/007/index.html").unlink()
    (live / "dreams/007/index.html").symlink_to(tmp_path / "nowhere")
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.live_manifest.keys() == {"dreams/004/index.html"}
        for rel, data in _plan(changed=True).items():
            d = writer.digest(data)
            if w.can_keep(rel, d):
                w.keep(rel, d)
            else:
                w.add(rel, data)
    assert tree(out) == _plan(changed=True)
    gen = _live(out)
    found = writer._read_manifest(writer.builds_dir(out) / f"manifest-{gen.name}")
    assert found is not None
    for rel, (d, size, mtime) in found[0].items():
        st = os.lstat(gen / rel)
        assert (d, size, mtime) == (
            writer.digest((gen / rel).read_bytes()),
            st.st_size,
            st.st_mtime_ns,
        )
    assert seals[gen.name] == writer._seal(gen, found[1], found[0])


def test_the_threshold_has_no_edge_in_an_empty_or_all_lendable_manifest(tmp_path: Path) -> None:
    """T81 (guard, holds): an empty live manifest lends nothing; one whose every
    entry is lendable checks the live seal (no division, no zero edge)."""
    root = tmp_path / ".site.builds"
    (root / "a").mkdir(parents=True)
    writer._write_manifest(root / "manifest-a", {})
    assert writer._survey_live({}, root, "a", {}, frozenset()) == writer._LiveSurvey(False, {})
    entry = (writer.digest(b"x"), 1, 0)
    (root / "a" / "f").write_bytes(b"x")
    checksum = writer._write_manifest(root / "manifest-a", {"f": entry})
    seal = writer._seal(root / "a", checksum, {"f": entry})
    assert seal is not None
    got = writer._survey_live({"a": seal}, root, "a", {}, frozenset())
    assert got.sealed and got.entries == {"f": entry}


_INTERRUPT_IN_BEGIN = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from builder.site import writer

    out, seals = Path(sys.argv[1]) / "site", {}
    for _ in range(2):
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            w.add_all({"index.html": b"home"})

    def slow(args):  # a survey reading a restored generation's gigabyte
        time.sleep(30)
        return None
    writer._survey = slow

    line = int(sys.argv[2])
    def tracer(frame, event, arg):
        if frame.f_code is not writer.Opening.begin.__code__:
            return None
        def local(frame, event, arg):
            if event == "line" and frame.f_lineno == line:
                sys.settrace(None)
                raise KeyboardInterrupt  # Ctrl-C lands here
            return local
        return local

    opening = writer.Opening(out, seals=seals, seals_tagged=True, defer=True)
    assert opening._pending is None
    try:
        with opening:
            sys.settrace(tracer)
            opening.begin()
    except KeyboardInterrupt:  # the build's with-block has closed the Opening
        import multiprocessing
        print("interrupted", len(multiprocessing.active_children()), "left", flush=True)
    print("done", flush=True)
    """
)


def _begin_lines() -> list[int]:
    source, first = inspect.getsourcelines(writer.Opening.begin)
    return [first + i for i, text in enumerate(source) if text.strip().startswith("self.")]


@needs_fork
@pytest.mark.parametrize("line", _begin_lines())
def test_an_interrupt_anywhere_in_begin_is_ended_by_close(tmp_path: Path, line: int) -> None:
    """T40: begin() forks inside its try but hands the process's ExitStack to
    the Opening only after it (``self._stack = stack``): a Ctrl-C landing
    between the two leaves close() nothing to end (its contract: "end the
    survey's process"), so the survey runs on after the build's ``with
    opening`` has closed it, until the exception's traceback is dropped and
    the suspended background() generator is finalized (CPython refcounting;
    never while a caller keeps the exception, as pytest.raises or a server's
    error log does). Before 2ba60c2f the stack was the Opening's before the
    fork (review r62)."""
    out, hung = run_isolated(_INTERRUPT_IN_BEGIN, str(tmp_path), str(line), timeout=60)
    assert not hung, out
    assert "interrupted 0 left" in out and "done" in out, f"interrupted at line {line}: {out}"


def test_a_real_build_lending_by_reading_is_the_cold_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (guard, holds): every lendable file taken by reading (the threshold
    forced), through build.py's deferred survey: the site of a +1 after a +1
    is a cold build's, files were lent by reading, and the live seal unchecked."""
    from builder import build as buildmod
    from builder.formats.note import parse_private_key
    from tests.pools import PoolFixture
    from tests.test_store_restore import _cold, _published, site_files

    tp, origin = _published(tmp_path)
    signer = parse_private_key(tp.log_key)
    buildmod.build(tp.content, origin / "site", signer=signer)
    pool = PoolFixture(tp.content, tp.log_key, tp.vkey)
    pool.add("bob", 1)
    buildmod.build(tp.content, origin / "site", signer=signer)
    pool.add("ada", 1)
    monkeypatch.setattr(writer, "LSTATS_PER_READ", 0)
    reads: list[str] = []
    holds = writer._holds_at

    def read(path: str, entry: writer.Entry, *fd: int) -> tuple[writer.Entry, int] | None:
        reads.append(path)
        return holds(path, entry, *fd)

    monkeypatch.setattr(writer, "_holds_at", read)
    monkeypatch.setattr(parallel, "workers", lambda: 1)  # the survey here, so counted
    live = str(_live(origin / "site"))
    buildmod.build(tp.content, origin / "site", signer=signer)
    monkeypatch.undo()
    assert [p for p in reads if p.startswith(live + "/")]
    assert site_files(origin / "site") == _cold(tp.content, tmp_path)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, OSError])
def test_a_build_failing_before_begin_forks_nothing_and_releases_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: type[BaseException]
) -> None:
    """T40 (guard, holds): a deferred survey never begun: a build interrupted or
    failing in load_beside leaves no process, the lock free, the output as it was."""
    import multiprocessing

    from builder import build as buildmod
    from builder.formats.note import parse_private_key
    from tests.test_store_restore import _published, site_files

    tp, origin = _published(tmp_path)
    signer = parse_private_key(tp.log_key)
    buildmod.build(tp.content, origin / "site", signer=signer)
    before = site_files(origin / "site")
    forks: list[object] = []
    background = parallel.background

    def counted(func: object, *args: object, **kw: object) -> object:
        if func is writer._survey:
            forks.append(func)
        return background(func, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel, "background", counted)

    def fail(*args: object) -> object:
        raise exc("stopped")

    monkeypatch.setattr(buildmod.filekeys, "load_beside", fail)
    with pytest.raises(exc):
        buildmod.build(tp.content, origin / "site", signer=signer)
    assert not multiprocessing.active_children() and not forks
    writer.Opening(origin / "site", background=False).close()  # the lock is free
    assert site_files(origin / "site") == before
