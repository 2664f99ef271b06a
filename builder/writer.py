"""Apply a build plan (``{relative path: bytes}``) to an output folder atomically.

The new site is written in full to a sibling temporary folder, then swapped
with the old one in a single ``renameat2(RENAME_EXCHANGE)`` call (Linux ≥ 3.15),
so a reader or a killed build sees either the old site or the new one, never a
mix and never nothing. Where the exchange is not available, the swap falls back
to two renames, leaving a window of microseconds without ``out``.

Files whose bytes did not change are hard-linked from the old tree instead of
written again (cheap, and their mtime stays). Paths are checked before any
byte is written: relative, no ``..``, no two writers of one path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from builder.errors import DreampoolError

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class PlanError(DreampoolError):
    """A build plan names a path that cannot be written safely."""


def check_path(rel: str) -> None:
    # Split the string itself: PurePosixPath drops "." and empty segments, so
    # "a/./b" and "a//b" would alias "a/b" (two writers of one file) and "."
    # would name the output folder itself.
    parts = rel.split("/")
    if (
        PurePosixPath(rel).is_absolute()
        or any(part in ("", ".", "..") for part in parts)
        or "\\" in rel
        or "\x00" in rel
    ):
        raise PlanError(f"build plan path {rel!r} is not a plain relative path")


def write_tree(out: Path, plan: Mapping[str, bytes]) -> None:
    """Replace ``out`` by exactly the files of ``plan``."""
    for rel in plan:
        check_path(rel)
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(out)
    staging = out.parent / f".{out.name}.new-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        made: set[Path] = {staging}
        for rel in sorted(plan):
            target = staging / rel
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.update(target.parents)
            data = plan[rel]
            old = out / rel
            if _same_bytes(old, data):
                os.link(old, target)
            else:
                target.write_bytes(data)
        _swap(staging, out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def _remove_stale(out: Path) -> None:
    """Remove staging folders left by builds that were killed (their pid is gone)."""
    for leftover in out.parent.glob(f".{out.name}.new-*"):
        pid = leftover.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _same_bytes(path: Path, data: bytes) -> bool:
    try:
        if path.is_symlink() or path.stat().st_size != len(data):
            return False
        return path.read_bytes() == data
    except OSError:
        return False


def _swap(staging: Path, out: Path) -> None:
    """Make ``staging`` the new ``out``; afterwards ``staging`` holds the old tree."""
    if not out.exists():
        os.rename(staging, out)
        return
    if _renameat2_exchange(staging, out):
        return
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    os.rename(out, old)
    os.rename(staging, out)
    os.rename(old, staging)


def _renameat2_exchange(a: Path, b: Path) -> bool:
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    func = getattr(libc, "renameat2", None)
    if func is None:
        return False
    result = func(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(result == 0)
