"""Review r87 of 62a04928 + dd9511f8 (keep() lends the very file checked:
writer._open_beneath opens it O_PATH one name at a time, SiteWriter._lendable
checks it on that descriptor, writer._link_open links it through
/proc/self/fd/N and falls back to writer._copy_open) and 376fd1fb
(Opening.begin(): a survey that cannot be forked runs in the build).

Three defects, all low (availability and error reporting; nothing other
than the checked bytes was published in any case tried):

- a live page the build user neither owns nor may read (a root process
  writing the live site, mode 0o600): can_keep() says yes on the sealed
  path (it reads nothing), linkat refuses it (protected_hardlinks: EPERM),
  and the copy's reopen through /proc fails with EACCES: a bare
  PermissionError on "/proc/self/fd/N" ends every build of that generation;
- a live page edited in place with its size and mtime kept (accepted on the
  sealed path, THREATS.md) is refused for good where the lend is a copy
  (no /proc, or after EMLINK/EXDEV/EPERM): "changed while this build ran ...
  build again", and every build again refuses it;
- 376fd1fb's fallback carries a build past the survey only: with fork
  failing (EAGAIN at a process limit) the build still ends two stages later
  in assemble.write_site's parallel.background, a bare OSError.

The guards hold: begin()'s fallback leaves no process, stack or pending
state and keeps the lock; the copy publishes only the bytes checked (a file
grown or shrunk between the check and the copy is refused, no tmp file or
descriptor left); ENOENT from linkat with the file still linked copies the
descriptor's file, not what the path names now; a symlink at the temporary
name is removed as itself; and a non-root build lends from live folders
restored 0o500/0o100, and from an overlayfs lower layer.

What was done: a file this process may not read is not lent (it would be
published unreadable) and is rendered instead; where lends are copies (no
/proc) a sealed generation's file is checked by its bytes, so one edited in
place is rendered, and a copy made because linkat refused names the file
whose bytes are not its manifest's and says to remove it; parallel.background
computes in the caller when no process can be forked, so every stage that
forks carries on."""

from __future__ import annotations

import errno
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder import build as buildmod
from builder import parallel
from builder.formats.note import parse_private_key
from builder.site import writer
from tests.golden_update import tree
from tests.isolated import REPO
from tests.redteam.test_r82_review import _lending, _live, _plan

REL = "dreams/004/index.html"
WANT = writer.digest(b"edited")
SEALED = 10**9  # LSTATS_PER_READ that makes the few lends take the seal
PATHS = pytest.mark.parametrize(
    "per_read", [writer.LSTATS_PER_READ, SEALED], ids=["read", "sealed"]
)


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _build_changed(out: Path, seals: dict[str, bytes]) -> None:
    """A build of the changed plan, lending what can be lent."""
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        for rel, data in _plan(changed=True).items():
            d = writer.digest(data)
            if w.can_keep(rel, d):
                w.keep(rel, d)
            else:
                w.add(rel, data)


def _edit_in_place(page: Path, data: bytes) -> None:
    st = os.stat(page)
    with open(page, "r+b") as f:
        f.write(data)
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))


# --- a non-root build (setpriv) ---------------------------------------------

_AS_NOBODY = """
import json, os, sys
from pathlib import Path
from builder.site import writer
from tests.golden_update import tree
from tests.redteam.test_r82_review import _lending, _plan
tmp, step = Path(sys.argv[1]), sys.argv[2]
writer.LSTATS_PER_READ = int(sys.argv[3])
if step == "setup":
    out, seals = _lending(tmp)
    (tmp / "seals").write_text(json.dumps({k: v.hex() for k, v in seals.items()}))
    print(os.path.realpath(out))
    sys.exit(0)
seals = {k: bytes.fromhex(v) for k, v in json.loads((tmp / "seals").read_text()).items()}
out, rel, want = tmp / "site", "dreams/004/index.html", writer.digest(b"edited")
try:
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        kept = w.can_keep(rel, want)
        if kept:
            w.keep(rel, want)
        else:
            w.add(rel, b"edited")
        w.add_all({r: d for r, d in _plan(changed=True).items() if r != rel})
except writer.PlanError as exc:
    print("refused:", exc)
except OSError as exc:
    print("bare OSError:", repr(exc))
else:
    try:
        print("built", "lent" if kept else "written", tree(out) == _plan(changed=True))
    except OSError as exc:
        print("built, unreadable:", exc)
"""


def _nobody(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
         sys.executable, "-c", _AS_NOBODY, *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout.strip()


@pytest.fixture
def nobody_tree() -> Iterator[Path]:
    """A folder the user nobody (65534) owns, for a build run as nobody."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("runs a build as another user (root, setpriv)")
    top = Path(tempfile.mkdtemp(prefix="r87-"))
    try:
        os.chmod(top, 0o755)
        os.chown(top, 65534, 65534)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _protected_hardlinks() -> bool:
    try:
        return Path("/proc/sys/fs/protected_hardlinks").read_text().strip() == "1"
    except OSError:
        return False


# --- defects ------------------------------------------------------------------


def test_an_unreadable_live_page_not_the_builds_ends_in_a_bare_oserror(
    nobody_tree: Path,
) -> None:
    """T81 (T45, low: every build of the generation ends, with a message naming
    /proc/self/fd/N). The build runs as its own user; a process writing the
    live site as another (root: a sudo edit, a root service, tar restoring as
    root) leaves a live page root's, mode 0o600, size and mtime kept, no
    folder entry changed, so the seal still holds. can_keep() says yes by
    size and mtime (it reads nothing on the sealed path); keep()'s linkat is
    refused by protected_hardlinks (EPERM: not the user's, not readable and
    writable), so _link_open copies; _copy_open's reopen through /proc fails
    with EACCES, raised bare out of keep(): the target's manifest is gone,
    the CLI prints "error: /proc/self/fd/7: Permission denied", and the next
    build lends the same page and fails the same way. (The same with a page
    of the user's own, mode 0o000, once EMLINK or EXDEV sends it to the copy.)
    Fix: in _lendable, refuse a file this process cannot open for reading,
    on both paths (os.access(f"/proc/self/fd/{fd}", os.R_OK), or open and
    close it through _reading), so can_keep() says no and the page is
    rendered; and in _copy_open turn an OSError from reading into None (a
    PlanError naming the live file), never a bare OSError. A page no reader
    may read is no page to lend in any case (a link would publish it 0o000)."""
    if not _protected_hardlinks():
        pytest.skip("fs.protected_hardlinks is off: linkat would not refuse")
    live = Path(_nobody(str(nobody_tree), "setup", str(SEALED)))
    page = live / REL
    os.chown(page, 0, 0)  # the inode's ctime only: no folder of the seal moves
    os.chmod(page, 0o600)
    said = _nobody(str(nobody_tree), "build", str(SEALED))
    assert "bare OSError" not in said, said


def test_a_sealed_page_edited_in_place_wedges_every_build_where_lends_are_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (low: availability; macOS and any system without /proc, or on Linux
    after EMLINK/EXDEV/EPERM). A live page edited in place between builds,
    its size and mtime kept, is the accepted case of THREATS.md: linked, it
    is published as it is. Where the lend is a copy, can_keep() still says
    yes by size and mtime, and _copy_open's digest check refuses it:
    "changed while this build ran ... another process is writing the live
    site: stop it, then build again". Nothing is writing it; the live
    generation does not change when the build fails, so every build again
    lends the same page and stops the same way, until someone removes the
    live generation by hand.
    Fix: where the lend will be a copy (not _links_by_fd()), let can_keep()
    take the page by its bytes (it is read once either way: the copy reads
    it), so a page that does not hold its digest is rendered; where the copy
    is found only in keep() (EMLINK/EXDEV/EPERM), say the live page does not
    hold what its manifest records, and drop it from what the next build
    may lend (e.g. refuse lends from a live generation whose page failed,
    by removing its seal row) rather than advise building again."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", SEALED)
    monkeypatch.setattr(writer, "_links_by_fd", lambda: False)
    out, seals = _lending(tmp_path)
    _edit_in_place(_live(out) / REL, b"EDITED")
    refusals = []
    for _ in range(2):  # "build again", as the hint says
        try:
            _build_changed(out, seals)
            break
        except writer.PlanError as exc:
            refusals.append(str(exc))
    assert len(refusals) < 2, refusals
    assert tree(out) == _plan(changed=True)


def test_a_build_whose_forks_fail_is_still_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T40 (low: robustness; 376fd1fb's purpose). begin() now surveys in the
    build when fork raises OSError (EAGAIN at a process limit, ENOMEM), but
    the same condition ends the build a few lines later: write_site's
    parallel.background (the patterns) calls process.start() with no
    fallback, and the build ends in a bare BlockingIOError (the CLI:
    "error: Resource temporarily unavailable", no hint). The fallback is
    reached only if fork fails once and then works again.
    Fix: move the fallback into parallel.background itself: on OSError from
    process.start() restore the mask, close both ends of the pipe and yield
    Pending(functools.partial(func, arg)) (inline, as on one core); then
    Opening.begin() needs no try of its own (with that change this build is
    the cold build's, checked by hand)."""
    from tests.test_store_restore import _cold, site_files
    from tests.test_writer_opening import _restored

    if "fork" not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip("no fork here")
    tp, clone, _ = _restored(tmp_path)

    def no_fork() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(os, "fork", no_fork)
    try:
        buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    finally:
        monkeypatch.undo()
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


# --- guards -------------------------------------------------------------------


def test_a_survey_whose_fork_fails_runs_inline_with_the_lock_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T40 (guard, holds): fork raising OSError in begin() leaves no process
    (parallel.background computes it here when asked, since this review);
    the survey is made in the build and is the one a build without a second
    core makes; the lock stays taken until close(), then is free. (Python's
    Popen._launch leaks its four pipe descriptors when fork fails: the
    standard library's, once a build.)"""
    out, seals = _lending(tmp_path)
    with writer.Opening(out, seals=dict(seals), seals_tagged=True, background=False) as o:
        inline = o.survey()
    monkeypatch.setattr(parallel, "workers", lambda: 2)

    def no_fork() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    opening = writer.Opening(out, seals=dict(seals), seals_tagged=True)
    try:
        pending = opening._pending
        opening.begin()  # once: nothing more
        assert opening._pending is pending and not multiprocessing.active_children()
        with pytest.raises(writer.PlanError, match="another build"):
            writer.Opening(out, seals=dict(seals), background=False)
        assert opening.survey() == inline
    finally:
        opening.close()
    monkeypatch.undo()
    writer.Opening(out, seals=dict(seals), background=False).close()  # the lock is free


# keep()'s refusals of a file that is not what it checked (the copy's own,
# since this review, names the file's bytes).
_REFUSED = "changed while this build ran|does not hold the bytes"


@pytest.mark.parametrize("change", [b"edited and more", b"edit"], ids=["grown", "shrunk"])
@PATHS
def test_the_copy_publishes_only_the_bytes_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int, change: bytes
) -> None:
    """T81 (guard, holds): the file grown (pread past the checked size) or
    shrunk between keep()'s check and its copy: refused, no tmp file under
    the new generation, no descriptor left open, nothing goes live."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    monkeypatch.setattr(writer, "_links_by_fd", lambda: False)
    out, seals = _lending(tmp_path)
    published = os.readlink(out)
    page = _live(out) / REL
    real_copy = writer._copy_open

    def changed_first(*args: object) -> object:
        with open(page, "r+b") as f:  # the very inode: in place
            f.truncate(0)
            f.write(change)
        return real_copy(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_copy_open", changed_first)
    stop = pytest.raises(writer.PlanError, match=_REFUSED)
    with stop, writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, WANT)
        before = _fds()
        try:
            w.keep(REL, WANT)
        finally:
            assert _fds() == before
            assert not list(w.gen.rglob(".*.tmp"))
    assert os.readlink(out) == published
    assert (_live(out) / REL).read_bytes() == change  # as the other process left it


@PATHS
def test_enoent_from_linkat_copies_the_file_checked_not_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int
) -> None:
    """T81 (guard, holds): linkat failing with ENOENT while the file is still
    linked (gVisor's /proc) after the page was replaced at its path (as tar
    does, size and mtime kept): the copy reads the descriptor's file, the
    one checked, never the new one; nlink > 0 cannot be faked for a file
    unlinked (no name can be given back to it)."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    out, seals = _lending(tmp_path)
    page = _live(out) / REL
    real_link = os.link

    def enoent(src: str, dst: str, *a: object, **k: object) -> None:
        if src.startswith("/proc/self/fd/"):
            aside = page.with_name("aside")
            real_link(page, aside)  # still linked: nlink > 0
            st = os.stat(page)
            page.unlink()
            page.write_bytes(b"PWNED!")
            os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
        real_link(src, dst, *a, **k)  # type: ignore[arg-type]

    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, WANT)
        monkeypatch.setattr(os, "link", enoent)
        w.keep(REL, WANT)
        monkeypatch.setattr(os, "link", real_link)
        w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
    assert tree(out)[REL] == b"edited"


def test_a_link_at_the_temporary_name_is_removed_as_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T45 (guard, holds): _link_open's remove_entry(tmp) of a symlink (to a
    file, or to a folder) left at the temporary name in the generation being
    written removes the link, never what it names, and the lend goes on."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", SEALED)
    out, seals = _lending(tmp_path)
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "keep.txt").write_bytes(b"mine")
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        tmp = Path(w._tmp(REL))
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.symlink_to(victim, target_is_directory=True)
        assert w.can_keep(REL, WANT)
        w.keep(REL, WANT)
        w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
    assert (victim / "keep.txt").read_bytes() == b"mine" and (victim / "sub").is_dir()
    assert tree(out) == _plan(changed=True)


@pytest.mark.parametrize("mode", [0o500, 0o100], ids=["0500", "0100"])
@PATHS
def test_a_non_root_build_lends_from_folders_restored_without_write(
    nobody_tree: Path, per_read: int, mode: int
) -> None:
    """T81 (guard, holds): as a user (no capability), the O_PATH opens need
    only search permission on the way, linkat of /proc/self/fd/N works for a
    file of the user's own, and the reopen for reading works: a live folder
    restored 0o500 or 0o100 (tar) is lent from (by its bytes: the chmod
    moved the folder's ctime)."""
    live = Path(_nobody(str(nobody_tree), "setup", str(per_read)))
    os.chmod(live / "dreams/004", mode)  # its ctime moves: the page is read either way
    said = _nobody(str(nobody_tree), "build", str(per_read))
    assert said == "built lent True", said


_OVERLAY_AS_NOBODY = """
set -e
T=$1
mount -t overlay overlay -o lowerdir=$T/lower,upperdir=$T/upper,workdir=$T/work $T/merged \
  || { echo "no overlay"; exit 0; }
setpriv --reuid 65534 --regid 65534 --clear-groups "$2" -c "$3" $T/merged build $4
umount $T/merged
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="mounts an overlay (unshare)")
@PATHS
def test_a_non_root_build_lends_from_an_overlay_lower_layer(
    nobody_tree: Path, per_read: int
) -> None:
    """T81 (guard, holds): the live generation on an overlayfs lower layer
    (an image built as root, the build run as a user): the O_PATH open, the
    /proc reopen and the linkat that copies the file up all work as the
    user, so the page is lent, not refused or copied."""
    layers = {n: nobody_tree / n for n in ("lower", "upper", "work", "merged")}
    for folder in layers.values():
        folder.mkdir()
        os.chown(folder, 65534, 65534)
    _nobody(str(layers["lower"]), "setup", str(per_read))
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    run = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", _OVERLAY_AS_NOBODY, "sh",
         str(nobody_tree), sys.executable, _AS_NOBODY, str(per_read)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if "no overlay" in run.stdout or (run.returncode and "unshare" in run.stderr):
        pytest.skip("no overlay mount here")
    assert run.stdout.strip() == "built lent True", run.stdout + run.stderr
