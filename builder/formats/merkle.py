"""RFC 6962 Merkle tree hashing, proofs and their verification.

The tree is the one of RFC 6962 §2.1 (restated in RFC 9162 §2.1.1), with H =
SHA-256::

    MTH({})        = SHA-256()                                  (the empty root)
    MTH({d(0)})    = SHA-256(0x00 || d(0))                      (a leaf hash)
    MTH(D[n])      = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n]))
                     where k is the largest power of two smaller than n

The 0x00/0x01 prefixes keep a leaf from ever hashing like an interior node
(RFC 6962 §2.1, second-preimage resistance).

Stored hashes. As in Go's golang.org/x/mod/sumdb/tlog, a tree is kept as the
hashes of its *complete* subtrees only: the hash at (level k, index i) is
MTH(D[i·2^k : (i+1)·2^k]), so level 0 holds the leaf hashes and level k holds
one hash per 2^k leaves. A complete subtree never changes once its last leaf
is appended, so these hashes are append-only, and every root and proof of
every tree size up to the current one is a function of O(log n) of them.
Everything here that builds a proof reads stored hashes through one tiny
interface, a :data:`HashReader` ``read_hash(level, index) -> bytes``, so the
same code serves the in-memory :class:`MerkleTree` and a reader over published
tiles (:mod:`builder.formats.tiles`).

Worked example: the tree of 7 leaves d0…d6 in RFC 6962 §2.1.3::

                hash               stored: level 0  a b c d e f d6 (leaf hashes)
               /    \\                      level 1  g h i
              k      l                     level 2  k
             / \\    / \\
            g   h  i   j           j = d6 is promoted, not hashed again; l and
           / \\ / \\ / \\  |          the root are not stored (not complete) and
           a b c d e f d6          are rebuilt: root = H(0x01 || k || H(0x01 || i || d6)).

The audit path of d0 is [b, h, l] and of d6 is [i, k]; the consistency proof
from size 3 to 7 is [c, d, g, l] (RFC 6962 §2.1.3).

Verification (:func:`verify_inclusion`, :func:`verify_consistency`) needs no
tree at all; it is what a light client runs (docs/protocol.md §5 steps 3 and 5).
A verify function raises :class:`~builder.errors.VerificationError` and
returns ``None``: there is no boolean to forget to check.

Errors: a failed verification is a ``VerificationError`` that says what was
computed and what was wanted. Asking a :class:`MerkleTree` for a size it does
not have is a ``LogError`` (the caller believes the log is larger than it is).
A call that breaks a documented precondition of a proof builder (negative
index, ``index >= size``, ``size1 > size2``) is a ``ValueError``: a bug in the
caller, not a property of the log.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

from builder.errors import LogError, VerificationError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "MAX_TREE_SIZE",
    "HashReader",
    "MerkleTree",
    "consistency_proof_from",
    "inclusion_proof_from",
    "leaf_hash",
    "node_hash",
    "root_from",
    "root_from_consistency_proof",
    "root_from_inclusion_proof",
    "roots_from_consistency_proof",
    "subtree_hash_from",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
"""Bytes in a SHA-256 hash; every stored hash, root and proof hash has this size."""

EMPTY_ROOT = hashlib.sha256(b"").digest()
"""MTH({}) = SHA-256() — the root of the empty tree (RFC 6962 §2.1)."""

MAX_TREE_SIZE = 2**64 - 1
"""Largest tree size a proof can be about: tree_size is a uint64 (RFC 6962 §3.5)."""

HashReader = Callable[[int, int], bytes]
"""``read_hash(level, index)``: the stored hash MTH(D[index·2^level : (index+1)·2^level]).

Called only for complete subtrees inside the tree size being proved.
"""

_sha256 = hashlib.sha256
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"


def leaf_hash(data: bytes) -> bytes:
    """Return the hash of a leaf: SHA-256(0x00 || data) (RFC 6962 §2.1)."""
    return _sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return the hash of an interior node: SHA-256(0x01 || left || right) (RFC 6962 §2.1)."""
    return _sha256(_NODE_PREFIX + left + right).digest()


# --- Verification (RFC 9162 §2.1.3.2 and §2.1.4.2) ------------------------------


def root_from_inclusion_proof(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes]
) -> bytes:
    """Return the root that ``proof`` implies for ``leaf_hash`` at ``index`` of a tree of ``size``.

    Requires 0 <= index < size. The result means nothing until it is compared
    with a trusted root: use :func:`verify_inclusion` unless that comparison is
    the caller's own.

    Raises VerificationError if the index is out of range, a hash has the wrong
    size or the proof has the wrong number of hashes for ``(index, size)``.
    """
    if not 0 <= index < size <= MAX_TREE_SIZE:
        raise VerificationError(
            f"leaf index {index} is not inside a tree of size {size} "
            f"(want 0 <= index < size < 2^64)"
        )
    if len(leaf_hash) != HASH_SIZE:
        raise VerificationError(f"leaf hash is {len(leaf_hash)} bytes, want {HASH_SIZE}")
    _check_proof_hashes(proof)
    inner, border = _decompose_inclusion_proof(index, size)
    if len(proof) != inner + border:
        raise VerificationError(
            f"inclusion proof has {len(proof)} hashes, want {inner + border} "
            f"for leaf {index} of a tree of size {size}"
        )
    # RFC 9162 §2.1.3.2: fn = index, sn = size - 1; the bits of fn below the
    # point where the paths to fn and sn split say left or right (chain_inner),
    # above it the path runs along the right border (chain_border_right).
    root = _chain_inner(leaf_hash, proof[:inner], index)
    return _chain_border_right(root, proof[inner:])


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``proof`` shows ``leaf_hash`` at ``index`` in the tree of ``size`` with ``root``.

    RFC 9162 §2.1.3.2. Requires 0 <= index < size. Returns ``None`` on success
    and raises VerificationError otherwise, with the computed and wanted roots.
    """
    calculated = root_from_inclusion_proof(leaf_hash, index, size, proof)
    if calculated != root:
        raise VerificationError(
            f"inclusion proof for leaf {index} of a tree of size {size} gives root "
            f"{calculated.hex()}, want {root.hex()}"
        )


def root_from_consistency_proof(
    size1: int, size2: int, root1: bytes, proof: Sequence[bytes]
) -> bytes:
    """Check ``proof`` against ``root1`` and return the root it implies for ``size2``.

    RFC 9162 §2.1.4.2. Requires 0 < size1 <= size2. The returned root means
    nothing until compared with a trusted root for ``size2``; use
    :func:`verify_consistency` unless that comparison is the caller's own.

    A proof from size 0 is refused: every tree extends the empty tree, so such
    a proof proves nothing (transparency-dev/merkle refuses it the same way).
    If size1 == size2 the proof must be empty and ``root1`` is returned.
    """
    calculated1, calculated2 = roots_from_consistency_proof(size1, size2, root1, proof)
    if calculated1 != root1:
        raise VerificationError(
            f"consistency proof from size {size1} to {size2} gives old root "
            f"{calculated1.hex()}, want {root1.hex()}"
        )
    return calculated2


def roots_from_consistency_proof(
    size1: int, size2: int, root1: bytes, proof: Sequence[bytes]
) -> tuple[bytes, bytes]:
    """The roots for ``size1`` and ``size2`` that ``proof`` gives, compared with nothing.

    RFC 9162 §2.1.4.2 steps 1–7 without the two comparisons. When size1 is a
    power of two the proof leaves out the old root and ``root1`` stands in for it
    (and comes back as the old root); otherwise ``root1`` is not used. Raises
    VerificationError only for a proof of the wrong shape (see
    :func:`root_from_consistency_proof`). Whoever holds a proof whose new root is a
    signed root holds the true nodes of that tree: if its old root differs from
    another signed root of size1, the two signed trees are inconsistent.
    """
    if size1 < 0 or size2 < size1:
        raise VerificationError(f"tree sizes go backwards: {size1} to {size2}")
    if size2 > MAX_TREE_SIZE:
        raise VerificationError(f"tree size {size2} does not fit in 64 bits")
    if size1 == 0:
        raise VerificationError(
            "a consistency proof from the empty tree (size 0) is meaningless; want size1 > 0"
        )
    if size1 == size2:
        if proof:
            raise VerificationError(
                f"consistency proof between equal sizes {size1} has {len(proof)} hashes, want 0"
            )
        return root1, root1
    if not proof:
        raise VerificationError(f"consistency proof from size {size1} to {size2} is empty")
    _check_proof_hashes(proof)

    # The proof is the inclusion proof, in the tree of size2, of the node at
    # level `shift` that ends at size1 (the rightmost complete subtree of the
    # old tree), preceded by that node's hash unless it is the whole old tree
    # (size1 a power of two), in which case root1 is that hash.
    inner, border = _decompose_inclusion_proof(size1 - 1, size2)
    shift = _trailing_zeros(size1)
    inner -= shift  # shift < inner because size1 < size2
    if size1 == 1 << shift:
        seed, path = root1, proof
    else:
        seed, path = proof[0], proof[1:]
    want = (len(proof) - len(path)) + inner + border
    if len(proof) != want:
        raise VerificationError(
            f"consistency proof from size {size1} to {size2} has {len(proof)} hashes, want {want}"
        )
    node_index = (size1 - 1) >> shift

    # RFC 9162 §2.1.4.2 step 6: the hashes left of the path rebuild root1 ...
    calculated1 = _chain_inner_right(seed, path[:inner], node_index)
    calculated1 = _chain_border_right(calculated1, path[inner:])
    # ... and all of them rebuild root2.
    calculated2 = _chain_inner(seed, path[:inner], node_index)
    return calculated1, _chain_border_right(calculated2, path[inner:])


def verify_consistency(
    size1: int, size2: int, root1: bytes, root2: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``size2`` with ``root2`` extends the tree of ``size1`` with ``root1``.

    RFC 9162 §2.1.4.2. Requires 0 < size1 <= size2 (see
    :func:`root_from_consistency_proof`); for size1 == size2 the proof must be
    empty and the roots equal. Returns ``None`` on success and raises
    VerificationError otherwise.
    """
    calculated = root_from_consistency_proof(size1, size2, root1, proof)
    if calculated != root2:
        what = "new root" if size1 != size2 else "root"
        raise VerificationError(
            f"consistency proof from size {size1} to {size2} gives {what} "
            f"{calculated.hex()}, want {root2.hex()}"
        )


def _check_proof_hashes(proof: Sequence[bytes]) -> None:
    for i, h in enumerate(proof):
        if len(h) != HASH_SIZE:
            raise VerificationError(f"proof hash {i} is {len(h)} bytes, want {HASH_SIZE}")


def _decompose_inclusion_proof(index: int, size: int) -> tuple[int, int]:
    """Split the inclusion proof of ``index`` in a tree of ``size`` into (inner, border) lengths.

    ``inner`` counts the levels below the point where the paths to ``index``
    and ``size - 1`` meet; ``border`` counts the left siblings above it (the
    path then runs along the right border, where right siblings do not exist).
    """
    inner = (index ^ (size - 1)).bit_length()
    border = (index >> inner).bit_count()
    return inner, border


def _trailing_zeros(n: int) -> int:
    """Return the number of trailing zero bits of n > 0."""
    return (n & -n).bit_length() - 1


def _chain_inner(seed: bytes, proof: Sequence[bytes], index: int) -> bytes:
    """Hash ``seed`` (the node at ``index`` on its level) up through siblings in ``proof``.

    Bit i of ``index`` says whether the node at height i is a right child.
    """
    for i, h in enumerate(proof):
        seed = node_hash(h, seed) if (index >> i) & 1 else node_hash(seed, h)
    return seed


def _chain_inner_right(seed: bytes, proof: Sequence[bytes], index: int) -> bytes:
    """Like :func:`_chain_inner`, only through left siblings: the subtree at an earlier size."""
    for i, h in enumerate(proof):
        if (index >> i) & 1:
            seed = node_hash(h, seed)
    return seed


def _chain_border_right(seed: bytes, proof: Sequence[bytes]) -> bytes:
    """Hash ``seed`` up the right border, where every sibling is a left one."""
    for h in proof:
        seed = node_hash(h, seed)
    return seed


# --- Proofs from stored hashes (RFC 6962 §2.1.1 and §2.1.2) -----------------------


def subtree_hash_from(read_hash: HashReader, start: int, end: int) -> bytes:
    """Return MTH(D[start:end]) from the stored hashes of complete subtrees.

    Requires 0 <= start < end and ``start`` a multiple of a power of two
    2^k >= end - start — i.e. [start, end) is a node of the RFC 6962 tree of
    any size >= end (the whole tree when start == 0).

    D[start:end] splits into complete subtrees whose sizes are the set bits of
    end - start, largest first; RFC 6962 §2.1 hashes them together right to
    left, since the largest-power-of-two split always peels the left one off.
    """
    n = end - start
    if start < 0 or n <= 0 or (start & ((1 << (n - 1).bit_length()) - 1)):
        raise ValueError(f"[{start}, {end}) is not a node of an RFC 6962 tree")
    hashes: list[bytes] = []
    position = start
    for level in range(n.bit_length() - 1, -1, -1):
        if (n >> level) & 1:
            hashes.append(read_hash(level, position >> level))
            position += 1 << level
    result = hashes.pop()
    while hashes:
        result = node_hash(hashes.pop(), result)
    return result


def root_from(read_hash: HashReader, size: int) -> bytes:
    """Return the root MTH(D[0:size]) of the tree of ``size`` leaves (RFC 6962 §2.1).

    Requires size >= 0; the empty tree's root is :data:`EMPTY_ROOT`. Reads at
    most log2(size) + 1 stored hashes.
    """
    if size < 0:
        raise ValueError(f"tree size {size} is negative")
    if size == 0:
        return EMPTY_ROOT
    return subtree_hash_from(read_hash, 0, size)


def _path_from(read_hash: HashReader, level: int, index: int, size: int) -> list[bytes]:
    """Return the siblings, bottom up, on the path from node (level, index) to the root of size.

    Requires the node to be a complete subtree inside the tree:
    (index + 1) · 2^level <= size. For level 0 this is RFC 6962 §2.1.1
    PATH(index, D[size]), written iteratively.
    """
    proof: list[bytes] = []
    last = (size - 1) >> level  # the rightmost node on this level (maybe incomplete)
    while last > 0:
        if index & 1:
            # A left sibling is always complete.
            proof.append(read_hash(level, index - 1))
        elif index < last:
            # A right sibling may be the incomplete rightmost node; MTH of what exists.
            start = (index + 1) << level
            proof.append(subtree_hash_from(read_hash, start, min(start + (1 << level), size)))
        # else: this node is the rightmost on its level with no right sibling;
        # RFC 6962 places it one level up unchanged, so there is no proof hash.
        index >>= 1
        last >>= 1
        level += 1
    return proof


def inclusion_proof_from(read_hash: HashReader, index: int, size: int) -> list[bytes]:
    """Return the inclusion proof PATH(index, D[size]) of RFC 6962 §2.1.1 (RFC 9162 §2.1.3.1).

    Requires 0 <= index < size. Reads O(log size) stored hashes.
    """
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is not inside a tree of size {size}")
    return _path_from(read_hash, 0, index, size)


def consistency_proof_from(read_hash: HashReader, size1: int, size2: int) -> list[bytes]:
    """Return the consistency proof PROOF(size1, D[size2]) of RFC 6962 §2.1.2 (RFC 9162 §2.1.4.1).

    Requires 0 < size1 <= size2; the proof between equal sizes is empty. Reads
    O(log size2) stored hashes.

    RFC 6962's SUBPROOF recursion, read bottom up, is the path from the
    rightmost complete subtree of the old tree — the node at level
    tz = trailing_zeros(size1) that ends at size1 — to the new root, preceded by
    that node's own hash unless it is the whole old tree (size1 a power of two,
    the SUBPROOF case m == n with b = true).
    """
    if not 0 < size1 <= size2:
        raise ValueError(
            f"no consistency proof from size {size1} to {size2}; want 0 < size1 <= size2"
        )
    if size1 == size2:
        return []
    level = _trailing_zeros(size1)
    index = (size1 - 1) >> level
    path = _path_from(read_hash, level, index, size2)
    if index == 0:
        return path
    return [read_hash(level, index), *path]


# --- An in-memory tree ---------------------------------------------------------


class MerkleTree:
    """An append-only RFC 6962 tree that stores the hash of every complete subtree.

    Level k is one ``bytearray`` of concatenated 32-byte hashes: entry i is
    MTH(D[i·2^k : (i+1)·2^k]) (the layout of Go's sumdb/tlog stored hashes, and
    exactly what the tiles of :mod:`builder.formats.tiles` publish). A tree of n leaves
    holds n + n/2 + n/4 + … < 2n hashes, about 64 bytes per leaf, in a handful
    of objects. Roots and proofs for *any* size up to :attr:`size` read
    O(log n) of them.
    """

    __slots__ = ("_levels", "_size")

    def __init__(self) -> None:
        self._levels: list[bytearray] = [bytearray()]
        self._size = 0

    @classmethod
    def from_leaf_hashes(cls, leaf_hashes: Iterable[bytes]) -> MerkleTree:
        """Return a tree holding ``leaf_hashes`` (each 32 bytes) in order."""
        tree = cls()
        tree.extend(leaf_hashes)
        return tree

    @classmethod
    def from_levels(cls, levels: Sequence[bytes], size: int) -> MerkleTree:
        """Return the tree of ``size`` leaves whose stored hashes are ``levels``:
        level k, ``size >> k`` hashes of 32 bytes, for every k with a complete
        subtree (what :meth:`hashes_at` gives). The hashes are taken as they are;
        only their counts are checked (ValueError)."""
        if size < 0 or len(levels) != max(size.bit_length(), 1):
            raise ValueError(f"a tree of {size} leaves has {max(size.bit_length(), 1)} levels")
        for k, data in enumerate(levels):
            if len(data) != (size >> k) * HASH_SIZE:
                raise ValueError(f"level {k} of a tree of {size} leaves holds {size >> k} hashes")
        tree = cls()
        tree._levels = [bytearray(data) for data in levels]
        tree._size = size
        return tree

    @property
    def size(self) -> int:
        """The number of leaves."""
        return self._size

    def __len__(self) -> int:
        return self._size

    def append(self, leaf_hash: bytes) -> int:
        """Append one leaf hash (32 bytes, SHA-256(0x00 || data)) and return its index."""
        if len(leaf_hash) != HASH_SIZE:
            raise ValueError(f"leaf hash is {len(leaf_hash)} bytes, want {HASH_SIZE}")
        index = self._size
        levels = self._levels
        levels[0] += leaf_hash
        # Each 1 bit at the bottom of `index` is a left sibling whose subtree the
        # new leaf completes: hash the pair into the level above (RFC 6962 §2.1).
        n = index
        level = 0
        right = leaf_hash
        while n & 1:
            right = _sha256(_NODE_PREFIX + levels[level][-64:-32] + right).digest()
            level += 1
            if level == len(levels):
                levels.append(bytearray())
            levels[level] += right
            n >>= 1
        self._size = index + 1
        return index

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        """Append every leaf hash in order.

        All hashes are checked before any is appended, so a bad one leaves the
        tree unchanged.
        """
        items = list(leaf_hashes)
        for i, h in enumerate(items):
            if len(h) != HASH_SIZE:
                raise ValueError(f"leaf hash {i} of the batch is {len(h)} bytes, want {HASH_SIZE}")
        append = self.append
        for h in items:
            append(h)

    def hash_at(self, level: int, index: int) -> bytes:
        """Return the stored hash MTH(D[index·2^level : (index+1)·2^level]).

        Requires the subtree to be complete: (index + 1) · 2^level <= size.
        Raises LogError otherwise. This is the tree's :data:`HashReader`.
        """
        if level < 0 or index < 0 or level >= len(self._levels):
            raise LogError(
                f"no stored hash at level {level}, index {index} in a tree of size {self._size}"
            )
        data = self._levels[level]
        start = index * HASH_SIZE
        if start + HASH_SIZE > len(data):
            raise LogError(
                f"no stored hash at level {level}, index {index}: the tree has {self._size} "
                f"leaves, so level {level} has {len(data) // HASH_SIZE} complete subtrees"
            )
        return bytes(data[start : start + HASH_SIZE])

    def hashes_at(self, level: int, start: int, end: int) -> bytes:
        """Return the concatenated stored hashes of indices [start, end) at ``level``.

        Requires 0 <= start <= end <= the number of complete subtrees at that
        level (size >> level). Raises LogError otherwise.
        """
        have = self._size >> level if level >= 0 else -1
        if level < 0 or not 0 <= start <= end <= have:
            raise LogError(
                f"no stored hashes [{start}, {end}) at level {level} in a tree of size "
                f"{self._size} (level has {max(have, 0)})"
            )
        if start == end:
            return b""
        return bytes(self._levels[level][start * HASH_SIZE : end * HASH_SIZE])

    def level_bytes(self, level: int) -> bytes:
        """Return every stored hash at ``level``, concatenated: (size >> level) · 32 bytes.

        A copy, O(size): a live view would pin the level's buffer, and an
        append that then failed halfway up the levels would leave the tree
        inconsistent. For a tile's worth use :meth:`hashes_at`.
        """
        if level < 0:
            raise ValueError(f"level {level} is negative")
        if level >= len(self._levels):
            return b""
        return bytes(self._levels[level])

    def _check_size(self, size: int) -> None:
        if not 0 <= size <= self._size:
            raise LogError(f"tree has {self._size} leaves, cannot use size {size}")

    def root(self, size: int | None = None) -> bytes:
        """Return the root of the first ``size`` leaves (default: all), RFC 6962 §2.1.

        Requires 0 <= size <= :attr:`size`; raises LogError for a size the
        tree does not have. O(log size).
        """
        if size is None:
            size = self._size
        self._check_size(size)
        return root_from(self.hash_at, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """Return the inclusion proof of leaf ``index`` in the tree of ``size`` leaves.

        RFC 6962 §2.1.1. ``size`` defaults to all leaves. Requires
        0 <= index < size <= :attr:`size`.
        """
        if size is None:
            size = self._size
        self._check_size(size)
        return inclusion_proof_from(self.hash_at, index, size)

    def consistency_proof(self, size1: int, size2: int | None = None) -> list[bytes]:
        """Return the consistency proof from ``size1`` to ``size2`` leaves (default: all).

        RFC 6962 §2.1.2. Requires 0 < size1 <= size2 <= :attr:`size`.
        """
        if size2 is None:
            size2 = self._size
        self._check_size(size2)
        return consistency_proof_from(self.hash_at, size1, size2)
