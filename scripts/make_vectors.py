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
byte and that they verify with builder.lightclient.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from builder import build, logbuild, merkle, pool, strictjson
from builder import dream as dreamfmt
from builder.b64 import b64_encode, b64url_encode
from builder.ed25519 import public_key_of
from builder.note import Signer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "vectors"
ORIGIN = "vectors.dreampool.example/log"
BASE_URL = "https://vectors.dreampool.example/"
EPOCH = 1794819600  # 2026-11-16T09:00:00Z: history times only; no vector file holds one
LABELS = {
    "author seed": "dreampool test vectors: author key",
    "log seed": "dreampool test vectors: log key",
    "salt A": "dreampool test vectors: salt A",
    "salt B": "dreampool test vectors: salt B",
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
        files["vectors.json"] = _json(_values(content, signer, author_seed, [a, b]))
        files["negative/ed25519-keys.json"] = _json(refused_keys())
        files["README.md"] = _readme(json.loads(files["vectors.json"])).encode("utf-8")
    if out.exists():
        shutil.rmtree(out)
    for rel, data in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


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


_P = 2**255 - 19
# The y of the 8 points of small order (two of them have x = 0).
_SMALL_ORDER_Y = (
    "0100000000000000000000000000000000000000000000000000000000000000",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "0000000000000000000000000000000000000000000000000000000000000000",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
)


def refused_keys() -> dict[str, Any]:
    """docs/protocol.md §1's refused public keys, each with the universal
    signature (R = the identity, S = 0) that plain OpenSSL accepts under the
    ones that decode: every y >= p and every small-order y, both sign bits."""
    sign = 1 << 255
    ys = [(y, "y >= p: not a canonical encoding") for y in range(_P, 2**255)]
    ys += [
        (int.from_bytes(bytes.fromhex(h), "little"), "small order: [8]A is the identity")
        for h in _SMALL_ORDER_Y
    ]
    keys = [
        {"publicKey": (y | (sign * bit)).to_bytes(32, "little").hex(), "why": why}
        for y, why in ys
        for bit in (0, 1)
    ]
    return {
        "about": "public keys every verifier MUST refuse (docs/protocol.md §1), with the "
        "signature that verifies every message under them in a verifier that does not",
        "signature": (bytes([1]) + bytes(63)).hex(),
        "message": "any message at all",
        "keys": keys,
    }


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
    by_id = {json.loads(leaf).get("id"): i for i, leaf in enumerate(leaves)}
    out_dreams = []
    for d, salt_label in zip(dreams, ("salt A", "salt B"), strict=True):
        salt = b64url_encode(label_bytes(salt_label))
        commit = logbuild.commitment(d["dream"], salt)
        leaf = logbuild.dream_leaf(d["id"], commit)
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


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _readme(v: dict[str, Any]) -> str:
    a, b = v["dreams"]
    first, last = v["checkpoints"][0], v["checkpoints"][-1]
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
| `vectors.json` | every value above, for both dreams |
| `negative/ed25519-keys.json` | the 48 public keys §1 refuses, with the universal signature (R = identity, S = 0) that plain OpenSSL accepts under them |

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
