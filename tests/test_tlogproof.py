"""tlog-proof files (builder.formats.tlogproof) against c2sp.org/tlog-proof@v1.

The worked example is the RFC 6962 test tree (transparency-dev/merkle
testonly/constants.go, see tests/vectors/README.md): leaves "", 00, 10 give
the size-3 root aeb6bcfe…; a naive RFC 6962 computation checks that the proof
in the file leads from leaf 2 to that root.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import DreampoolError
from builder.formats.checkpoint import Checkpoint, format_checkpoint, sign_checkpoint
from builder.formats.note import Signer
from builder.formats.tlogproof import (
    MAX_EXTRA_SIZE,
    MAX_PROOF_HASHES,
    TlogProof,
    TlogProofError,
    format_tlog_proof,
    parse_tlog_proof,
)


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _leaf(data: bytes) -> bytes:
    return _h(b"\x00" + data)  # RFC 6962 §2.1: SHA-256(0x00 || data)


def _node(left: bytes, right: bytes) -> bytes:
    return _h(b"\x01" + left + right)  # SHA-256(0x01 || left || right)


ORIGIN = "example.org/dreams"
LOG = Signer.from_seed(ORIGIN, bytes([3]) * 32)
LEAVES = [b"", b"\x00", b"\x10"]
SUBTREE_01 = _node(_leaf(LEAVES[0]), _leaf(LEAVES[1]))
ROOT_3 = _node(SUBTREE_01, _leaf(LEAVES[2]))
CHECKPOINT = sign_checkpoint(Checkpoint(ORIGIN, 3, ROOT_3), LOG)
PROOF = TlogProof(2, LEAVES[2], (SUBTREE_01,), CHECKPOINT)


def test_worked_example_layout() -> None:
    assert ROOT_3.hex() == "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"
    data = format_tlog_proof(PROOF)
    expected = (
        b"c2sp.org/tlog-proof@v1\n"
        b"extra EA==\n"
        b"index 2\n"
        b"+sVCA+fMaWzw38tCySodnbr3CtnmIfS9jZhmLwDjwSU=\n"
        b"\n"
    ) + CHECKPOINT
    assert data == expected
    assert CHECKPOINT.startswith(format_checkpoint(Checkpoint(ORIGIN, 3, ROOT_3)).encode())
    parsed = parse_tlog_proof(data)
    assert parsed == PROOF
    # Naive check of the proof's meaning: sibling first, up to the root's child.
    assert parsed.extra is not None
    assert _node(parsed.proof[0], _leaf(parsed.extra)) == ROOT_3


def test_round_trips() -> None:
    single = sign_checkpoint(Checkpoint(ORIGIN, 1, _leaf(b"x")), LOG)
    for proof in (
        PROOF,
        TlogProof(2, None, (SUBTREE_01,), CHECKPOINT),
        TlogProof(0, b"x", (), single),
        TlogProof(0, None, (), single),
        TlogProof(5, b"\xff" * MAX_EXTRA_SIZE, (b"\x00" * 32,) * MAX_PROOF_HASHES, CHECKPOINT),
    ):
        data = format_tlog_proof(proof)
        assert parse_tlog_proof(data) == proof
        assert format_tlog_proof(parse_tlog_proof(data)) == data


def test_no_extra_line_layout() -> None:
    data = format_tlog_proof(TlogProof(0, None, (), CHECKPOINT))
    assert data == b"c2sp.org/tlog-proof@v1\nindex 0\n\n" + CHECKPOINT


_HASH = base64.b64encode(SUBTREE_01)
_TAIL = b"\n\n" + CHECKPOINT


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"c2sp.org/tlog-proof@v2\nindex 2\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1 \nindex 2\n" + _HASH + _TAIL,
        b"C2SP.org/tlog-proof@v1\nindex 2\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\r\nindex 2\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex 2\r\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\n" + _HASH + _TAIL,  # no index line
        b"c2sp.org/tlog-proof@v1\nindex 02\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex -2\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex +2\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex  2\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex 9223372036854775808\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex \xd9\xa3\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nextra \nindex 2\n" + _HASH + _TAIL,  # empty extra
        b"c2sp.org/tlog-proof@v1\nextra EB==\nindex 2\n" + _HASH + _TAIL,  # trailing bits
        b"c2sp.org/tlog-proof@v1\nextra EA\nindex 2\n" + _HASH + _TAIL,  # unpadded
        b"c2sp.org/tlog-proof@v1\nextra  EA==\nindex 2\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nextra\nindex 2\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex 2\nextra EA==\n" + _HASH + _TAIL,  # out of order
        b"c2sp.org/tlog-proof@v1\nextra EA==\nextra EA==\nindex 2\n" + _HASH + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + _HASH[:-1] + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + base64.b64encode(bytes(31)) + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + base64.b64encode(bytes(33)) + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + _HASH + b" " + _TAIL,
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + _HASH,  # ends without checkpoint
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + _HASH + b"\n",
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + _HASH + b"\n\n",  # empty checkpoint
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + _HASH + b"\n\ngarbage\n",
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + _HASH + b"\n\n\n" + CHECKPOINT,
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + _HASH + _TAIL + b"trailing\n",
        b"c2sp.org/tlog-proof@v1\nindex 2\n" + (_HASH + b"\n") * 64 + b"\n" + CHECKPOINT,
    ],
)
def test_parse_refuses(data: bytes) -> None:
    with pytest.raises(TlogProofError):
        parse_tlog_proof(data)


def test_errors_name_the_line() -> None:
    with pytest.raises(TlogProofError, match="line 3: proof hash"):
        parse_tlog_proof(b"c2sp.org/tlog-proof@v1\nindex 2\nnope\n\n" + CHECKPOINT)
    with pytest.raises(TlogProofError, match="checkpoint: "):
        parse_tlog_proof(b"c2sp.org/tlog-proof@v1\nindex 2\n\nx\n7\n\n- a b\n")


def test_constructor_refuses() -> None:
    for args in (
        (-1, None, (), CHECKPOINT),
        (1 << 63, None, (), CHECKPOINT),
        (True, None, (), CHECKPOINT),
        (0, b"", (), CHECKPOINT),
        (0, b"x" * (MAX_EXTRA_SIZE + 1), (), CHECKPOINT),
        (0, None, (bytes(31),), CHECKPOINT),
        (0, None, (bytes(32),) * (MAX_PROOF_HASHES + 1), CHECKPOINT),
        (0, None, (), b""),
        (0, None, (), format_checkpoint(Checkpoint(ORIGIN, 3, ROOT_3)).encode()),
    ):
        with pytest.raises(TlogProofError):
            TlogProof(*args)


@settings(max_examples=150, deadline=None)
@given(
    index=st.integers(0, (1 << 63) - 1),
    extra=st.one_of(st.none(), st.binary(min_size=1, max_size=300)),
    proof=st.lists(st.binary(min_size=32, max_size=32), max_size=MAX_PROOF_HASHES),
)
def test_format_parse_round_trip(index: int, extra: bytes | None, proof: list[bytes]) -> None:
    p = TlogProof(index, extra, tuple(proof), CHECKPOINT)
    assert parse_tlog_proof(format_tlog_proof(p)) == p


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_parse_arbitrary_bytes_only_raises_dreampool_errors(data: bytes) -> None:
    with contextlib.suppress(DreampoolError):
        parse_tlog_proof(data)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_parse_mutated_proof_only_raises_dreampool_errors(data: st.DataObject) -> None:
    raw = bytearray(format_tlog_proof(PROOF))
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] ^= data.draw(st.integers(1, 255))
    try:
        parsed = parse_tlog_proof(bytes(raw))
    except DreampoolError:
        return
    assert parsed != PROOF
