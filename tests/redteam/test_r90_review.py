"""Review r90 of 4ace3b2e (parallel._sigint_held / _sigint_given_back: across
each fork the main thread blocks SIGINT and its Python handler is one that
only notes the signal; the caller's handler and mask are given back after,
and a noted signal is raised again with signal.raise_signal; the forked
process gives the caller's handler back before it unblocks).

The fix does what it says where it says it: a Ctrl-C another thread takes at
any line of Popen._launch, at any of a pool's forks, or in a real CLI build,
ends with no child left, the mask and handler as they were, and the CLI's
exit unchanged (130, "interrupted", no traceback, the lock free).

Found (the first five tests fail on 4ace3b2e):

- The order of the two steps is wrong at both ends. _sigint_held blocks the
  signal before it installs the noting handler, outside the try that undoes
  the block; _sigint_given_back gives the caller's handler back before it
  lifts the block. A Ctrl-C in either gap (one that reached the main thread
  as pthread_sigmask ran, or one another thread takes) is raised by the
  caller's handler with SIGINT still blocked in the main thread, and the
  block is never lifted: a program that goes on after a KeyboardInterrupt (a
  REPL, an embedding program, the agents' server's main thread) never sees
  another Ctrl-C, and every program it runs later (git, through subprocess:
  the mask survives exec) starts with SIGINT blocked.
- signal.raise_signal delivers the signal a second time to a program that
  watches signals through signal.set_wakeup_fd (asyncio's
  loop.add_signal_handler): CPython's C handler wrote the signal to the
  wakeup fd when it was noted, and writes it again when it is raised. One
  Ctrl-C, two calls of the loop's SIGINT callback ("once: stop gracefully;
  twice: exit now").
- A handler installed from C (getsignal() is None: an embedding program's)
  is given back as SIG_DFL: after one background() its next Ctrl-C kills the
  program instead of reaching its handler. 4ace3b2e~1 left it alone.
- (latent) _start_worker gives back one level of _SigintHeld: a process
  forked in a window opened inside another keeps a handler that only notes,
  and ignores every SIGINT of its life.

Guards (hold): every line of Popen._launch with another thread alive, for
background, map_ordered and imap_ordered, at each of a pool's forks; a real
CLI build interrupted that way; a custom handler or SIG_IGN given back to
the caller and to the forked processes; SIG_DFL kills as it would have;
nested windows deliver one interrupt; a fork from another thread holds
nothing.

What was done: the reviewer's suggested fixes, taken as they were. The
noting handler goes in before the block (undone if the block fails), and the
mask is lifted before the handler is given back; a noted signal is handed to
the caller's handler by a call (SIG_DFL: raised; SIG_IGN: nothing); a
handler installed from C is left alone and the signal only blocked, as
before 4ace3b2e; _start_worker unwraps every level.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
from pathlib import Path

import pytest

from builder import parallel
from tests.isolated import REPO, run_isolated

needs_fork = pytest.mark.skipif(parallel.workers() < 2, reason="one core: nothing forked")
needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="counts children in /proc")

# Shared by the isolated scripts: a thread that does not block SIGINT, the
# children of this process still running, the main thread's mask.
_PRELUDE = textwrap.dedent(
    """
    import contextlib, inspect, os, signal, subprocess, sys, threading, time
    import multiprocessing.popen_fork as pf
    from builder import parallel

    me = os.getpid()
    other = None

    def start_other():
        # a thread that does not block SIGINT (an embedding program's, a server's)
        global other
        other = threading.Thread(target=threading.Event().wait, daemon=True)
        other.start()

    def children():
        n = 0
        for p in filter(str.isdigit, os.listdir("/proc")):
            with contextlib.suppress(OSError):
                state, ppid = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[:2]
                n += int(ppid) == me and state != "Z"
        return n

    def blocked():
        return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())

    def line_of(func, text, offset=0):
        src, first = inspect.getsourcelines(func)
        return first + [i for i, t in enumerate(src) if text in t][0] + offset

    def stop_at(code, line, act):
        # act() once, at `line` of `code`, in this process (never a child)
        def tracer(frame, event, arg):
            if frame.f_code is not code:
                return None
            def local(frame, event, arg):
                if event == "line" and frame.f_lineno == line and os.getpid() == me:
                    sys.settrace(None)
                    frame.f_trace = None
                    act()
                    return None
                return local
            return local
        sys.settrace(tracer)

    def taken_by_the_other_thread():
        signal.pthread_kill(other.ident, signal.SIGINT)
        time.sleep(0.1)  # its C handler runs; the main thread's Python one at the next bytecode
    """
)


# --- defects ------------------------------------------------------------------------

_AS_THE_MASK_IS_TAKEN = _PRELUDE + textwrap.dedent(
    """
    import _thread
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def arrives_as_pthread_sigmask_runs():
        # A Ctrl-C the main thread took in pthread_sigmask's C code, before the
        # kernel blocked it: CPython's C handler notes it, and the Python one
        # runs at the CALL's end, the next thing _sigint_held does.
        _thread.interrupt_main()
        time.sleep(0.01)

    code = parallel._sigint_held.__code__
    stop_at(code, line_of(parallel._sigint_held, "try:"), arrives_as_pthread_sigmask_runs)
    try:
        with contextlib.ExitStack() as stack:
            parallel.background_on(stack, time.sleep, 30)
        print("not interrupted")
    except KeyboardInterrupt:  # a REPL, an embedding program: it goes on
        print("interrupted", children(), "left, blocked", blocked(), flush=True)
    print("threads:", threading.active_count(), flush=True)
    try:
        os.kill(me, signal.SIGINT)  # the user presses Ctrl-C again
        time.sleep(0.3)
        print("second Ctrl-C: lost", flush=True)
    except KeyboardInterrupt:
        print("second Ctrl-C: raised", flush=True)
    """
)


@needs_fork
@needs_proc
def test_an_interrupt_as_sigint_is_blocked_leaves_it_blocked_for_good() -> None:
    """T40: _sigint_held blocks SIGINT, then installs the noting handler inside a
    try that would unblock it on an exception; the line between (the end of
    pthread_sigmask's CALL, the try's NOP) is in neither. A Ctrl-C the main
    thread takes while pthread_sigmask runs (noted by the C handler just
    before the block lands), or one another thread takes just after, is
    raised there by the caller's handler: KeyboardInterrupt out of
    background() with SIGINT blocked in the main thread for the rest of the
    process. Single-threaded (the CLI, a REPL), every later Ctrl-C stays
    pending forever; processes run later inherit the block.
    Fix: install the noting handler first, then block inside a try whose
    except gives the handler back (a signal between the two steps is then
    noted, not raised): ``signal.signal(SIGINT, held)``; ``try: mask =
    pthread_sigmask(SIG_BLOCK, {SIGINT}) except BaseException:
    signal.signal(SIGINT, before); raise``."""
    out, hung = run_isolated(_AS_THE_MASK_IS_TAKEN, timeout=30)
    assert not hung, out
    assert "interrupted 0 left" in out and "threads: 1" in out, out  # holds: no fork yet
    assert "blocked False" in out and "second Ctrl-C: raised" in out, (
        "a KeyboardInterrupt out of _sigint_held left SIGINT blocked in the main thread\n" + out
    )


_AS_THE_HANDLER_IS_GIVEN_BACK = _PRELUDE + textwrap.dedent(
    """
    start_other()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = parallel._sigint_given_back.__code__
    line = line_of(parallel._sigint_given_back, "signal.pthread_sigmask(signal.SIG_SETMASK")
    stop_at(code, line, taken_by_the_other_thread)
    try:
        with contextlib.ExitStack() as stack:
            parallel.background_on(stack, time.sleep, 30)
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted", children(), "left, blocked", blocked(), flush=True)
    git = subprocess.run(  # what a program run later (git) starts with
        [sys.executable, "-c",
         "import signal; print(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set()))"],
        capture_output=True, text=True,
    )  # fmt: skip
    print("a program run later starts with SIGINT blocked:", git.stdout.strip(), flush=True)
    """
)


@needs_fork
@needs_proc
def test_an_interrupt_as_the_handler_is_given_back_leaves_sigint_blocked() -> None:
    """T40: _sigint_given_back gives the caller's handler back, then lifts the
    block. A Ctrl-C another thread takes between the two is raised by the
    caller's handler (KeyboardInterrupt) before pthread_sigmask(SIG_SETMASK)
    runs: the child is ended (holds), but SIGINT stays blocked in the main
    thread, and every program the process runs later (subprocess: the mask
    survives exec) starts with it blocked, so Ctrl-C no longer stops a git
    the build runs. Fix: lift the block first (a signal pending in the main
    thread is then taken by the noting handler), then give the handler back,
    then raise a noted signal: ``pthread_sigmask(SIG_SETMASK, mask)``;
    ``signal.signal(SIGINT, before)``; ``if held.taken: ...``."""
    out, hung = run_isolated(_AS_THE_HANDLER_IS_GIVEN_BACK, timeout=30)
    assert not hung, out
    assert "interrupted 0 left" in out, out  # holds: pid known, the child ended
    assert "a program run later starts with SIGINT blocked: False" in out, (
        "a KeyboardInterrupt out of _sigint_given_back left SIGINT blocked\n" + out
    )


_ASYNCIO = _PRELUDE + textwrap.dedent(
    """
    start_other()
    import asyncio
    calls = []

    async def main():
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, lambda: calls.append(signal.SIGINT))
        if sys.argv[1] == "window":  # a build the loop's thread runs, forking
            line = line_of(pf.Popen._launch, "os.close(child_w)")
            stop_at(pf.Popen._launch.__code__, line, taken_by_the_other_thread)
            with parallel.background(abs, -3) as pending:
                assert pending() == 3
        else:  # the same Ctrl-C with no window
            taken_by_the_other_thread()
        for _ in range(10):
            await asyncio.sleep(0.02)
        print("callback calls:", len(calls), flush=True)

    asyncio.run(main())
    """
)


@needs_fork
def test_an_interrupt_held_off_reaches_an_asyncio_signal_handler_once() -> None:
    """T40: asyncio's loop.add_signal_handler (and anything using
    signal.set_wakeup_fd) learns of a signal from the byte CPython's C
    handler writes to the wakeup fd, whatever the Python handler. A Ctrl-C
    taken during the fork writes that byte while _SigintHeld notes it; then
    _sigint_given_back's signal.raise_signal runs the C handler again, which
    writes a second: one Ctrl-C, two calls of the loop's callback (a server
    whose first Ctrl-C stops gracefully and second exits at once exits at
    once). Without a window the callback runs once.
    Fix: give a noted signal back without the C handler: call the caller's
    Python handler directly (``before(signal.SIGINT, None)`` when callable;
    nothing for SIG_IGN; raise_signal only for SIG_DFL), since the wakeup fd
    has already been written; or, if a wakeup fd is set
    (``signal.set_wakeup_fd(-1)`` then set back), do not raise again."""
    plain, hung = run_isolated(_ASYNCIO, "plain", timeout=30)
    assert not hung and "callback calls: 1" in plain, plain  # the baseline
    out, hung = run_isolated(_ASYNCIO, "window", timeout=30)
    assert not hung, out
    assert "callback calls: 1" in out, "one Ctrl-C in the fork reached asyncio twice\n" + out


_EMBEDDING = r"""
#include <Python.h>
#include <signal.h>
#include <stdio.h>
static volatile sig_atomic_t hits = 0;
static void on_int(int s) { (void)s; hits++; }
int main(int argc, char **argv) {
    struct sigaction sa = {0};
    sa.sa_handler = on_int;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);  /* the program's own Ctrl-C handler, from C */
    Py_Initialize();
    int rc = PyRun_SimpleString(argv[1]);
    Py_Finalize();
    raise(SIGINT);  /* a Ctrl-C once the build is done */
    printf("rc %d, own handler called %d time(s)\n", rc, (int)hits);
    fflush(stdout);
    return 0;
}
"""

_EMBEDDED = """
import signal
from builder import parallel
print("python sees", signal.getsignal(signal.SIGINT), flush=True)
with parallel.background(abs, -3) as pending:
    assert pending() == 3
"""


def _embedding_program(tmp_path: Path) -> Path:
    include = sysconfig.get_paths()["include"]
    libdir = sysconfig.get_config_var("LIBDIR")
    if (
        shutil.which("gcc") is None
        or not sysconfig.get_config_var("Py_ENABLE_SHARED")
        or not os.path.isfile(os.path.join(include, "Python.h"))
    ):
        pytest.skip("no compiler, Python.h or shared libpython to embed Python")
    ver = sysconfig.get_config_var("LDVERSION") or sysconfig.get_python_version()
    src, exe = tmp_path / "embed.c", tmp_path / "embed"
    src.write_text(_EMBEDDING)
    cc = subprocess.run(
        ["gcc", "-o", str(exe), str(src), f"-I{include}", f"-L{libdir}", f"-lpython{ver}",
         f"-Wl,-rpath,{libdir}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if cc.returncode:
        pytest.skip(f"cannot build an embedding program: {cc.stderr[-500:]}")
    return exe


@needs_fork
def test_a_sigint_handler_installed_from_c_is_given_back(tmp_path: Path) -> None:
    """T40: a program embedding Python that handles SIGINT itself (its handler
    installed from C, so signal.getsignal() is None) calls a build. The
    window replaces that handler with CPython's and _sigint_given_back puts
    back SIG_DFL ("the default is the nearest"): the program's next Ctrl-C
    kills it (here: dies by SIGINT, its handler never called) where
    4ace3b2e~1, which only blocked the signal, left the handler alone. The
    same happens to any C-level handler Python does not know of.
    Fix: when getsignal() is None, do not swap the handler (block only, as
    before; the C handler raises no KeyboardInterrupt in the main thread);
    or save and restore the raw sigaction (ctypes) rather than Python's
    record of it. _start_worker then has nothing to give back."""
    exe = _embedding_program(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHOME": sys.base_prefix}
    run = subprocess.run(
        [str(exe), _EMBEDDED], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert "python sees None" in run.stdout, run.stdout + run.stderr  # the case described
    assert run.returncode == 0 and "rc 0, own handler called 1 time(s)" in run.stdout, (
        f"exit {run.returncode}: the program's own SIGINT handler was not given back\n"
        + run.stdout
        + run.stderr
    )


def _handler(_: object) -> str:
    return repr(signal.getsignal(signal.SIGINT))


@needs_fork
def test_a_process_forked_in_a_nested_window_has_the_callers_handler() -> None:
    """T40 (latent: no window of dreampool opens inside another today; a
    handler of another signal, or a finalizer run during process.start(),
    that forks would): a window opened inside another records the outer
    _SigintHeld as the handler ``before``, and _start_worker unwraps one
    level only, so a process forked in the inner window runs its whole life
    with a handler that only notes SIGINT: Ctrl-C never stops it.
    Fix: in _start_worker, ``while isinstance(handler, _SigintHeld):
    handler = handler.before``, then give back what is left."""
    # A background job (CI's, run under nohup) starts with SIGINT ignored.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        outer = parallel._sigint_held()
        try:
            with parallel.background(_handler, None) as pending:
                seen = pending()
        finally:
            parallel._sigint_given_back(outer)
    finally:
        signal.signal(signal.SIGINT, before)
    assert seen == repr(signal.default_int_handler), seen


# --- guards -------------------------------------------------------------------------

_EVERY_LINE = _PRELUDE + textwrap.dedent(
    """
    start_other()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    mode = sys.argv[1]
    src, first = inspect.getsourcelines(pf.Popen._launch)
    # every line the parent runs: before the fork, the fork, and after it
    lines = [first + i for i, t in enumerate(src) if i and t.strip()
             and "_bootstrap" not in t and "os._exit" not in t]
    nths = [0] if mode == "background" else [0, 1]
    for nth in nths:
        for line in lines:
            seen = [0]
            def act():
                taken_by_the_other_thread()
            def tracer(frame, event, arg):
                if frame.f_code is not pf.Popen._launch.__code__:
                    return None
                def local(frame, event, arg):
                    if event == "line" and frame.f_lineno == line and os.getpid() == me:
                        if seen[0] < nth:
                            seen[0] += 1
                            return None
                        sys.settrace(None)
                        frame.f_trace = None
                        seen[0] = -1
                        act()
                        return None
                    return local
                return local
            sys.settrace(tracer)
            try:
                if mode == "background":
                    with contextlib.ExitStack() as stack:
                        parallel.background_on(stack, time.sleep, 30)
                elif mode == "map":
                    parallel.map_ordered(abs, list(range(40)), min_items=1)
                else:
                    list(parallel.imap_ordered(abs, list(range(40)), min_items=1))
                result = "none"
            except KeyboardInterrupt:
                result = "interrupted"
            sys.settrace(None)
            fired = seen[0] == -1
            handler = signal.getsignal(signal.SIGINT) is signal.default_int_handler
            if fired != (result == "interrupted") or children() or blocked() or not handler:
                print("BAD", nth, line, result, fired, children(), blocked(), handler, flush=True)
            elif fired:
                print("ok", nth, line, flush=True)
    print("done", flush=True)
    """
)


@needs_fork
@needs_proc
@pytest.mark.parametrize("mode", ["background", "map", "imap"])
def test_guard_an_interrupt_another_thread_takes_at_any_line_of_the_fork(mode: str) -> None:
    """T40 (guard, holds): with a thread that does not block SIGINT alive, a
    Ctrl-C it takes at every line the parent runs in Popen._launch (before
    the fork, the fork, each line after it), at the first and the second of
    a pool's forks: one KeyboardInterrupt, raised once the child is known;
    no child left running; the mask and handler as before."""
    out, hung = run_isolated(_EVERY_LINE, mode, timeout=60)
    assert not hung, out
    assert "done" in out and "BAD" not in out, out
    assert out.count("ok ") >= (8 if mode == "background" else 16), out


_CLI = textwrap.dedent(
    """
    import contextlib, inspect, os, signal, sys, threading, time
    from pathlib import Path
    import multiprocessing.popen_fork as pf
    from builder import build as buildmod
    from builder.cli import main as cli
    from builder.formats.note import parse_private_key
    from tests.pools import make_pool
    from tests.redteam.test_r60_review import _lock_is_free

    # A shell's background job (CI's) starts with SIGINT ignored; a user's
    # terminal gives Python its default handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tmp, offset = Path(sys.argv[1]), int(sys.argv[2])
    tp = make_pool(tmp)
    tp.add("ada", 3)
    site = tmp / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    tp.add("bob", 1)
    os.environ["DREAMPOOL_LOG_KEY"] = tp.log_key
    src, first = inspect.getsourcelines(pf.Popen._launch)
    line = first + [i for i, t in enumerate(src) if "os.close(child_w)" in t][0] + offset
    me = os.getpid()
    other = threading.Thread(target=threading.Event().wait, daemon=True)
    other.start()
    fired = []

    def tracer(frame, event, arg):
        if frame.f_code is not pf.Popen._launch.__code__:
            return None
        def local(frame, event, arg):
            if event == "line" and frame.f_lineno == line and os.getpid() == me and not fired:
                fired.append(1)
                sys.settrace(None)
                frame.f_trace = None
                signal.pthread_kill(other.ident, signal.SIGINT)
                time.sleep(0.1)
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

    sys.settrace(tracer)
    code = cli.main(["build", "--content", str(tp.content), "--out", str(site), "--quiet"])
    sys.settrace(None)
    lock = "free" if _lock_is_free(tmp / ".site.builds") else "taken"
    print("fired", len(fired), "code", code, "children", children(), "lock", lock, flush=True)
    """
)


@needs_fork
@needs_proc
@pytest.mark.parametrize("offset", [0, 2])
def test_guard_the_cli_interrupted_in_a_fork_with_another_thread_exits_as_before(
    tmp_path: Path, offset: int
) -> None:
    """T40 (guard, holds): `dreampool build` (cli.main) whose first fork (the
    survey of the generation it writes) takes a Ctrl-C another thread
    receives: exit 130, "dreampool: interrupted", no traceback (the
    parent's or a child's), the build lock free, no child left."""
    out, hung = run_isolated(_CLI, str(tmp_path), str(offset), timeout=60)
    assert not hung, out
    assert "fired 1 code 130 children 0 lock free" in out, out
    assert "dreampool: interrupted" in out and "Traceback" not in out, out


def _custom(signum: int, frame: object) -> None:
    pass


@needs_fork
@pytest.mark.parametrize("handler", [signal.SIG_IGN, _custom], ids=["ignored", "custom"])
def test_guard_the_callers_handler_is_the_forked_processes_and_its_own_after(
    handler: object,
) -> None:
    """T40 (guard, holds): a caller that ignores SIGINT, or has a Python handler
    of its own: a background process and a pool's workers forked in the
    window run with that handler, and the caller has it back after."""
    before = signal.signal(signal.SIGINT, handler)  # type: ignore[arg-type]
    try:
        with parallel.background(_handler, None) as pending:
            assert pending() == repr(handler)
        assert parallel.map_ordered(_handler, list(range(40)), min_items=1) == [repr(handler)] * 40
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, before)


_DEFAULT = _PRELUDE + textwrap.dedent(
    """
    start_other()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    line = line_of(pf.Popen._launch, "os.close(child_w)")
    stop_at(pf.Popen._launch.__code__, line, taken_by_the_other_thread)
    print("forking", flush=True)
    with parallel.background(abs, -3) as pending:
        print("the window was left alive", flush=True)
    """
)


@needs_fork
def test_guard_a_caller_with_sigint_at_its_default_dies_of_it_after_the_fork() -> None:
    """T40 (guard, holds): SIGINT at SIG_DFL (a program that wants Ctrl-C to
    end it at once): one taken in the window ends the process by SIGINT once
    given back, as it would have without the window, not later."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-c", _DEFAULT], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=30, start_new_session=True,
    )  # fmt: skip
    assert "forking" in run.stdout, run.stdout + run.stderr
    assert run.returncode == -signal.SIGINT, run.stdout + run.stderr
    assert "left alive" not in run.stdout


def test_guard_nested_windows_raise_one_interrupt_once_both_are_given_back() -> None:
    """T40 (guard, holds): a SIGINT another thread takes in a window opened
    inside another is noted by the inner, raised again (blocked: left
    pending in the main thread) when it is given back, and raised once, by
    the caller's handler, when the outer is given back; mask and handler as
    before."""
    calls: list[int] = []

    def own(signum: int, frame: object) -> None:
        calls.append(signum)

    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    before = signal.signal(signal.SIGINT, own)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    try:
        outer = parallel._sigint_held()
        inner = parallel._sigint_held()
        assert other.ident is not None
        signal.pthread_kill(other.ident, signal.SIGINT)
        time.sleep(0.05)
        parallel._sigint_given_back(inner)
        time.sleep(0.01)
        assert calls == []
        parallel._sigint_given_back(outer)
        time.sleep(0.01)
        assert calls == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is own
        assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask
    finally:
        signal.signal(signal.SIGINT, before)
        stop.set()
        other.join()


@needs_fork
def test_guard_a_fork_from_another_thread_holds_nothing() -> None:
    """T40 (guard, holds): a fork from a thread other than the main one (the
    agents' server runs its tools in the SDK's worker threads) neither
    blocks SIGINT nor swaps the main thread's handler: a Ctrl-C meanwhile
    stays the main thread's to raise."""
    seen: list[object] = []

    def work() -> None:
        seen.append(parallel._sigint_held())
        seen.append(parallel.map_ordered(abs, list(range(-20, 20)), min_items=1))
        with parallel.background(abs, -3) as pending:
            seen.append(pending())

    before = signal.getsignal(signal.SIGINT)  # SIG_IGN in a background job (CI's)
    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)
    assert seen == [None, [abs(x) for x in range(-20, 20)], 3]
    assert signal.getsignal(signal.SIGINT) is before
