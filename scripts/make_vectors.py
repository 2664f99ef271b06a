"""Make docs/vectors/: a worked example of every value a dreampool implementation computes.

Two dreams by one author go through the real pipeline (``dreampool submit`` and
two ``dreampool build`` runs) in a scratch pool, with everything that is
normally random fixed:

* the author's Ed25519 seed, the log key's seed and each dream's commitment
  salt are SHA-256 of fixed ASCII labels (listed in the README it writes), so
  another implementation can rebuild every key without any key file: no
  private key is written anywhere;
* Ed25519 is deterministic (RFC 8032), and checkpoints carry no timestamp.

Then it copies what a reader downloads (the site's ``log/`` and
``dreams/<id>/``), what an author signs, and every intermediate value
(``vectors.json``), and writes ``README.md`` from them. Run from the repository
root::

    python scripts/make_vectors.py            # (re)write docs/vectors
    python scripts/make_vectors.py --check    # exit 1 if docs/vectors differs
    python scripts/make_vectors.py OUT        # write elsewhere

tests/test_vectors.py checks that the committed files are reproduced byte for
byte and that they verify with builder.readers.lightclient.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from builder import build
from builder.content import anonymity, pool
from builder.formats import dream as dreamfmt
from builder.formats import ed25519, merkle, statement, strictjson, tiles
from builder.formats import leaf as leaffmt
from builder.formats.b64 import b64_encode, b64url_decode, b64url_encode
from builder.formats.checkpoint import (
    Checkpoint,
    Cosigner,
    cosign,
    cosigned_message,
    sign_checkpoint,
)
from builder.formats.ed25519 import public_key_of
from builder.formats.note import Signer
from builder.formats.policy import Policy, PolicyLog, PolicyWitness, format_policy
from builder.formats.tlogproof import TlogProof, format_tlog_proof, parse_tlog_proof
from builder.log import logbuild

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "vectors"
ORIGIN = "vectors.dreampool.example/log"
BASE_URL = "https://vectors.dreampool.example/"
EPOCH = 1794819600  # 2026-11-16T09:00:00Z: history times, and WITNESS_TIME below
LABELS = {
    "author seed": "dreampool test vectors: author key",
    "log seed": "dreampool test vectors: log key",
    "salt A": "dreampool test vectors: salt A",
    "salt B": "dreampool test vectors: salt B",
    "negative log seed": "dreampool test vectors: negative log key",
    "negative salt": "dreampool test vectors: negative salt",
    "large log seed": "dreampool test vectors: large log key",
    "large salt": "dreampool test vectors: large salt",
    "rotated author seed": "dreampool test vectors: rotated author key",
    "witness seed": "dreampool test vectors: witness key",
}
NEGATIVE_ORIGIN = "vectors.dreampool.example/negative"
LARGE_ORIGIN = "vectors.dreampool.example/large"
# The large log: 260 leaves, checkpoints at sizes 200 and 260, so its tiles
# include a kept partial tile (0/000.p/200), a full level-0 tile, a level-1
# tile and the entry bundles of each. Dreams (record and proof) at these
# indices; every other leaf announces a filler key, whose seed is SHA-256 of
# LARGE_FILLER_LABEL with the leaf index in decimal appended.
LARGE_SIZES = (200, 260)
LARGE_DREAMS = (1, 2, 257, 259)
# The dream at leaf 2 is erased at its author's signed request
# (docs/protocol.md §7): the erasure leaf is leaf 258; its folder keeps the
# proof and has no record.
LARGE_ERASED = 2
LARGE_ERASURE = 258
# The author rotates to a new key (a dreampool.rotate/v1 statement signed by
# the old key): leaf 256 announces the new key, and the dreams after it are
# signed by it.
LARGE_ROTATION = 256
WITNESS_NAME = "witness.dreampool.example"
WITNESS_TIME = EPOCH + 2 * 86400  # the cosignature's timestamp (cosignature/v1)
LARGE_FILLER_LABEL = "dreampool test vectors: large filler key "

# docs/protocol.md §1's refused public keys: every y >= p (a non-canonical
# encoding), in both signs, and the 8 points of small order, in both signs.
_P = 2**255 - 19
_SMALL_ORDER_Y = (
    1,
    _P - 1,
    0,
    int.from_bytes(
        bytes.fromhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"), "little"
    ),
    int.from_bytes(
        bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), "little"
    ),
)
REFUSED_KEYS = sorted(
    {(y | (s << 255)).to_bytes(32, "little") for y in range(_P, 2**255) for s in (0, 1)}
    | {(y | (s << 255)).to_bytes(32, "little") for y in _SMALL_ORDER_Y for s in (0, 1)}
)
# R = B (the base point, 58 66…66) and S = 1: [S]B = R, so it verifies every
# message for which [k]A is the identity. R is of prime order, so only §1's
# key rules refuse it (R = the identity, S = 0 would be refused by rule 4 too).
UNIVERSAL_SIGNATURE = bytes.fromhex("58" + "66" * 31) + (1).to_bytes(32, "little")
# Three of them get a record and a proof in the negative log (step 4 must refuse).
LOGGED_BAD_KEYS = {
    "key-non-canonical": (_P + 1).to_bytes(32, "little"),  # eeff…ff7f, y = p + 1
    "key-identity": (1).to_bytes(32, "little"),  # 0100…00, order 1
    "key-order-4": (0).to_bytes(32, "little"),  # y = 0, order 4
}
POOL_YAML = f"title: dreampool test vectors\norigin: {ORIGIN}\nbase_url: {BASE_URL}\nk: 3\n"

DRAFT_A: dict[str, Any] = {
    "author": "vector-author",
    "title": "Canonical JSON sorts keys by UTF-16 code units",
    "summary": "JCS (RFC 8785) orders object members by their **UTF-16** code units: "
    "`é` (U+00E9) before `梦` (U+68A6) before `😀` (U+1F600, a surrogate pair).",
    "entries": [
        {
            "text": "Sign the JCS bytes, never a pretty-printed file.",
            "type": "rule",
            "confidence": "confirmed",
            "source": "RFC 8785 §3.2",
        },
        {"text": "Numbers serialize as ECMAScript does: 1e+21, not 1e21.", "type": "fact",
         "confidence": "confirmed"},
    ],
    "tags": ["jcs", "test-vectors"],
    "consent": {"share": True, "derivatives": True, "anonymize": False},
}  # fmt: skip

DRAFT_B: dict[str, Any] = {
    "author": "vector-author",
    "title": "Proofs of old dreams never change",
    "summary": "A second build appends a leaf; the first dream's proof file stays "
    "byte-identical and log/consistency/2 links its checkpoint to the new one.",
    "entries": [
        {"text": "Cache proof.tlog-proof and tiles forever.", "type": "lesson",
         "confidence": "confirmed"},
    ],
    "tags": ["test-vectors"],
    "lineage": {"generation": 1},  # parent: dream A's id, filled in below
    "consent": {"share": True, "derivatives": False, "anonymize": False},
}  # fmt: skip


def label_bytes(name: str) -> bytes:
    return hashlib.sha256(LABELS[name].encode("ascii")).digest()


def make(out: Path) -> None:
    """Build the example pool in a scratch directory and write the vectors to ``out``."""
    author_seed = label_bytes("author seed")
    signer = Signer.from_seed(ORIGIN, label_bytes("log seed"))
    with tempfile.TemporaryDirectory() as tmp:
        content = Path(tmp) / "content"
        (content / "dreams").mkdir(parents=True)
        (content / "keys").mkdir()
        (content / "pool.yaml").write_text(POOL_YAML, encoding="utf-8")
        previous = os.environ.get("SOURCE_DATE_EPOCH")
        try:
            os.environ["SOURCE_DATE_EPOCH"] = str(EPOCH)
            a = _admit(content, DRAFT_A, author_seed, label_bytes("salt A"), signer, tmp)
            draft_b = {**DRAFT_B, "lineage": {"parent": a["id"], "generation": 1}}
            os.environ["SOURCE_DATE_EPOCH"] = str(EPOCH + 86400)
            b = _admit(content, draft_b, author_seed, label_bytes("salt B"), signer, tmp)
        finally:
            if previous is None:
                os.environ.pop("SOURCE_DATE_EPOCH", None)
            else:
                os.environ["SOURCE_DATE_EPOCH"] = previous
        site = Path(tmp) / "site"
        files = _collect(site, content, [a, b])
        negative_files, negative = _negative(a)
        files.update(negative_files)
        files["negative/unicode.json"] = _json(_unicode_negatives())
        files["accepted.json"] = _json(_accepted())
        large_files, large = _large()
        files.update(large_files)
        values = _values(content, signer, author_seed, [a, b])
        values["negative"] = negative
        values["large"] = large
        witnessed_files, witnessed = _witnessed(files, signer, b)
        files.update(witnessed_files)
        values["witnessed"] = witnessed
        files["unicode-tables.json"] = _unicode_tables()
        files["vectors.json"] = _json(values)
        files["README.md"] = _readme(json.loads(files["vectors.json"])).encode("utf-8")
    if out.exists():
        shutil.rmtree(out)
    for rel, data in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _unicode_tables() -> bytes:
    """docs/vectors/unicode-tables.json, as scripts/make_unicode_tables.py --json
    writes it (the one module that knows the tables' format)."""
    spec = importlib.util.spec_from_file_location(
        "make_unicode_tables", Path(__file__).resolve().parent / "make_unicode_tables.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.render_json()).encode("utf-8")


def _admit(
    content: Path, draft: dict[str, Any], seed: bytes, salt: bytes, signer: Signer, tmp: str
) -> dict[str, Any]:
    """Sign, submit (as `dreampool submit`), fix the salt, build (as `dreampool build`)."""
    signed = dreamfmt.sign(draft, seed)
    submitted = (json.dumps(signed, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    incoming = Path(tmp) / "incoming.json"
    incoming.write_bytes(submitted)
    result = pool.submit(content, [incoming], today=dt.date(2026, 11, 16))
    (dream_id,) = result.added
    # What a build draws at random, fixed: the dream's commitment salt.
    drawn = logbuild.new_salt
    logbuild.new_salt = lambda _id: b64url_encode(salt)
    try:
        report = build.build(content, Path(tmp) / "site", signer=signer)
    finally:
        logbuild.new_salt = drawn
    assert report.admitted == [dream_id] and not report.refused, report
    return {"id": dream_id, "dream": signed, "submitted": submitted}


def _collect(site: Path, content: Path, dreams: list[dict[str, Any]]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for path in sorted((site / "log").rglob("*")):
        if path.is_file() and path.suffix != ".html":  # the log's page is no vector
            files[f"site/{path.relative_to(site).as_posix()}"] = path.read_bytes()
    for d in dreams:
        for name in ("record.json", "proof.tlog-proof"):
            files[f"site/dreams/{d['id']}/{name}"] = (site / "dreams" / d["id"] / name).read_bytes()
        files[f"submitted/{d['id']}.json"] = d["submitted"]
        files[f"signed-bytes/{d['id']}.jcs"] = dreamfmt.signed_bytes(d["dream"])
    return files


def _values(
    content: Path, signer: Signer, author_seed: bytes, dreams: list[dict[str, Any]]
) -> dict[str, Any]:
    """Every intermediate value, recomputed here from the formulas of docs/protocol.md."""
    shards = sorted((content / "log" / "leaves").glob("*.jsonl"))
    leaves = [line for shard in shards for line in shard.read_bytes().splitlines()]
    history = [
        json.loads(line) for line in (content / "log" / "history.jsonl").read_text().splitlines()
    ]
    tree = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(leaf) for leaf in leaves)
    public_key = public_key_of(author_seed)
    by_id = {
        parsed.id: i
        for i, parsed in enumerate(map(leaffmt.parse, leaves))
        if isinstance(parsed, leaffmt.DreamLeaf)
    }
    out_dreams = []
    for d, salt_label in zip(dreams, ("salt A", "salt B"), strict=True):
        salt = b64url_encode(label_bytes(salt_label))
        commit = logbuild.commitment(d["dream"], salt)
        leaf = leaffmt.encode(leaffmt.DreamLeaf(d["id"], commit))
        out_dreams.append(
            {
                "id": d["id"],
                "index": by_id[d["id"]],
                "signedBytes": dreamfmt.signed_bytes(d["dream"]).decode("utf-8"),
                "signedBytesSha256": hashlib.sha256(dreamfmt.signed_bytes(d["dream"])).hexdigest(),
                "signature": d["dream"]["sig"]["value"],
                "salt": salt,
                "saltLabel": LABELS[salt_label],
                "commitmentInput": strictjson.canonical(
                    {"dream": d["dream"], "salt": salt}
                ).decode(),
                "commitment": commit,
                "leafData": leaf.decode("utf-8"),
                "leafHash": merkle.leaf_hash(leaf).hex(),
            }
        )
    return {
        "origin": ORIGIN,
        "author": {
            "seedLabel": LABELS["author seed"],
            "publicKey": b64url_encode(public_key),
            "keyId": dreamfmt.key_id(public_key),
        },
        "log": {
            "seedLabel": LABELS["log seed"],
            "vkey": signer.verifier.vkey,
            "keyIdHex": signer.key_id.hex(),
        },
        "dreams": out_dreams,
        "leaves": [
            {"index": i, "data": leaf.decode("utf-8"), "hash": merkle.leaf_hash(leaf).hex()}
            for i, leaf in enumerate(leaves)
        ],
        "checkpoints": [
            {
                "size": h["size"],
                "rootBase64": b64_encode(tree.root(h["size"])),
                "rootHex": tree.root(h["size"]).hex(),
            }
            for h in history
        ],
        "consistency": {
            "from": history[0]["size"],
            "to": history[-1]["size"],
            "proofBase64": [
                b64_encode(h)
                for h in tree.consistency_proof(history[0]["size"], history[-1]["size"])
            ],
        },
    }


def _negative(a: dict[str, Any]) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Inputs every verifier must refuse, each at one docs/protocol.md §5 step.

    A separate log (its own origin and key, so no checkpoint of the vector log
    is contradicted) holds one leaf per case, so that steps 1-3 pass and the
    refusal is for the reason the case names. Also every refused public key
    with the universal signature, as dreams in ``negative/universal-forgery.json``.
    """
    signer = Signer.from_seed(NEGATIVE_ORIGIN, label_bytes("negative log seed"))
    salt = b64url_encode(label_bytes("negative salt"))
    dream_a = a["dream"]

    def forged(public_key: bytes) -> dict[str, Any]:
        """Dream A under ``public_key`` with the universal signature, its title
        given a suffix `` (n)`` for the first n (if any, up to 63) at which the
        signature verifies by the bare equation, with no key rule: for a key
        of small order that is when [k]A is the identity, k = SHA-512(R ‖ A ‖
        M) mod L, one message in at most 8. So each such dream is a forgery
        a verifier without §1's key rules (plain OpenSSL) accepts (a
        stranger's audit, 23rd session: on one message OpenSSL accepted 5 of
        the 48)."""
        body = {k: dream_a[k] for k in dreamfmt.SIGNED_FIELDS if k in dream_a}
        body["sig"] = {
            "alg": "ed25519",
            "keyId": dreamfmt.key_id(public_key),
            "publicKey": b64url_encode(public_key),
            "value": b64url_encode(UNIVERSAL_SIGNATURE),
        }
        for n in range(64):
            tried = {**body, "title": f"{dream_a['title']} ({n})" if n else dream_a["title"]}
            if _bare_equation_holds(public_key, dreamfmt.signed_bytes(tried)):
                return tried
        return body

    with_field = dreamfmt.sign(
        {**DRAFT_A, "title": "A signed dream with a field the protocol does not name"},
        label_bytes("author seed"),
    )
    with_field["mood"] = "hopeful"  # not signed: the signature still verifies
    cases: list[tuple[str, str, int, dict[str, Any], dict[str, Any]]] = [
        (
            "record-unknown-field",
            "record.json holds a member beyond format, id, index, salt, dream (§2)",
            2,
            dream_a,
            {"note": "not a record field"},
        ),
        (
            "dream-unknown-field",
            "the dream holds a field §1 does not name; its signature verifies (§1)",
            4,
            with_field,
            {},
        ),
    ]
    for name, key in LOGGED_BAD_KEYS.items():
        cases.append(
            (
                name,
                f"sig.publicKey {key.hex()} (§1 key validity) with the universal signature",
                4,
                forged(key),
                {},
            )
        )
    # A valid key whose signature fails: dream A with its title changed after
    # signing, and (below) dream A under a checkpoint whose log signature has
    # one bit flipped. A verifier that never runs the Ed25519 equation passes
    # every other vector (a stranger's audit, 23rd session).
    edited = {**dream_a, "title": dream_a["title"] + "!"}
    cases.append(
        (
            "dream-bad-signature",
            "dream A with its title changed after signing: the author key is valid, its "
            "signature does not verify (§1)",
            4,
            edited,
            {},
        )
    )
    cases.append(
        (
            "checkpoint-bad-signature",
            "dream A under a checkpoint whose log-key signature has its last bit flipped "
            "(§4.1: a trusted key's signature that fails)",
            1,
            dream_a,
            {},
        )
    )
    # §1's binding rules, each broken alone on dream A (the signature over
    # the signed fields still verifies where it can: sig is not signed).
    a_sig = dream_a["sig"]
    raw = b64url_decode(a_sig["value"])
    s_plus_l = raw[:32] + (int.from_bytes(raw[32:], "little") + ed25519.L).to_bytes(32, "little")
    other_key_id = dreamfmt.key_id(public_key_of(label_bytes("negative log seed")))
    for name, what, sig in (
        (
            "dream-keyid-mismatch",
            "sig.keyId is not the keyId of sig.publicKey; the signature verifies (§1)",
            {**a_sig, "keyId": other_key_id},
        ),
        (
            "dream-s-not-reduced",
            "dream A's signature with S + L in place of S: the equation holds mod L, and "
            "§1 (RFC 8032 §5.1.7) refuses S >= L",
            {**a_sig, "value": b64url_encode(s_plus_l)},
        ),
        (
            "dream-alg-not-ed25519",
            'sig.alg is "EdDSA", not "ed25519"; the signature verifies (§1)',
            {**a_sig, "alg": "EdDSA"},
        ),
    ):
        cases.append((name, what, 4, {**dream_a, "sig": sig}, {}))
    cases.append(
        (
            "record-id-not-the-signatures",
            "record.id (and the leaf's id) is not the first 16 hex of H(signature) (§1, §2)",
            4,
            dream_a,
            {"id": "0123456789abcdef"},
        )
    )
    # §1's strict reading of record.json, each rule broken alone in dream A's
    # record, byte for byte (a JSON library's writer cannot make these).
    for name, what in RECORD_BYTE_CASES:
        cases.append((name, what, 2, dream_a, {}))
    # Dream A signed again by its author with R moved by a point of order 8
    # (_torsion_signature): valid by the cofactored equation only. A verifier
    # that checks [8][S]B = [8]R + [8][k]A passed every other vector.
    torsion = _torsion_signature(label_bytes("author seed"), dreamfmt.signed_bytes(dream_a))
    cases.append(
        (
            "dream-r-torsion",
            "dream A signed by its author with R = [r]B + T, T of order 8: the cofactored "
            "equation [8][S]B = [8]R + [8][k]A holds, the cofactorless one §1 requires "
            "does not",
            4,
            {**dream_a, "sig": {**a_sig, "value": b64url_encode(torsion)}},
            {},
        )
    )
    # R = the identity, S = k·s: the equation holds, and only §1's rule on R
    # refuses it, by its small order or by its non-canonical encoding.
    for name, encoded_r, what in (
        (
            "dream-r-small-order",
            (1).to_bytes(32, "little"),
            "R = 01 00…00 (the identity, of small order) and S = k·s: the equation holds "
            "(OpenSSL accepts it, libsodium refuses it); §1 refuses an R of small order",
        ),
        (
            "dream-r-non-canonical",
            (_P + 1).to_bytes(32, "little"),
            "R = ee ff…ff 7f (y = p + 1, a non-canonical encoding of the identity) and "
            "S = k·s: a verifier that reduces y mod p accepts it; §1 refuses y >= p",
        ),
    ):
        value = _identity_r_signature(
            label_bytes("author seed"), dreamfmt.signed_bytes(dream_a), encoded_r
        )
        cases.append(
            (name, what, 4, {**dream_a, "sig": {**a_sig, "value": b64url_encode(value)}}, {})
        )
    leaves = []
    records = []
    for index, (name, _, _, dream, extra_members) in enumerate(cases):
        dream_id = extra_members.get("id") or dreamfmt.dream_id(
            b64url_decode(dream["sig"]["value"])
        )
        leaves.append(leaffmt.encode(leaffmt.DreamLeaf(dream_id, logbuild.commitment(dream, salt))))
        record = {
            "format": "dreampool-record/v1",
            "id": dream_id,
            "index": index,
            "salt": salt,
            "dream": dream,
            **extra_members,
        }
        data = (json.dumps(record, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
        records.append(_broken_record(name, data, index))
    tree = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(leaf) for leaf in leaves)
    note = sign_checkpoint(Checkpoint(NEGATIVE_ORIGIN, tree.size, tree.root()), signer)
    files: dict[str, bytes] = {
        "negative/log/policy": format_policy(
            Policy((PolicyLog(signer.verifier, None),), (), (), "none")
        ).encode(),
        "negative/log/checkpoint": note,
    }
    listed = []
    for index, (name, what, step, _, _) in enumerate(cases):
        files[f"negative/{name}/record.json"] = records[index]
        carried = _flip_last_signature_bit(note) if name == "checkpoint-bad-signature" else note
        files[f"negative/{name}/proof.tlog-proof"] = format_tlog_proof(
            TlogProof(index, leaves[index], tuple(tree.inclusion_proof(index, tree.size)), carried)
        )
        listed.append({"name": name, "what": what, "refusedAtStep": step})
    forgeries = []
    for key in REFUSED_KEYS:
        dream = forged(key)
        verifies = _bare_equation_holds(key, dreamfmt.signed_bytes(dream))
        forgeries.append(
            {"publicKeyHex": key.hex(), "verifiesWithoutKeyRules": verifies, "dream": dream}
        )
    files["negative/universal-forgery.json"] = _json(forgeries)
    summary = {
        "origin": NEGATIVE_ORIGIN,
        "logSeedLabel": LABELS["negative log seed"],
        "vkey": signer.verifier.vkey,
        "saltLabel": LABELS["negative salt"],
        "universalSignatureHex": UNIVERSAL_SIGNATURE.hex(),
        "cases": listed,
        "refusedPublicKeysHex": [key.hex() for key in REFUSED_KEYS],
        "forgedWithoutKeyRulesHex": [
            f["publicKeyHex"] for f in forgeries if f["verifiesWithoutKeyRules"]
        ],
    }
    return files, summary


def _bare_equation_holds(public_key: bytes, message: bytes) -> bool:
    """Whether the universal signature verifies on ``message`` under
    ``public_key`` by OpenSSL's Ed25519 (through ``cryptography``), which
    applies none of §1's key rules: what a verifier that skips them accepts."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(UNIVERSAL_SIGNATURE, message)
    except (InvalidSignature, ValueError):
        return False
    return True


# Edwards25519 arithmetic for the vectors no library signs (:func:`_signed_with_r`):
# RFC 8032 §5.1's curve, extended coordinates. Written again here on purpose, not
# taken from tests/independent_verifier.py: the tests check these vectors with that
# module's arithmetic, which must stay a witness independent of the generator.
_D = -121665 * pow(121666, _P - 2, _P) % _P
_Point = tuple[int, int, int, int]  # (X, Y, Z, T), x = X/Z, y = Y/Z, xy = T/Z


def _add(a: _Point, b: _Point) -> _Point:
    """RFC 8032 §5.1.4's unified addition (it doubles too)."""
    aa = (a[1] - a[0]) * (b[1] - b[0]) % _P
    bb = (a[1] + a[0]) * (b[1] + b[0]) % _P
    cc = 2 * a[3] * b[3] * _D % _P
    dd = 2 * a[2] * b[2] % _P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _times(n: int, a: _Point) -> _Point:
    out: _Point = (0, 1, 1, 0)  # the identity
    while n:
        if n & 1:
            out = _add(out, a)
        a, n = _add(a, a), n >> 1
    return out


def _point(y: int, sign: int) -> _Point:
    """RFC 8032 §5.1.3's decoding of a y that is on the curve."""
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * pow(2, (_P - 1) // 4, _P) % _P
    assert (x * x - x2) % _P == 0, "y is not on the curve"
    if x & 1 != sign:
        x = _P - x
    return (x, y, 1, x * y % _P)


def _encode(a: _Point) -> bytes:
    """RFC 8032 §5.1.2: y, with the sign of x in bit 255."""
    inv = pow(a[2], _P - 2, _P)
    x, y = a[0] * inv % _P, a[1] * inv % _P
    return (y | (x & 1) << 255).to_bytes(32, "little")


_BASE = _point(4 * pow(5, _P - 2, _P) % _P, 0)  # B, RFC 8032 §5.1
_ORDER_8 = _point(_SMALL_ORDER_Y[3], 0)  # a point T of order 8


def _signed_with_r(seed: bytes, message: bytes, r: int, encoded_r: bytes) -> bytes:
    """RFC 8032 §5.1.6's signature of ``message`` by ``seed``, with the nonce
    ``r`` and ``encoded_r`` written for R: k = SHA-512(R ‖ A ‖ M) mod L,
    S = r + k·s mod L. Where ``encoded_r`` is [r]B that is an honest
    signature; the vectors write other points for R (see the callers).

    Never use it with a real key: two signatures with one r and two k give
    away the key (s = (S1 − S2)/(k1 − k2) mod L). The vectors' seeds are
    public (their labels are in vectors.json)."""
    h = hashlib.sha512(seed).digest()
    s = int.from_bytes(h[:32], "little")
    s = (s & ~7 & ((1 << 254) - 1)) | (1 << 254)  # RFC 8032 §5.1.5 step 2
    public = _encode(_times(s, _BASE))
    assert public == public_key_of(seed)
    k = int.from_bytes(hashlib.sha512(encoded_r + public + message).digest(), "little") % ed25519.L
    return encoded_r + ((r + k * s) % ed25519.L).to_bytes(32, "little")


def _torsion_signature(seed: bytes, message: bytes) -> bytes:
    """A signature whose R is moved by a point T of order 8: R' = [r]B + T
    (r from the message and a label, not the honest signature's nonce). Then
    [S]B = R' − T + [k]A: the cofactorless equation §1 requires,
    [S]B = R' + [k]A, fails (OpenSSL, BoringSSL, Go and libsodium refuse it),
    while the cofactored one, [8][S]B = [8]R' + [8][k]A, holds (ZIP-215
    verifiers, such as ed25519-zebra, accept it)."""
    nonce = hashlib.sha512(b"dreampool test vectors: torsion nonce" + message).digest()
    r = int.from_bytes(nonce, "little") % ed25519.L
    return _signed_with_r(seed, message, r, _encode(_add(_times(r, _BASE), _ORDER_8)))


def _identity_r_signature(seed: bytes, message: bytes, encoded_r: bytes) -> bytes:
    """A signature whose R is an encoding of the identity and S = k·s: then
    [S]B = [k]A = R + [k]A, so the bare equation holds. With ``01 00…00``,
    a point of small order, OpenSSL and WebCrypto in Chromium accept it and
    libsodium refuses it; with ``ee ff…ff 7f`` (y = p + 1), a verifier that
    reduces y mod p accepts it. §1 refuses both."""
    return _signed_with_r(seed, message, 0, encoded_r)


# (case, what §1's strict reading refuses): record.json bytes a verifier MUST
# refuse at §5 step 2, made from dream A's record by _broken_record.
RECORD_BYTE_CASES = (
    ("record-byte-order-mark", "record.json begins with a UTF-8 byte order mark (§1)"),
    ("record-duplicate-member", "record.json holds the member format twice (§1)"),
    (
        "record-lone-surrogate",
        "the dream's title begins with the escape \\ud800, a lone surrogate (§1)",
    ),
    ("record-invalid-utf8", "the dream's title holds the byte 0xFF, not UTF-8 (§1)"),
    ("record-nan", "record.json's index is NaN (§1)"),
    ("record-integer-too-large", "record.json's index is 2^53, beyond ±(2^53 − 1) (§1)"),
    ("record-index-not-an-integer", "record.json's index is written with a fraction, as 1.0 (§1)"),
    ("record-nested-too-deep", "record.json nests arrays 33 deep, one past §1's 32"),
)


def _broken_record(name: str, data: bytes, index: int) -> bytes:
    """``data`` (a record.json as a build writes it) broken as RECORD_BYTE_CASES's
    ``name`` says; any other case's as it is."""
    index_member = f'"index": {index},'.encode()
    title = b'"title": "'
    assert data.count(index_member) == 1 and data.count(title) == 1
    broken = {
        "record-byte-order-mark": lambda: b"\xef\xbb\xbf" + data,
        "record-duplicate-member": lambda: data.replace(
            b'"format": "dreampool-record/v1",',
            b'"format": "dreampool-record/v1",\n  "format": "dreampool-record/v1",',
        ),
        "record-lone-surrogate": lambda: data.replace(title, title + b"\\ud800"),
        "record-invalid-utf8": lambda: data.replace(title, title + b"\xff"),
        "record-nan": lambda: data.replace(index_member, b'"index": NaN,'),
        "record-integer-too-large": lambda: data.replace(
            index_member, f'"index": {2**53},'.encode()
        ),
        "record-index-not-an-integer": lambda: data.replace(
            index_member, f'"index": {index}.0,'.encode()
        ),
        "record-nested-too-deep": lambda: data.replace(
            index_member, index_member + b' "deep": ' + b"[" * 33 + b"]" * 33 + b","
        ),
    }.get(name)
    return data if broken is None else broken()


def _flip_last_signature_bit(note: bytes) -> bytes:
    """``note`` (one signature line) with the last bit of its Ed25519 signature
    flipped: the key ID and every other byte as signed."""
    text, sep, line = note.rstrip(b"\n").rpartition(b"\n")
    dash, name, sig = line.split(b" ")
    raw = bytearray(base64.b64decode(sig, validate=True))
    raw[-1] ^= 0x01
    return text + sep + b" ".join((dash, name, base64.b64encode(bytes(raw)))) + b"\n"


# docs/protocol.md §1.1: (name, what, field, JSON pointer, text). Each hides
# "hi" (or a byte) after visible letters, or is an exception used out of place.
UNICODE_NEGATIVES: list[tuple[str, str, str, str]] = [
    ("variation-selector-supplement", "U+E0100–E01EF after letters", "title",
     "Deploy\U000e0168\U000e0169 notes"),
    ("mongolian-free-variation-selector", "U+180B after a letter", "author",
     "vector-author\u180b"),
    ("shorthand-format-control", "U+1BCA0 (Cf, default-ignorable)", "tags",
     "jcs\U0001bca0"),
    ("unassigned-default-ignorable", "U+E0200, unassigned, default-ignorable", "summary",
     "Sign the bytes\U000e0268\U000e0269."),
    ("private-use", "U+E000 (Co)", "title", "Canonical \ue000 JSON"),
    ("unassigned", "U+0378, unassigned in Unicode 15.0.0", "title", "Canonical \u0378 JSON"),
    ("noncharacter", "U+FDD0", "title", "Canonical \ufdd0 JSON"),
    ("selector-after-letter", "U+FE0F after a letter that takes none", "title", "Canonical\ufe0f"),
    ("zwj-between-letters", "U+200D outside an emoji sequence or after no virama", "title",
     "Cano\u200dnical"),
    ("emoji-tag-sequence", "tag characters after U+1F3F4", "title",
     "Flag \U0001f3f4\U000e0067\U000e0062\U000e007f"),
]  # fmt: skip


def _unicode_negatives() -> list[dict[str, Any]]:
    """Dreams signed by the vector author key, each with one text field holding a
    code point docs/protocol.md §1.1 refuses: the signature verifies, the dream
    must be refused (``negative/unicode.json``)."""
    out = []
    for name, what, field, text in UNICODE_NEGATIVES:
        draft = copy.deepcopy(DRAFT_A)
        if field == "tags":
            draft["tags"] = [text]
            pointer = "/tags/0"
        else:
            draft[field] = text
            pointer = f"/{field}"
        out.append(
            {
                "name": name,
                "what": what,
                "pointer": pointer,
                "dream": dreamfmt.sign(draft, label_bytes("author seed")),
            }
        )
    return out


# (name, what, title): signed dreams §1.1 allows, each a title a verifier that
# refuses every ZWJ, ZWNJ or selector (or judges by an older Unicode) refuses.
ACCEPTED_TITLES = (
    ("zwj-emoji", "an emoji ZWJ sequence (§1.1 exception 3)",
     "Pair programming \U0001f469\u200d\U0001f4bb"),
    ("zwj-emoji-skin-tone", "a ZWJ sequence after a skin tone (exception 3)",
     "Late night \U0001f469\U0001f3fd\u200d\U0001f4bb"),
    ("zwj-flag", "the rainbow flag: U+FE0F then ZWJ (exceptions 2 and 3)",
     "Pride \U0001f3f3\ufe0f\u200d\U0001f308"),
    ("emoji-selector", "U+FE0F after a base that takes it (exception 2)",
     "Kindness \u2764\ufe0f"),
    ("keycap", "a keycap: #, U+FE0F, U+20E3 (exception 2)",
     "Issue #\ufe0f\u20e3"),
    ("zwnj-persian", "ZWNJ in Persian between joining letters (exception 5)",
     "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 ship it"),
    ("zwj-after-virama", "ZWJ after a Devanagari virama (exception 4)",
     "Sanskrit \u0915\u094d\u200d\u0937"),
    ("new-in-15", "U+1FAE8 SHAKING FACE, assigned in Unicode 15.0.0 (§1.1: 15.0.0's tables)",
     "Earthquake drill \U0001fae8"),
)  # fmt: skip


def _accepted() -> list[dict[str, Any]]:
    """Signed dreams a verifier MUST accept (``accepted.json``): the positive
    side of the negative vectors (a stranger's audit, 23rd session: no
    vector had a dream without ``consent.derivatives``, an anonymous dream,
    or the sequences §1.1 allows, so a verifier that refused them passed)."""
    author = label_bytes("author seed")
    out = []
    no_derivatives = copy.deepcopy(DRAFT_A)
    del no_derivatives["consent"]["derivatives"]
    no_derivatives["title"] = "A dream whose consent leaves derivatives out"
    out.append(
        {
            "name": "derivatives-absent",
            "what": "consent without derivatives (§1: optional, absent means false)",
            "dream": dreamfmt.sign(no_derivatives, author),
        }
    )
    minimal = {
        "author": DRAFT_A["author"],
        "title": "Only what §1 requires",
        "entries": [{"text": "One entry.", "type": "fact", "confidence": "confirmed"}],
        "consent": {"share": True, "anonymize": False},
    }
    out.append(
        {
            "name": "minimal",
            "what": "no summary, tags or lineage, no entry source (§1: optional)",
            "dream": dreamfmt.sign(minimal, author),
        }
    )
    one_time = hashlib.sha256(b"dreampool test vectors: one-time key of the anonymous dream")
    anonymous = anonymity.anonymous_draft({**DRAFT_A, "title": "A dream signed by no one"})
    out.append(
        {
            "name": "anonymous",
            "what": "author anonymous, anonymize true, signed by a one-time key (§1.2)",
            "dream": dreamfmt.sign(anonymous, one_time.digest()),
        }
    )
    for name, what, title in ACCEPTED_TITLES:
        out.append(
            {
                "name": name,
                "what": what,
                "dream": dreamfmt.sign({**DRAFT_A, "title": title}, author),
            }
        )
    return out


def _large() -> tuple[dict[str, bytes], dict[str, Any]]:
    """A second positive log, ``large/`` (a site's ``log/`` and ``dreams/``), past one tile.

    Leaf 0 announces the author's key; the leaves at LARGE_DREAMS are dreams by
    that author; every other leaf announces a filler key. Two checkpoints
    (LARGE_SIZES), each dream's proof against the first one holding it, a
    consistency proof between them and every tile either size is served as,
    the earlier size's partial tiles kept (docs/protocol.md §4).
    """
    signer = Signer.from_seed(LARGE_ORIGIN, label_bytes("large log seed"))
    salt = b64url_encode(label_bytes("large salt"))
    author_seed = label_bytes("author seed")
    author_key = public_key_of(author_seed)
    size = LARGE_SIZES[-1]
    leaves: list[bytes] = []
    dreams: dict[int, dict[str, Any]] = {}
    request: dict[str, Any] = {}
    new_seed = label_bytes("rotated author seed")
    new_key = public_key_of(new_seed)
    rotation = statement.sign(
        {
            "type": statement.ROTATE,
            "author": DRAFT_A["author"],
            "oldKeyId": dreamfmt.key_id(author_key),
            "newKeyId": dreamfmt.key_id(new_key),
            "newPublicKey": b64url_encode(new_key),
        },
        author_seed,
    )
    for index in range(size):
        if index == LARGE_ERASURE:
            erased_id = dreams[LARGE_ERASED]["id"]
            # After the rotation (leaf LARGE_ROTATION) the dream's key is
            # retired: the author's current key signs the request (§7). It was
            # the old key's, which the pool refuses (a stranger's audit, 23rd
            # session).
            request = statement.sign(
                {"type": statement.ERASE, "id": erased_id, "reason": "author-request"},
                new_seed if index > LARGE_ROTATION else author_seed,
            )
            leaves.append(leaffmt.encode(leaffmt.ErasureLeaf(erased_id, request["reason"])))
            continue
        if index == 0:
            key = author_key
            author = DRAFT_A["author"]
        elif index == LARGE_ROTATION:
            key = new_key
            author = DRAFT_A["author"]
        elif index in LARGE_DREAMS:
            draft = {
                **DRAFT_B,
                "title": f"Leaf {index} of the large vector log",
                "summary": f"Dream at leaf {index}: its proof is checked against the tiles "
                "of a log past one full tile.",
            }
            del draft["lineage"]
            dream = dreamfmt.sign(draft, new_seed if index > LARGE_ROTATION else author_seed)
            dream_id = dreamfmt.dream_id(b64url_decode(dream["sig"]["value"]))
            dreams[index] = {"id": dream_id, "dream": dream}
            leaves.append(
                leaffmt.encode(leaffmt.DreamLeaf(dream_id, logbuild.commitment(dream, salt)))
            )
            continue
        else:
            seed = hashlib.sha256(f"{LARGE_FILLER_LABEL}{index}".encode("ascii")).digest()
            key = public_key_of(seed)
            author = f"filler-{index:03d}"
        leaves.append(leaffmt.encode(leaffmt.KeyLeaf(dreamfmt.key_id(key), key, author)))
    tree = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(leaf) for leaf in leaves)
    notes = {
        m: sign_checkpoint(Checkpoint(LARGE_ORIGIN, m, tree.root(m)), signer) for m in LARGE_SIZES
    }
    files: dict[str, bytes] = {
        "large/log/policy": format_policy(
            Policy((PolicyLog(signer.verifier, None),), (), (), "none")
        ).encode(),
        "large/log/checkpoint": notes[size],
    }
    refs: set[tiles.TileRef] = set()
    before = 0
    for m in LARGE_SIZES:
        files[f"large/log/checkpoints/{m}"] = notes[m]
        if m < size:
            files[f"large/log/consistency/{m}"] = "".join(
                b64_encode(h) + "\n" for h in tree.consistency_proof(m, size)
            ).encode()
        refs.update(tiles.new_tiles(before, m))
        before = m
    for ref in sorted(refs):
        span = ref.hash_indices
        files[f"large/log/{ref.path}"] = (
            tiles.encode_entry_bundle(leaves[span.start : span.stop])
            if ref.is_entry_bundle
            else tiles.tile_data(tree, ref)
        )
    listed = []
    for index, d in dreams.items():
        holding = min(m for m in LARGE_SIZES if m > index)
        record = {
            "format": "dreampool-record/v1",
            "id": d["id"],
            "index": index,
            "salt": salt,
            "dream": d["dream"],
        }
        if index != LARGE_ERASED:
            files[f"large/dreams/{d['id']}/record.json"] = _json(record)
        files[f"large/dreams/{d['id']}/proof.tlog-proof"] = format_tlog_proof(
            TlogProof(
                index, leaves[index], tuple(tree.inclusion_proof(index, holding)), notes[holding]
            )
        )
        listed.append(
            {
                "id": d["id"],
                "index": index,
                "checkpointSize": holding,
                "erased": index == LARGE_ERASED,
            }
        )
    erased_id = dreams[LARGE_ERASED]["id"]
    files[f"statements/erase-{erased_id}.json"] = _json(request)
    rotation_path = f"statements/rotate-{rotation['newKeyId'].removeprefix('sha256:')}.json"
    files[rotation_path] = _json(rotation)
    summary = {
        "origin": LARGE_ORIGIN,
        "logSeedLabel": LABELS["large log seed"],
        "vkey": signer.verifier.vkey,
        "saltLabel": LABELS["large salt"],
        "fillerSeedLabel": LARGE_FILLER_LABEL + "<index>",
        "size": size,
        "checkpoints": [{"size": m, "rootBase64": b64_encode(tree.root(m))} for m in LARGE_SIZES],
        "dreams": listed,
        "erasure": {
            "id": erased_id,
            "index": LARGE_ERASURE,
            "leafData": leaves[LARGE_ERASURE].decode(),
            "request": f"statements/erase-{erased_id}.json",
            "requestSignedBytes": strictjson.canonical(
                {k: v for k, v in request.items() if k != "sig"}
            ).decode(),
        },
        "rotation": {
            "seedLabel": LABELS["rotated author seed"],
            "newKeyId": rotation["newKeyId"],
            "newPublicKey": rotation["newPublicKey"],
            "keyLeafIndex": LARGE_ROTATION,
            "keyLeafData": leaves[LARGE_ROTATION].decode(),
            "statement": rotation_path,
            "statementSignedBytes": strictjson.canonical(
                {k: v for k, v in rotation.items() if k != "sig"}
            ).decode(),
        },
        "tiles": sorted(f"log/{ref.path}" for ref in refs),
    }
    return files, summary


def _witnessed(
    files: dict[str, bytes], signer: Signer, b: dict[str, Any]
) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The vector log's last checkpoint cosigned by a witness (c2sp.org/tlog-cosignature,
    type 0x04), a policy naming that witness as its quorum, and dream B's proof
    carrying the cosigned checkpoint."""
    cosigner = Cosigner.from_seed(WITNESS_NAME, label_bytes("witness seed"))
    note = files["site/log/checkpoint"]
    text = note.split(b"\n\n", 1)[0] + b"\n"
    line = cosign(text.decode("utf-8"), cosigner, WITNESS_TIME)
    cosigned = note + line.encode("utf-8")
    policy = Policy(
        (PolicyLog(signer.verifier, None),),
        (PolicyWitness("w1", cosigner.verifier, None),),
        (),
        "w1",
    )
    proof = parse_tlog_proof(files[f"site/dreams/{b['id']}/proof.tlog-proof"])
    assert proof.checkpoint == note
    out = {
        "witnessed/policy": format_policy(policy).encode(),
        "witnessed/checkpoint": cosigned,
        "witnessed/proof.tlog-proof": format_tlog_proof(
            TlogProof(proof.index, proof.extra, proof.proof, cosigned)
        ),
    }
    summary = {
        "seedLabel": LABELS["witness seed"],
        "name": WITNESS_NAME,
        "vkey": cosigner.verifier.vkey,
        "timestamp": WITNESS_TIME,
        "cosignedMessage": cosigned_message(text, WITNESS_TIME).decode("utf-8"),
        "signatureLine": line,
        "dream": b["id"],
    }
    return out, summary


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _readme(v: dict[str, Any]) -> str:
    a, b = v["dreams"]
    first, last = v["checkpoints"][0], v["checkpoints"][-1]
    n = v["negative"]
    g = v["large"]
    large_dreams = "\n".join(
        f"| `large/dreams/{d['id']}/` | {d['index']} | {d['checkpointSize']} | "
        f"{'erased: proof only' if d['erased'] else 'record and proof'} |"
        for d in g["dreams"]
    )
    e = g["erasure"]
    r = g["rotation"]
    w = v["witnessed"]
    large_cps = ", ".join(f"{c['size']} (root `{c['rootBase64']}`)" for c in g["checkpoints"])
    large_tiles = "\n".join(f"* `large/{t}`" for t in g["tiles"])
    cases = "\n".join(f"| `{c['name']}` | {c['what']} | {c['refusedAtStep']} |" for c in n["cases"])
    leaves = "\n".join(
        f"| {leaf['index']} | `{leaf['data']}` | `{leaf['hash']}` |" for leaf in v["leaves"]
    )
    return f"""\
# dreampool test vectors

Generated by `python scripts/make_vectors.py` (do not edit by hand; the test
suite checks these files are reproduced byte for byte). They show every value
of [docs/protocol.md](../protocol.md) for one small pool, so another implementation
can test itself against this one.

## The keys (no key file: derive them)

Each seed is SHA-256 of an ASCII label; no private key is stored anywhere.

| what | derivation | public |
|---|---|---|
| author Ed25519 seed | SHA-256(`{v["author"]["seedLabel"]}`) | publicKey `{v["author"]["publicKey"]}`, keyId `{v["author"]["keyId"]}` |
| log note key seed | SHA-256(`{v["log"]["seedLabel"]}`) | vkey `{v["log"]["vkey"]}` |
| salt of dream A | SHA-256(`{a["saltLabel"]}`) | `{a["salt"]}` (b64url) |
| salt of dream B | SHA-256(`{b["saltLabel"]}`) | `{b["salt"]}` (b64url) |

The log's origin is `{v["origin"]}`; its policy is `site/log/policy`.

## The story

1. The author signs dream A (`submitted/{a["id"]}.json`); a build admits it:
   leaf 0 announces the author's key, leaf 1 is dream A. Checkpoint size {first["size"]}.
2. The author signs dream B, whose lineage names A; a second build admits it
   as leaf 2. Checkpoint size {last["size"]}; `site/log/consistency/{first["size"]}`
   is the consistency proof from size {first["size"]} to {last["size"]}.
3. Dream A's proof (`site/dreams/{a["id"]}/proof.tlog-proof`) is against the
   checkpoint of size {first["size"]} and did not change in the second build.

## What to check, with the values of dream A

| docs/protocol.md | value |
|---|---|
| §1 signed bytes: JCS of the signed fields | `signed-bytes/{a["id"]}.jcs`, SHA-256 `{a["signedBytesSha256"]}` |
| §1 `sig.value` (Ed25519 over those bytes) | `{a["signature"]}` |
| §1 dream id: first 16 hex of SHA-256(raw signature) | `{a["id"]}` |
| §1 keyId: `sha256:` + first 16 hex of SHA-256(raw public key) | `{v["author"]["keyId"]}` |
| §2 commitment: hex SHA-256(JCS({{"dream", "salt"}})) | `{a["commitment"]}` |
| §3 leaf data (JCS) | `{a["leafData"]}` |
| §3 leaf hash: SHA-256(0x00 ‖ leaf data) | `{a["leafHash"]}` |
| §4 root at size {first["size"]} (base64) | `{first["rootBase64"]}` |
| §4 root at size {last["size"]} (base64) | `{last["rootBase64"]}` |

Every leaf of the log:

| index | leaf data | leaf hash (hex) |
|---|---|---|
{leaves}

`vectors.json` holds all of these for both dreams, plus the exact bytes the
commitment hashes (`commitmentInput`).

## Files

| path | what |
|---|---|
| `submitted/<id>.json` | the signed dream as its author submits it (§1) |
| `signed-bytes/<id>.jcs` | the exact bytes the author's signature covers (§1) |
| `site/dreams/<id>/record.json` | the published record: id, index, salt, dream (§2) |
| `site/dreams/<id>/proof.tlog-proof` | c2sp.org/tlog-proof@v1 against the admitting build's checkpoint (§5) |
| `site/log/policy` | c2sp.org/tlog-policy: the log key, `quorum none` (§4) |
| `site/log/checkpoint`, `site/log/checkpoints/<size>` | c2sp.org/tlog-checkpoint signed notes (§4) |
| `site/log/consistency/{first["size"]}` | RFC 6962 consistency proof, one base64 hash a line (§4) |
| `site/log/tile/…` | c2sp.org/tlog-tiles, partial tiles included (§4) |
| `large/…` | a second log of {g["size"]} leaves, laid out as a site (below) |
| `statements/rotate-<16 hex of keyId>.json` | a `dreampool.rotate/v1` statement (§7): `large/`'s author moves to a new key |
| `statements/erase-<id>.json` | a signed `dreampool.erase/v1` request (§7) for an erased dream of `large/` |
| `negative/…` | what a verifier must refuse (below) |
| `witnessed/policy`, `witnessed/checkpoint`, `witnessed/proof.tlog-proof` | a checkpoint cosigned by a witness, and a policy whose quorum is that witness (below) |
| `accepted.json` | signed dreams a verifier MUST accept: without `consent.derivatives`, with no optional field, anonymous (a one-time key), and titles holding each sequence §1.1 allows (ZWJ emoji, a keycap, ZWNJ, ZWJ after a virama, a code point new in 15.0) |
| `unicode-tables.json` | §1.1's code point tables (Unicode 15.0.0, each source's SHA-256), as `scripts/make_unicode_tables.py --json` writes them |
| `vectors.json` | every value above, for both dreams |

## Checking an implementation

* Recompute the signed bytes, signature, id and keyId of each
  `submitted/<id>.json` from the author seed.
* Recompute each record's commitment and leaf data, and the leaf hashes and
  roots above.
* Verify each proof with the policy (docs/protocol.md §5 steps 1–4), and dream A's
  checkpoint against `site/log/checkpoint` with `site/log/consistency/{first["size"]}`
  (step 5). With dreampool:

  ```sh
  cd docs/vectors/site
  dreampool verify-proof dreams/{a["id"]}/proof.tlog-proof \\
      --record dreams/{a["id"]}/record.json --policy log/policy \\
      --newer log/checkpoint --consistency log/consistency/{first["size"]}
  ```

* Sign the checkpoint texts with the log seed: Ed25519 is deterministic, so
  your signature lines must equal the ones in `site/log/checkpoints/`.

## A log past one tile: `large/`

`large/` is another log, laid out as a site (`large/log/`, `large/dreams/`),
of origin `{g["origin"]}` (its key's seed is SHA-256(`{g["logSeedLabel"]}`),
vkey `{g["vkey"]}`, policy `large/log/policy`). It has {g["size"]} leaves:
leaf 0 announces the author's key above; the dreams below are by that author,
with salt SHA-256(`{g["saltLabel"]}`); every other leaf announces a filler key
of author `filler-<index>` (3 digits), whose seed is
SHA-256(`{g["fillerSeedLabel"]}`), the index in decimal. Checkpoints
were published at sizes {large_cps}; `large/log/consistency/{g["checkpoints"][0]["size"]}` links them.

| dream | leaf index | its proof's checkpoint size | files |
|---|---|---|---|
{large_dreams}

Dream `{e["id"]}` is erased: leaf {e["index"]} is
`{e["leafData"]}`,
and `{e["request"]}` is the author's signed `dreampool.erase/v1` request
(docs/protocol.md §7; the pool keeps it as `content/erasures/{e["id"]}.json`,
never on the site), signed by the author's current key (the dream's key is
retired by the rotation below, which comes first in the log) over
`{e["requestSignedBytes"]}`.
Its folder keeps `proof.tlog-proof` and has no `record.json` (§3, §5): only
§5 steps 1 and 3 can be run on it, with the proof's `extra` as the leaf data.

The author rotates to a new key, whose seed is SHA-256(`{r["seedLabel"]}`):
`{r["statement"]}` is the `dreampool.rotate/v1` statement (§7; the pool keeps
it as `content/rotations/<16 hex of the new keyId>.json`, never on the site),
signed by the old key over
`{r["statementSignedBytes"]}`.
Leaf {r["keyLeafIndex"]} announces the new key for the same author,
`{r["keyLeafData"]}`;
the dreams after it are signed by the new key.

Its tiles (c2sp.org/tlog-tiles, docs/protocol.md §4): a full level-0 tile
and its entry bundle, a level-1 tile, the partial tiles of the last size, and
the partial tile and bundle of size {g["checkpoints"][0]["size"]}, kept after
the full tile replaced them. A verifier of the whole site recomputes every one
from the entry bundles:

{large_tiles}

## A witnessed checkpoint: `witnessed/`

`witnessed/checkpoint` is the vector log's checkpoint of size {last["size"]}
(`site/log/checkpoint`) with a c2sp.org/tlog-cosignature line (type 0x04,
cosignature/v1) appended by the witness `{w["name"]}`, whose seed is
SHA-256(`{w["seedLabel"]}`), vkey `{w["vkey"]}`, at timestamp {w["timestamp"]}:

```text
{w["signatureLine"]}```

It signs the bytes

```text
{w["cosignedMessage"]}```

`witnessed/policy` names the log key, that witness as `w1`, and `quorum w1`
(§4.2). `witnessed/proof.tlog-proof` is dream B's proof carrying the
cosigned checkpoint; with dream B's record it passes §5 steps 1–4 under
that policy, step 1 with the quorum met, while dream B's proof from
`site/` (no cosignature) fails step 1 under it.

## Negative vectors: what a verifier must refuse

`negative/` is a second log, of origin `{n["origin"]}` (its key's seed is
SHA-256(`{n["logSeedLabel"]}`), vkey `{n["vkey"]}`, policy
`negative/log/policy`), so none of its checkpoints contradicts the log
above. Each leaf is one case: its `negative/<case>/proof.tlog-proof` and
`record.json` pass every §5 step before the one given, with that policy,
and a verifier MUST refuse the case at that step.

| case | what is wrong | refused at §5 step |
|---|---|---|
{cases}

`negative/universal-forgery.json` lists every public key docs/protocol.md §1
refuses ({len(n["refusedPublicKeysHex"])} encodings: each y ≥ p and each of the 8 small-order points, in
both signs), each in a copy of dream A whose `sig.value` is the universal
signature R = B, the base point (`58` followed by 31 bytes `66`), S = 1 (hex
`{n["universalSignatureHex"][:8]}…`), so [S]B = R; R is of prime order, so
only the key rules refuse it.
That signature verifies by the bare equation (SB = R + [k]A, cofactorless,
as plain OpenSSL checks it, with none of §1's key rules) exactly when [k]A
is the identity, k = SHA-512(R ‖ A ‖ M) mod L: on every message for the
encodings of the identity itself, on about one message in 2, 4 or 8 for the
other points of small order, and never for a point of large order. So each
dream's title carries a suffix ` (n)` chosen to make it verify where one
can; `verifiesWithoutKeyRules` says for which {len(n["forgedWithoutKeyRulesHex"])} of the {len(n["refusedPublicKeysHex"])} it does
(checked with OpenSSL through `cryptography`): a verifier that accepts any
of these has no small-order or canonical-encoding rule. A verifier MUST
refuse every one of these dreams.

`negative/unicode.json` lists dreams signed by the author key above whose
signatures verify, each with one text field (`pointer`) holding a code point
docs/protocol.md §1.1 refuses: a variation selector, Mongolian free variation
selector, shorthand format control or unassigned default-ignorable after
visible letters (hidden text), a private-use, unassigned or noncharacter code
point, an emoji selector or ZWJ out of place, an emoji tag sequence. A
verifier MUST refuse every one of these dreams.
"""  # noqa: E501


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = Path(tmp) / "vectors"
            make(fresh)
            differ = _differences(fresh, OUT)
        for line in differ:
            print(f"make_vectors: {line}", file=sys.stderr)
        if differ:
            print("make_vectors: hint: run `python scripts/make_vectors.py`", file=sys.stderr)
        return 1 if differ else 0
    out = Path(argv[0]) if argv else OUT
    make(out)
    print(f"wrote {out}")
    return 0


def _differences(fresh: Path, committed: Path) -> list[str]:
    def files(root: Path) -> dict[str, bytes]:
        return {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        }

    want, have = files(fresh), files(committed) if committed.is_dir() else {}
    found = []
    for rel in sorted(set(want) | set(have)):
        if want.get(rel) != have.get(rel):
            what = "missing" if rel not in have else "extra" if rel not in want else "differs"
            found.append(f"{committed / rel}: {what}")
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
