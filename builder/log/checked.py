"""What the last build found of the logged dreams' files: the store's ``logcheck`` row.

Step 3 of the log stage (:mod:`builder.log.logbuild`) checks that every
logged, unerased dream's file and salt still give the commitment its leaf
holds (docs/protocol.md §3). Done dream by dream it read two store sections
whole (the commitments and the salts' texts) and looked up each dream in
both: about 1 s of a build after one new dream at 100k dreams, to find that
nothing had changed.

What that check establishes is a fact about bytes that never stops being
true: *the dream file with git blob id F and the salt file with blob id S
commit to the value of leaf i of the tree of size n with root r*. The build
shows a logged dream not from its file but from the store's scan row for F
(:mod:`builder.buildcache`), which step 3 checked too when it recomputed the
commitment from it. So a build records the fact (:class:`Checked`), for
every dream the log holds once the build is done, as one digest over a line
per dream (:func:`line`: id, index, the two blob ids, and the digest of the
scan row it took the dream from, as the store read or wrote it: the row's
tag under the row key, which a build with the log key verified, never the
public digest beside it, which anyone who writes the store can set: review
r76) in log order, beside the tree's size and root; and a second digest of
the lines with each row's public digest, for a reader without the key. The
next build takes every logged dream as checked, without reading a salt or
a commitment, when

* its proven log is that very tree (the same size and root: the same
  leaves, so the same dreams at the same indices, the same erasures), and
* the digest of its own lines (each logged, unerased dream's file as the
  scan found it, its salt's blob id as git vouches for it, the scan row as
  the store gave it) is the one recorded: every file, salt and row is the
  one that was checked. A scan row written again since (review r75: only a
  bug in the build writes a wrong one under the row key) is checked again.

Anything else (a file or salt edited or missing, a salt git does not vouch
for, a tree that grew since) is checked dream by dream, as before. A salt's
text is then read only when a page shows it
(:func:`builder.log.logbuild.salt_text`), and must give the leaf's
commitment with the dream the build holds.

The row is derived state like the rest of the store: a build without it
checks every dream and publishes the same bytes. A signing build takes only
a row tagged with its row key (THREATS.md T81), and a row that does not
decode as :func:`encode` writes it is no row.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from builder.content import filekeys

ROW = "log"  # the section's one key

# The row: the tree's size (8 bytes, big-endian), its root (32), the digest
# of the lines with each scan row's tag (16), and with its public digest (16).
_ROW = struct.Struct(">Q32s16s16s")
_DIGEST_SIZE = 16


@dataclass(frozen=True, slots=True)
class Checked:
    size: int
    root: bytes  # the tree's root at ``size`` (RFC 6962 §2.1)
    # Of the lines, in log order (:func:`digest`), each naming its scan row
    # as the writer took it: by its tag under the row key (a build with the
    # log key), else by its public digest, as ``public`` always does.
    digest: bytes
    # The lines with each row's public digest: what a reader without the key
    # (a preview, ``dreampool mcp --content``) compares, having checked each
    # row's public digest itself. Equal to ``digest`` from a build without it.
    public: bytes


# One dream's line, before the row it stood for is known: its id, leaf index,
# the blob ids of its file and salt, and the key of the store's scan row the
# build took it from (the file's blob id too: builder.buildcache).
Line = tuple[str, int, str, str]


def digest(lines: Iterable[Line], row_of: Callable[[str], bytes | None]) -> bytes | None:
    """The digest of ``lines`` in the order given (log order), each as
    :func:`line` writes it with the digest of the scan row it stood for
    (``row_of(blob)``: :meth:`builder.buildcache.BuildCache.scan_row`); None
    if a row has none (not read from the store or written to it this build).
    The fields are not checked here, line by line (0.13 s against 0.08 at
    100k dreams): a build makes them from a leaf's dream id and from blob ids
    git listed or hashlib computed."""
    parts: list[str] = []
    add = parts.append
    for dream_id, index, file_blob, salt_blob in lines:
        row = row_of(file_blob)
        if not isinstance(row, bytes):  # none (or, from a damaged store, not bytes)
            return None
        add(_text(dream_id, index, file_blob, salt_blob, row))
    return hashlib.blake2b("".join(parts).encode(), digest_size=_DIGEST_SIZE).digest()


class ScanRows(Protocol):
    """How the store names the scan row a dream was taken from
    (:class:`builder.buildcache.BuildCache`)."""

    @property
    def tagged(self) -> bool:
        """Whether :meth:`scan_row` names rows by their tag under the row key."""
        ...

    def scan_row(self, blob: str) -> bytes | None:
        """The digest the build took the row under ``blob`` by: its tag, else its
        public digest; None if the build neither read nor wrote it."""
        ...

    def scan_row_public(self, blob: str) -> bytes | None:
        """The public digest of the row under ``blob``, as the store holds it."""
        ...


class Hashing:
    """The lines of every dream a log holds, in log order, and their two
    digests (:func:`digest` with each row's tag, and with its public digest),
    hashed as they come. A build whose check stands hashes the standing
    lines once (:func:`builder.log.logbuild.plan`), and the row it records
    after the store is saved (:meth:`digests`) hashes only the lines of the
    dreams it logged, from the hash's kept state, once every line hashed
    before still names the row it was hashed with: at 100k dreams that is a
    comparison of each row's digest rather than two more passes that build
    and hash every line's text. A line whose row changed since (written
    again this build) starts the hashing over. The digests are
    :func:`digest`'s, which the tests hold them to."""

    def __init__(self, lines: Iterable[Line] = ()) -> None:
        self._lines = list(lines)  # in log order; only ever appended to
        self._tagged = False  # whether the states below name rows by tag
        self._start()

    def append(self, line: Line) -> None:
        """The line of the dream logged next."""
        self._lines.append(line)

    def __len__(self) -> int:
        return len(self._lines)

    def _start(self) -> None:
        self._done = 0  # how many lines the states below have taken
        self._rows: list[bytes] = []  # the row digest each of them was hashed with
        self._publics: list[bytes | None] = []  # and its public digest (a tagged build)
        self._digest = hashlib.blake2b(digest_size=_DIGEST_SIZE)
        self._public = hashlib.blake2b(digest_size=_DIGEST_SIZE)
        self._public_whole = True  # every public digest was bytes

    def _still(self, rows: ScanRows) -> bool:
        """Whether every line hashed so far names the rows it was hashed with."""
        if rows.tagged != self._tagged:
            return False
        done = [x[2] for x in self._lines[: self._done]]
        if any(rows.scan_row(b) != r for b, r in zip(done, self._rows, strict=True)):
            return False
        public = rows.scan_row_public
        return not self._tagged or all(
            public(b) == p for b, p in zip(done, self._publics, strict=True)
        )

    def digests(self, rows: ScanRows) -> tuple[bytes, bytes] | None:
        """(digest, public) of every line, each naming its row as ``rows``
        names it now; None if a row has no digest. ``public`` equals
        ``digest`` without a row key, and is 16 zero bytes if a tagged row's
        public digest is not bytes (which nothing checks beside the tag:
        review r76): a digest no reader matches."""
        tagged = rows.tagged
        scan_row, scan_public = rows.scan_row, rows.scan_row_public
        if not self._still(rows):
            self._start()
            self._tagged = tagged
        parts: list[str] = []
        publics: list[str] = []
        row_list: list[bytes] = []
        public_list: list[bytes | None] = []
        whole = self._public_whole
        for dream_id, index, file_blob, salt_blob in self._lines[self._done :]:
            row = scan_row(file_blob)
            if not isinstance(row, bytes):  # none (or, from a damaged store, not bytes)
                return None
            row_list.append(row)
            parts.append(_text(dream_id, index, file_blob, salt_blob, row))
            if tagged:
                public = scan_public(file_blob)
                public_list.append(public)
                if not isinstance(public, bytes):
                    whole = False
                elif whole:
                    publics.append(_text(dream_id, index, file_blob, salt_blob, public))
        self._done = len(self._lines)
        self._rows += row_list
        self._publics += public_list
        self._public_whole = whole
        self._digest.update("".join(parts).encode())
        if not tagged:
            return self._digest.digest(), self._digest.digest()
        if not whole:
            return self._digest.digest(), bytes(_DIGEST_SIZE)
        self._public.update("".join(publics).encode())
        return self._digest.digest(), self._public.digest()


def line(dream_id: str, index: int, file_blob: str, salt_blob: str, row: bytes) -> bytes:
    """One dream's line: its id, leaf index, the blob ids of its file and
    salt, and its scan row's digest, tab-separated. None of them holds a tab
    or a newline (a dream id, a number, 40 hex, hex), so no line reads as
    another; checked here, for whoever makes one from elsewhere."""
    if not filekeys.is_blob_id(file_blob) or not filekeys.is_blob_id(salt_blob):
        raise ValueError("not a git blob id")
    if "\t" in dream_id or "\n" in dream_id:
        raise ValueError("not a dream id")
    return _text(dream_id, index, file_blob, salt_blob, row).encode()


def _text(dream_id: str, index: int, file_blob: str, salt_blob: str, row: bytes) -> str:
    return f"{dream_id}\t{index}\t{file_blob}\t{salt_blob}\t{row.hex()}\n"


def encode(c: Checked) -> bytes:
    return _ROW.pack(c.size, c.root, c.digest, c.public)


def decode(data: bytes | None) -> Checked | None:
    """The row ``data`` holds, or None for no row or for anything but the
    72 bytes :func:`encode` writes."""
    if not isinstance(data, bytes) or len(data) != _ROW.size:
        return None
    size, root, digest, public = _ROW.unpack(data)
    return Checked(size, root, digest, public)


def salt_blob(salt: str) -> str:
    """The blob id of the salt file a build writes for ``salt``
    (:func:`builder.log.logbuild.apply`: the text and a newline)."""
    return filekeys.git_blob_id(salt.encode() + b"\n")
