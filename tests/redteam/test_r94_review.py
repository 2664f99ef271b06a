"""Review r94: the rule on R (docs/protocol.md §1 rule 4) and the fragments LRU.

Each test here failed on the reviewed tree (fa648b5) and names the defect it
showed. What was done: tests/interop/verify.go wraps Go's verifier with rule
4 and docs/verifiers.md says a Go verifier must (the review's test of Go's
note.Open is tests/test_interop.py's test_go_sumdb_with_the_rule_on_r_…);
the key-rule tests sign with R = B, S = 1, which rule 4 does not refuse;
docs/protocol.md describes the universal signature the vectors hold and the
dream-r-* cases; `check` on a logged dream a rule added since refuses names
`recheck` and `erase` (and a signature error that is no edit no longer says
the dream was changed after signing); the fragments memo (Units.prefetch) is
bounded in bytes (tests/test_site_build.py's
test_list_pages_read_each_fragment_row_once_and_hold_few holds it to it;
the review's own test of the old row count is gone with it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.formats import dream as dreamfmt
from builder.formats import ed25519
from builder.formats.b64 import b64url_encode
from builder.formats.note import parse_private_key
from tests.conftest import REPO, draft
from tests.pools import SEEDS, make_pool

GOPATH = "/usr/share/gocode"


def _secret_scalar(seed: bytes) -> int:
    h = hashlib.sha512(seed).digest()
    return (int.from_bytes(h[:32], "little") & ~7 & ((1 << 254) - 1)) | (1 << 254)


def _identity_r(seed: bytes, message: bytes) -> bytes:
    """R = the identity 01 00…00, S = k·s: the bare equation holds (OpenSSL,
    Go's crypto/ed25519 and WebCrypto accept it); §1 rule 4 refuses it."""
    public = ed25519.public_key_of(seed)
    r = (1).to_bytes(32, "little")
    k = int.from_bytes(hashlib.sha512(r + public + message).digest(), "little") % ed25519.L
    return r + (k * _secret_scalar(seed) % ed25519.L).to_bytes(32, "little")


# --------------------------------------------------------------------------
# 2. docs/protocol.md's "Testing another implementation" still describes the
#    old universal signature.


def test_protocol_md_describes_the_universal_signature_the_vectors_hold() -> None:
    """T05: the commit changed the universal signature of
    negative/universal-forgery.json from (R = 01 00…00, S = 0) to (R = B,
    S = 1), and docs/vectors/README.md says so, but docs/protocol.md's
    "Testing another implementation" still says "signed with the universal
    signature R = `01` followed by 31 zero bytes, S = 0". A stranger writing
    a verifier from protocol.md and the vectors finds another sig.value than
    the one described (and, from protocol.md's text, would expect these
    vectors to be refused by rule 4 as well as by the key rules)."""
    vectors = json.loads((REPO / "docs/vectors/vectors.json").read_text(encoding="utf-8"))
    held = vectors["negative"]["universalSignatureHex"]
    assert held.startswith("5866"), held[:8]
    section = (REPO / "docs/protocol.md").read_text(encoding="utf-8")
    section = section[section.index("## Testing another implementation") :]
    assert "31 zero bytes, S = 0" not in section


# --------------------------------------------------------------------------
# 3. The key-rule tests' signature is now refused by rule 4 alone.


SMALL_ORDER_KEYS = [
    bytes.fromhex(h)
    for h in (
        "0100000000000000000000000000000000000000000000000000000000000000",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    )
]


def test_the_key_rule_tests_still_fail_without_the_key_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T05: test_ed25519.py::test_small_order_and_non_canonical_keys_refused,
    redteam/test_input.py::test_small_order_public_keys_are_refused (which
    matches "small order", also the R rule's message) and the 48-key loop of
    tests/browser/test_verify_browser.py::test_the_browser_client_over_every_protocol_vector
    (and small_order_dream) still sign with R = the identity, S = 0. Rule 4
    now refuses that signature under any key, so each passes with the key
    rule taken out of the verifier (checked here for the Python one, and by
    hand for crypto.js: the browser's small-order step-4 test passes with
    checkPublicKey removed from ed25519Verify). THREATS.md T05 still cites
    them as the key rule's tests. They should use the R = B, S = 1
    signature test_key_validity.py switched to."""
    monkeypatch.setattr(ed25519, "check_public_key", lambda key: None)
    from tests.test_ed25519 import UNIVERSAL

    accepted = 0
    for key in SMALL_ORDER_KEYS:
        try:
            ed25519.verify(key, b"any message", UNIVERSAL)
            accepted += 1
        except Exception:
            pass
    assert accepted > 0, (
        "with no key rule, the key-rule tests' signature is still refused "
        "(by the rule on R): those tests no longer test the key rule"
    )


# --------------------------------------------------------------------------
# 4. `dreampool check` on a pool whose log holds a dream rule 4 now refuses.


def pool_logging_an_identity_r_dream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A pool whose log holds a dream signed with R = the identity, S = k·s,
    admitted by the verifier as it was before rule 4, then built with rule 4
    (the build goes on: §3.1)."""
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    tp.add("ada", 1)
    strict = ed25519.verify

    def before_rule_4(public_key: bytes, message: bytes, signature: bytes) -> None:
        ed25519.check_public_key(public_key)
        if int.from_bytes(signature[32:], "little") >= ed25519.L:
            raise ed25519.SignatureError("S >= L")
        from cryptography.exceptions import InvalidSignature

        try:
            ed25519._public(public_key).verify(signature, message)
        except InvalidSignature:
            raise ed25519.SignatureError("signature does not verify") from None

    body = dreamfmt.sign(draft(title="Signed with R the identity"), SEEDS["ada"])
    body["sig"]["value"] = b64url_encode(_identity_r(SEEDS["ada"], dreamfmt.signed_bytes(body)))
    monkeypatch.setattr(ed25519, "verify", before_rule_4)
    src = tmp_path / "crafted.json"
    src.write_text(json.dumps(body), encoding="utf-8")
    from builder.content import pool

    pool.submit(tp.content, [src])
    buildmod.build(tp.content, tmp_path / "site", signer=signer)
    monkeypatch.setattr(ed25519, "verify", strict)
    buildmod.build(tp.content, tmp_path / "site2", signer=signer)  # goes on (§3.1)
    return tp


def test_check_of_a_pool_whose_logged_dream_rule_4_refuses_gives_the_right_fix(
    tmp_path: Path, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T05 (docs/protocol.md §3.1): a pool built before the upgrade may log a
    dream signed with R = the identity, S = k·s (the old verifiers admitted
    it). After the upgrade `build` goes on (the commitment holds) and
    `recheck` lists it as a candidate for erasure, but `dreampool check`
    (the whole pool, docs/operators.md "Building locally") fails the pool
    with two problems whose hints are wrong for it: "the dream was changed
    after signing, or signed with another key; sign the draft again" and
    "restore the file or its key file from git history … a logged dream must
    stay publishable". Neither restoring nor re-signing helps; the fix is
    `recheck` and `erase`."""
    tp = pool_logging_an_identity_r_dream(tmp_path, monkeypatch)
    rechecked = run("recheck", "--content", tp.content)
    assert rechecked.code == 1 and "R is a point of small order" in rechecked.out + rechecked.err
    checked = run("check", "--content", tp.content)
    said = checked.out + checked.err
    assert "R is a point of small order" in said
    assert "changed after signing" not in said, said
    assert "dreampool recheck" in said and "dreampool erase" in said, said
