"""SiteWriter.keep() lending a file of the live generation: the very file it
checked, open on a descriptor reached through plain folders only, is linked
(linkat of /proc/self/fd/N), or copied where an open file cannot be linked.
The races a process writing the live site could win against a link by path
are in tests/redteam/test_r82..r85_review.py; these pin the mechanism."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from builder.site import writer
from tests.golden_update import tree
from tests.redteam.test_r82_review import _lending, _live, _plan

REL = "dreams/004/index.html"
WANT = writer.digest(b"edited")
BY_BYTES = writer.LSTATS_PER_READ  # few files to lend: each read (monkeypatched below)
PATHS = pytest.mark.parametrize("per_read", [writer.LSTATS_PER_READ, 10**9], ids=["read", "sealed"])


@PATHS
def test_a_lent_file_is_the_live_inode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int
) -> None:
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    out, seals = _lending(tmp_path)
    inode = os.stat(_live(out) / REL).st_ino
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, WANT)
        w.keep(REL, WANT)
        assert (REL in w._live_read) == (per_read == BY_BYTES)
        w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
    assert os.stat(out / REL).st_ino == inode
    assert tree(out) == _plan(changed=True)


@PATHS
def test_where_an_open_file_cannot_be_linked_it_is_copied_as_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int
) -> None:
    """No /proc (macOS, a chroot): the bytes read on the descriptor are
    checked and written anew; the entry recorded is the copy's."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    monkeypatch.setattr(writer, "_links_by_fd", lambda: False)
    out, seals = _lending(tmp_path)
    inode = os.stat(_live(out) / REL).st_ino
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, WANT)
        w.keep(REL, WANT)
        w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
        entry = w.written[REL]
    st = os.stat(out / REL)
    assert st.st_ino != inode and entry == (WANT, st.st_size, st.st_mtime_ns)
    assert tree(out) == _plan(changed=True)
    # The next build of the generation holds it as recorded: no rewrite.
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        w.add_all(_plan(changed=True))
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        w.add_all(_plan(changed=True))
        assert w.changed == 0


@pytest.mark.parametrize(
    ("per_read", "links"),
    [(BY_BYTES, True), (BY_BYTES, False), (10**9, False)],
    ids=["read-linked", "read-copied", "sealed-copied"],
)
def test_a_lent_file_edited_in_place_after_its_check_stops_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int, links: bool
) -> None:
    """Other bytes of the same size, the mtime set back: by its bytes keep()
    reads them again on the descriptor; on the sealed path the copy reads
    them (a link shares the inode, edited in place either way: THREATS.md)."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    monkeypatch.setattr(writer, "_links_by_fd", lambda: links)
    out, seals = _lending(tmp_path)
    published = os.readlink(out)
    page = _live(out) / REL
    stop = pytest.raises(writer.PlanError, match="changed while this build ran")
    with stop, writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, WANT)
        st = os.stat(page)
        with open(page, "r+b") as f:
            f.write(b"EDITED")
        os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
        w.keep(REL, WANT)
    assert os.readlink(out) == published
    assert not list(writer.builds_dir(out).rglob(".*.tmp"))


def test_a_sealed_lend_whose_folder_moved_since_the_survey_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder on the way changed an entry after the survey (its ctime
    moved: another file there replaced, or an overlayfs copy-up made by an
    earlier lend): the file is not taken by its size and mtime but read."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", 10**9)
    out, seals = _lending(tmp_path)
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        (_live(out) / "dreams/004/spare").write_bytes(b"")
        (_live(out) / "dreams/004/spare").unlink()
        assert w.can_keep(REL, WANT)
        assert w._live_read == {REL: w._live_read[REL]} and w._live_read[REL] is not None
        w.keep(REL, WANT)
        w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
    assert tree(out) == _plan(changed=True)


@pytest.mark.parametrize(
    "error",
    [errno.ENOENT, errno.EXDEV, errno.EPERM, errno.EMLINK],
    ids=["proc-cannot-link", "other-mount", "protected", "link-limit"],
)
def test_a_file_that_cannot_be_linked_is_copied_as_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int
) -> None:
    """linkat refused with the file still there (ENOENT from a /proc that
    cannot link, as under gVisor; EXDEV, EPERM, EMLINK: review r86): the
    file checked is copied, not refused."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", BY_BYTES)
    out, seals = _lending(tmp_path)
    real_link = os.link

    def refused(src: str, dst: str, *a: object, **k: object) -> None:
        if src.startswith("/proc/self/fd/"):
            raise OSError(error, os.strerror(error))
        real_link(src, dst, *a, **k)  # type: ignore[arg-type]

    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, WANT)
        monkeypatch.setattr(os, "link", refused)
        w.keep(REL, WANT)
        monkeypatch.setattr(os, "link", real_link)
        w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
    assert os.stat(out / REL).st_ino != os.stat(_live_of_other(out) / REL).st_ino
    assert tree(out) == _plan(changed=True)


def _live_of_other(out: Path) -> Path:
    """The generation that is not live (the one lent from, before the commit)."""
    live = os.readlink(out).rsplit("/", 1)[1]
    other = writer.GENERATIONS[1] if live == writer.GENERATIONS[0] else writer.GENERATIONS[0]
    return writer.builds_dir(out) / other
