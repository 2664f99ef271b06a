"""Offline inclusion proofs, according to c2sp.org/tlog-proof@v1.

A proof is a sequence of lines separated by newlines (U+000A):

1. the header ``c2sp.org/tlog-proof@v1``;
2. optionally ``extra`` , one space, and base64 of opaque extra data (here,
   docs/protocol.md §5: the leaf data; it is not authenticated by the proof and the
   light client recomputes it from the record);
3. ``index``, one space, the zero-based leaf index in ASCII decimal with no
   leading zero (unless ``0``);
4. zero or more lines, each the base64 of one SHA-256 hash of the RFC 6962
   inclusion proof, from the leaf's sibling up to the root's child;
5. an empty line, then the signed checkpoint note (:mod:`builder.formats.checkpoint`)
   verbatim, with its signatures and any cosignatures.

For example, in the RFC 6962 test tree whose leaves are ``""``, ``00`` and
``10`` (hex), the leaf ``10`` sits at index 2 and its proof is one hash, that
of the subtree over leaves 0 and 1; the signature is elided::

    c2sp.org/tlog-proof@v1
    extra EA==
    index 2
    +sVCA+fMaWzw38tCySodnbr3CtnmIfS9jZhmLwDjwSU=

    example.org/dreams
    3
    rra8/idLcKFPsGel5VeCZNsPqbUa9eC6FZFY8yngbnc=

    — example.org/dreams <base64 of key ID and signature>

Proofs are stored with the file extension ``.tlog-proof``.

The parser is strict and bounded: canonical base64 only, at most
:data:`MAX_PROOF_HASHES` hashes (a tree of fewer than 2^63 leaves needs no
more), extra data of at most :data:`MAX_EXTRA_SIZE` bytes (a leaf's uint16
length prefix, docs/protocol.md §6), an embedded checkpoint that is a well-formed
note holding a well-formed checkpoint. Nothing here verifies: signatures,
quorum, ``index < size`` and the inclusion itself are the verifier's steps
(docs/protocol.md §5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.errors import DreampoolError
from builder.formats.b64 import b64_decode as b64decode_canonical
from builder.formats.b64 import b64_encode as b64encode
from builder.formats.checkpoint import MAX_TREE_SIZE, parse_checkpoint
from builder.formats.note import MAX_NOTE_SIZE, split_note

HEADER = b"c2sp.org/tlog-proof@v1"
HASH_SIZE = 32
MAX_PROOF_HASHES = 63
MAX_EXTRA_SIZE = 65535
# The header lines at their largest, plus the largest checkpoint note.
MAX_TLOG_PROOF_SIZE = MAX_NOTE_SIZE + 96 * 1024

# tlog-proof §Format: ASCII decimal, no leading zeroes unless the index is 0.
_DECIMAL = re.compile(rb"0|[1-9][0-9]{0,18}")


class TlogProofError(DreampoolError):
    """A tlog-proof file is malformed."""


@dataclass(frozen=True, slots=True)
class TlogProof:
    """An inclusion proof of the leaf at index under an embedded signed checkpoint."""

    index: int
    extra: bytes | None
    proof: tuple[bytes, ...]
    checkpoint: bytes

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not 0 <= self.index <= MAX_TREE_SIZE:
            raise TlogProofError("tlog-proof index must be in [0, 2^63)")
        if self.extra is not None and not 0 < len(self.extra) <= MAX_EXTRA_SIZE:
            raise TlogProofError(
                f"tlog-proof extra data is {len(self.extra)} bytes, want 1 to {MAX_EXTRA_SIZE} "
                "(no extra data is None)"
            )
        if len(self.proof) > MAX_PROOF_HASHES:
            raise TlogProofError(
                f"tlog-proof has {len(self.proof)} hashes, want at most {MAX_PROOF_HASHES}"
            )
        for number, h in enumerate(self.proof, 1):
            if len(h) != HASH_SIZE:
                raise TlogProofError(f"tlog-proof hash {number} is {len(h)} bytes, want 32")
        _check_checkpoint(self.checkpoint)


def format_tlog_proof(p: TlogProof) -> bytes:
    """The file bytes of p, according to c2sp.org/tlog-proof@v1."""
    lines = [HEADER]
    if p.extra is not None:
        lines.append(b"extra " + b64encode(p.extra).encode("ascii"))
    lines.append(b"index " + str(p.index).encode("ascii"))
    lines.extend(b64encode(h).encode("ascii") for h in p.proof)
    return b"".join(line + b"\n" for line in lines) + b"\n" + p.checkpoint


def parse_tlog_proof(data: bytes) -> TlogProof:
    """Parse a tlog-proof file strictly; every refusal names the line."""
    if len(data) > MAX_TLOG_PROOF_SIZE:
        raise TlogProofError(f"tlog-proof is {len(data)} bytes, want at most {MAX_TLOG_PROOF_SIZE}")
    pos = 0
    number = 0

    def next_line() -> bytes:
        nonlocal pos, number
        end = data.find(b"\n", pos)
        if end < 0:
            raise TlogProofError(
                f"tlog-proof line {number + 1}: missing, or has no newline "
                "(want header lines, an empty line, then the checkpoint)"
            )
        line = data[pos:end]
        pos = end + 1
        number += 1
        return line

    # tlog-proof §Format: "The first line MUST be the string c2sp.org/tlog-proof@v1".
    if next_line() != HEADER:
        raise TlogProofError(
            "tlog-proof line 1: want the header c2sp.org/tlog-proof@v1",
            hint="this file is not a tlog-proof, or another version of the format",
        )

    # "The second line MAY start with the string extra followed by a space".
    line = next_line()
    extra: bytes | None = None
    if line.startswith(b"extra "):
        try:
            extra = b64decode_canonical(line[len(b"extra ") :].decode("ascii"))
        except ValueError:
            raise TlogProofError(
                f"tlog-proof line {number}: extra data is not canonical base64"
            ) from None
        if not 0 < len(extra) <= MAX_EXTRA_SIZE:
            raise TlogProofError(
                f"tlog-proof line {number}: extra data is {len(extra)} bytes, "
                f"want 1 to {MAX_EXTRA_SIZE}"
            )
        line = next_line()

    # "The next line MUST start with the string index followed by a space".
    if not line.startswith(b"index "):
        raise TlogProofError(f"tlog-proof line {number}: want index <decimal>")
    index_text = line[len(b"index ") :]
    if not _DECIMAL.fullmatch(index_text) or int(index_text) > MAX_TREE_SIZE:
        raise TlogProofError(
            f"tlog-proof line {number}: index is not a decimal with no leading zero, below 2^63"
        )
    index = int(index_text)

    # "The next zero or more non-empty lines are the base64-encoded Merkle
    # inclusion proof ... one SHA-256 hash per line", ended by an empty line.
    proof: list[bytes] = []
    while (line := next_line()) != b"":
        if len(proof) == MAX_PROOF_HASHES:
            raise TlogProofError(
                f"tlog-proof line {number}: more than {MAX_PROOF_HASHES} proof hashes"
            )
        try:
            h = b64decode_canonical(line.decode("ascii"))
        except ValueError:
            raise TlogProofError(
                f"tlog-proof line {number}: proof hash is not canonical base64"
            ) from None
        if len(h) != HASH_SIZE:
            raise TlogProofError(
                f"tlog-proof line {number}: proof hash is {len(h)} bytes, want {HASH_SIZE}"
            )
        proof.append(h)

    # "After the inclusion proof lines and an empty line, the checkpoint
    # issued by the log is included verbatim".
    return TlogProof(index, extra, tuple(proof), data[pos:])


def _check_checkpoint(note: bytes) -> None:
    """Refuse an embedded checkpoint that is not a well-formed note and checkpoint."""
    try:
        text, _ = split_note(note)
        parse_checkpoint(text)
    except DreampoolError as e:
        raise TlogProofError(f"tlog-proof checkpoint: {e.message}", hint=e.hint) from None
