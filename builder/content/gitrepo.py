"""What git says about a pool's checkout: which paths it tracks, and what a
pull request changed.

The trust boundary (THREATS.md, docs/operators.md) turns on one fact: a pull
request can only bring files that git tracks. So whatever the build derives
(its store, site generations, manifests, the ``site`` link) is trusted only
where git tracks nothing, and ``dreampool check --base`` judges a pull
request by the paths its commits change.

Every call runs ``git`` with a fixed argument list, no shell and no pager,
and reads NUL-separated output (``-z``), so no path is ever parsed from
quoted or escaped text. Outside a git work tree, or where git is not
installed, nothing is tracked.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from builder.errors import DreampoolError

# Modes of a git tree entry (git's index-format documentation, "mode").
MODE_SYMLINK = "120000"
MODE_GITLINK = "160000"  # a submodule
MODE_FILE = ("100644", "100755")


class GitError(DreampoolError):
    """git could not answer (not a repository, an unknown revision)."""


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """git's answer. Its input and output go through unnamed temporary files
    where it can: git writes a listing a few kilobytes at a time, and reading
    one through a pipe (select, then read) was half the time of a listing of
    100k dreams. Without a usable temporary folder (none, read-only, full),
    through pipes (review r41)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_OPTIONAL_LOCKS"] = "0"  # a query never takes the index lock
    argv = ("git", "-c", "core.quotePath=false", *args)
    with contextlib.ExitStack() as files:
        try:
            given, out, err = (files.enter_context(tempfile.TemporaryFile()) for _ in range(3))
            if stdin is not None:
                given.write(stdin)
                given.flush()
                given.seek(0)
        except OSError:
            return subprocess.run(
                argv, cwd=cwd, input=stdin, capture_output=True, env=env, check=False
            )
        done = subprocess.run(
            argv,
            cwd=cwd,
            stdin=given if stdin is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            check=False,
        )
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, done.returncode, out.read(), err.read())


def work_tree(path: Path) -> Path | None:
    """The root of the git work tree holding ``path`` (a folder), or None."""
    if shutil.which("git") is None:
        return None
    result = _git(path, "rev-parse", "--show-toplevel")
    if result.returncode != 0:
        return None
    return Path(os.fsdecode(result.stdout.rstrip(b"\n")))


def _looks_like_a_checkout(folder: Path) -> bool:
    """Whether ``folder`` or a folder above it holds ``.git``."""
    return any((p / ".git").exists() for p in (folder, *folder.parents))


def looks_like_a_checkout(folder: Path) -> bool:
    """Whether ``folder`` seems to be in a git checkout (whether or not git runs)."""
    return _looks_like_a_checkout(folder)


def tracked(folder: Path, names: list[str]) -> list[str] | None:
    """The paths at or under ``folder/name`` (for each of ``names``) that git
    tracks, relative to ``folder``; [] outside a work tree, and None where
    the folder is in a checkout but git cannot say (not installed, or it
    refuses the repository, say for its owner): the caller must then assume
    the worst."""
    if not folder.is_dir():
        return []
    if work_tree(folder) is None:
        return None if _looks_like_a_checkout(folder) else []
    # Folded, not asked with a pathspec: on a file system that folds names a
    # tracked ``.SITE.builds/…`` or ``.ſite.builds/…`` is the very folder
    # ``.site.builds``, and git compares a pathspec byte for byte (``icase``:
    # ASCII letters only) whatever core.ignorecase says. Elsewhere it only
    # names more paths, and a caller assumes the worst of any.
    result = _git(folder, "ls-files", "-z", "--", ".")
    if result.returncode != 0:
        return None
    wanted = {fold_name(name) for name in names}
    # Split as bytes, and decoded only if kept: a checkout of 10k dreams lists
    # 21,000 paths, and the folder asked for is usually not among them. ("/"
    # is no byte of a longer UTF-8 sequence, and os.fsdecode maps a byte it
    # cannot decode alone: a path's first name decodes as it would in the path.)
    paths = [p for p in result.stdout.split(b"\0") if p]
    firsts = {p.partition(b"/")[0] for p in paths}
    kept = {first for first in firsts if fold_name(os.fsdecode(first)) in wanted}
    return [os.fsdecode(p) for p in paths if p.partition(b"/")[0] in kept] if kept else []


def tracked_folders(folder: Path) -> set[str] | None:
    """The names of the entries of ``folder`` that git's index holds a path
    under (``name/…``), or holds as a submodule (listed by its bare name,
    mode 160000: review r98; a file's bare name is no folder's, even where
    the work tree holds a folder in its place: review r99), compared byte
    for byte, as the names on disk are; None where git cannot say. One
    ``git`` run."""
    result = _git(folder, "ls-files", "-s", "-z", "--", ".")
    if result.returncode != 0:
        return None
    names = set()
    # git-ls-files(1) --stage: "<mode> <object> <stage>\t<path>", NUL-terminated.
    for record in result.stdout.split(b"\0"):
        meta, tab, path = record.partition(b"\t")
        if not tab:
            continue
        first, slash, _ = path.partition(b"/")
        if slash or meta.startswith(MODE_GITLINK.encode() + b" "):
            names.add(os.fsdecode(first))
    return names


# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt): HFS+ ignores
# U+200C-U+200F, U+202A-U+202E, U+206A-U+206F and U+FEFF in a name (Apple TN1150;
# git's is_hfs_dotgit skips the same), so ``s\u200cite`` is ``site`` there.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def fold_name(name: str) -> str:
    """``name`` as a file system that folds names may compare it: ignorable
    code points dropped (HFS+), then Unicode's compatibility caseless form
    (NFKC of case folding, twice: Unicode D146), coarser than APFS's case
    folding (``ſ`` is ``s``) and normalization (a decomposed ``é`` is the
    composed one) and than ASCII letter case anywhere. Names no file system
    takes for one may fold to one string too (``ｓｉｔｅ``): that costs a cold
    build or a named path, never a trusted one."""
    text = _IGNORABLE.sub("", unicodedata.normalize("NFD", name))
    for _ in range(2):
        text = unicodedata.normalize("NFKC", text.casefold())
    return _IGNORABLE.sub("", text)


@dataclass(frozen=True, slots=True)
class Change:
    """One path a pull request changes: git's status letter (A, M, D, T) and
    the modes before and after (``000000`` where there is no file)."""

    status: str
    path: str  # relative to the work tree's root, with "/"
    old_mode: str
    new_mode: str


def changes(root: Path, base: str, head: str = "HEAD") -> list[Change]:
    """Every path that differs between the commits ``base`` and ``head``, as
    ``git diff --raw`` gives them, renames and copies split into a deletion
    and an addition (so both paths are judged)."""
    for rev in (base, head):
        probe = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if probe.returncode != 0:
            raise GitError(
                f"{rev} is not a commit in {root}",
                hint="fetch it first (in a workflow: actions/checkout with fetch-depth: 2, "
                "then --base HEAD^1)",
            )
    result = _git(
        root, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", "--no-ext-diff", base, head
    )
    if result.returncode != 0:
        raise GitError(f"git diff {base} {head} failed: {result.stderr.decode(errors='replace')}")
    return parse_raw(result.stdout)


def uncommitted(root: Path, folder: str, read: Iterable[str] = ()) -> list[str]:
    """The paths under ``folder`` (relative to the work tree's root ``root``)
    whose work tree differs from HEAD: changed, staged or untracked, and the
    ignored ones under ``read`` (paths relative to ``folder``: what a build
    reads there), as ``git status --porcelain -z`` names them. Other ignored
    files are not named: a virtual environment or a key file a checkout
    ignores is no pull request's."""
    result = _git(
        root,
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignored=matching",
        "--no-renames",
        "--",
        folder,
    )
    if result.returncode != 0:
        raise GitError(f"git status failed: {result.stderr.decode(errors='replace')}")
    prefix = "" if folder in ("", ".") else folder.rstrip("/") + "/"
    reads = tuple(prefix + r for r in read)
    found = []
    # git-status(1), "Porcelain Format Version 1": "XY PATH", NUL-terminated;
    # "!!" for an ignored path (a folder of them ends in "/").
    for entry in result.stdout.split(b"\0"):
        if not entry:
            continue
        path = os.fsdecode(entry[3:])
        if entry[:2] == b"!!" and (
            # A dotfile is never read (a killed write's .tmp-*, .DS_Store, an
            # editor's swap file: review r92), nor what lies where no build reads.
            path.rstrip("/").rsplit("/", 1)[-1].startswith(".")
            or not any(
                path == r or path.startswith(r + "/") or (path.endswith("/") and r.startswith(path))
                for r in reads
            )
        ):
            continue
        found.append(path)
    return found


def parse_raw(out: bytes) -> list[Change]:
    """``git diff --raw -z`` output: ``:<old mode> <new mode> <old> <new> <status>``
    NUL ``<path>`` NUL, repeated (git-diff(1), "Raw output format")."""
    fields = out.split(b"\0")
    found: list[Change] = []
    i = 0
    while i + 1 < len(fields) and fields[i]:
        meta = fields[i].decode("ascii").lstrip(":").split(" ")
        if len(meta) != 5:
            raise GitError(f"unexpected git diff output: {fields[i]!r}")
        old_mode, new_mode, _, _, status = meta
        found.append(Change(status[:1], os.fsdecode(fields[i + 1]), old_mode, new_mode))
        i += 2
    return found


def tracked_entries(root: Path) -> list[tuple[str, str]]:
    """(mode, path) of every path git tracks in the work tree at ``root``."""
    result = _git(root, "ls-files", "-s", "-z")
    if result.returncode != 0:
        return []
    found = []
    for record in result.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        found.append((meta.split(b" ", 1)[0].decode("ascii"), os.fsdecode(path)))
    return found


# What makes git compare a work-tree file with its index entry by stat, in
# full, whatever the checkout's config says: no file system monitor (a hook
# program git would run, and which marks entries clean unseen), every stat
# field, ctime included (an edit that restores size and mtime still moves
# ctime), no entry taken as unchanged without a stat.
_FULL_STAT = (
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.checkStat=default",
    "-c",
    "core.trustctime=true",
    "-c",
    "core.ignoreStat=false",
)
# Attributes under which the work tree holds other bytes than the blob
# (gitattributes(5), "Effects"): line endings, $Id$ expansion, filters, encodings.
_CONVERTING = frozenset((b"text", b"eol", b"crlf", b"ident", b"filter", b"working-tree-encoding"))
# What `check-attr --all` may name one of those and still convert nothing: it
# lists only attributes a file has, so a listed ``unspecified`` is a value
# (``filter=unspecified``), and ``unset`` is ``-text`` or the value ``unset``
# alike (git-check-attr(1): "Not all values are equally unambiguous"). For
# these four git reads either as no conversion (convert.c); for ``filter`` and
# ``working-tree-encoding`` the value ``unset`` names a driver or an encoding,
# so any listed value of theirs converts (review r41).
_UNSET_CONVERTS_NOTHING = frozenset((b"text", b"eol", b"crlf", b"ident"))

# A record of `git ls-files -s -v -z` that clean_blobs vouches for: tag H (cached,
# no assume-unchanged or skip-worktree bit), a plain file's mode, a SHA-1 blob id
# (40 hex digits: in a SHA-256 repository nothing is vouched for, and every file
# is read: builder.content.filekeys), stage 0, then the path (any bytes but NUL).
# Found in the whole listing at once (findall, not a split and a match per
# record: 0.3 s at 100k dreams): a match starts where a record starts (after
# a NUL, or first) and its path runs to the record's end, so a name that holds
# the text of a record is never read as one (test_store_restore).
_LISTED = re.compile(rb"(?<![^\0])H (?:100644|100755) ([0-9a-f]{40}) 0\t([^\0]+)(?=\0|\Z)")


def _has_attributes(folder: Path) -> bool:
    """Whether any attributes file of the repository's own could apply to a
    file under ``folder``: a ``.gitattributes``, in the index or the work
    tree, in ``folder`` or below it or in a folder above it up to the top of
    the work tree, or the git folder's ``info/attributes``. (Errors count as
    yes: nothing is vouched for.)

    Only those can apply: a path's attributes come from the ``.gitattributes``
    of its own folder and of each folder above it, and from
    ``info/attributes`` (gitattributes(5), DESCRIPTION). So the rest of the
    work tree is not walked, which matters because the build's own output
    sits in it, untracked: at 10k dreams the two generations under
    ``.site.builds/`` are 60,000 files, and listing every untracked
    ``.gitattributes`` in the work tree took 0.5 s of a 3.5 s build."""
    prefix = _git(folder, "rev-parse", "--show-prefix")
    if prefix.returncode != 0:
        return True
    below = os.fsdecode(prefix.stdout.rstrip(b"\n"))  # "content/", or "" at the top
    parts = [p for p in below.split("/") if p]
    # Each folder from the top down to ``folder``'s parent: their own file only.
    above = [
        f":(top,literal){''.join(p + '/' for p in parts[:i])}.gitattributes"
        for i in range(len(parts))
    ]
    if any(c in below for c in "*?[\\"):  # a glob would misread the name: walk it all
        pathspecs = [":(top,glob)**/.gitattributes", ":(top).gitattributes"]
    else:
        pathspecs = [*above, f":(top,glob){below}**/.gitattributes"]
    found = _git(folder, "ls-files", "-z", "--cached", "--others", "--", *pathspecs)
    if found.returncode != 0 or found.stdout.strip(b"\0"):
        return True
    info = _git(folder, "rev-parse", "--git-path", "info/attributes")
    if info.returncode != 0:
        return True
    path = Path(os.fsdecode(info.stdout.rstrip(b"\n")))
    return (path if path.is_absolute() else folder / path).exists()


def _converts(autocrlf: subprocess.CompletedProcess[bytes]) -> bool:
    """Whether ``git config --get core.autocrlf`` says git converts text files
    on checkout or check-in: unset (exit 1) or false is no conversion; true,
    ``input`` and anything git would read otherwise is (a config git fails
    to read says nothing either, so it counts as converting)."""
    if autocrlf.returncode == 1 and not autocrlf.stdout:
        return False
    value = autocrlf.stdout.strip().lower()
    return autocrlf.returncode != 0 or value not in (b"false", b"no", b"off", b"0")


def clean_blobs(folder: Path) -> dict[str, str] | None:
    """The git blob id (40 hex digits) of each file under ``folder`` whose
    work-tree bytes are exactly the blob git's index names, by path relative
    to ``folder`` with "/"; None where git cannot say (not installed, not a
    work tree, it fails): the caller then digests the bytes it reads.

    A file is in it only if git's index holds it as a plain file (mode
    100644 or 100755, never a symlink, whose blob is the link's target, nor
    a submodule), at stage 0 (no conflict), with no assume-unchanged or
    skip-worktree bit (entries git would not stat), ``git diff-files``
    finds it unmodified by a full stat comparison (racily clean entries are
    compared by content: git's racy-git rule), and no attribute or
    ``core.autocrlf`` converts it on checkout. Modified, untracked and
    converted files are simply left out.

    A checkout that holds a ``.gitattributes`` file anywhere (tracked or not),
    or ``info/attributes`` in its git folder, gets nothing vouched for: the
    attributes are the pull request's to write, and one can hide itself from
    ``check-attr`` (a ``.gitattributes`` that gives itself a
    working-tree-encoding is unreadable on disk, yet git applied the committed
    copy's ``ident`` filter at checkout; THREATS.md T80). A pool needs no
    attributes; with them every file is read and digested instead."""
    if work_tree(folder) is None:
        return None
    # git's answers are asked for all at once, each in a thread that waits on
    # its process (the interpreter lock is free meanwhile): at 100k dreams the
    # full stat of every file (diff-files) and the walk for attributes files
    # were each as long as the listing.
    # The executor's exit waits for every thread it started (even when one
    # could not start, or git raised): the build forks later.
    try:
        with ThreadPoolExecutor(max_workers=3, thread_name_prefix="dreampool-git") as threads:
            # Not --bool, which fails on "input" (a conversion too: review r74).
            autocrlf = threads.submit(_git, folder, "config", "--get", "core.autocrlf")
            attributes = threads.submit(_has_attributes, folder)
            diff = threads.submit(
                _git,
                folder,
                *_FULL_STAT,
                "diff-files",
                "--name-only",
                "-z",
                "--relative",
                "--",
                ".",
            )
            listed = _git(folder, *_FULL_STAT, "ls-files", "-s", "-v", "-z", "--", ".")
        converts = _converts(autocrlf.result())
        has_attributes = attributes.result()
        changes = diff.result()
    except OSError:  # git could not be run: it cannot say
        return None
    if converts:  # every text file is converted on checkout
        return {}
    if has_attributes:
        return {}
    if listed.returncode != 0 or changes.returncode != 0:
        return None
    # By the path's bytes as git wrote them (decoded once, at the end).
    found = {path: blob for blob, path in _LISTED.findall(listed.stdout)}
    for path in changes.stdout.split(b"\0"):
        found.pop(path, None)
    if found:
        # Every attribute that applies (macros expanded: ``binary`` is listed
        # as ``text`` unset too), not the six by name: git then names each
        # one unspecified for every file, 62 MB at 100k dreams, where a pool
        # with no attributes file (the case here) gets nothing.
        attrs = _git(
            folder,
            *_FULL_STAT,
            "check-attr",
            "-z",
            "--stdin",
            "--all",
            stdin=b"\0".join(found) + b"\0",
        )
        if attrs.returncode != 0:
            return None
        fields = attrs.stdout.split(b"\0")  # (path, attribute, value) ...
        for i in range(0, len(fields) - 2, 3):
            name, value = fields[i + 1], fields[i + 2]
            if name in _CONVERTING and not (value == b"unset" and name in _UNSET_CONVERTS_NOTHING):
                found.pop(fields[i], None)
    encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    return {path.decode(encoding, errors): blob.decode("ascii") for path, blob in found.items()}
