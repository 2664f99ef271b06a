"""RFC 6962 hashing and proofs, held by three independent witnesses.

1. The transparency-dev/merkle vectors in tests/vectors/merkle (every
   file: happy paths and mutated negatives, ``wantErr`` respected) and the
   known roots and proofs of transparency-dev/merkle's tests.
2. A naive reference written straight from RFC 6962 §2.1 (MTH, PATH,
   PROOF/SUBPROOF), compared with :class:`MerkleTree` at every size up to
   2,000 and on Hypothesis-chosen proofs.
3. Properties: every proof verifies, and flipping any bit of it does not.
"""

from __future__ import annotations

import base64
import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import LogError, VerificationError
from builder.formats.merkle import (
    EMPTY_ROOT,
    MerkleTree,
    consistency_proof_from,
    inclusion_proof_from,
    leaf_hash,
    node_hash,
    root_from,
    root_from_consistency_proof,
    root_from_inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from tests.conftest import VECTORS, vector_files

MERKLE_VECTORS = VECTORS / "merkle"
INCLUSION_FILES = vector_files("merkle/inclusion")
CONSISTENCY_FILES = vector_files("merkle/consistency")


def _b64(value: str) -> bytes:
    return base64.b64decode(value, validate=True)


def _load(path: Path) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    vector["proof"] = [_b64(h) for h in vector["proof"] or []]  # null = empty proof
    return vector


def _vector_id(path: Path) -> str:
    return str(path.relative_to(MERKLE_VECTORS))


# --- 1. Published vectors ------------------------------------------------------------


def test_vectors_are_present() -> None:
    # vector_files already refuses a short folder; every one is a JSON vector.
    assert len(INCLUSION_FILES) == 98
    assert len(CONSISTENCY_FILES) == 98
    assert all(p.suffix == ".json" for p in INCLUSION_FILES + CONSISTENCY_FILES)


@pytest.mark.parametrize("path", INCLUSION_FILES, ids=_vector_id)
def test_inclusion_vector(path: Path) -> None:
    v = _load(path)
    args = (_b64(v["leafHash"]), v["leafIdx"], v["treeSize"], v["proof"], _b64(v["root"]))
    if v["wantErr"]:
        with pytest.raises(VerificationError):
            verify_inclusion(*args)
    else:
        verify_inclusion(*args)
        assert root_from_inclusion_proof(*args[:4]) == args[4]


@pytest.mark.parametrize("path", CONSISTENCY_FILES, ids=_vector_id)
def test_consistency_vector(path: Path) -> None:
    v = _load(path)
    args = (v["size1"], v["size2"], _b64(v["root1"]), _b64(v["root2"]), v["proof"])
    if v["wantErr"]:
        with pytest.raises(VerificationError):
            verify_consistency(*args)
    else:
        verify_consistency(*args)
        assert root_from_consistency_proof(args[0], args[1], args[2], args[4]) == args[3]


# transparency-dev/merkle testonly/constants.go and proof/verify_test.go.
RFC6962_LEAVES = [
    bytes.fromhex(h)
    for h in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
RFC6962_ROOTS = [  # root of the first n leaves, n = 1…8
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
RFC6962_INCLUSION = {  # (index, size): proof
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 3): ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    (1, 5): [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
}
RFC6962_CONSISTENCY = {  # (size1, size2): proof
    (1, 1): [],
    (1, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
    (6, 7): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}


@pytest.fixture(scope="module")
def rfc_tree() -> MerkleTree:
    return MerkleTree.from_leaf_hashes(leaf_hash(d) for d in RFC6962_LEAVES)


def test_known_roots(rfc_tree: MerkleTree) -> None:
    # The facts the vectors README names, then every prefix.
    assert rfc_tree.root().hex() == (
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"
    )
    assert rfc_tree.root(3).hex() == (
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"
    )
    assert rfc_tree.root(0) == EMPTY_ROOT == MerkleTree().root()
    assert EMPTY_ROOT.hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert [rfc_tree.root(n).hex() for n in range(1, 9)] == RFC6962_ROOTS


def test_known_proofs(rfc_tree: MerkleTree) -> None:
    for (index, size), want in RFC6962_INCLUSION.items():
        assert [h.hex() for h in rfc_tree.inclusion_proof(index, size)] == want, (index, size)
    for (size1, size2), want in RFC6962_CONSISTENCY.items():
        assert [h.hex() for h in rfc_tree.consistency_proof(size1, size2)] == want, (size1, size2)


def test_rfc6962_worked_example() -> None:
    # RFC 6962 §2.1.3: the tree of 7 leaves d0…d6, its audit paths and
    # consistency proofs, named as in the RFC's figure.
    a, b, c, d, e, f, d6 = (leaf_hash(b"d%d" % n) for n in range(7))
    g, h, i, j = node_hash(a, b), node_hash(c, d), node_hash(e, f), d6
    k, l = node_hash(g, h), node_hash(i, j)  # noqa: E741 — the RFC's name
    t = MerkleTree.from_leaf_hashes([a, b, c, d, e, f, d6])
    assert t.root() == node_hash(k, l)
    assert t.inclusion_proof(0) == [b, h, l]
    assert t.inclusion_proof(3) == [c, g, l]
    assert t.inclusion_proof(4) == [f, j, k]
    assert t.inclusion_proof(6) == [i, k]
    assert t.consistency_proof(3) == [c, d, g, l]
    assert t.consistency_proof(4) == [l]
    assert t.consistency_proof(6) == [i, j, k]


def test_hash_functions() -> None:
    assert leaf_hash(b"") == hashlib.sha256(b"\x00").digest()
    left, right = b"L" * 32, b"R" * 32
    assert node_hash(left, right) == hashlib.sha256(b"\x01" + left + right).digest()
    # Domain separation: the same bytes as a leaf hash differently (RFC 6962 §2.1).
    assert leaf_hash(b"\x01" + left + right) != node_hash(left, right)


# --- 2. A naive reference, straight from RFC 6962 §2.1 ---------------------------------

MAX_SIZE = 2000
DATA = tuple(f"leaf {i}".encode() for i in range(MAX_SIZE))


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _largest_power_of_two_below(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


@cache
def ref_mth(lo: int, hi: int) -> bytes:
    """MTH(D[lo:hi]) — RFC 6962 §2.1 (memoised only so the test stays fast)."""
    n = hi - lo
    if n == 0:
        return _sha256(b"")
    if n == 1:
        return _sha256(b"\x00" + DATA[lo])
    k = _largest_power_of_two_below(n)
    return _sha256(b"\x01" + ref_mth(lo, lo + k) + ref_mth(lo + k, hi))


def ref_path(m: int, lo: int, hi: int) -> list[bytes]:
    """PATH(m, D[lo:hi]) — RFC 6962 §2.1.1."""
    n = hi - lo
    if n == 1:
        return []
    k = _largest_power_of_two_below(n)
    if m < k:
        return [*ref_path(m, lo, lo + k), ref_mth(lo + k, hi)]
    return [*ref_path(m - k, lo + k, hi), ref_mth(lo, lo + k)]


def ref_subproof(m: int, lo: int, hi: int, b: bool) -> list[bytes]:
    """SUBPROOF(m, D[lo:hi], b) — RFC 6962 §2.1.2."""
    n = hi - lo
    if m == n:
        return [] if b else [ref_mth(lo, hi)]
    k = _largest_power_of_two_below(n)
    if m <= k:
        return [*ref_subproof(m, lo, lo + k, b), ref_mth(lo + k, hi)]
    return [*ref_subproof(m - k, lo + k, hi, False), ref_mth(lo, lo + k)]


def ref_proof(m: int, n: int) -> list[bytes]:
    """PROOF(m, D[n]) = SUBPROOF(m, D[n], true) — RFC 6962 §2.1.2."""
    return ref_subproof(m, 0, n, True)


@pytest.fixture(scope="module")
def tree() -> MerkleTree:
    return MerkleTree.from_leaf_hashes(leaf_hash(d) for d in DATA)


def test_roots_at_every_size(tree: MerkleTree) -> None:
    assert tree.size == len(tree) == MAX_SIZE
    for size in range(MAX_SIZE + 1):
        assert tree.root(size) == ref_mth(0, size), size


def test_append_and_extend_store_the_same_hashes(tree: MerkleTree) -> None:
    grown = MerkleTree()
    for i, d in enumerate(DATA):
        assert grown.append(leaf_hash(d)) == i
    assert grown.size == tree.size
    for level in range(12):
        assert grown.level_bytes(level) == tree.level_bytes(level)
        assert len(tree.level_bytes(level)) == 32 * (MAX_SIZE >> level)
    assert grown.root() == tree.root()


def test_stored_hashes_are_complete_subtrees(tree: MerkleTree) -> None:
    for level in range(11):
        for index in range(0, MAX_SIZE >> level, 7):
            want = ref_mth(index << level, (index + 1) << level)
            assert tree.hash_at(level, index) == want
            assert tree.hashes_at(level, index, index + 1) == want


sizes = st.integers(min_value=1, max_value=MAX_SIZE)


@st.composite
def index_and_size(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(sizes)
    return draw(st.integers(min_value=0, max_value=size - 1)), size


@st.composite
def two_sizes(draw: st.DrawFn) -> tuple[int, int]:
    size2 = draw(sizes)
    return draw(st.integers(min_value=1, max_value=size2)), size2


@settings(max_examples=300, deadline=None)
@given(index_and_size())
def test_inclusion_proof_matches_reference_and_verifies(
    tree: MerkleTree, case: tuple[int, int]
) -> None:
    index, size = case
    proof = tree.inclusion_proof(index, size)
    assert proof == ref_path(index, 0, size)
    verify_inclusion(leaf_hash(DATA[index]), index, size, proof, ref_mth(0, size))


@settings(max_examples=300, deadline=None)
@given(two_sizes())
def test_consistency_proof_matches_reference_and_verifies(
    tree: MerkleTree, case: tuple[int, int]
) -> None:
    size1, size2 = case
    proof = tree.consistency_proof(size1, size2)
    assert proof == ref_proof(size1, size2)
    verify_consistency(size1, size2, ref_mth(0, size1), ref_mth(0, size2), proof)


def test_edge_sizes_match_reference(tree: MerkleTree) -> None:
    # Powers of two and their neighbours, where the proof shapes change.
    edges = sorted({s for p in range(11) for s in (2**p - 1, 2**p, 2**p + 1) if 1 <= s <= 2000})
    for size2 in edges:
        for size1 in edges:
            if size1 <= size2:
                proof = tree.consistency_proof(size1, size2)
                assert proof == ref_proof(size1, size2)
                verify_consistency(size1, size2, tree.root(size1), tree.root(size2), proof)
        for index in (0, size2 // 2, size2 - 1):
            assert tree.inclusion_proof(index, size2) == ref_path(index, 0, size2)


# --- 3. Properties: a flipped bit fails --------------------------------------------


def _flip(proof: list[bytes], which: int, bit: int) -> list[bytes]:
    i = which % len(proof)
    h = bytearray(proof[i])
    h[bit // 8] ^= 1 << (bit % 8)
    return [*proof[:i], bytes(h), *proof[i + 1 :]]


@settings(max_examples=200, deadline=None)
@given(index_and_size(), st.integers(min_value=0), st.integers(min_value=0, max_value=255))
def test_flipped_inclusion_proof_bit_fails(
    tree: MerkleTree, case: tuple[int, int], which: int, bit: int
) -> None:
    index, size = case
    proof = tree.inclusion_proof(index, size)
    if not proof:  # the one-leaf tree: its proof is empty, the root is the leaf
        return
    bad = _flip(proof, which, bit)
    with pytest.raises(VerificationError):
        verify_inclusion(tree.hash_at(0, index), index, size, bad, tree.root(size))


@settings(max_examples=200, deadline=None)
@given(two_sizes(), st.integers(min_value=0), st.integers(min_value=0, max_value=255))
def test_flipped_consistency_proof_bit_fails(
    tree: MerkleTree, case: tuple[int, int], which: int, bit: int
) -> None:
    size1, size2 = case
    proof = tree.consistency_proof(size1, size2)
    if not proof:  # equal sizes
        return
    bad = _flip(proof, which, bit)
    with pytest.raises(VerificationError):
        verify_consistency(size1, size2, tree.root(size1), tree.root(size2), bad)


@settings(max_examples=100, deadline=None)
@given(two_sizes())
def test_wrong_roots_fail(tree: MerkleTree, case: tuple[int, int]) -> None:
    size1, size2 = case
    proof = tree.consistency_proof(size1, size2)
    other = leaf_hash(b"not a root")
    with pytest.raises(VerificationError):
        verify_consistency(size1, size2, other, tree.root(size2), proof)
    with pytest.raises(VerificationError):
        verify_consistency(size1, size2, tree.root(size1), other, proof)


# --- The generic hash-reader path and preconditions --------------------------------


def test_proofs_from_any_hash_store(tree: MerkleTree) -> None:
    stored = {
        (level, i): tree.hash_at(level, i) for level in range(11) for i in range(MAX_SIZE >> level)
    }

    def read_hash(level: int, index: int) -> bytes:
        return stored[(level, index)]

    assert root_from(read_hash, 1234) == tree.root(1234)
    assert inclusion_proof_from(read_hash, 1000, 1234) == tree.inclusion_proof(1000, 1234)
    assert consistency_proof_from(read_hash, 999, 1234) == tree.consistency_proof(999, 1234)


def test_tree_refuses_sizes_it_does_not_have(tree: MerkleTree) -> None:
    with pytest.raises(LogError, match="2000 leaves"):
        tree.root(MAX_SIZE + 1)
    with pytest.raises(LogError):
        tree.inclusion_proof(0, MAX_SIZE + 1)
    with pytest.raises(LogError):
        tree.consistency_proof(1, MAX_SIZE + 1)
    with pytest.raises(LogError):
        tree.hash_at(0, MAX_SIZE)
    with pytest.raises(LogError):
        tree.hash_at(11, 0)  # 2^11 > 2000: no complete subtree there


def test_proof_preconditions(tree: MerkleTree) -> None:
    with pytest.raises(ValueError, match="not inside"):
        tree.inclusion_proof(10, 10)
    with pytest.raises(ValueError, match="0 < size1"):
        tree.consistency_proof(0, 10)
    with pytest.raises(ValueError, match="0 < size1"):
        tree.consistency_proof(11, 10)
    assert tree.consistency_proof(10, 10) == []


def test_append_checks_hash_size() -> None:
    t = MerkleTree()
    with pytest.raises(ValueError, match="31 bytes"):
        t.append(b"x" * 31)
    with pytest.raises(ValueError, match="leaf hash 1 "):
        t.extend([b"a" * 32, b"b" * 33])
    assert t.size == 0 and t.root() == EMPTY_ROOT  # nothing half-appended


def test_level_bytes_is_a_copy() -> None:
    t = MerkleTree.from_leaf_hashes([leaf_hash(b"a"), leaf_hash(b"b")])
    level0 = t.level_bytes(0)
    t.append(leaf_hash(b"c"))  # no view pins the buffer
    assert level0 == leaf_hash(b"a") + leaf_hash(b"b")
    assert t.level_bytes(1) == node_hash(leaf_hash(b"a"), leaf_hash(b"b"))
    assert t.level_bytes(40) == b""


def test_verify_messages_say_got_and_want(tree: MerkleTree) -> None:
    proof = tree.inclusion_proof(3, 10)
    with pytest.raises(VerificationError, match="has 3 hashes, want 4"):
        verify_inclusion(tree.hash_at(0, 3), 3, 10, proof[:3], tree.root(10))
    with pytest.raises(VerificationError, match=f"want {EMPTY_ROOT.hex()}"):
        verify_inclusion(tree.hash_at(0, 3), 3, 10, proof, EMPTY_ROOT)
    with pytest.raises(VerificationError, match="proof hash 1 is 31 bytes, want 32"):
        verify_inclusion(tree.hash_at(0, 3), 3, 10, [proof[0], proof[1][:31], *proof[2:]], b"")
    with pytest.raises(VerificationError, match="meaningless"):
        verify_consistency(0, 10, EMPTY_ROOT, tree.root(10), [])
