"""Ed25519 (RFC 8032) with the refusals docs/protocol.md §1 adds.

Signing and the curve arithmetic come from ``cryptography`` (OpenSSL). Three
refusals are added on top of its RFC 8032 §5.1.7 verification, because plain
OpenSSL does not make them all:

* a public key of small order (order 1, 2, 4 or 8): with such a key one
  signature verifies every message. The small-order points have exactly five
  y coordinates (1, p-1, 0 and the two order-8 values); a key is refused when
  its y (sign bit cleared) is one of them, whatever its sign bit, and also when
  y >= p (a non-canonical encoding); one that is no point of the curve fails
  the equation, and is then named so, not left to read as an edit;
* a non-canonical S (S >= L), which would make signatures malleable;
* an R (the signature's first half) that is non-canonical or of small order,
  by the same test as a key: an author can sign with R = the identity and
  S = k·s, which OpenSSL and WebCrypto in Chromium accept and libsodium
  refuses, or write the identity as y = p + 1, which a verifier that reduces
  y mod p accepts. Refused here, every verifier agrees (docs/protocol.md §1).

``verify`` raises :class:`SignatureError` and returns ``None``; it never
returns a bool a caller could forget to check.
"""

from __future__ import annotations

import functools

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from builder.errors import SignatureError

PUBLIC_KEY_SIZE = 32
SEED_SIZE = 32
SIGNATURE_SIZE = 64

# RFC 8032 §5.1: the field prime p and the group order L.
P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493

# y coordinates of the 8 points of small order (RFC 7748 / libsodium's list):
# identity (y=1), order 2 (y=-1), order 4 (y=0), order 8 (y=±y8).
_Y8 = int.from_bytes(
    bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), "little"
)
SMALL_ORDER_Y = frozenset({1, P - 1, 0, _Y8, P - _Y8})


def check_public_key(public_key: bytes, *, on_curve: bool = False) -> None:
    """Refuse a public key that is the wrong size, non-canonical or of small order;
    with ``on_curve``, also one that is no point of the curve (rule 3), which
    costs two modular exponentiations: asked of a vkey, parsed once, not of
    every dream's key (:func:`verify` names it when the equation fails)."""
    if len(public_key) != PUBLIC_KEY_SIZE:
        raise SignatureError(
            f"public key is {len(public_key)} bytes, want {PUBLIC_KEY_SIZE}",
            hint="sig.publicKey is the b64url of the raw 32-byte Ed25519 key",
        )
    y = int.from_bytes(public_key, "little") & ((1 << 255) - 1)
    if y >= P:
        raise SignatureError("public key is not a canonical point encoding (y >= p)")
    if y in SMALL_ORDER_Y:
        raise SignatureError(
            "public key is a point of small order, with which one signature verifies "
            "every message (docs/protocol.md §1)",
            hint="make a real key with `dreampool keygen`",
        )
    if on_curve and not _decodes(public_key):
        raise _not_on_curve()


_D = -121665 * pow(121666, P - 2, P) % P


def _not_on_curve() -> SignatureError:
    return SignatureError(
        "public key is not a point of the curve (docs/protocol.md §1, RFC 8032 §5.1.3)",
        hint="make a real key with `dreampool keygen`",
    )


def _decodes(public_key: bytes) -> bool:
    """RFC 8032 §5.1.3 steps 2–4 for a canonical encoding: x² = (y² − 1)/(d·y² + 1)
    has a square root mod p (Euler's criterion), and x = 0 comes with sign 0."""
    n = int.from_bytes(public_key, "little")
    y, sign = n & ((1 << 255) - 1), n >> 255
    x2 = (y * y - 1) * pow(_D * y * y + 1, P - 2, P) % P
    if x2 == 0:
        return sign == 0
    return pow(x2, (P - 1) // 2, P) == 1


def verify(public_key: bytes, message: bytes, signature: bytes) -> None:
    """Verify an Ed25519 signature; raise :class:`SignatureError` if it does not hold."""
    check_public_key(public_key)
    if len(signature) != SIGNATURE_SIZE:
        raise SignatureError(f"signature is {len(signature)} bytes, want {SIGNATURE_SIZE}")
    # docs/protocol.md §1: R canonical and not of small order, as a key.
    r = int.from_bytes(signature[:32], "little") & ((1 << 255) - 1)
    if r >= P:
        raise SignatureError("signature is not canonical (its R has y >= p)")
    if r in SMALL_ORDER_Y:
        raise SignatureError("signature's R is a point of small order (docs/protocol.md §1)")
    # RFC 8032 §5.1.7 step 1: S must be in [0, L).
    if int.from_bytes(signature[32:], "little") >= L:
        raise SignatureError("signature is not canonical (S >= L)")
    try:
        _public(public_key).verify(signature, message)
    except InvalidSignature:
        # Rule 3, a key that is no point of the curve, fails the equation in
        # every library; named as such, not as an edit. Asked only here: two
        # modular exponentiations cost twice a verification (review r96).
        if not _decodes(public_key):
            raise _not_on_curve() from None
        raise SignatureError("signature does not verify") from None


@functools.lru_cache(maxsize=1024)
def _public(public_key: bytes) -> Ed25519PublicKey:
    """The key object of a checked 32-byte public key, kept for the next
    dream by the same author (an author signs many; loading a key was an
    eighth of a verification). The object holds only the public key."""
    return Ed25519PublicKey.from_public_bytes(public_key)


def public_key_of(seed: bytes) -> bytes:
    """The 32-byte public key of a 32-byte private seed (RFC 8032 §5.1.5)."""
    key = _private(seed)
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def sign(seed: bytes, message: bytes) -> bytes:
    """The 64-byte Ed25519 signature of message under the 32-byte seed (RFC 8032 §5.1.6)."""
    return _private(seed).sign(message)


def generate_seed() -> bytes:
    """A fresh random 32-byte private seed."""
    key = Ed25519PrivateKey.generate()
    return key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def _private(seed: bytes) -> Ed25519PrivateKey:
    if len(seed) != SEED_SIZE:
        raise ValueError(f"Ed25519 seed is {len(seed)} bytes, want {SEED_SIZE}")
    return Ed25519PrivateKey.from_private_bytes(seed)
