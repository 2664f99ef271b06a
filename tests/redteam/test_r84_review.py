"""Review r84 of 334a334e (keep() requires a file lent by its bytes to be the
inode can_keep read; parallel.background_on registers the process's end on
the stack before the fork).

Three defects (the first three tests fail on 334a334e): the inode check is
passed by a freed inode number reused outside, and by a folder made a link
after _live_way cached it (read and link then both go outside); an interrupt
inside Popen._launch, after the fork, leaves a process the stack cannot end.
The interrupt is fixed (SIGINT blocked in the main thread across the fork,
parallel.background). The two lending races were closed by keep() linking
the very file it checked, through its descriptor, opened one folder at a
time with no link followed (a first fix, a check of the folders after the
link, broke lending on overlayfs: r85). The guards hold."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from multiprocessing import popen_fork
from pathlib import Path

import pytest

from builder import parallel
from builder.site import writer
from tests.golden_update import tree
from tests.isolated import run_isolated
from tests.redteam.test_r82_review import _lending, _live, _plan

REL = "dreams/004/index.html"
needs_fork = pytest.mark.skipif(parallel.workers() < 2, reason="one core: nothing forked")


def _outside_with_inode(folder: Path, ino: int, data: bytes) -> Path | None:
    """A file in ``folder`` holding ``data`` on inode ``ino``, if the file
    system hands a freed inode number out again (ext4 does, at once)."""
    for i in range(64):
        f = folder / ("index.html" if i == 0 else f".spare{i}")
        f.write_bytes(data)
        if os.stat(f).st_ino == ino:
            if i:
                f.rename(folder / "index.html")
            return folder / "index.html"
    return None


def test_a_folder_made_a_link_to_a_file_on_the_freed_inode_does_not_lend_it(
    tmp_path: Path,
) -> None:
    """T81 (T45, reviews r34, r83): the inode check compares st_ino only. After
    can_keep reads the live page (inode N), unlinking it frees N, and ext4
    gives N to the next file made nearby: an outside file with the page's
    public bytes and mtime, on N, reached through the page's folder made a
    link, passes keep()'s check (bytes, size, mtime, inode number all equal),
    and the signing build publishes and seals an inode outside its state."""
    for attempt in range(8):  # another process on the machine may take N first
        if _lend_through_a_reused_inode(tmp_path / str(attempt)):
            return
    pytest.skip("this file system did not hand a freed inode out again")


class _NotReused(Exception):
    pass


def _lend_through_a_reused_inode(tmp_path: Path) -> bool:
    out, seals = _lending(tmp_path)
    outside = tmp_path / "outside" / "004"
    outside.mkdir(parents=True)
    published = os.readlink(out)
    try:
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            assert w.can_keep(REL, writer.digest(b"edited"))  # read: inode N
            page = _live(out) / REL
            st = os.stat(page)
            page.unlink()  # N is free
            made = _outside_with_inode(outside, st.st_ino, b"edited")
            if made is None:
                raise _NotReused  # leaves the writer uncommitted
            os.utime(made, ns=(0, st.st_mtime_ns))
            shutil.rmtree(page.parent)
            page.parent.symlink_to(outside, target_is_directory=True)
            w.keep(REL, writer.digest(b"edited"))
            w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
    except _NotReused:
        return False
    except writer.PlanError:  # the build stops: nothing it wrote goes live
        assert os.readlink(out) == published
        return True
    assert os.stat(out / REL).st_ino != os.stat(outside / "index.html").st_ino
    return True


def _lending_two(tmp_path: Path) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    """As _lending, with two pages (004, 005) the live generation holds and
    the other does not: the next build of ``plan`` lends both, by reading."""
    plan = {**_plan(changed=True), "dreams/005/index.html": b"edit 5"}
    out, seals = tmp_path / "site", dict[str, bytes]()
    for p in (_plan(), _plan(), plan):
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            w.add_all(p)
    return out, seals, plan


def test_a_folder_made_a_link_after_another_pages_check_does_not_lend_outside(
    tmp_path: Path,
) -> None:
    """T81 (T45, reviews r34, r83): _live_way looks at each live folder once per
    build and caches it, so ``dreams`` (and the generation's own folder), found
    plain when page 004 is lent, is never looked at again: made a link to a
    copy outside (the public pages' bytes) before page 005 is checked, 005 is
    read through it, its outside inode recorded, linked through it, and the
    new inode check passes (it is the inode read). The signing build publishes
    and seals a file outside its state (r34's state), no timing needed."""
    out, seals, plan = _lending_two(tmp_path)
    published = os.readlink(out)
    outside = tmp_path / "outside"
    try:
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            for rel in ("dreams/004/index.html", "dreams/005/index.html"):
                if rel.startswith("dreams/005"):  # between two lent pages
                    dreams = _live(out) / "dreams"
                    shutil.copytree(dreams, outside / "dreams")
                    dreams.rename(tmp_path / "moved")
                    dreams.symlink_to(outside / "dreams", target_is_directory=True)
                if w.can_keep(rel, writer.digest(plan[rel])):
                    w.keep(rel, writer.digest(plan[rel]))
                else:  # not lent: written anew
                    w.add(rel, plan[rel])
            lent = ("dreams/004/", "dreams/005/")
            w.add_all({r: d for r, d in plan.items() if not r.startswith(lent)})
    except writer.PlanError:  # the build stops: nothing it wrote goes live
        assert os.readlink(out) == published
        return
    page = outside / "dreams/005/index.html"
    assert os.stat(out / "dreams/005/index.html").st_ino != os.stat(page).st_ino


_INTERRUPT_IN_THE_FORK = """
import contextlib, inspect, os, signal, sys, time
import multiprocessing.popen_fork as pf
from builder import parallel

# A shell's background job starts with SIGINT ignored (POSIX), and Python then
# installs no handler of its own: a Ctrl-C must raise here wherever it runs.
signal.signal(signal.SIGINT, signal.default_int_handler)

def slow(arg):  # a survey reading a restored generation's gigabyte
    time.sleep(30)

src, first = inspect.getsourcelines(pf.Popen._launch)
line = first + [i for i, t in enumerate(src) if "os.close(child_w)" in t][0] + int(sys.argv[1])
me = os.getpid()

def tracer(frame, event, arg):
    if frame.f_code is not pf.Popen._launch.__code__:
        return None
    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == line and os.getpid() == me:
            sys.settrace(None)
            frame.f_trace = None
            os.kill(me, signal.SIGINT)  # Ctrl-C lands here, in the parent, forked
            return None
        return local
    return local

def children():
    n = 0
    for p in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            state, ppid = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[:2]
            n += int(ppid) == me and state != "Z"
    return n

try:
    with contextlib.ExitStack() as stack:
        sys.settrace(tracer)
        parallel.background_on(stack, slow, None)
except KeyboardInterrupt:
    print("interrupted", children(), "left", flush=True)
"""


@needs_fork
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="counts children in /proc")
@pytest.mark.parametrize("offset", [0, 1, 2, 4])
def test_an_interrupt_inside_the_fork_is_ended_by_closing_the_stack(
    tmp_path: Path, offset: int
) -> None:
    """T40: background_on says an interrupt "landing anywhere" leaves no process
    closing the stack cannot end, but background() knows its process only
    once Process.start() has stored its Popen: a Ctrl-C in the parent inside
    Popen._launch, after os.fork() returned (closing the pipe ends, making its
    Finalize), leaves process.pid None, so the generator's finally neither
    kills nor joins, and the survey (or scan half) runs on, unseen by
    multiprocessing.active_children(), until this process exits (on Linux, by
    PR_SET_PDEATHSIG; an agents' server lives on for hours). Fix: block SIGINT
    (signal.pthread_sigmask, main thread) around process.start() and unblock
    it in the child (_start_worker), so the interrupt lands once the pid is known."""
    out, hung = run_isolated(_INTERRUPT_IN_THE_FORK, str(offset), timeout=60)
    assert not hung, out
    assert "interrupted 0 left" in out, out


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@needs_fork
@pytest.mark.parametrize("taken", [True, False])
def test_guard_closing_the_stack_is_leaving_the_context(taken: bool) -> None:
    """T40 (guard, holds): gen.close() on the stack does what __exit__ did: a
    taken result's process is joined (exit 0), an untaken one killed, the
    receiver closed; an exception through the stack is the caller's, unchanged."""
    before = _fds()
    with pytest.raises(ValueError, match="the caller's"), contextlib.ExitStack() as stack:
        pending: parallel.Pending[object]
        if taken:
            pending = parallel.background_on(stack, abs, -3)
            assert pending() == 3
        else:
            pending = parallel.background_on(stack, time.sleep, 30.0)
        process = pending._abandon.__self__  # type: ignore[union-attr]
        raise ValueError("the caller's")
    assert process.exitcode == (0 if taken else -signal.SIGKILL)
    del process, pending  # multiprocessing's own pipe goes with its Popen
    assert _fds() == before


def test_guard_a_fork_that_fails_or_one_core_leaves_a_stack_that_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T40 (guard, holds): fork raising OSError inside __enter__ leaves no
    descriptor and a stack whose close() (of the finished generator) is
    harmless; on one core (yield without finally) close() of the suspended
    generator works and the result is computed inline."""
    before = _fds()

    def no_fork(self: object, process: object) -> None:
        raise OSError(11, "no process")  # as os.fork (CPython's _launch leaks its pipes then)

    with monkeypatch.context() as m, contextlib.ExitStack() as stack:
        m.setattr(parallel, "workers", lambda: 2)
        m.setattr(popen_fork.Popen, "_launch", no_fork)
        # Computed here, as on one core (review r87: it raised OSError).
        assert parallel.background_on(stack, abs, -3)() == 3
    assert _fds() == before
    monkeypatch.setattr(parallel, "workers", lambda: 1)
    with contextlib.ExitStack() as stack:
        assert parallel.background_on(stack, abs, -3)() == 3


def test_guard_a_folder_made_a_link_to_another_device_stops_the_build(tmp_path: Path) -> None:
    """T81 (T45, guard, holds): a lent page's folder made a link to a folder on
    another file system between can_keep and keep: keep() opens no link
    (it stopped with EXDEV, an OSError, when it linked by path: r84), no tmp
    is left, the output and the lock are as they were, and the next build
    is the plan's."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no other file system to link to")
    out, seals = _lending(tmp_path)
    published, before = os.readlink(out), tree(out)
    with tempfile.TemporaryDirectory(dir=shm) as other:
        (Path(other) / "index.html").write_bytes(b"edited")
        stop = pytest.raises(writer.PlanError, match="changed while this build ran")
        with stop, writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            assert w.can_keep(REL, writer.digest(b"edited"))
            page = _live(out) / REL
            shutil.rmtree(page.parent)
            page.parent.symlink_to(other, target_is_directory=True)
            w.keep(REL, writer.digest(b"edited"))
        assert os.readlink(out) == published
        assert not list(writer.builds_dir(out).rglob(".*.tmp"))
    (_live(out) / REL).parent.unlink()
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        w.add_all(_plan(changed=True))
    assert tree(out) == _plan(changed=True) and before[REL] == b"edited"
