"""Review r85 of 74751a2b (SiteWriter._live_still: a lent file's live folders
must keep the inode and ctime _live_way found once it is linked; SIGINT
blocked in the main thread across Process.start()).

Three defects (the first three tests fail on 74751a2b): on overlayfs (a
container whose image layer holds the output) link(2) of a lower-layer file
copies it up and moves its live folders' ctimes, so every lend is refused
and, the target's manifest gone, each later build fails on the next file;
a SIGINT taken by another live thread still lands inside Popen._launch,
leaving a child the stack cannot end; and a caller's own block of SIGINT is
lifted by background(). The guards hold: normal builds (+1, +n, a restored
clone, folders restored 0o500) lend with no refusal, and a folder swapped
out and back around the link does not lend the outside copy.

What was done: the check after the link was taken back, and later (keep()
linking the very file checked, through its descriptor) the races it closed
were closed again with no check of the folders after the link; the overlayfs
test passes. The caller's mask is restored (SIG_SETMASK). A SIGINT taken by
another thread, open until the twenty-third session (a strict xfail), is now
noted by a handler the main thread holds across the fork
(parallel._sigint_held) and raised once the child is known; the forked
process gives the caller's handler back before it unblocks the signal."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from builder import build as buildmod
from builder import parallel
from builder.formats.note import parse_private_key
from builder.site import writer
from tests.gitrun import git
from tests.isolated import REPO, run_isolated
from tests.pools import make_pool
from tests.redteam.test_r82_review import _lending, _live, _plan
from tests.redteam.test_r84_review import _INTERRUPT_IN_THE_FORK

REL = "dreams/004/index.html"
needs_fork = pytest.mark.skipif(parallel.workers() < 2, reason="one core: nothing forked")

_ON_OVERLAY = """
import os, subprocess, sys, tempfile
from pathlib import Path
from builder.site import writer
from tests.redteam.test_r82_review import _lending, _plan
writer.LSTATS_PER_READ = int(sys.argv[1])
tmp = Path(sys.argv[2])
lower, upper, work, merged = (tmp / n for n in ("lower", "upper", "work", "merged"))
for d in (lower, upper, work, merged):
    d.mkdir()
out, seals = _lending(lower)  # built on the image's layer
mount = ["mount", "-t", "overlay", "overlay", "-o",
         f"lowerdir={lower},upperdir={upper},workdir={work}", str(merged)]
if subprocess.run(mount, capture_output=True).returncode:
    print("no overlay"); sys.exit(0)
rel, want = "dreams/004/index.html", writer.digest(b"edited")
try:
    with writer.SiteWriter(merged / "site", seals=seals, seals_tagged=True) as w:
        assert w.can_keep(rel, want)
        w.keep(rel, want)
        w.add_all({r: d for r, d in _plan(changed=True).items() if r != rel})
    print("lent", (merged / "site" / rel).read_bytes())
except writer.PlanError as e:
    print("refused:", e)
finally:
    subprocess.run(["umount", str(merged)])
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="mounts an overlay (root)"
)
@pytest.mark.parametrize("per_read", [writer.LSTATS_PER_READ, 10**9], ids=["read", "sealed"])
def test_a_live_generation_on_an_overlay_lower_layer_is_lent_from(
    tmp_path: Path, per_read: int
) -> None:
    """T81 (spurious refusal, T40-like wedge): _live_still takes any move of a
    live folder's ctime after the link as an outside writer. On overlayfs,
    os.link of a file of the lower layer (an image layer holding the output:
    a later Dockerfile RUN, a container built with its site) copies the file
    and its folders up, which stamps those folders' ctime: every lend is
    refused ("another process is writing the live site"), on both paths,
    where 334a334e lent. The refused build has already removed the target's
    manifest, so the next one lends every file and fails on the next one not
    yet copied up: one file per build, 300,000 builds at 100k dreams.
    Fix: link the inode checked rather than a path checked twice: open each
    folder from the generation's own with O_DIRECTORY|O_NOFOLLOW, open the
    file O_NOFOLLOW, check it (size/mtime, or read its bytes) on that fd,
    and os.link(f"/proc/self/fd/{fd}", tmp, follow_symlinks=True) (linkat
    AT_SYMLINK_FOLLOW); else compare (st_dev, st_ino) and the folders'
    inodes, not their ctimes, once linked."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        ["unshare", "-m", "--propagation", "private", sys.executable, "-c", _ON_OVERLAY,
         str(per_read), str(tmp_path)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if "no overlay" in run.stdout or (run.returncode and "unshare" in run.stderr):
        pytest.skip("no overlay mount here")
    assert "lent b'edited'" in run.stdout, run.stdout + run.stderr


_WITH_A_THREAD = _INTERRUPT_IN_THE_FORK.replace(
    "            os.kill(me, signal.SIGINT)  # Ctrl-C lands here, in the parent, forked\n",
    "            os.kill(me, signal.SIGINT)  # Ctrl-C lands here, in the parent, forked\n"
    "            time.sleep(0.3)  # another thread takes it meanwhile, if one can\n",
).replace(
    "try:\n    with contextlib.ExitStack()",
    "import threading\nthreading.Thread(target=threading.Event().wait, daemon=True).start()\n"
    "try:\n    with contextlib.ExitStack()",
)


@needs_fork
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="counts children in /proc")
@pytest.mark.parametrize("offset", [0, 1, 2, 4])
def test_an_interrupt_inside_the_fork_with_another_thread_alive_is_ended(
    tmp_path: Path, offset: int
) -> None:
    """T40: the mask is the main thread's only. A process-directed SIGINT while
    it is blocked there goes to any thread that does not block it (a
    ThreadPoolExecutor worker, an embedding program's thread); CPython's C
    handler runs there and the Python handler raises KeyboardInterrupt in
    the main thread at its next bytecode, inside Popen._launch after the
    fork: process.pid is None and the child is left, as before r84's fix.
    Fix: across process.start() install (main thread) a Python SIGINT
    handler that only records the signal, restore the old one after and
    call it if a signal came (the child resets it in _start_worker); or
    keep the mask and assert threading.active_count() == 1."""
    assert _WITH_A_THREAD.count("threading.Event().wait") == 1
    assert "time.sleep(0.3)" in _WITH_A_THREAD
    out, hung = run_isolated(_WITH_A_THREAD, str(offset), timeout=60)
    assert not hung, out
    assert "interrupted 0 left" in out, out


@needs_fork
def test_a_callers_blocked_sigint_stays_blocked_across_background() -> None:
    """T40 (latent: no caller blocks SIGINT today): background() unblocks
    SIGINT after the fork whatever the mask was, so a caller that blocked it
    around a step that must not be interrupted (a commit's rename and seal)
    and forks inside finds it unblocked. Fix: restore what
    pthread_sigmask(SIG_BLOCK, ...) returned (SIG_SETMASK), not SIG_UNBLOCK."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with parallel.background(abs, -3) as pending:
            still = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
            assert pending() == 3
        assert still, "background() lifted its caller's block of SIGINT"
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def test_guard_normal_builds_lend_with_no_refusal(tmp_path: Path) -> None:
    """T81 (guard, holds): nothing a build does moves a live folder between
    _live_way and _live_still (link() stamps the file's and the target
    folder's ctime, never the source folder's; derived.secure's chmod runs
    first). +1s, +n, a restored clone (lent by bytes) and one whose folders
    tar restored 0o500 build, lending by both paths, and none is refused."""
    lent: dict[str, int] = {"read": 0, "sealed": 0}
    keep = writer.SiteWriter.keep

    def counted(self: writer.SiteWriter, rel: str, want: bytes) -> None:
        before = self.changed
        keep(self, rel, want)
        if self.changed != before:
            lent["read" if rel in self._live_read else "sealed"] += 1

    with pytest.MonkeyPatch.context() as m:
        m.setattr(writer.SiteWriter, "keep", counted)
        origin = tmp_path / "origin"
        tp = make_pool(origin)
        tp.add("ada", 3)
        tp.add("bob", 2)
        git(origin, "init", "-q", "-b", "main")
        signer = parse_private_key(tp.log_key)
        for n in (0, 0, 1, 1, 30, 1):
            if n:
                tp.add("ada", n)
            buildmod.build(tp.content, origin / "site", signer=signer)
        git(origin, "add", "content")
        git(origin, "commit", "-q", "-m", "published")
        for name, mode in (("clone", None), ("clone500", 0o500)):
            clone = tmp_path / name
            git(tmp_path, "clone", "-q", str(origin), str(clone))
            shutil.copytree(origin / ".site.builds", clone / ".site.builds", symlinks=True)
            os.symlink(os.readlink(origin / "site"), clone / "site")
            if mode is not None:
                for d, subs, _ in os.walk(clone / ".site.builds", topdown=False):
                    for s in subs:
                        os.chmod(Path(d) / s, mode)
            try:
                for _ in range(2):
                    buildmod.build(clone / "content", clone / "site", signer=signer)
            finally:
                for d, _, _ in os.walk(clone):
                    os.chmod(d, 0o755)
    assert lent["read"] and lent["sealed"], lent


@pytest.mark.parametrize("per_read", [writer.LSTATS_PER_READ, 10**9], ids=["read", "sealed"])
def test_guard_a_folder_swapped_out_and_back_around_the_link_lends_the_file_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_read: int
) -> None:
    """T81 (T45, guard, holds): the page's folder made a link to an outside copy
    (same bytes, same mtimes) once keep() has checked the page, and renamed
    back after the link: keep() links the file open on the descriptor it
    checked, never a path, so the generation published holds the live
    generation's inode, not the outside copy's (r85's fix)."""
    monkeypatch.setattr(writer, "LSTATS_PER_READ", per_read)
    out, seals = _lending(tmp_path)
    folder, aside, outside = _live(out) / "dreams/004", tmp_path / "aside", tmp_path / "out4"
    checked = os.stat(folder / "index.html").st_ino
    real_link = os.link
    swapped = []

    def swap_around_the_link(src: str, dst: str, *a: object, **k: object) -> None:
        shutil.copytree(folder, outside)
        folder.rename(aside)
        folder.symlink_to(outside, target_is_directory=True)
        try:
            real_link(src, dst, *a, **k)  # type: ignore[arg-type]
        finally:
            folder.unlink()
            aside.rename(folder)
            swapped.append(src)

    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, writer.digest(b"edited"))
        monkeypatch.setattr(os, "link", swap_around_the_link)
        w.keep(REL, writer.digest(b"edited"))
        monkeypatch.setattr(os, "link", real_link)
        w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
    assert swapped and not folder.is_symlink()
    assert os.stat(out / REL).st_ino == checked != os.stat(outside / "index.html").st_ino
    assert (out / REL).read_bytes() == b"edited"
