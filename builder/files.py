"""Reading a file a user names: bounded, never blocking, with its real size;
and removing a path as itself (:func:`remove_entry`), never what a link names.

:func:`read_head` is for files outside the pool (a MemOS diary, a proof, a
record, a policy): symlinks are followed, as a user's own paths may be, but
only a regular file is read. A FIFO named on the command line would otherwise
block the command for ever waiting for a writer, and a device could be read
without end. :func:`builder.content.pool.read_regular` is the pool's stricter twin
(no symlinks).

A caller reads one byte past its limit, so it can tell a file is too big
without reading all of it, and reports the size ``fstat`` gives, not the
number of bytes it read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from builder.errors import InputError, Problem

__all__ = ["NOT_REGULAR", "read_head", "remove_entry"]

NOT_REGULAR = "is not a regular file (a FIFO, device or folder is never read)"


def read_head(path: str | os.PathLike[str], limit: int) -> tuple[bytes, int]:
    """At most ``limit + 1`` bytes of the regular file ``path``, and its size.

    Raises :class:`InputError` for anything but a regular file (opened
    without blocking, so a FIFO is refused at once) and ``OSError`` when the
    file cannot be opened.
    """
    # O_NONBLOCK: opening a FIFO would otherwise wait for a writer for ever.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError([Problem(os.fspath(path), "", NOT_REGULAR)])
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(limit + 1), info.st_size
    finally:
        os.close(fd)


def remove_entry(path: Path) -> None:
    """Remove ``path`` itself, never what a link names: a link or file is
    unlinked, a folder removed with what it holds (:func:`_remove_tree`
    follows no link inside the folder it removes)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        _remove_tree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_OWNER = stat.S_IRWXU


def owner_may_change(path: str | os.PathLike[str], st: os.stat_result | None = None) -> None:
    """Give the plain folder at ``path`` (``st``: its lstat, if known) its
    owner's read, write and search bits if it lacks any: tar restores a
    folder's mode as its archive says, and a folder of mode 0o500 or 0o000
    in the build's derived state would fail every build after it (review
    r33). A link, or anything not a folder, is left as it is."""
    if st is None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
    if stat.S_ISDIR(st.st_mode) and st.st_mode & _OWNER != _OWNER:
        os.chmod(path, stat.S_IMODE(st.st_mode) | _OWNER)


def _remove_tree(path: Path) -> None:
    """``shutil.rmtree(path)`` without recursion, one descriptor open at a
    time: shutil's recurses once per level (Python 3.11, 3.12) with a
    descriptor each, and a folder restored from the publish workflow's cache
    can nest as deep as tar makes it (RecursionError, review r33). Each
    folder is opened by name from its parent without following a link, its
    other entries unlinked as themselves; going back up is ``..``."""
    owner_may_change(path)
    fd = os.open(path, _FOLDER)
    # The folders gone down into (each by its name in its parent), each with
    # the subfolders it still holds.
    stack = [("", _unlink_files(fd))]
    try:
        while True:
            name, subs = stack[-1]
            if subs:
                sub = subs.pop()
                try:
                    child = os.open(sub, _FOLDER, dir_fd=fd)
                except PermissionError:  # mode 0o000 (see owner_may_change)
                    os.chmod(sub, _OWNER, dir_fd=fd)
                    child = os.open(sub, _FOLDER, dir_fd=fd)
                with contextlib.suppress(OSError):  # mode 0o500: its entries stay
                    os.fchmod(child, _OWNER)
                os.close(fd)
                fd = child
                stack.append((sub, _unlink_files(fd)))
                continue
            stack.pop()
            if not stack:
                break
            parent = os.open("..", _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


def _unlink_files(fd: int) -> list[str]:
    """Unlink every entry of the folder open at ``fd`` but its subfolders
    (a link as itself); returns their names."""
    subs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subs.append(entry.name)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.name, dir_fd=fd)
    return subs
