"""What the last build found of the logged dreams' files: the store's ``logcheck`` row.

Step 3 of the log stage (:mod:`builder.log.logbuild`) checks that every
logged, unerased dream's file and salt still give the commitment its leaf
holds (docs/protocol.md §3). Done dream by dream it read two store sections
whole (the commitments and the salts' texts) and looked up each dream in
both: about 1 s of a build after one new dream at 100k dreams, to find that
nothing had changed.

What that check establishes is a fact about bytes that never stops being
true: *the dream file with git blob id F and the salt file with blob id S
commit to the value of leaf i of the tree of size n with root r*. So a build
records it (:class:`Checked`), for every dream the log holds once the build
is done, as one digest over a line per dream (:func:`line`: id, index, the
two blob ids) in log order, beside the tree's size and root. The next build
takes every logged dream as checked, without reading a salt or a
commitment, when

* its proven log is that very tree (the same size and root: the same
  leaves, so the same dreams at the same indices, the same erasures), and
* the digest of its own lines (each logged, unerased dream's file as the
  scan found it and its salt's blob id as git vouches for it) is the one
  recorded: every file and salt is the one that was checked.

Anything else (a file or salt edited or missing, a salt git does not vouch
for, a tree that grew since) is checked dream by dream, as before. A salt's
text is then read only when a page shows it
(:func:`builder.log.logbuild.salt_text`), and must still be the blob the
line names.

The row is derived state like the rest of the store: a build without it
checks every dream and publishes the same bytes. A signing build takes only
a row tagged with its row key (THREATS.md T81), and a row that does not
decode as :func:`encode` writes it is no row.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.content import filekeys

if TYPE_CHECKING:
    from hashlib import _Hash

ROW = "log"  # the section's one key

# The row: the tree's size (8 bytes, big-endian), its root (32), the digest (16).
_ROW = struct.Struct(">Q32s16s")
_DIGEST_SIZE = 16


@dataclass(frozen=True, slots=True)
class Checked:
    size: int
    root: bytes  # the tree's root at ``size`` (RFC 6962 §2.1)
    digest: bytes  # of the lines, in log order (:class:`Lines`)


class Lines:
    """The digest of one line per checked dream, fed in log order; a build
    goes on from the lines it found standing with the dreams it logs."""

    __slots__ = ("_hash",)

    def __init__(self, state: _Hash | None = None) -> None:
        self._hash = state or hashlib.blake2b(digest_size=_DIGEST_SIZE)

    def add(self, dream_id: str, index: int, file_blob: str, salt_blob: str) -> None:
        self._hash.update(line(dream_id, index, file_blob, salt_blob))

    def digest(self) -> bytes:
        return self._hash.digest()


def line(dream_id: str, index: int, file_blob: str, salt_blob: str) -> bytes:
    """One dream's line: its id, leaf index and the blob ids of its file and
    salt, tab-separated. None of them holds a tab or a newline (a dream id, a
    number, 40 hex); the blob ids are checked, so no line reads as another."""
    if not filekeys.is_blob_id(file_blob) or not filekeys.is_blob_id(salt_blob):
        raise ValueError("not a git blob id")
    return f"{dream_id}\t{index}\t{file_blob}\t{salt_blob}\n".encode()


def encode(c: Checked) -> bytes:
    return _ROW.pack(c.size, c.root, c.digest)


def decode(data: bytes | None) -> Checked | None:
    """The row ``data`` holds, or None for no row or for anything but the
    56 bytes :func:`encode` writes."""
    if data is None or len(data) != _ROW.size:
        return None
    size, root, digest = _ROW.unpack(data)
    return Checked(size, root, digest)


def salt_blob(salt: str) -> str:
    """The blob id of the salt file a build writes for ``salt``
    (:func:`builder.log.logbuild.apply`: the text and a newline)."""
    return filekeys.git_blob_id(salt.encode() + b"\n")
