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
import shutil
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
    unlinked, a folder removed with what it holds (``shutil.rmtree`` does not
    follow a link inside the folder it removes)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
