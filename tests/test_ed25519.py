"""Ed25519: RFC 8032 §7.1 vectors and the protocol's extra refusals."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder.errors import SignatureError
from builder.formats import ed25519
from tests import independent_verifier as iv
from tests.conftest import vector_files

(RFC8032_FILE,) = vector_files("ed25519")
RFC8032 = json.loads(RFC8032_FILE.read_text(encoding="utf-8"))["vectors"]

# The 8 low-order point encodings (canonical) and two non-canonical spellings.
SMALL_ORDER = [
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0000000000000000000000000000000000000000000000000000000000000080",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
]
NON_CANONICAL = [
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p + 1 (identity)
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",  # y = p
]


@pytest.mark.parametrize("vec", RFC8032, ids=[v["name"] for v in RFC8032])
def test_rfc8032_vectors(vec: dict[str, str]) -> None:
    seed = bytes.fromhex(vec["secretKey"])
    message = bytes.fromhex(vec["message"])
    assert ed25519.public_key_of(seed).hex() == vec["publicKey"]
    assert ed25519.sign(seed, message).hex() == vec["signature"]
    ed25519.verify(bytes.fromhex(vec["publicKey"]), message, bytes.fromhex(vec["signature"]))


def test_three_rfc_vectors() -> None:
    assert [v["name"] for v in RFC8032] == ["TEST 1", "TEST 2", "TEST 3"]


# R = B, the base point, and S = 1 ([S]B = R): with a key of small order it
# verifies every message whose [k]A is the identity; R is of prime order, so
# only the key rule can refuse it (review r94: with R = the identity, the rule
# on R refused it too, and these tests passed with the key rule taken out).
UNIVERSAL = bytes.fromhex("58" + "66" * 31) + (1).to_bytes(32, "little")


@pytest.mark.parametrize("key", SMALL_ORDER + NON_CANONICAL)
def test_small_order_and_non_canonical_keys_refused(key: str) -> None:
    # With a small-order key A, R = [S]B verifies any message whose [k]A is the
    # identity under a plain cofactorless check; it must be refused here, by
    # the key rule (R = B is of prime order: rule 4 on R does not refuse it).
    sig = UNIVERSAL
    with pytest.raises(SignatureError, match="public key"):
        ed25519.verify(bytes.fromhex(key), b"any message", sig)


def test_non_canonical_s_refused() -> None:
    vec = RFC8032[0]
    sig = bytes.fromhex(vec["signature"])
    s = int.from_bytes(sig[32:], "little") + ed25519.L  # same point, malleated S
    malleated = sig[:32] + s.to_bytes(32, "little")
    with pytest.raises(SignatureError, match="S >= L"):
        ed25519.verify(bytes.fromhex(vec["publicKey"]), b"", malleated)


@pytest.mark.parametrize("size", [0, 31, 33])
def test_wrong_key_size(size: int) -> None:
    with pytest.raises(SignatureError, match="want 32"):
        ed25519.verify(bytes(size), b"", bytes(64))


def test_wrong_signature_size() -> None:
    pk = bytes.fromhex(RFC8032[0]["publicKey"])
    with pytest.raises(SignatureError, match="want 64"):
        ed25519.verify(pk, b"", bytes(63))


SEED = bytes.fromhex(RFC8032[1]["secretKey"])
PUB = ed25519.public_key_of(SEED)


@given(st.binary(max_size=64), st.data())
def test_flipping_any_signature_bit_fails(message: bytes, data: st.DataObject) -> None:
    sig = bytearray(ed25519.sign(SEED, message))
    ed25519.verify(PUB, message, bytes(sig))
    bit = data.draw(st.integers(0, len(sig) * 8 - 1))
    sig[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(SignatureError):
        ed25519.verify(PUB, message, bytes(sig))


@given(st.binary(min_size=1, max_size=64), st.data())
def test_flipping_any_message_bit_fails(message: bytes, data: st.DataObject) -> None:
    sig = ed25519.sign(SEED, message)
    bit = data.draw(st.integers(0, len(message) * 8 - 1))
    changed = bytearray(message)
    changed[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(SignatureError):
        ed25519.verify(PUB, bytes(changed), sig)


def test_a_signature_whose_r_is_small_order_or_non_canonical_is_refused() -> None:
    """T05 (review r93): R = the identity and S = k·s verify by the bare
    equation under an honest key (OpenSSL and WebCrypto in Chromium accept
    it, libsodium refuses it), and any R written with y >= p is one a lax
    decoder reduces. docs/protocol.md §1's rule 4 refuses both, before the
    library: every R of small order in either sign, every y >= p."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    seed = bytes(range(32))
    public, message = ed25519.public_key_of(seed), b"a message"
    h = hashlib.sha512(seed).digest()
    s = (int.from_bytes(h[:32], "little") & ~7 & ((1 << 254) - 1)) | (1 << 254)
    identity = (1).to_bytes(32, "little")
    k = int.from_bytes(hashlib.sha512(identity + public + message).digest(), "little")
    forged = identity + (k % ed25519.L * s % ed25519.L).to_bytes(32, "little")
    Ed25519PublicKey.from_public_bytes(public).verify(forged, message)  # OpenSSL: fine
    with pytest.raises(SignatureError, match="R is a point of small order"):
        ed25519.verify(public, message, forged)
    with pytest.raises(iv.VerificationError):
        iv.ed25519_verify(public, forged, message, "test")
    good = ed25519.sign(seed, message)
    for y in sorted(ed25519.SMALL_ORDER_Y) + list(range(ed25519.P, 2**255)):
        for sign in (0, 1):
            r = (y | sign << 255).to_bytes(32, "little")
            with pytest.raises(SignatureError, match="R"):
                ed25519.verify(public, message, r + good[32:])
    ed25519.verify(public, message, good)
