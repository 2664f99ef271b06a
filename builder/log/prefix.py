"""A proven prefix of the log, kept so that a build parses only the leaves after it.

Every build proves the stored log (:func:`builder.log.logbuild.prove`): it
parses each leaf strictly (docs/protocol.md §3), checks the rules across
leaves, and rebuilds the RFC 6962 tree. Both are pure functions of the leaves'
bytes, and all but the last of the leaf shards (``content/log/leaves``, 4,096
leaves a file) never change once full. At 100k dreams the parse and the tree
were 0.6–0.75 s of every build, for leaves the build before had read in the
very same bytes.

So the build store keeps one row (section ``logprefix``, :mod:`builder.buildcache`)
under :func:`key`, a digest of the full shards' bytes, holding what the proof
made of their leaves: the tree's stored hashes (:class:`builder.formats.merkle.MerkleTree`'s
levels, cut to those leaves) and what the leaves log, in log order (each dream
leaf's id and commitment, each key leaf's keyId and author, each erasure
leaf's id and reason, with their leaf indices). The next build whose full
shards hash to the same key takes that, and parses and hashes only the
leaves after it.

The row is written only by a build whose proof of those leaves succeeded,
and read back as hostile data like every row of the store: a tag or digest
checked before it is decoded (T81), then :func:`decode` accepts only the
shape :func:`encode` writes, consistent with itself (each leaf index below
the prefix's size exactly once, ids and keyIds once each), and anything else
is a miss: the leaves are then parsed as before. The key is 256 bits of
BLAKE2b over the shards' own BLAKE2b-256 digests, so no other bytes than
those proven name the row.

The value is one line of JSON, then the tree's hashes as raw bytes: level 0
(the leaf hashes), then level 1, and so on, level ``j`` holding
``size >> j`` hashes of 32 bytes (the layout of Go's sumdb/tlog stored
hashes).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from builder.formats import dream as dreamfmt
from builder.formats import merkle
from builder.formats.leaf import REASONS

FORMAT = "dreampool-log-prefix/1"


def key(shard_digests: Sequence[bytes]) -> str:
    """The row's key for a prefix made of the shards whose BLAKE2b-256 digests
    are ``shard_digests``, in order: 64 hex."""
    h = hashlib.blake2b(FORMAT.encode() + b"\n", digest_size=32)
    for d in shard_digests:
        if len(d) != 32:
            raise ValueError("a shard's digest is 32 bytes")
        h.update(d)
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class Prefix:
    """What the first :attr:`size` leaves of a proven log hold."""

    size: int
    tree: merkle.MerkleTree
    dreams: list[tuple[str, int, str]]  # (id, leaf index, commitment), in log order
    keys: list[tuple[str, int, str]]  # (keyId, leaf index, author), in log order
    erasures: list[tuple[str, int, str]]  # (id, leaf index, reason), in log order


def _tree_bytes(size: int) -> int:
    return sum((size >> level) * merkle.HASH_SIZE for level in range(size.bit_length()))


def encode(p: Prefix) -> bytes:
    """The row of ``p``: a line of JSON, then the tree's hashes (module doc)."""
    if p.tree.size < p.size:
        raise ValueError("the tree holds fewer leaves than the prefix")
    head = {
        "format": FORMAT,
        "size": p.size,
        "dreams": [[d[0] for d in p.dreams], [d[1] for d in p.dreams], [d[2] for d in p.dreams]],
        "keys": [list(k) for k in p.keys],
        "erasures": [list(e) for e in p.erasures],
    }
    levels = b"".join(
        p.tree.hashes_at(level, 0, p.size >> level) for level in range(p.size.bit_length())
    )
    text = json.dumps(head, ensure_ascii=True, separators=(",", ":"))
    return text.encode("ascii") + b"\n" + levels


def decode(data: bytes, size: int) -> Prefix | None:
    """The prefix of ``size`` leaves that ``data`` (a row :func:`encode` wrote)
    holds, or None if it holds anything else: any damage is a miss, never an
    error (a JSON line nested deep enough raised RecursionError: review r69)."""
    try:
        return _decode(data, size)
    except Exception:  # whatever a hostile row raises, it is a miss
        return None


def _decode(data: bytes, size: int) -> Prefix | None:
    cut = data.find(b"\n")
    if cut < 0 or len(data) - cut - 1 != _tree_bytes(size):
        return None
    head = json.loads(data[:cut].decode("ascii"))
    if not isinstance(head, dict) or set(head) != {"format", "size", "dreams", "keys", "erasures"}:
        return None
    if head["format"] != FORMAT or type(head["size"]) is not int or head["size"] != size:
        return None
    ids, indices, commitments = _columns(head["dreams"])
    keys = [_triple(k) for k in _list(head["keys"])]
    erasures = [_triple(e) for e in _list(head["erasures"])]
    # Every leaf below the size is exactly one dream, key or erasure leaf, each
    # id and keyId logged once, and the lists in log order (module doc).
    every = indices + [k[1] for k in keys] + [e[1] for e in erasures]
    if len(every) != size or set(every) != set(range(size)):
        return None
    if len(set(ids)) != len(ids) or len({k[0] for k in keys}) != len(keys):
        return None
    if len({e[0] for e in erasures}) != len(erasures) or not {e[0] for e in erasures} <= set(ids):
        return None
    for column in (indices, [k[1] for k in keys], [e[1] for e in erasures]):
        if column != sorted(column):  # (distinct: every index is there once)
            return None
    # Only what a leaf can hold (docs/protocol.md §3, builder.formats.leaf), so
    # that a reader that checks a row by its public digest alone (T108) is
    # never handed text no leaf could give (review r69): ids, commitments and
    # keyIds as one pattern match each, authors by §1's rules, reasons of the
    # three, and each erasure after its dream's leaf.
    if not (
        _every(_IDS, ids, 16)
        and _every(_COMMITMENTS, commitments, 64)
        and _every(_KEY_IDS, [k[0] for k in keys], 23)
        and _every(_IDS, [e[0] for e in erasures], 16)
    ):
        return None
    if any(not _is_author(k[2]) for k in keys) or any(e[2] not in REASONS for e in erasures):
        return None
    leaf_of = dict(zip(ids, indices, strict=True))
    if any(leaf_of[e[0]] >= e[1] for e in erasures):
        return None
    view = memoryview(data)[cut + 1 :]
    levels: list[bytes] = []
    at = 0
    for level in range(size.bit_length()):
        n = (size >> level) * merkle.HASH_SIZE
        levels.append(bytes(view[at : at + n]))
        at += n
    tree = merkle.MerkleTree.from_levels(levels, size)
    dreams = list(zip(ids, indices, commitments, strict=True))
    return Prefix(size, tree, dreams, keys, erasures)


# docs/protocol.md §3: a dream id, a commitment and a keyId, each on a line.
_IDS = re.compile(r"(?:[0-9a-f]{16}\n)*")
_COMMITMENTS = re.compile(r"(?:[0-9a-f]{64}\n)*")
_KEY_IDS = re.compile(r"(?:sha256:[0-9a-f]{16}\n)*")


def _every(pattern: re.Pattern[str], values: list[str], length: int) -> bool:
    """Whether each of ``values`` (strings) is ``length`` characters of a line
    of ``pattern``: one match over them all (at 100k dreams, one call per
    value was a tenth of what the row saves)."""
    text = "\n".join(values) + "\n" if values else ""
    return len(text) == (length + 1) * len(values) and pattern.fullmatch(text) is not None


def _is_author(name: str) -> bool:
    return not dreamfmt.validate_author(name, "")


def _list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise TypeError("not a list")
    return value


def _columns(value: Any) -> tuple[list[str], list[int], list[str]]:
    ids, indices, commitments = _list(value)
    _list(ids), _list(indices), _list(commitments)
    if not len(ids) == len(indices) == len(commitments):
        raise ValueError("columns of unequal length")
    if not set(map(type, ids)) <= {str} or not set(map(type, commitments)) <= {str}:
        raise TypeError("not strings")
    if not set(map(type, indices)) <= {int}:
        raise TypeError("not whole numbers")
    return ids, indices, commitments


def _triple(value: Any) -> tuple[str, int, str]:
    name, index, text = _list(value)
    if type(name) is not str or type(index) is not int or type(text) is not str:
        raise TypeError("not (text, index, text)")
    return name, index, text
