"""The measuring parts of ``benchmarks/run``: child processes, git checkouts,
what a build rewrote, the MCP server's response times and the targets.

Nothing here prints or parses arguments (``benchmarks/run`` does); every
function returns what it measured. The figures and targets come from issue 21:

* a pool is a git repository whose ``content/`` is committed, so a *fresh
  clone* (:func:`clone`) is what CI checks out;
* a build's *derived folder* is ``.<out>.builds/`` beside the output link
  (two site generations, their manifests and the store ``cache/``;
  builder.site.writer, builder.buildcache); :func:`copy_derived` restores it as a
  CI cache would, or as a long-lived checkout keeps it;
* what a build *rewrote* (:func:`rewrites`) is each file of the generation it
  made live whose inode existed in neither generation before it ran: the
  writer replaces a file by rename and keeps an unchanged one by hard link,
  so a new inode is a file whose bytes this build wrote;
* the MCP server (:func:`time_mcp`) is driven with newline-delimited
  JSON-RPC over stdio, the MCP stdio transport, without the SDK's client, so
  the times are the server's and not an asyncio client's.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

# gc.auto=0: a commit of thousands of files would otherwise start `git gc --auto`
# in the background, which packs and deletes loose objects while the next
# `git clone` hard-links them ("failed to copy file"). init_pool_repo packs once.
GIT_OPTIONS = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "gc.auto=0"]


class Sample(NamedTuple):
    """One child process: wall seconds, CPU seconds (user + sys), peak resident
    MB, and MB it made the kernel write to storage (``disk``: the rusage
    ``ru_oublock`` of it and the workers it waited for, in 512-byte blocks,
    counted as pages are dirtied: every file, the store's changed pages and
    its journal included, where :func:`rewrites` can only count the store
    whole)."""

    wall: float
    cpu: float
    mb: float
    disk: float = 0.0


def measure(
    cmd: Sequence[str], env: Mapping[str, str] | None = None, *, cwd: Path | None = None
) -> Sample:
    """Run ``cmd`` to its end (in ``cwd``, if given) and return its :class:`Sample`.
    Dirty pages of the run before are flushed first, so no run pays for
    another's writeback. A failure raises :class:`RuntimeError` with the
    child's stderr.

    A ``python -m builder`` puts its working folder first on ``sys.path``,
    before ``PYTHONPATH``: run from a checkout of this repository it imports
    that checkout's ``builder``, whatever tree ``PYTHONPATH`` names. Give the
    tree as ``cwd`` (benchmarks/ab.py compared one tree with itself until it did)."""
    os.sync()
    # stderr goes to a file, not a pipe: a child that wrote more than a pipe holds
    # (a refusal per dream) would block while wait4 waits for it.
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
        # wait4 gives this child's own rusage (its forked workers included).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            said = err.read().decode(errors="replace")
            raise RuntimeError(f"failed: {' '.join(cmd)}\n{said}")
    return Sample(
        wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, usage.ru_oublock * 512 / 1e6
    )


def median(samples: Sequence[Sample]) -> Sample:
    """Each field's median on its own (the median wall need not be the median CPU's run)."""
    return Sample(*(statistics.median(s[i] for s in samples) for i in range(len(Sample._fields))))


# --- git checkouts ---------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    """``git -C repo args…``; its stdout. Raises CalledProcessError on failure."""
    done = subprocess.run(
        ["git", *GIT_OPTIONS, "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout


def commit_content(repo: Path, message: str) -> str:
    """Commit everything under ``repo/content`` (as a merged pull request or a
    publish run's log state would be); the new HEAD."""
    git(repo, "add", "-A", "content")
    if git(repo, "status", "--porcelain", "--", "content").strip():
        git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def init_pool_repo(pool: Path) -> str:
    """Make ``pool`` a git repository with ``content/`` committed; its HEAD."""
    if not (pool / ".git").exists():
        git(pool, "init", "-q", "-b", "main")
    head = commit_content(pool, "generated and admitted pool")
    git(pool, "repack", "-a", "-d", "-q")
    return head


def clone(origin: Path, dest: Path, trash: Trash | None = None) -> None:
    """A fresh clone of ``origin`` at ``dest``; whatever was there is removed
    first, or put in ``trash`` if given."""
    if trash is not None:
        trash.put(dest)
    remove_tree(dest)
    subprocess.run(["git", *GIT_OPTIONS, "clone", "--quiet", str(origin), str(dest)], check=True)


def reset_checkout(repo: Path, head: str) -> None:
    """Put ``repo``'s ``content/`` back to commit ``head``: files git rewrites are
    only those that differ, so unchanged dream files keep their inode and ctime
    (the store's scan section keys on them: builder.content.pool.file_stamp)."""
    git(repo, "reset", "-q", "--hard", head)
    git(repo, "clean", "-q", "-f", "-d", "--", "content")


def remove_tree(path: Path) -> None:
    """``path`` gone, whether a folder, a file or a symlink (never what a link names)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


class Trash:
    """Where a tree goes that a timed run would otherwise create its files right
    after deleting: moved here (a rename), deleted by :meth:`empty` once the
    timed runs are done.

    On a file system that skips recently freed inodes, deleting a tree first
    taxes the next run's every new file. ext4 without a journal (this
    machine's root file system) reuses no inode freed in the last 60 s (300 s
    while its inode table block is unwritten: ``recently_deleted`` in
    fs/ext4/ialloc.c) and looks each one up as it skips it. Measured here
    (2026-12-03): 10,000 folders of three files written in 1.1 s when nothing
    had been deleted for minutes, in 18.2 s two minutes after two built clones
    of the 10k pool were deleted (``perf``: ``recently_deleted`` and
    ``find_inode_bit`` on top); a cold build of that pool right after such a
    deletion spent 30% of its samples (py-spy) creating files and folders. A
    fresh CI machine has deleted nothing, so neither the cold build nor Hugo
    is timed right after deleting its last run's tree."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._count = 0

    def put(self, path: Path) -> None:
        if not (path.is_symlink() or path.exists()):
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._count += 1
        path.rename(self.folder / f"{os.getpid()}-{self._count}-{path.name}")

    def empty(self) -> None:
        remove_tree(self.folder)


def count_dreams(content: Path) -> int:
    return sum(1 for e in os.scandir(content / "dreams") if e.name.endswith(".json"))


# --- the derived folder ------------------------------------------------------------------

RESTORE_CHOICES = ("all", "cache")


def builds_dir(out: Path) -> Path:
    return out.parent / f".{out.name}.builds"


def copy_derived(src: Path, dest: Path, what: str, *, link_generations: bool = False) -> None:
    """Put a copy of the derived folder ``src`` (a ``.<out>.builds``) at ``dest``.

    ``what`` is ``all`` (generations, manifests and store: what a CI cache of the
    folder restores) or ``cache`` (the store only). Files are copied (``cp -a``, which
    keeps the generations' shared files shared, as tar does), so each has one link,
    like a restored cache's. ``link_generations`` hard-links the generations' files
    instead, which is quicker at 100k dreams and safe because a build replaces such a
    file by rename, never writes into it; manifests and the store are always real
    copies (builder.site.derived discards a hard-linked manifest, and builder.buildcache
    rewrites a hard-linked store whole)."""
    if what not in RESTORE_CHOICES:
        raise ValueError(f"restore {what!r}: one of {RESTORE_CHOICES}")
    remove_tree(dest)
    dest.mkdir(parents=True)
    for entry in sorted(os.listdir(src)):
        if what == "cache" and entry != "cache":
            continue
        if link_generations and entry in ("a", "b"):
            subprocess.run(["cp", "-al", str(src / entry), str(dest / entry)], check=True)
        else:
            subprocess.run(["cp", "-a", str(src / entry), str(dest / entry)], check=True)


def generation_inodes(builds: Path) -> set[int]:
    """The inode of every file in both generations of ``builds``."""
    found: set[int] = set()
    for gen in ("a", "b"):
        for root, _dirs, files in os.walk(builds / gen):
            for name in files:
                found.add(os.lstat(os.path.join(root, name)).st_ino)
    return found


class Rewrites(NamedTuple):
    """What one build wrote: files and bytes of the site, and of its own state (the
    log under content/log, manifests and store) touched since it started."""

    files: int
    bytes: int
    state_files: int
    state_bytes: int
    # The site's largest files it wrote, (bytes, path in the site), largest first:
    # which pages and shards a +1 rewrites, and whether any grows with the pool.
    largest: tuple[tuple[int, str], ...] = ()


LARGEST = 8  # files a Rewrites names


def rewrites(out: Path, content: Path, before: set[int], since_ns: int) -> Rewrites:
    """What the build that started at ``since_ns`` (``time.time_ns()``) wrote, given
    ``before`` = :func:`generation_inodes` taken just before it ran: a file of the
    live generation whose inode is new, or whose mtime is the build's. A kept file
    is a hard link of one written earlier (its old inode and mtime); a written file
    may get the inode number of one the build just removed (ext4 reuses them at
    once: a restored +1 counted 16 of its files so, its search shard not among
    them), so the inode alone undercounts. State files count whole (SQLite writes
    pages, so the store's bytes are an upper bound)."""
    files = size = 0
    written: list[tuple[int, str]] = []
    live = os.path.realpath(out)
    for root, _dirs, names in os.walk(live):
        for name in names:
            st = os.lstat(os.path.join(root, name))
            if st.st_ino not in before or st.st_mtime_ns >= since_ns:
                files += 1
                size += st.st_size
                written.append((st.st_size, os.path.relpath(os.path.join(root, name), live)))
    state_files = state_size = 0
    builds = builds_dir(out)
    state = [p for p in builds.iterdir() if p.name not in ("a", "b")] + [content / "log"]
    for top in state:
        walked: Iterable[tuple[str, list[str], list[str]]] = (
            os.walk(top) if top.is_dir() else [(str(top.parent), [], [top.name])]
        )
        for root, _dirs, names in walked:
            for name in names:
                st = os.lstat(os.path.join(root, name))
                if st.st_mtime_ns >= since_ns:
                    state_files += 1
                    state_size += st.st_size
    largest = tuple(sorted(written, key=lambda w: (-w[0], w[1]))[:LARGEST])
    return Rewrites(files, size, state_files, state_size, largest)


# --- the MCP server ------------------------------------------------------------------------


class McpError(RuntimeError):
    """The server did not answer, answered with an error, or a tool call failed."""


class _StdioClient:
    """Newline-delimited JSON-RPC with a child process (the MCP stdio transport)."""

    def __init__(self, cmd: Sequence[str], env: Mapping[str, str], stderr: Path) -> None:
        self._stderr = stderr
        self._err = stderr.open("wb")
        self.proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err
        )
        self._buffer = b""
        self._next = 1

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def request(self, method: str, params: Mapping[str, Any], timeout: float) -> Any:
        """Send a request and wait for its response (skipping the server's
        notifications); its ``result``."""
        ident = self._next
        self._next += 1
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": dict(params)})
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline)
            if message.get("id") != ident:
                continue  # a notification (log line, progress) or a server request
            if "error" in message:
                raise McpError(f"{method}: {message['error']}")
            return message.get("result")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._err.close()

    def _send(self, message: Mapping[str, Any]) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def _exit_code(self) -> int | None:
        try:
            return self.proc.wait(timeout=5)  # its stdout closed: it is on its way out
        except subprocess.TimeoutExpired:
            return None

    def _said(self, lines: int = 5) -> str:
        """The last ``lines`` lines the server wrote to stderr, after a colon, if any:
        what went wrong, in its words (``dreampool mcp`` names a missing extra)."""
        self._err.flush()
        said = self._stderr.read_bytes().decode(errors="replace").strip().splitlines()
        return ": " + " / ".join(said[-lines:]) if said else ""

    def _read(self, deadline: float) -> dict[str, Any]:
        assert self.proc.stdout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise McpError("the server did not answer in time")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise McpError(f"the server exited ({self._exit_code()}){self._said()}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise McpError(f"not a JSON-RPC message: {line[:200]!r}")
        return message


@dataclass(frozen=True, slots=True)
class McpTimes:
    """Seconds from spawning the server to its answer to ``initialize``; of the
    first tool call (a checkout's server reads the checkout in the background
    after ``initialize``, and the first call waits for it); and of each tool
    once the server is ready."""

    start: float
    first: float
    tools: dict[str, float]


def _initialize(client: _StdioClient, timeout: float) -> None:
    client.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "dreampool-bench", "version": "1"},
        },
        timeout,
    )


def time_start(
    cmd: Sequence[str], env: Mapping[str, str], stderr: Path, *, timeout: float = 600.0
) -> float:
    """Seconds from spawning the server ``cmd`` to its answer to ``initialize``."""
    start = time.monotonic()
    client = _StdioClient(cmd, env, stderr)
    try:
        _initialize(client, timeout)
        return time.monotonic() - start
    finally:
        client.close()


def time_mcp(
    cmd: Sequence[str],
    env: Mapping[str, str],
    arguments: Mapping[str, Mapping[str, Any]],
    stderr: Path,
    *,
    last: Sequence[str] = ("dream_draft",),
    timeout: float = 600.0,
) -> McpTimes:
    """Spawn the server ``cmd``, time ``initialize``, list its tools and call each
    once with ``arguments[name]`` (the tools in ``last`` after the others: a draft
    changes the checkout, which makes the next call rebuild its view). A tool the
    server lists and ``arguments`` does not know raises :class:`McpError`, so a new
    tool is not silently left out; so does a call whose result is an error."""
    start = time.monotonic()
    client = _StdioClient(cmd, env, stderr)
    try:
        _initialize(client, timeout)
        started = time.monotonic() - start
        client.notify("notifications/initialized")
        listed = client.request("tools/list", {}, timeout)
        names = sorted(t["name"] for t in listed["tools"])
        unknown = [n for n in names if n not in arguments]
        if unknown:
            raise McpError(f"no benchmark arguments for tool(s) {', '.join(unknown)}")
        order = [n for n in names if n not in last] + [n for n in last if n in names]

        def call(name: str) -> float:
            t0 = time.monotonic()
            result = client.request(
                "tools/call", {"name": name, "arguments": dict(arguments[name])}, timeout
            )
            took = time.monotonic() - t0
            if result.get("isError"):
                text = " ".join(c.get("text", "") for c in result.get("content", []))
                raise McpError(f"{name} failed: {text[:500]}")
            return took

        # The first call waits for the server's view of the pool; timed apart,
        # so that no tool is charged with it (and then called again).
        first = call(order[0]) if order else 0.0
        times = {name: call(name) for name in order}
        return McpTimes(started, first, times)
    finally:
        client.close()


def median_mcp(runs: Sequence[McpTimes]) -> McpTimes:
    """Median start and median time of each tool over ``runs``."""
    names = runs[0].tools.keys()
    return McpTimes(
        statistics.median(r.start for r in runs),
        statistics.median(r.first for r in runs),
        {n: statistics.median(r.tools[n] for r in runs) for n in names},
    )


# --- targets ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Targets:
    """Issue 21's targets for one pool size (seconds, MB; ``cold_ratio`` is over Hugo's
    wall time, ``cold_s`` an absolute limit where Hugo is not run)."""

    size: int
    plus1: float
    plus100: float
    peak_mb: float
    cold_ratio: float | None = None
    cold_stretch: float | None = None
    cold_s: float | None = None


TARGETS = (
    Targets(10_000, plus1=0.5, plus100=1.0, peak_mb=200, cold_ratio=1.0, cold_stretch=0.5),
    Targets(100_000, plus1=1.0, plus100=2.0, peak_mb=400, cold_ratio=1.0),
    Targets(1_000_000, plus1=3.0, plus100=5.0, peak_mb=1024, cold_s=300.0),
)
ADMISSION_MS = 1.0  # CPU per admitted dream, at every size
RESTORED_S = 2.0  # +1 in a fresh clone with the store restored, at 100k
MCP_START_S = 1.0  # at 100k
MCP_TOOL_S = 0.5  # every tool, at 100k
MCP_AT = 100_000


def targets_for(n: int) -> Targets:
    """The targets of the smallest listed size at or above ``n`` (the largest beyond
    them): a smaller pool must meet at least its next size's targets."""
    for t in TARGETS:
        if n <= t.size:
            return t
    return TARGETS[-1]


def verdict(value: float, limit: float, unit: str, *, strict: bool = False) -> str:
    """``met`` or ``missed by X<unit>`` for ``value`` against ``limit`` (``value <=
    limit``, or ``<`` if ``strict``)."""
    ok = value < limit if strict else value <= limit
    if ok:
        return "met"
    return f"missed by {value - limit:.2f}{unit}" if value != limit else "missed (equal)"
