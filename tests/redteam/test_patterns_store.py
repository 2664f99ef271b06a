"""Review of commit 0eeeab7: the patterns kept in the build's store under the key
of their inputs (``patterns.inputs_key``), ``dream_stats`` taking them, and the
bulk tools' signature checks on every core (``PoolReader.check_all``).

Each test is an attack or an accident the change must survive. A failing test is a
defect: the site or an agent shown something other than a cold build or a reader
without the store would show, or a tool call that fails.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from builder import parallel
from builder.agents import mcp_server
from builder.site import patterns
from tests.conftest import REPO
from tests.pools import make_pool
from tests.redteam import build, set_tier, signed, submit

AUTHORS = ("ada", "bob", "cy")


def _pool(root: Path, n: int) -> Any:
    """A pool of ``n`` dreams by each of three member authors, built."""
    tp = make_pool(root)
    for author in AUTHORS:
        submit(
            tp,
            *(
                signed(author, title=f"{author} dream {i} about the index", tags=["databases"])
                for i in range(n)
            ),
        )
        set_tier(tp, author, "member")
    build(tp, root / "site")
    return tp


def test_a_bulk_tool_forking_beside_dream_stats_counting_words_runs_its_own_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T113 (fork reuse in the agents' server). The SDK runs tools in worker
    threads, at once. ``dream_stats`` counts the words of a pool the store does not
    hold on every core (``compute_patterns(spread=True)``, under ``Tools._words_lock``
    only), and since this change ``dream_list`` by tag (any bulk tool that counts) checks a new
    snapshot's signatures on every core (``check_all``, under the reader's lock).
    Both go through ``parallel.map_ordered``, which hands the function to its
    forked workers through one module global, ``_TASK``: the call that set it last
    wins, and the other call's workers run the wrong function (or None, once the
    first call is done). Here the two forks are lined up with a barrier, as two
    clients' calls may line up on their own: one call fails, dream_list with an
    AttributeError (its workers ran ``dream_words`` on indices) or dream_stats
    with a TypeError (its workers ran check_all's lambda on DreamViews). The
    reload's scan of new dream files (``pool.scan_dreams``, from 200 files on)
    races dream_stats the same way: that part is older than this change."""
    monkeypatch.setattr(mcp_server, "SIGNATURES_FORKED", 1)
    monkeypatch.setitem(parallel.map_ordered.__kwdefaults__, "min_items", 1)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    root = tmp_path / "pool"
    tp = _pool(root, 2)
    first = tmp_path / "first"
    shutil.copytree(tp.content, first)  # the checkout the server starts on
    submit(tp, *(signed(a, title=f"{a} later dream", tags=["databases"]) for a in AUTHORS))
    build(tp, root / "site")  # a publish build lands three new dreams
    served = tmp_path / "served" / "content"
    shutil.copytree(first, served)
    tools = mcp_server.Tools(mcp_server.open_reader(None, served), content=served)

    real = parallel._fork_pool
    barrier = threading.Barrier(2, timeout=60)
    lined_up = threading.Event()

    def forking(*args: Any) -> Any:
        # dream_stats counting words, and dream_list checking signatures (not the
        # reload's scan of the new files, which forks here too: min_items is 1)
        wanted = {"stats": "compute_patterns", "list": "check_all"}
        if wanted.get(threading.current_thread().name) in _callers():
            barrier.wait()  # both calls have handed their function over: fork now
        return real(*args)

    real_compute = patterns.compute_patterns

    def compute(*args: Any, **kw: Any) -> Any:
        lined_up.set()  # dream_stats is counting words now (its check_all is done)
        return real_compute(*args, **kw)

    monkeypatch.setattr(parallel, "_fork_pool", forking)
    monkeypatch.setattr(patterns, "compute_patterns", compute)
    errors: dict[str, BaseException] = {}
    out: dict[str, Any] = {}

    def run(name: str, call: Any) -> None:
        try:
            out[name] = call()
        except BaseException as exc:
            errors[name] = exc

    stats = threading.Thread(target=run, args=("stats", tools.dream_stats), name="stats")
    stats.start()
    assert lined_up.wait(60)
    shutil.copytree(tp.content, served, dirs_exist_ok=True)  # the new dreams reach it
    listing = threading.Thread(
        target=run, args=("list", lambda: tools.dream_list(tag="databases", limit=100)), name="list"
    )
    listing.start()
    stats.join(120)
    listing.join(120)
    assert errors == {}, {k: repr(v) for k, v in errors.items()}
    assert len(out["list"].data["dreams"]) == 9 and out["list"].data["failed"] == []
    assert out["stats"].data["dreams"] == 6


def _callers() -> set[str]:
    """The names of the functions on this thread's stack."""
    names = set()
    frame = sys._getframe(1)
    while frame is not None:
        names.add(frame.f_code.co_name)
        frame = frame.f_back
    return names


def test_bulk_tools_answer_when_no_process_can_be_forked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T114 (a tool lost to an optimisation). ``check_all`` only gets ahead of
    ``checked()``, which checks each signature itself; but a fork that fails (EAGAIN
    under a container's pids limit or RLIMIT_NPROC, ENOMEM with strict overcommit)
    raised out of it, so ``dream_digest``, ``dream_stats`` and ``dream_list`` by tag
    (which never forked before, over a built checkout) failed whole with an OSError
    traceback instead of answering one dream at a time."""
    monkeypatch.setattr(mcp_server, "SIGNATURES_FORKED", 1)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    root = tmp_path / "pool"
    tp = _pool(root, 2)
    calls = (
        lambda t: t.dream_digest(),
        lambda t: t.dream_stats(),
        lambda t: t.dream_list(tag="databases", limit=100),
    )
    served = mcp_server.Tools(mcp_server.open_reader(None, tp.content, out=root / "site"))
    want = [call(served) for call in calls]

    def no_fork(*args: Any) -> Any:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(parallel, "_fork_pool", no_fork)
    tools = mcp_server.Tools(mcp_server.open_reader(None, tp.content, out=root / "site"))
    for call, wanted in zip(calls, want, strict=True):
        got = call(tools)
        assert (got.text, got.data) == (wanted.text, wanted.data)


_DIES = """
import os, signal, sys, threading
from pathlib import Path
from builder import parallel
from builder.agents import mcp_server

parent = os.getpid()
real = mcp_server._signature_holds


def dies(body):
    if os.getpid() != parent:  # a worker, killed as the OOM killer kills it
        os.kill(os.getpid(), signal.SIGKILL)
    return real(body)


mcp_server._signature_holds = dies
mcp_server.SIGNATURES_FORKED = 1
parallel.workers = lambda: 2
tools = mcp_server.Tools(mcp_server.open_reader(None, Path(sys.argv[1])))
out = []
first = threading.Thread(target=lambda: out.append(tools.dream_digest()), daemon=True)
first.start()
first.join(30)
later = threading.Thread(target=lambda: out.append(tools.dream_list(limit=5)), daemon=True)
later.start()
later.join(10)
print("hung" if first.is_alive() or later.is_alive() else len(out[0].data["dreams"]), flush=True)
os._exit(0)
"""


def test_a_signature_worker_killed_does_not_hang_the_server(tmp_path: Path) -> None:
    """T114 (a hang behind the reader's lock). ``check_all`` forks its workers with
    ``parallel.map_ordered``, a ``multiprocessing.Pool``, while it holds the
    reader's lock. A Pool whose worker dies (the OOM killer: a fork of a server
    holding a 100k-dream pool is a large process) never answers ``map``
    (CPython bpo-22393): ``check_all`` waited forever, and every later tool call
    waited for the lock behind it. ``parallel.background`` already uses an executor
    for this reason. Run in a child process, so a hang costs this test 40 s, not
    the suite."""
    root = tmp_path / "pool"
    tp = _pool(root, 2)
    run = subprocess.run(
        [sys.executable, "-c", _DIES, str(tp.content)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert run.stdout.strip() == "6", run.stdout + run.stderr[-2000:]


def test_a_words_dictionary_planted_in_the_temp_folder_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T115 ("a dream's words depend on its id alone", which the store's words
    section and its patterns row, and dream_stats over it, rest on). Chinese words
    come from jieba, whose ``Tokenizer.initialize`` loaded the default dictionary
    from ``<tempfile.gettempdir()>/jieba.cache`` whenever that file existed,
    whoever wrote it (``marshal.load``, which the Python docs call unsafe for
    untrusted data), and the store's code digest does not cover it. Another user of
    a shared /tmp planted one and the build's keywords (then kept in the store, and
    served by ``dream_stats`` under the same key) were theirs: here a phrase made
    one word."""
    import marshal

    from builder.site import keywords

    phrase = "数据库索引重建"
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    keywords._segmenter.cache_clear()
    try:
        want = keywords.tokens(phrase)
        assert want == {"数据库", "索引", "重建"}
        seg, _ = keywords._segmenter()
        freq, total = dict(seg.FREQ), seg.total
        for i in range(1, len(phrase)):
            freq.setdefault(phrase[:i], 0)
        freq[phrase] = 10**9
        (tmp_path / "jieba.cache").write_bytes(marshal.dumps((freq, total + 10**9)))
        keywords._segmenter.cache_clear()
        assert keywords.tokens(phrase) == want
        assert [p.name for p in tmp_path.iterdir()] == ["jieba.cache"]  # none of ours left
    finally:
        keywords._segmenter.cache_clear()
