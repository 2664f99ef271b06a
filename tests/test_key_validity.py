"""docs/protocol.md §1's key-validity rule, against all three verifiers.

A verifier that followed the old text ("any of the 8 low-order point
encodings") accepted `eeff…ff7f` (y = p + 1, the identity to a lax decoder)
with R = identity, S = 0: a universal forgery under plain OpenSSL. This test
enumerates every encoding the rule refuses (y ≥ p in both signs, the 8
small-order points in both signs) and checks that `builder.formats.ed25519`,
`tests/independent_verifier.py` and the site's `static/crypto.js` (in Node)
each refuse the universal signature under every one, while plain OpenSSL
(the `cryptography` package, no extra checks) accepts it for the keys that
decode: so the vectors are the real forgery, not a signature nobody accepts.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from builder.errors import SignatureError
from builder.formats import ed25519
from tests import independent_verifier as iv
from tests.conftest import REPO

P = 2**255 - 19
SIGN = 1 << 255
# The y of the 8 points of small order (x = 0 for y = 1 and y = p - 1).
SMALL_ORDER_Y = [
    1,
    P - 1,
    0,
    int.from_bytes(
        bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"), "little"
    ),
    int.from_bytes(
        bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), "little"
    ),
]
# R = B, the base point, and S = 1 ([S]B = R): refused by the key rules alone
# (R = the identity would be refused by the rule on R too, docs/protocol.md §1).
UNIVERSAL = bytes.fromhex("58" + "66" * 31) + (1).to_bytes(32, "little")
MESSAGE = b"any message at all"
# The published negative vectors (scripts/make_vectors.py): what a stranger's
# verifier is tested with, and what this test runs the project's three through.
NEGATIVE = json.loads(
    (REPO / "docs" / "vectors" / "negative" / "universal-forgery.json").read_text(encoding="utf-8")
)


def _encode(y: int, sign: int) -> bytes:
    return (y | (SIGN if sign else 0)).to_bytes(32, "little")


REFUSED = sorted(
    {_encode(y, s) for y in range(P, 2**255) for s in (0, 1)}
    | {_encode(y, s) for y in SMALL_ORDER_Y for s in (0, 1)}
)


def test_the_published_negative_vectors_are_exactly_these() -> None:
    assert sorted(bytes.fromhex(k["publicKeyHex"]) for k in NEGATIVE) == REFUSED


def test_the_rule_covers_38_non_canonical_and_every_small_order_encoding() -> None:
    assert len({k for k in REFUSED if int.from_bytes(k, "little") % SIGN >= P}) == 38
    small = [k for k in REFUSED if int.from_bytes(k, "little") % SIGN < P]
    assert all(iv.is_small_order(k) or iv._decode_point(k) is None for k in small)
    decodable = [k for k in small if iv._decode_point(k) is not None]
    assert len(decodable) == 8  # the 8 points; x = 0 with the sign bit set does not decode


def test_plain_openssl_accepts_the_forgery_so_the_vectors_are_real() -> None:
    accepted = []
    for key in (_encode(P + 1, 0), _encode(1, 0), _encode(0, 0)):
        try:
            Ed25519PublicKey.from_public_bytes(key).verify(UNIVERSAL, MESSAGE)
            accepted.append(key.hex())
        except (InvalidSignature, ValueError):
            pass
    assert _encode(P + 1, 0).hex() in accepted, accepted


@pytest.mark.parametrize("key", REFUSED, ids=lambda k: k.hex()[:4] + "…" + k.hex()[-4:])
def test_the_python_verifiers_refuse_every_encoding(key: bytes) -> None:
    with pytest.raises(SignatureError):
        ed25519.verify(key, MESSAGE, UNIVERSAL)
    with pytest.raises(iv.VerificationError):
        iv.ed25519_verify(key, UNIVERSAL, MESSAGE, "test")


_NODE = """
import { ed25519Verify } from %s;
const keys = JSON.parse(process.argv[1]);
const sig = new Uint8Array(64); sig.fill(0x66, 1, 32); sig[0] = 0x58; sig[32] = 1;
const message = new TextEncoder().encode(%s);
const out = [];
for (const hex of keys) {
  const key = Uint8Array.from(hex.match(/../g).map((b) => parseInt(b, 16)));
  try { out.push((await ed25519Verify(key, message, sig)) ? "accepted" : "rejected"); }
  catch (e) { out.push("refused"); }
}
console.log(JSON.stringify(out));
"""


def test_the_sites_verifier_refuses_every_encoding_in_node() -> None:
    node = shutil.which("node")
    assert node, "Node.js runs the site's verifier here (.ci/run installs it)"
    module = (REPO / "templates" / "static" / "crypto.js").as_uri()
    script = _NODE % (json.dumps(module), json.dumps(MESSAGE.decode()))
    result = subprocess.run(
        [node, "--input-type=module", "-e", script, json.dumps([k.hex() for k in REFUSED])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    verdicts = json.loads(result.stdout)
    assert len(verdicts) == len(REFUSED)
    assert set(verdicts) == {"refused"}, dict(
        zip((k.hex() for k in REFUSED), verdicts, strict=True)
    )
