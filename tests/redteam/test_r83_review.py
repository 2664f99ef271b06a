"""Review r83 of 6b78f00a (SiteWriter.keep reads a file lent by its bytes again
once linked; Opening.begin owns its ExitStack before the fork).

Two defects found (the first two tests fail on 6b78f00a; fixed: the linked
file must be the inode can_keep read, and parallel.background_on registers
the process's end before the fork); the others guard what held.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from builder import parallel
from builder.site import writer
from tests.golden_update import tree
from tests.isolated import run_isolated
from tests.redteam.test_r82_review import _INTERRUPT_IN_BEGIN, _lending, _live, _plan

needs_fork = pytest.mark.skipif(parallel.workers() < 2, reason="one core: nothing forked")
REL = "dreams/004/index.html"


def test_a_folder_made_a_link_after_the_read_does_not_lend_an_inode_outside(
    tmp_path: Path,
) -> None:
    """T81 (T45, review r34): keep() checks the folders once (_live_way is cached
    from can_keep), so a folder of a lent page replaced by a link to a folder
    outside between can_keep's read and keep's link is followed by os.link. The
    new read of the linked file compares bytes, size and mtime only: an outside
    file holding the page's public bytes, with its mtime, passes, and the
    signing build publishes and seals an inode outside the build's state, one
    its owner may change in place later, which r34 fixed for the unraced case.
    Fix: record the inode (st_dev, st_ino) _holds read in can_keep and require
    the linked tmp to be that inode (fstat in the second _holds), else PlanError."""
    out, seals = _lending(tmp_path)
    outside = tmp_path / "outside" / "004"
    outside.mkdir(parents=True)
    (outside / "index.html").write_bytes(b"edited")  # the page's public bytes
    published = os.readlink(out)
    try:
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            assert w.can_keep(REL, writer.digest(b"edited"))  # read: 1 lent file of 41
            page = _live(out) / REL
            os.utime(outside / "index.html", ns=(0, os.stat(page).st_mtime_ns))
            shutil.rmtree(page.parent)
            page.parent.symlink_to(outside, target_is_directory=True)
            w.keep(REL, writer.digest(b"edited"))
            w.add_all({r: d for r, d in _plan(changed=True).items() if r != REL})
    except writer.PlanError:  # the build stops: nothing it wrote goes live
        assert os.readlink(out) == published
        return
    assert os.stat(out / REL).st_ino != os.stat(outside / "index.html").st_ino


_INTERRUPT_AS_BACKGROUND_IS_ENTERED = _INTERRUPT_IN_BEGIN.replace(
    "line = int(sys.argv[2])\n"
    "def tracer(frame, event, arg):\n"
    "    if frame.f_code is not writer.Opening.begin.__code__:\n"
    "        return None\n"
    "    def local(frame, event, arg):\n"
    '        if event == "line" and frame.f_lineno == line:\n',
    "import contextlib\n"
    "from builder import parallel\n"
    "def tracer(frame, event, arg):  # as background's __enter__ returns: forked\n"
    "    if frame.f_code is not contextlib._GeneratorContextManager.__enter__.__code__:\n"
    "        return None\n"
    '    if frame.f_locals["self"].gen.gi_code is not parallel.background.__wrapped__.__code__:\n'
    "        return None\n"
    "    def local(frame, event, arg):\n"
    '        if event == "return":\n',
)
assert _INTERRUPT_AS_BACKGROUND_IS_ENTERED != _INTERRUPT_IN_BEGIN


@needs_fork
def test_an_interrupt_as_enter_context_returns_is_ended_by_close(tmp_path: Path) -> None:
    """T40: begin() forks inside ExitStack.enter_context, which registers the
    context's exit only after __enter__ returns (``self._push_cm_exit(cm,
    _exit)``): a Ctrl-C landing there leaves the forked survey outside the
    Opening's stack, so close() ends nothing and the survey runs on while the
    traceback holds enter_context's frame (r82's defect, one frame down; its
    test traces begin's own lines only). Fix: register the generator's close
    before entering, e.g. ``cm = parallel.background(...);
    self._stack.callback(cm.gen.close); self._pending = cm.__enter__()``, or
    have background() return an object whose kill is reachable before the fork."""
    out, hung = run_isolated(_INTERRUPT_AS_BACKGROUND_IS_ENTERED, str(tmp_path), "0", timeout=60)
    assert not hung, out
    assert "interrupted 0 left" in out and "done" in out, out


def test_guard_a_stopped_lend_leaves_no_tmp_the_lock_free_and_the_site_as_it_was(
    tmp_path: Path,
) -> None:
    """T81 (guard, holds): keep()'s new PlanError unlinks its tmp, leaves the
    output and the live generation as they were, releases the lock, and the
    next build is the plan's."""
    out, seals = _lending(tmp_path)
    published, before = os.readlink(out), tree(out)
    stop = pytest.raises(writer.PlanError, match="changed while this build ran")
    with stop, writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        assert w.can_keep(REL, writer.digest(b"edited"))
        page = _live(out) / REL
        with open(page, "r+b") as f:  # edited in place meanwhile, size and mtime kept
            st = os.fstat(f.fileno())
            f.write(b"EDITED")
        os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
        w.keep(REL, writer.digest(b"edited"))
    assert os.readlink(out) == published and tree(out) == {**before, REL: b"EDITED"}
    assert not list(writer.builds_dir(out).rglob(".*.tmp"))
    writer.Opening(out, background=False).close()  # the lock is free
    with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
        w.add_all(_plan(changed=True))
    assert tree(out) == _plan(changed=True)


def test_guard_a_lent_page_edited_in_place_after_the_build_is_rewritten_by_both_next_builds(
    tmp_path: Path,
) -> None:
    """T81 (guard, holds): a page lent by its bytes, then edited in place
    through the shared inode (its mtime moves), is not vouched for by the
    commit's seal: the next build of each generation writes it again."""
    out, seals = _lending(tmp_path)
    plan = _plan(changed=True)

    def build() -> None:
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            for rel, data in plan.items():
                if not w.keep_all(((rel, writer.digest(data)),)):
                    w.add(rel, data)

    build()  # lends REL, read
    assert (out / REL).stat().st_nlink == 2
    with open(out / REL, "r+b") as f:  # in place: both generations see it
        f.write(b"EDITED")
    for _ in range(2):
        build()
        assert tree(out) == plan
