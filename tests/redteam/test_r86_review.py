"""Review r86 of 62a04928 and 226a4b13 (keep() lends the very file checked:
writer._open_beneath opens it one name at a time with no link followed,
SiteWriter._lendable checks it on that descriptor, writer._link_open links
the descriptor through /proc/self/fd, writer._copy_open copies it without
/proc).

Two defects (the first two tests fail on 226a4b13), both low: a hard link
that cannot be made (EMLINK here; EXDEV across a mount, EPERM from
protected_hardlinks likewise) escapes keep() as a bare OSError, with no
fallback to copying the file it has already checked, and a live page
65,000 links deep wedges every build (no race needed); and the file to
lend is opened for reading before its type is known, so a device node in
its place has its driver's open run (new on the sealed path, which only
stat-ed it before). The guards hold: a live generation made a link, every
kind of non-file on the way, a page unlinked once opened, folders swapped
after the survey, and sealed lends at any depth, with no descriptor leaked.

What was done: a file linkat refuses (EMLINK, EXDEV, EPERM, or ENOENT with
the file still linked, as from a /proc that cannot link) is copied as
checked; the file is opened O_PATH, its type checked, and read only through
a second open of /proc/self/fd/N (O_NOCTTY)."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.site import writer
from tests.golden_update import tree
from tests.redteam.test_r82_review import _lending, _live, _plan

REL = "dreams/004/index.html"
WANT = writer.digest(b"edited")
PATHS = pytest.mark.parametrize("per_read", [writer.LSTATS_PER_READ, 10**9], ids=["read", "sealed"])


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _link_to_the_limit(page: Path, folder: Path) -> bool:
    """Hard-link ``page`` from ``folder`` (outside the live generation, same
    file system) until the file system refuses another link; False if it
    has no limit worth reaching."""
    folder.mkdir()
    src = os.open(page.parent, os.O_RDONLY | os.O_DIRECTORY)
    dst = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(70_000):
            try:
                os.link(page.name, str(i), src_dir_fd=src, dst_dir_fd=dst)
            except OSError as exc:
                if exc.errno == errno.EMLINK:
                    return True
                raise
    finally:
        os.close(src)
        os.close(dst)
    return False


@PATHS
def test_a_live_page_linked_to_the_limit_is_still_lent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int
) -> None:
    """T81 (T45, low; pre-existing, kept by the change): _link_open catches
    only ENOENT from linkat. A process writing the live site hard-links a
    live page 64,999 times from a folder of its own outside the live
    generation (ext4's limit): no folder of the live generation changes, so
    the seal holds and the page checks out on both paths, but linkat fails
    with EMLINK and a bare OSError ends the build after the target's
    manifest was removed; every later build lends the page again and fails
    the same way until the links go (no race needed). EXDEV (the live page
    under a bind mount or another file system) and EPERM (protected_hardlinks,
    a page not the build user's) take the same path.
    Fix: in _link_open, on EMLINK, EXDEV or EPERM from os.link fall back to
    _copy_open(fd, ...) (the descriptor was checked; the copy checks its
    bytes again), or at least raise PlanError."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    out, seals = _lending(tmp_path)
    page = _live(out) / REL
    links = tmp_path / "links"
    try:
        if not _link_to_the_limit(page, links):
            pytest.skip("this file system does not limit hard links")
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            assert w.can_keep(REL, WANT)
            try:
                w.keep(REL, WANT)
            except writer.PlanError:
                w.add(REL, b"edited")  # refused cleanly: written instead
            w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
    finally:
        shutil.rmtree(links, ignore_errors=True)
    assert tree(out) == _plan(changed=True)


def _mknod_null(path: Path) -> None:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a device node (root)")
@PATHS
def test_a_device_node_in_place_of_a_lent_page_is_not_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int
) -> None:
    """T81 (T45, low; hardening): _open_beneath opens the page with O_RDONLY
    (no O_NOCTTY) before anything looks at its type, so a character or block
    device in its place has its driver's open() run in the signing build
    (a tty taken as controlling terminal by a build that leads its session,
    a watchdog armed, a tape rewound). Before the change the sealed path
    only stat-ed the page; the read path opened it the same way. Who can
    plant one: a root process writing the live site, or tar restoring the
    publish workflow's cache as root (a container job). The lend is
    refused either way: the harm is the open itself.
    Fix: open the last name with O_PATH|O_NOFOLLOW, fstat it, go on only
    for S_ISREG, and read through a second open of /proc/self/fd/N with
    O_RDONLY|O_NOCTTY (without /proc: openat the name again, O_NOFOLLOW,
    and require the same st_dev/st_ino); linkat works on the O_PATH fd."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    out, seals = _lending(tmp_path)
    page = _live(out) / REL
    real_open = os.open
    opened: list[str] = []

    def recording_open(path: object, flags: int, *a: object, **k: object) -> int:
        fd = real_open(path, flags, *a, **k)  # type: ignore[arg-type]
        if not flags & getattr(os, "O_PATH", 0):
            mode = os.fstat(fd).st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                opened.append(str(path))
        return fd

    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        page.unlink()
        try:
            _mknod_null(page)
        except PermissionError:
            pytest.skip("no CAP_MKNOD here")
        monkeypatch.setattr(os, "open", recording_open)
        kept = w.can_keep(REL, WANT)
        monkeypatch.setattr(os, "open", real_open)
        assert not kept
        w.add_all(_plan(changed=True))
    assert opened == [], f"opened a device node for reading: {opened}"


# --- guards -----------------------------------------------------------------


def _unix_socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
    finally:
        s.close()


Sabotage = Callable[[Path, Path], None]


def _page_is(make: Sabotage) -> Sabotage:
    def sabotage(live: Path, outside: Path) -> None:
        page = live / REL
        page.unlink()
        make(page, outside)

    return sabotage


def _folder_is(make: Sabotage) -> Sabotage:
    def sabotage(live: Path, outside: Path) -> None:
        folder = live / "dreams/004"
        shutil.rmtree(folder)
        make(folder, outside)

    return sabotage


def _generation_is_a_link(live: Path, outside: Path) -> None:
    shutil.copytree(live, outside / "copy", symlinks=True)  # bytes and mtimes kept
    live.rename(outside / "aside")
    live.symlink_to(outside / "copy", target_is_directory=True)


SABOTAGE: dict[str, Sabotage] = {
    "page-fifo": _page_is(lambda p, _: os.mkfifo(p)),
    "page-folder": _page_is(lambda p, _: p.mkdir()),
    "page-socket": _page_is(lambda p, _: _unix_socket(p)),
    "page-link": _page_is(lambda p, o: p.symlink_to(o / "004" / "index.html")),
    "folder-fifo": _folder_is(lambda f, _: os.mkfifo(f)),
    "folder-file": _folder_is(lambda f, _: f.write_bytes(b"edited")),
    "folder-link": _folder_is(lambda f, o: f.symlink_to(o / "004", target_is_directory=True)),
    "folder-loop": _folder_is(lambda f, _: f.symlink_to("004")),
    "generation-link": _generation_is_a_link,
}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
@PATHS
@pytest.mark.parametrize("how", list(SABOTAGE))
def test_guard_nothing_but_a_plain_file_through_plain_folders_is_lent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int, how: str
) -> None:
    """T81 (T45, guard, holds): after the survey the page is made a FIFO, a
    folder, a socket or a link to an outside copy; or its folder a FIFO, a
    file, a link to an outside copy (same bytes and mtime) or a link to
    itself (ELOOP); or the live generation itself a link to a full copy.
    can_keep says no, keep() raises PlanError (no hang on the FIFO, no
    OSError), nothing is published, no tmp is left and no descriptor leaks."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    out, seals = _lending(tmp_path)
    outside = tmp_path / "x"
    shutil.copytree(_live(out) / "dreams/004", outside / "004")  # the page, its mtime too
    published = os.readlink(out)
    before = _fds()
    with (
        pytest.raises(writer.PlanError, match="changed while this build ran"),
        writer.SiteWriter(out, seals=seals, seals_tagged=True) as w,
    ):
        SABOTAGE[how](_live(out), outside)
        assert not w.can_keep(REL, WANT)
        w.keep(REL, WANT)
    assert _fds() == before
    assert os.readlink(out) == published
    assert not list(writer.builds_dir(out).rglob(".*.tmp"))


def test_guard_a_page_unlinked_once_opened_is_not_linked_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (guard, holds): the page checked and opened, then unlinked by a
    process writing the live site before the link (its inode at nlink 0):
    linkat of /proc/self/fd/N fails with ENOENT and keep() stops the build
    with PlanError rather than resurrecting it; no tmp is left, no fd leaks."""
    out, seals = _lending(tmp_path)
    page = _live(out) / REL
    published = os.readlink(out)
    real_link = os.link
    unlinked = []

    def unlink_first(src: str, dst: str, *a: object, **k: object) -> None:
        if src.startswith("/proc/self/fd/"):
            page.unlink()
            unlinked.append(os.fstat(int(src.rsplit("/", 1)[1])).st_nlink)
        real_link(src, dst, *a, **k)  # type: ignore[arg-type]

    before = _fds()
    with (
        pytest.raises(writer.PlanError, match="changed while this build ran"),
        writer.SiteWriter(out, seals=seals, seals_tagged=True) as w,
    ):
        assert w.can_keep(REL, WANT)
        monkeypatch.setattr(os, "link", unlink_first)
        w.keep(REL, WANT)
    monkeypatch.setattr(os, "link", real_link)
    assert unlinked == [0]
    assert _fds() == before
    assert os.readlink(out) == published
    assert not list(writer.builds_dir(out).rglob(".*.tmp"))


def test_guard_two_folders_swapped_after_the_survey_are_read_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (guard, holds): dreams/004 and dreams/005 swapped after the survey
    (their pages the same size, 005's mtime set to 004's): each folder keeps
    its inode and ctime only if the kernel leaves them, but dreams/ changed
    entries, so _as_surveyed refuses the size-and-mtime path, the bytes are
    read, and b"page 5" is not lent as 004's page."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", 10**9)
    out, seals = _lending(tmp_path)
    dreams = _live(out) / "dreams"
    st = os.stat(dreams / "004/index.html")
    os.utime(dreams / "005/index.html", ns=(st.st_atime_ns, st.st_mtime_ns))
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        (dreams / "004").rename(dreams / "tmp")
        (dreams / "005").rename(dreams / "004")
        (dreams / "tmp").rename(dreams / "005")
        assert not w.can_keep(REL, WANT)
        w.add_all(_plan(changed=True))
    assert tree(out) == _plan(changed=True)


def test_guard_sealed_lends_at_any_depth_are_taken_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (guard, holds): _as_surveyed pairs the survey's folders ("" first,
    outermost to innermost) with _open_beneath's in the same order, for a
    file at the generation's top and one four folders down: both lent by
    size and mtime (not read), as the very live inodes."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", 10**9)
    out, seals = tmp_path / "site", {}
    base = {**_plan(), "a/b/c/d/page.html": b"deep"}
    changed = {**base, "index.html": b"HOME", "a/b/c/d/page.html": b"DEEP"}
    for plan in (base, base, changed):
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            w.add_all(plan)
    live = _live(out)
    inodes = {rel: os.stat(live / rel).st_ino for rel in ("index.html", "a/b/c/d/page.html")}
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w._live_sealed
        for rel in inodes:
            want = writer.digest(changed[rel])
            assert w.can_keep(rel, want)
            w.keep(rel, want)
        assert w._live_read == {}
        w.add_all({r: d for r, d in changed.items() if r not in inodes})
    assert tree(out) == changed
    assert {rel: os.stat(out / rel).st_ino for rel in inodes} == inodes
