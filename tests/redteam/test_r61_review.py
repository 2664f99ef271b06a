"""Review r61 of 8f50bb71 (Opening.close abandons the survey; _read_plain
refuses unreadable and sparse manifests). Each test runs its scenario in a
subprocess where a hang is possible, and says what it shows."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from builder import parallel
from tests.isolated import run_isolated

REPO = Path(__file__).resolve().parents[2]


# --- 1. abandon() while the survey sends its result: close() never returns ------

_ABANDON_MID_SEND = textwrap.dedent(
    """
    import os, sys, threading, time
    from multiprocessing import connection
    from pathlib import Path
    from builder.site import writer
    from tests.redteam.test_r60_review import _lock_is_free, _restored

    tmp = Path(sys.argv[1])
    tp, clone, _ = _restored(tmp)
    flag = tmp / "sending"
    real_drop = writer.drop_locks

    def drop_locks():  # in the survey's process: its result's send is slow
        real_drop()
        send = connection.Connection._send
        def _send(self, buf, *a):
            if len(buf) > 100_000:  # the result: the kill lands halfway through it
                flag.touch()  # (nothing reads the pipe before close: the half may block)
                send(self, bytes(buf)[: len(buf) // 2])
                time.sleep(60)
            return send(self, buf, *a)
        connection.Connection._send = _send

    def survey(args):  # a restored generation's survey: megabytes to hand back
        return writer.Survey(manifest=True, sealed=True,
                             entries={"a": (bytes(4 << 20), 0, 0)}, checked=None)

    writer.drop_locks = drop_locks
    writer._survey = survey
    opening = writer.Opening(clone / "site")
    while not flag.exists():
        time.sleep(0.05)

    def report():
        time.sleep(15)
        print("after 15 s: close() has not returned; lock:",
              "free" if _lock_is_free(clone / ".site.builds") else "taken", flush=True)
        os._exit(3)

    threading.Thread(target=report, daemon=True).start()
    opening.close()  # the build failed: abandon the survey, release the lock
    print("close: returned; lock:",
          "free" if _lock_is_free(clone / ".site.builds") else "taken", flush=True)
    """
)


def test_closing_an_opening_while_its_survey_sends_its_result_returns(tmp_path: Path) -> None:
    """T40: Opening.close() SIGKILLs the survey's process (Pending.abandon). On
    8f50bb71 it then ran executor.shutdown(wait=True): if the kill landed while
    that process was writing its result to the executor's result pipe (a
    restored generation's Survey is megabytes), the executor's manager thread
    was left in recv() waiting for the rest of a message that never came (the
    build itself held the pipe's write end, so no EOF), and shutdown joined it
    forever, lock held. parallel.background now reads the result only when
    asked, through a pipe only the process writes. Here the kill lands while
    the survey's process is sending its result (the send is slowed to make the
    window certain); unpatched, a 64 MiB result killed 50-120 ms after the
    survey returned hung 3 of 3 runs on 8f50bb71."""
    if parallel.workers() < 2:
        pytest.skip("one core: no survey process")
    out, _ = run_isolated(_ABANDON_MID_SEND, str(tmp_path), timeout=120)
    assert "close: returned; lock: free" in out, out


# --- 2. an interrupt while the writer waits for the survey --------------------------

_INTERRUPT_SURVEY_WAIT = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from builder.site import writer
    from tests.redteam.test_r60_review import _lock_is_free, _restored

    tmp = Path(sys.argv[1]); interrupts = int(sys.argv[2])
    tp, clone, _ = _restored(tmp)
    build_pid = os.getpid()
    real = writer._survey

    def slow(args):  # a slow survey (a restored generation, a gigabyte to read)
        if os.getpid() != build_pid:
            time.sleep(8)
        return real(args)

    writer._survey = slow
    opening = writer.Opening(clone / "site")
    left = [interrupts]

    def interrupt(signum, frame):
        left[0] -= 1
        if left[0] == 0:
            signal.setitimer(signal.ITIMER_REAL, 0)
        raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0, 1.0)  # Ctrl-C once a second
    started = time.monotonic()
    try:
        writer.SiteWriter(clone / "site", opening=opening)  # the site stage's first step
    except BaseException as exc:
        print(f"writer: {type(exc).__name__} after {time.monotonic() - started:.1f} s", flush=True)
    print("lock:", "free" if _lock_is_free(clone / ".site.builds") else "taken", flush=True)
    print("script: done", flush=True)
    """
)


def test_an_interrupt_while_the_writer_waits_for_the_survey_ends_it(tmp_path: Path) -> None:
    """T40: Opening.survey() waits for the result, then _end_background(abandon=False)
    in a finally: an interrupt during the wait (the site stage reached before
    the survey of a restored generation is done) does not end the survey but
    waits in executor.shutdown(wait=True) for all of it, build lock held (the
    writer has taken it): measured, the interrupt surfaces after the whole 8 s."""
    if parallel.workers() < 2:
        pytest.skip("one core: no survey process")
    out, hung = run_isolated(_INTERRUPT_SURVEY_WAIT, str(tmp_path), "1", timeout=120)
    assert not hung and "lock: free" in out, out
    took = float(out.split("writer: KeyboardInterrupt after ")[1].split(" s")[0])
    assert took < 4, f"interrupted at 1 s, the writer gave up after {took} s\n{out}"


def test_a_second_interrupt_while_the_writer_waits_for_the_survey_exits(tmp_path: Path) -> None:
    """T40: As above, pressing Ctrl-C again (the first seemed ignored): the second
    interrupt lands in executor.shutdown's Thread.join, which on CPython 3.11
    marks the manager thread stopped; the lock is released, but at exit the
    interpreter waits for the executor forever: the process never exits (the
    hang r60 fixed on the close path, still there on the survey path)."""
    if parallel.workers() < 2:
        pytest.skip("one core: no survey process")
    out, hung = run_isolated(_INTERRUPT_SURVEY_WAIT, str(tmp_path), "2", timeout=60)
    assert "script: done" in out, out
    assert not hung, f"the interrupted build never exited (killed after 60 s)\n{out}"


# --- 3. a dense oversized manifest is still read whole ------------------------------

_DENSE_MANIFEST = textwrap.dedent(
    """
    import os, resource, sys
    from pathlib import Path
    from builder import build as buildmod
    from builder.formats.note import parse_private_key
    from tests.redteam.test_r60_review import _restored
    from tests.test_store_restore import _cold, site_files

    tmp = Path(sys.argv[1])
    tp, clone, target = _restored(tmp)
    manifest = target.parent / f"manifest-{target.name}"
    manifest.unlink()
    # Allocated, not holes: tar restores a file of zeros stored without --sparse
    # (a few KiB of zstd in the cache) this way. st_blocks says it is dense.
    fd = os.open(manifest, os.O_WRONLY | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, 3 << 30)
    os.close(fd)
    # A runner with less memory than the manifest: here 2 GiB of address space.
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, hard))
    try:
        buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    except BaseException as exc:
        print("build failed:", type(exc).__name__, exc, flush=True)
    else:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        same = site_files(clone / "site") == _cold(clone / "content", tmp)
        print("build: ok, same as cold:", same)
    """
)


def test_a_restored_dense_oversized_manifest_is_taken_for_a_damaged_one(tmp_path: Path) -> None:
    """T81: r60's fix for a manifest of terabytes of holes checks st_blocks only:
    a manifest restored as allocated zeros (tar of an archive member not
    marked sparse; zstd makes gigabytes of zeros a few KiB of cache) is read
    whole by _read_plain, and every build fails with MemoryError (or the OOM
    killer) where memory is smaller than the disk; the failed run saves the
    cache back. A manifest far larger than any a build writes is a damaged one."""
    out, hung = run_isolated(_DENSE_MANIFEST, str(tmp_path), timeout=600)
    assert not hung, out
    assert "build: ok, same as cold: True" in out, out
