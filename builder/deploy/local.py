"""The site the build made, as a deploy reads it.

The list of files is the live generation's manifest
(:func:`builder.site.writer.live_site`), never a walk of the folder: the site
is derived state, and whatever else is in it (a file someone put there, a
symlink) was not made by the build and is not published. Each file is opened
without following a symlink at any step, must be a regular file inside the
generation, and must hold the bytes the manifest records (its digest), or
the deploy stops: a site edited after its build, or a build running now, is
not what was verified.
"""

from __future__ import annotations

import base64
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from builder.deploy import DeployError, remote
from builder.deploy.plan import CHECKPOINT
from builder.site import writer

MAX_CHECKPOINT = 64 * 1024


@dataclass(frozen=True)
class Site:
    generation: Path
    files: dict[str, tuple[str, int]]  # path → (hex digest, size)

    def read(self, rel: str) -> bytes:
        """The bytes of ``rel``, checked against the manifest."""
        data = read_inside(self.generation, rel)
        want_digest, want_size = self.files[rel]
        if len(data) != want_size or writer.digest(data).hex() != want_digest:
            raise DeployError(
                f"{self.generation / rel}: the file is not what the build wrote "
                "(its bytes differ from the generation's manifest)",
                hint="never edit a built site; run `dreampool build` again, then deploy",
            )
        return data

    def root_hash(self) -> bytes:
        """The new checkpoint's root hash line (base64, as pages print it)."""
        if CHECKPOINT not in self.files:
            raise DeployError(
                f"{self.generation}: the site has no {CHECKPOINT}",
                hint="deploy a site `dreampool build` made",
            )
        lines = self.read(CHECKPOINT).split(b"\n")
        if len(lines) < 3 or not lines[2]:
            raise DeployError(
                f"{self.generation / CHECKPOINT}: line 3 is not a root hash",
                hint="run `dreampool build` again",
            )
        base64.b64decode(lines[2], validate=True)  # the writer signed it: a bug if not
        return lines[2]


def load(out: Path) -> Site:
    live = writer.live_site(out)
    if live is None:
        raise DeployError(
            f"{out}: not a built site (no link to a generation with a sound manifest)",
            hint="run `dreampool build --out DIR` first, and deploy that DIR",
        )
    generation, entries = live
    if remote.NAME in entries:
        raise DeployError(
            f"{generation / remote.NAME}: the site has a file by the name the deploy's "
            "own manifest takes in the bucket",
            hint="a build never makes it: run `dreampool build` again",
        )
    files = {rel: (entry[0].hex(), entry[1]) for rel, entry in entries.items()}
    return Site(generation, files)


def read_inside(root: Path, rel: str) -> bytes:
    """The regular file ``root/rel``, every folder on the way opened without
    following a symlink (a link anywhere is refused, not followed)."""
    parts = rel.split("/")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            nxt = _open_at(fd, part, os.O_RDONLY | os.O_DIRECTORY, root, rel)
            os.close(fd)
            fd = nxt
        leaf = _open_at(fd, parts[-1], os.O_RDONLY | os.O_NONBLOCK, root, rel)
    finally:
        os.close(fd)
    try:
        if not stat.S_ISREG(os.fstat(leaf).st_mode):
            raise DeployError(
                f"{root / rel}: not a regular file", hint="run `dreampool build` again"
            )
        with os.fdopen(leaf, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(leaf)


def _open_at(fd: int, name: str, flags: int, root: Path, rel: str) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise DeployError(
                f"{root / rel}: a symlink or other non-plain entry on the way "
                "(a deploy publishes only files the build made)",
                hint="run `dreampool build` again; never put links in a built site",
            ) from None
        raise DeployError(
            f"{root / rel}: cannot read: {exc.strerror}", hint="run `dreampool build` again"
        ) from None
