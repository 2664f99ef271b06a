"""One writer of a pool's content at a time.

A build writes ``content/log`` (salts, leaves, a signed checkpoint) long before
it writes the site, and :mod:`builder.site.writer` locks only the output folder.
Two builds of one pool started together each chose salts for the new dreams
and each signed a checkpoint of the same size with a different root: the log
key signed a fork, and the pool's files held a mix of both. So a build (and
``dreampool erase``, which changes what the next build logs) holds this lock
from its first read of the pool to its last write.

The lock is ``flock(2)`` on the ``content`` folder itself, not on a file in
it: no lock file lands in the pool's repository, and the kernel drops the
lock with the last process holding it, so a killed build never leaves one.
Workers a build forks hold a copy; they die with it (builder.parallel).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from builder.errors import PoolError


@contextmanager
def hold(content: Path, doing: str = "build") -> Iterator[None]:
    """Hold the pool's lock for the block; a clear error if another process has it."""
    try:
        fd = os.open(content, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        yield  # no pool here: the caller's own checks say so
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PoolError(
                f"another build or erase is writing the pool {content}; this {doing} "
                "changed nothing",
                hint="wait for it to finish, then run this again (one build of a pool at a time)",
            ) from None
        yield
    finally:
        os.close(fd)
