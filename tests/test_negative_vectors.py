"""The project's verifiers over every vector: each positive one passes, each negative one fails.

docs/vectors/negative/ (written by scripts/make_vectors.py) holds inputs a
verifier MUST refuse: a record with an unknown member, a dream with an
unknown field whose signature verifies, and dreams signed with the universal
signature (R = B, S = 1) under every public key docs/protocol.md §1
refuses. Both ``builder.readers.lightclient`` and ``tests/independent_verifier.py``
run over each: if either accepts a negative vector, or refuses a positive
one, this fails. Each logged case must also pass the steps before the one
that refuses it, so it is refused for the reason it names.

docs/vectors/large/ is a second positive log past one tile (a full level-0
tile, a level-1 tile, a partial tile kept after its full tile): the
independent verifier recomputes every tile, and a changed byte in any one is
refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from builder.errors import InputError, SignatureError, VerificationError
from builder.formats import dream as dreamfmt
from builder.formats import merkle, statement, tlogproof
from builder.formats.ed25519 import public_key_of
from builder.readers import lightclient
from tests import independent_verifier as iv

VECTORS = Path(__file__).resolve().parent.parent / "docs" / "vectors"
NEGATIVE = VECTORS / "negative"
VALUES: dict[str, Any] = json.loads((VECTORS / "vectors.json").read_text(encoding="utf-8"))
CASES = VALUES["negative"]["cases"]
FORGERIES = json.loads((NEGATIVE / "universal-forgery.json").read_text(encoding="utf-8"))


def independent_record(record: bytes, proof: bytes, policy: bytes) -> str:
    """tests/independent_verifier.py's checks of one proof and its record; the dream id."""
    trust = iv.parse_policy(policy, "policy")
    extra, index, hashes, cp_bytes = iv.parse_tlog_proof(proof, "proof")
    cp = iv.verify_checkpoint(cp_bytes, trust, "proof checkpoint")
    assert extra is not None
    iv.verify_inclusion(index, cp.size, iv.leaf_hash(extra), hashes, cp.root)
    rec = iv.load_json_strict(record, "record")
    iv._keys(rec, {"format", "id", "index", "salt", "dream"}, set(), "record")
    iv._check(rec["format"] == "dreampool-record/v1", "record: format")
    iv._check(type(rec["index"]) is int and rec["index"] == index, "record: index")
    commitment = iv.sha256(iv.jcs({"dream": rec["dream"], "salt": rec["salt"]})).hex()
    leaf = iv.jcs({"v": 1, "kind": "dream", "id": rec["id"], "commitment": commitment})
    iv._check(leaf == extra, "record: leaf data")
    iv.check_dream(rec["dream"], "record: dream")
    got_id, _ = iv.verify_dream_signature(rec["dream"], "record: dream")
    iv._check(got_id == rec["id"], "record: id")
    return got_id


def test_there_are_negative_vectors() -> None:
    assert {c["name"] for c in CASES} >= {
        "record-unknown-field",
        "dream-unknown-field",
        "key-non-canonical",
        "key-identity",
    }
    assert len(FORGERIES) == 48 == len(VALUES["negative"]["refusedPublicKeysHex"])


@pytest.mark.parametrize("d", VALUES["dreams"], ids=lambda d: d["id"])
def test_both_verifiers_accept_every_positive_vector(d: dict[str, Any]) -> None:
    site = VECTORS / "site"
    record = (site / "dreams" / d["id"] / "record.json").read_bytes()
    proof = (site / "dreams" / d["id"] / "proof.tlog-proof").read_bytes()
    policy = (site / "log" / "policy").read_bytes()
    assert lightclient.verify_proof(proof, record, policy).id == d["id"]
    assert independent_record(record, proof, policy) == d["id"]
    assert iv.verify_site(site).records == len(VALUES["dreams"])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_both_verifiers_refuse_every_logged_negative_case(case: dict[str, Any]) -> None:
    record = (NEGATIVE / case["name"] / "record.json").read_bytes()
    proof = (NEGATIVE / case["name"] / "proof.tlog-proof").read_bytes()
    policy = (NEGATIVE / "log" / "policy").read_bytes()
    steps: list[lightclient.Step] = []
    with pytest.raises(VerificationError) as refused:
        lightclient.verify_proof(proof, record, policy, on_step=steps.append)
    assert refused.value.step == case["refusedAtStep"], refused.value.message
    assert [s.ok for s in steps] == [True] * (case["refusedAtStep"] - 1) + [False]
    with pytest.raises(iv.VerificationError):
        independent_record(record, proof, policy)


@pytest.mark.parametrize("forgery", FORGERIES, ids=lambda f: f["publicKeyHex"][:8])
def test_both_verifiers_refuse_every_universal_forgery(forgery: dict[str, Any]) -> None:
    dream = forgery["dream"]
    data = json.dumps(dream).encode()
    with pytest.raises(SignatureError):  # the key, not the schema
        dreamfmt.parse(data, "forgery.json")
    iv.check_dream(dream, "forgery")  # well formed: only the key is wrong
    with pytest.raises(iv.VerificationError):
        iv.verify_dream_signature(dream, "forgery")


def test_the_forgeries_marked_so_verify_without_the_key_rules() -> None:
    """A stranger's audit (23rd session): on one message, OpenSSL's bare
    equation accepted the universal signature under 5 of the 48 refused keys,
    so a verifier with no small-order rule passed every vector. Each dream
    now verifies that way where any message can (the identity and the other
    points of small order), and only the key rules refuse it."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    sig = bytes.fromhex(VALUES["negative"]["universalSignatureHex"])
    forged = set()
    for f in FORGERIES:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(f["publicKeyHex"]))
        try:
            key.verify(sig, dreamfmt.signed_bytes(f["dream"]))
        except InvalidSignature:
            assert not f["verifiesWithoutKeyRules"], f["publicKeyHex"]
            continue
        assert f["verifiesWithoutKeyRules"], f["publicKeyHex"]
        forged.add(f["publicKeyHex"])
    assert forged == set(VALUES["negative"]["forgedWithoutKeyRulesHex"])
    # The 8 points of small order have 5 y values (1, p - 1, 0 and two of
    # order 8); with y = p and y = p + 1 (0 and 1 again), each under both sign
    # bits: 14 encodings, and every one forges.
    assert len(forged) == 14


@pytest.mark.parametrize("name", ["dream-bad-signature", "checkpoint-bad-signature"])
def test_a_valid_key_whose_signature_fails_is_a_negative_case(name: str) -> None:
    """A stranger's audit (23rd session): every negative case was refused by a
    key, field or Unicode rule, so a verifier that never ran the Ed25519
    equation passed them all. These two are refused by the equation alone."""
    (case,) = [c for c in CASES if c["name"] == name]
    assert case["refusedAtStep"] == (4 if name.startswith("dream") else 1)


ACCEPTED = json.loads((VECTORS / "accepted.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", ACCEPTED, ids=lambda c: c["name"])
def test_both_verifiers_accept_every_accepted_dream(case: dict[str, Any]) -> None:
    """A stranger's audit (23rd session): no vector had a dream without
    consent.derivatives, an anonymous one, or the sequences §1.1 allows, so a
    verifier that refused them (or added derivatives: false before checking
    the signature) passed every vector. The pool's parser takes each, with
    its id; so does the independent verifier, but for a code point new in
    Unicode 15.0, which it judges by the running Python's Unicode data."""
    dream = case["dream"]
    data = json.dumps(dream, ensure_ascii=False).encode()
    parsed = dreamfmt.parse(data, case["name"])
    assert parsed.id == dreamfmt.dream_id(base64.urlsafe_b64decode(dream["sig"]["value"] + "=="))
    if case["name"] == "new-in-15" and unicodedata_version() < (15, 0):
        return
    iv.check_dream(dream, case["name"])
    got_id, _ = iv.verify_dream_signature(dream, case["name"])
    assert got_id == parsed.id


def unicodedata_version() -> tuple[int, ...]:
    import unicodedata

    return tuple(int(x) for x in unicodedata.unidata_version.split("."))


LARGE = VECTORS / "large"


def test_the_large_log_has_every_kind_of_tile() -> None:
    g = VALUES["large"]
    assert g["size"] >= 256 + 1
    tiles = set(g["tiles"])
    assert "log/tile/0/000" in tiles  # a full level-0 tile
    assert any(t.startswith("log/tile/1/") for t in tiles)  # a level-1 tile
    first = g["checkpoints"][0]["size"]
    assert first < 256 and f"log/tile/0/000.p/{first}" in tiles  # kept after 0/000 exists
    assert any(d["index"] > 256 for d in g["dreams"])
    on_disk = {
        p.relative_to(LARGE).as_posix() for p in (LARGE / "log" / "tile").rglob("*") if p.is_file()
    }
    assert on_disk == tiles


def test_the_independent_verifier_recomputes_every_tile_of_the_large_log() -> None:
    report = iv.verify_site(LARGE)
    g = VALUES["large"]
    kept = [d for d in g["dreams"] if not d["erased"]]
    assert (report.size, report.leaves, report.records) == (g["size"], g["size"], len(kept))
    tiles = [t for t in g["tiles"] if "/entries/" not in t]
    assert (report.tiles, report.entry_bundles) == (len(tiles), len(g["tiles"]) - len(tiles))
    assert report.published_sizes == [c["size"] for c in g["checkpoints"]]
    assert report.consistency_proofs == 1 and not report.ignored


@pytest.mark.parametrize("tile", VALUES["large"]["tiles"])
def test_a_changed_tile_of_the_large_log_is_refused(tile: str, tmp_path: Path) -> None:
    site = tmp_path / "large"
    shutil.copytree(LARGE, site)
    data = bytearray((site / tile).read_bytes())
    data[-1] ^= 0x01
    (site / tile).write_bytes(bytes(data))
    with pytest.raises(iv.VerificationError):
        iv.verify_site(site)


@pytest.mark.parametrize(
    "d", [d for d in VALUES["large"]["dreams"] if not d["erased"]], ids=lambda d: str(d["index"])
)
def test_both_verifiers_accept_every_dream_of_the_large_log(d: dict[str, Any]) -> None:
    record = (LARGE / "dreams" / d["id"] / "record.json").read_bytes()
    proof = (LARGE / "dreams" / d["id"] / "proof.tlog-proof").read_bytes()
    policy = (LARGE / "log" / "policy").read_bytes()
    current = (LARGE / "log" / "checkpoint").read_bytes()
    result = lightclient.verify_proof(proof, record, policy)
    assert (result.id, result.index, result.checkpoint.size) == (
        d["id"],
        d["index"],
        d["checkpointSize"],
    )
    assert independent_record(record, proof, policy) == d["id"]
    if d["checkpointSize"] < VALUES["large"]["size"]:
        consistency = (LARGE / "log" / "consistency" / str(d["checkpointSize"])).read_bytes()
        newer = lightclient.verify_proof(
            proof, record, policy, newer=current, consistency=consistency
        ).newer
        assert newer is not None and newer.size == VALUES["large"]["size"]


ERASURE = VALUES["large"]["erasure"]


def test_the_erased_dream_keeps_its_proof_and_has_no_record() -> None:
    folder = LARGE / "dreams" / ERASURE["id"]
    assert not (folder / "record.json").exists()
    proof = (folder / "proof.tlog-proof").read_bytes()
    policy = (LARGE / "log" / "policy").read_bytes()
    # The light client's steps 1 and 3, with the proof's extra as the leaf data.
    (_, checkpoint, _), _ = lightclient._check_checkpoint(policy, proof)
    parsed = tlogproof.parse_tlog_proof(proof)
    assert parsed.extra is not None
    merkle.verify_inclusion(
        merkle.leaf_hash(parsed.extra), parsed.index, checkpoint.size, parsed.proof, checkpoint.root
    )
    assert iv.parse_leaf(parsed.index, parsed.extra).obj["id"] == ERASURE["id"]
    # The independent verifier, the same steps, then the whole site.
    trust = iv.parse_policy(policy, "policy")
    extra, index, hashes, cp_bytes = iv.parse_tlog_proof(proof, "proof")
    cp = iv.verify_checkpoint(cp_bytes, trust, "proof checkpoint")
    assert extra is not None and index < ERASURE["index"]
    iv.verify_inclusion(index, cp.size, iv.leaf_hash(extra), hashes, cp.root)
    report = iv.verify_site(LARGE)
    assert (report.erased, report.erasure_leaves) == (1, 1)
    entries = (LARGE / "log" / "tile" / "entries" / "001.p" / "4").read_bytes()
    assert ERASURE["leafData"].encode() in entries


def test_the_erase_request_is_signed_by_the_authors_current_key() -> None:
    """§7: once a rotation retired the dream's key, the author's current key
    signs the request (a stranger's audit, 23rd session: the vector's was the
    retired key's, which `dreampool erase` refuses)."""
    data = (VECTORS / ERASURE["request"]).read_bytes()
    request = json.loads(data)
    leaf = json.loads(ERASURE["leafData"])
    assert (
        (request["id"], request["reason"])
        == (leaf["id"], leaf["reason"])
        == (
            ERASURE["id"],
            "author-request",
        )
    )
    # builder.formats.statement, as `dreampool erase --request` checks it.
    current = VALUES["large"]["rotation"]["newKeyId"]
    assert statement.verify(request, "request", statement.ERASE) == current
    # Independently: Ed25519 over JCS of all but sig, keyId that of publicKey.
    body = {k: v for k, v in request.items() if k != "sig"}
    assert iv.jcs(body).decode() == ERASURE["requestSignedBytes"]
    pub = iv.b64url_decode_strict(request["sig"]["publicKey"], "publicKey")
    signature = iv.b64url_decode_strict(request["sig"]["value"], "sig")
    iv.ed25519_verify(pub, signature, iv.jcs(body), "request")
    assert iv.key_id_of(pub) == request["sig"]["keyId"] == current


def test_a_changed_erase_request_is_refused() -> None:
    request = json.loads((VECTORS / ERASURE["request"]).read_bytes())
    request["reason"] = "legal"
    with pytest.raises((SignatureError, InputError)):
        statement.verify(request, "request", statement.ERASE)
    body = {k: v for k, v in request.items() if k != "sig"}
    pub = iv.b64url_decode_strict(request["sig"]["publicKey"], "publicKey")
    with pytest.raises(iv.VerificationError):
        iv.ed25519_verify(
            pub, iv.b64url_decode_strict(request["sig"]["value"], "sig"), iv.jcs(body), "r"
        )


def test_a_record_of_the_erased_dream_is_refused(tmp_path: Path) -> None:
    site = tmp_path / "large"
    shutil.copytree(LARGE, site)
    kept = next(d for d in VALUES["large"]["dreams"] if not d["erased"])
    shutil.copy(
        site / "dreams" / kept["id"] / "record.json",
        site / "dreams" / ERASURE["id"] / "record.json",
    )
    with pytest.raises(iv.VerificationError, match="erased"):
        iv.verify_site(site)


ROTATION = VALUES["large"]["rotation"]


def test_the_rotation_is_signed_by_the_old_key_and_its_key_leaf_is_logged() -> None:
    rotation = json.loads((VECTORS / ROTATION["statement"]).read_bytes())
    old = VALUES["author"]["keyId"]
    assert (rotation["author"], rotation["oldKeyId"]) == ("vector-author", old)
    # builder.formats.statement, as the pool checks a rotation.
    assert statement.verify(rotation, "rotation", statement.ROTATE) == old
    # Independently: the old key's signature, the new key from its seed label.
    body = {k: v for k, v in rotation.items() if k != "sig"}
    assert iv.jcs(body).decode() == ROTATION["statementSignedBytes"]
    pub = iv.b64url_decode_strict(rotation["sig"]["publicKey"], "publicKey")
    assert iv.key_id_of(pub) == old
    signature = iv.b64url_decode_strict(rotation["sig"]["value"], "sig")
    iv.ed25519_verify(pub, signature, iv.jcs(body), "rotation")
    new_pub = iv.b64url_decode_strict(rotation["newPublicKey"], "newPublicKey")
    assert iv.key_id_of(new_pub) == rotation["newKeyId"] == ROTATION["newKeyId"]
    seed = hashlib.sha256(ROTATION["seedLabel"].encode()).digest()
    assert dreamfmt.key_id(public_key_of(seed)) == rotation["newKeyId"]
    # The new key's key leaf, same author, in the log (the entry bundle of leaves 256…).
    index = ROTATION["keyLeafIndex"]
    bundle = (LARGE / "log" / "tile" / "entries" / "001.p" / "4").read_bytes()
    leaves = iv.decode_bundle(bundle, 4, "entries/001.p/4")
    leaf = iv.parse_leaf(index, leaves[index - 256])
    assert leaf.kind == "key" and leaves[index - 256].decode() == ROTATION["keyLeafData"]
    assert (leaf.obj["keyId"], leaf.obj["author"]) == (rotation["newKeyId"], rotation["author"])
    # Dreams after it are signed by the new key and verify (both verifiers, above).
    after = [d for d in VALUES["large"]["dreams"] if d["index"] > index]
    assert after
    for d in after:
        record = json.loads((LARGE / "dreams" / d["id"] / "record.json").read_bytes())
        assert record["dream"]["sig"]["keyId"] == rotation["newKeyId"]


def test_a_changed_rotation_is_refused() -> None:
    rotation = json.loads((VECTORS / ROTATION["statement"]).read_bytes())
    rotation["newPublicKey"] = VALUES["author"]["publicKey"]
    with pytest.raises((SignatureError, InputError)):
        statement.verify(rotation, "rotation", statement.ROTATE)
    body = {k: v for k, v in rotation.items() if k != "sig"}
    pub = iv.b64url_decode_strict(rotation["sig"]["publicKey"], "publicKey")
    with pytest.raises(iv.VerificationError):
        iv.ed25519_verify(
            pub, iv.b64url_decode_strict(rotation["sig"]["value"], "sig"), iv.jcs(body), "r"
        )


WITNESSED = VECTORS / "witnessed"
WITNESS = VALUES["witnessed"]


def _dream_b_record() -> bytes:
    return (VECTORS / "site" / "dreams" / WITNESS["dream"] / "record.json").read_bytes()


def test_both_verifiers_accept_the_witnessed_proof() -> None:
    policy = (WITNESSED / "policy").read_bytes()
    proof = (WITNESSED / "proof.tlog-proof").read_bytes()
    steps: list[lightclient.Step] = []
    result = lightclient.verify_proof(proof, _dream_b_record(), policy, on_step=steps.append)
    assert result.id == WITNESS["dream"]
    assert "quorum w1 met" in steps[0].detail and WITNESS["name"] in steps[0].detail
    assert independent_record(_dream_b_record(), proof, policy) == WITNESS["dream"]
    cp = iv.verify_checkpoint(
        (WITNESSED / "checkpoint").read_bytes(), iv.parse_policy(policy, "p"), "c"
    )
    assert cp.cosigners == {"w1"}  # the policy's name for the witness
    assert (WITNESSED / "checkpoint").read_bytes().endswith(WITNESS["signatureLine"].encode())


def _refused_at_step_1(proof: bytes) -> None:
    policy = (WITNESSED / "policy").read_bytes()
    with pytest.raises(VerificationError) as refused:
        lightclient.verify_proof(proof, _dream_b_record(), policy)
    assert refused.value.step == 1, refused.value.message
    with pytest.raises(iv.VerificationError):
        independent_record(_dream_b_record(), proof, policy)


def test_the_proof_without_the_cosignature_misses_the_quorum() -> None:
    _refused_at_step_1(
        (VECTORS / "site" / "dreams" / WITNESS["dream"] / "proof.tlog-proof").read_bytes()
    )


def test_a_cosignature_with_another_timestamp_is_refused() -> None:
    proof = (WITNESSED / "proof.tlog-proof").read_bytes()
    line = WITNESS["signatureLine"]
    name, b64 = line.rstrip("\n").removeprefix("— ").split(" ")
    raw = bytearray(base64.b64decode(b64))
    raw[4 + 7] ^= 0x01  # key ID (4 bytes), then the 8-byte big-endian timestamp
    changed = f"— {name} {base64.b64encode(bytes(raw)).decode()}\n"
    assert proof.count(line.encode()) == 1
    _refused_at_step_1(proof.replace(line.encode(), changed.encode()))


def _times(n: int, a: Any) -> Any:
    out = (0, 1, 1, 0)  # the identity
    while n:
        if n & 1:
            out = iv._point_add(out, a)
        a, n = iv._point_add(a, a), n >> 1
    return out


def _neg(a: Any) -> Any:
    return ((-a[0]) % iv._P, a[1], a[2], (-a[3]) % iv._P)


def _same_point(a: Any, b: Any) -> bool:
    p = iv._P
    return (a[0] * b[2] - b[0] * a[2]) % p == 0 and (a[1] * b[2] - b[1] * a[2]) % p == 0


def test_the_torsion_case_holds_by_the_cofactored_equation_only() -> None:
    """A verifier that checks RFC 8032's cofactored equation, [8][S]B =
    [8]R + [8][k]A (ZIP-215's, ed25519-zebra's), where §1 requires the
    cofactorless [S]B = R + [k]A, passed every vector (a stranger's audit,
    23rd session: left open then). `dream-r-torsion` is dream A signed by
    its author's key with R moved by a point of order 8; computed here
    with the independent verifier's own point arithmetic, the cofactored
    equation holds, the cofactorless one does not, and OpenSSL (through
    ``cryptography``) refuses it."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    record = json.loads((NEGATIVE / "dream-r-torsion" / "record.json").read_bytes())
    dream = record["dream"]
    public = base64.urlsafe_b64decode(dream["sig"]["publicKey"] + "=")
    sig = base64.urlsafe_b64decode(dream["sig"]["value"] + "==")
    message = dreamfmt.signed_bytes(dream)
    # Dream A's statement, under dream A's key: only R and S differ.
    a = VALUES["dreams"][0]
    assert message == a["signedBytes"].encode() and sig != base64.urlsafe_b64decode(
        a["signature"] + "=="
    )
    site_a = json.loads((VECTORS / "site" / "dreams" / a["id"] / "record.json").read_bytes())
    assert site_a["dream"]["sig"]["publicKey"] == dream["sig"]["publicKey"]
    big_r, big_a = iv._decode_point(sig[:32]), iv._decode_point(public)
    assert big_r is not None and big_a is not None
    s = int.from_bytes(sig[32:], "little")
    assert s < iv._L
    k = int.from_bytes(hashlib.sha512(sig[:32] + public + message).digest(), "little") % iv._L
    base = iv._decode_point((4 * pow(5, iv._P - 2, iv._P) % iv._P).to_bytes(32, "little"))
    assert base is not None
    left, right = _times(s, base), iv._point_add(big_r, _times(k, big_a))
    assert not _same_point(left, right)  # cofactorless: refused
    assert _same_point(_times(8, left), _times(8, right))  # cofactored: accepted
    assert not iv.is_small_order(sig[:32])  # R is of mixed order, not small
    # T = R − ([S]B − [k]A) is of order 8, as the case says, not 2 or 4 (review r93).
    t = iv._point_add(big_r, _neg(iv._point_add(left, _neg(_times(k, big_a)))))
    identity = (0, 1, 1, 0)
    assert _same_point(_times(8, t), identity) and not _same_point(_times(4, t), identity)
    with pytest.raises(InvalidSignature):
        Ed25519PublicKey.from_public_bytes(public).verify(sig, message)


@pytest.mark.parametrize("name", ["dream-r-small-order", "dream-r-non-canonical"])
def test_the_r_cases_hold_by_the_bare_equation(name: str) -> None:
    """T05 (review r93): an author can sign with R = the identity and S = k·s.
    The equation holds: OpenSSL (through ``cryptography``) accepts
    `dream-r-small-order`, and a verifier that reduces R's y mod p finds it
    in `dream-r-non-canonical` (y = p + 1). Only §1's rule 4 refuses them, so
    a verifier without it (or one on libsodium, which refuses the first)
    fails a vector, where before every verifier passed them all and disagreed
    on a dream the pool published."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    record = json.loads((NEGATIVE / name / "record.json").read_bytes())
    dream = record["dream"]
    public = base64.urlsafe_b64decode(dream["sig"]["publicKey"] + "=")
    sig = base64.urlsafe_b64decode(dream["sig"]["value"] + "==")
    message = dreamfmt.signed_bytes(dream)
    assert message == VALUES["dreams"][0]["signedBytes"].encode()
    y = int.from_bytes(sig[:32], "little") % (1 << 255)
    big_r = iv._decode_point((y % iv._P).to_bytes(32, "little"))  # reduced: lax
    big_a = iv._decode_point(public)
    assert big_r is not None and big_a is not None
    assert _same_point(big_r, (0, 1, 1, 0))  # the identity
    k = int.from_bytes(hashlib.sha512(sig[:32] + public + message).digest(), "little") % iv._L
    base = iv._decode_point((4 * pow(5, iv._P - 2, iv._P) % iv._P).to_bytes(32, "little"))
    assert base is not None
    s = int.from_bytes(sig[32:], "little")
    assert s < iv._L
    assert _same_point(_times(s, base), iv._point_add(big_r, _times(k, big_a)))
    key = Ed25519PublicKey.from_public_bytes(public)
    if name == "dream-r-small-order":
        key.verify(sig, message)  # plain OpenSSL accepts it
    else:
        with pytest.raises(InvalidSignature):  # OpenSSL decodes R strictly
            key.verify(sig, message)
    with pytest.raises(SignatureError):
        dreamfmt.parse(json.dumps(dream).encode(), f"{name}.json")
