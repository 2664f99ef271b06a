"""Review r41 of commit 4c903f5 (``gitrepo.clean_blobs``: git's questions
asked at once in threads, answers read through temporary files, the listing
found with one ``findall``, ``check-attr --all``) and bf4209e (THREATS.md T80).

A failing test is an attack or a failure that succeeds. What held (checked,
no test kept): the ``findall`` parse reads every record as the old split and
``fullmatch`` did (names holding a record's text, tabs, newlines, non-UTF-8
bytes); bytes kept to the end decode as ``os.fsdecode`` did; ``--all`` decided
as naming the six attributes did over 600 random attributes files (macros,
``binary``, ``!``, ``-``, ``text=auto``, ``eol``, values, names equal to paths);
bf4209e's three changes are equivalent.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from pathlib import Path

import pytest

from builder.content import filekeys, gitrepo
from tests.gitrun import git


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    dreams = root / "content" / "dreams"
    dreams.mkdir(parents=True)
    for name in ("a.json", "b.json", "c.json"):
        (dreams / name).write_bytes(name.encode() + b"\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "content")
    git(root, "commit", "-q", "-m", "x")
    return root


def _wrongly_vouched(content: Path, vouched: dict[str, str]) -> list[str]:
    return sorted(
        path
        for path, blob in vouched.items()
        if filekeys.git_blob_id((content / path).read_bytes()) != blob
    )


# --- T80: a value check-attr prints as if it were no value -------------------


def test_a_filter_driver_named_unspecified_or_unset_is_not_taken_for_no_filter(
    tmp_path: Path,
) -> None:
    """T80 (not brought by 4c903f5: the old code misses it too). check-attr
    prints ``unspecified`` for an attribute no file sets and for the value
    ``filter=unspecified`` alike, and ``unset`` for ``-filter`` and for
    ``filter=unset`` alike (git-check-attr(1), EXAMPLES: "Not all values are
    equally unambiguous"). git's checkout takes the value as a driver's name
    (convert.c, git_path_check_convert): with ``filter.unspecified.smudge`` or
    ``filter.unset.smudge`` configured, the file is converted, yet
    ``_NOT_CONVERTING`` reads both words as "no filter" and git vouches for a
    blob the file does not hold. Needs attributes and drivers outside the
    repository (the operator's configuration), not a pull request's.

    With ``--all`` (4c903f5) the first half is cheap to close: ``--all``
    never lists an unspecified attribute, so a listed ``unspecified`` is
    always a value. ``unset`` stays ambiguous for ``filter`` (and
    ``working-tree-encoding``): a listed ``filter`` should count as converting
    whatever its value, or a driver of that name should stop the vouching."""
    root = _repo(tmp_path)
    content = root / "content"
    dreams = content / "dreams"
    attributes = tmp_path / "attributes"
    attributes.write_text("a.json filter=unspecified\nb.json filter=unset\n")
    git(root, "config", "core.attributesFile", str(attributes))
    for driver in ("unspecified", "unset"):
        git(root, "config", f"filter.{driver}.smudge", "tr a-z A-Z")
        git(root, "config", f"filter.{driver}.clean", "tr A-Z a-z")
    (dreams / "a.json").unlink()
    (dreams / "b.json").unlink()
    git(root, "checkout", "--", "content")
    assert (dreams / "a.json").read_bytes() == b"A.JSON\n"  # converted on checkout
    assert (dreams / "b.json").read_bytes() == b"B.JSON\n"
    assert not gitrepo._has_attributes(content)
    vouched = gitrepo.clean_blobs(content) or {}
    assert "dreams/c.json" in vouched
    wrong = _wrongly_vouched(content, vouched)
    assert not wrong, f"git vouches for converted files: {wrong}"


# --- answers through temporary files ------------------------------------------


def test_git_answers_without_a_usable_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T80, regression (4c903f5): ``_git`` now reads every answer of git through
    ``tempfile.TemporaryFile``, so a build run where no temporary directory is
    writable (a service under ``ProtectSystem=strict`` without ``PrivateTmp``,
    started in ``/``: tempfile falls back to the working folder) now fails:
    ``work_tree``, ``clean_blobs`` and ``tracked`` raise ``FileNotFoundError``
    ("No usable temporary directory") where they used to answer through pipes,
    and where the contract is an answer or None ("git cannot say": the caller
    then digests every file, or assumes the worst). The build stops with an
    error. Simulated by pointing tempfile at a folder that does not exist."""
    root = _repo(tmp_path)
    content = root / "content"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-usable-temporary-directory"))
    blobs = gitrepo.clean_blobs(content)
    assert blobs is None or set(blobs) == {f"dreams/{n}.json" for n in "abc"}
    paths = gitrepo.tracked(content, ["dreams"])
    assert paths is None or sorted(paths) == [f"dreams/{n}.json" for n in "abc"]


# --- threads ----------------------------------------------------------------------


def test_no_thread_of_clean_blobs_outlives_it_when_one_cannot_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T80, regression (4c903f5): the three ``_Meanwhile`` threads are started before
    the ``try`` whose ``finally`` joins them. If the second or third cannot start
    (``RuntimeError: can't start new thread``: a container's pids limit, memory),
    clean_blobs raises with the first one still running git, against its own
    "every thread has ended before this returns or raises: the build forks
    later" (a long-lived caller such as the MCP server, which catches the error
    and carries on, forks its workers later with it alive). The old code's one
    thread was started alone. Simulated: the second thread fails to start, and
    the first one's git answer takes half a second."""
    root = _repo(tmp_path)
    real_start = threading.Thread.start
    real_git = gitrepo._git
    started: list[str] = []

    def start(self: threading.Thread) -> None:
        if self.name.startswith("dreampool-git"):
            started.append(self.name)
            if len(started) == 2:
                raise RuntimeError("can't start new thread")
        real_start(self)

    def slow_git(cwd: Path, *args: str, stdin: bytes | None = None) -> object:
        if "config" in args:
            time.sleep(0.5)
        return real_git(cwd, *args, stdin=stdin)

    monkeypatch.setattr(threading.Thread, "start", start)
    monkeypatch.setattr(gitrepo, "_git", slow_git)
    with contextlib.suppress(RuntimeError):
        gitrepo.clean_blobs(root / "content")
    alive = [t for t in threading.enumerate() if t.name.startswith("dreampool-git")]
    running = [t.name for t in alive if t.is_alive()]
    for thread in alive:
        thread.join()
    assert not running, f"clean_blobs left threads running git: {running}"
