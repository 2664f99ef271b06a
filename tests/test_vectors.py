"""docs/vectors: reproduced byte for byte, verified by the light client, and
recomputed from docs/protocol.md with nothing of dreampool but the files themselves."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from builder.errors import VerificationError
from builder.readers import lightclient
from tests.conftest import REPO

VECTORS = REPO / "docs" / "vectors"


def load() -> dict[str, Any]:
    return dict(json.loads((VECTORS / "vectors.json").read_text(encoding="utf-8")))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def seed_of(label: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(label.encode()).digest())


def raw_public(key: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def test_the_script_reproduces_the_committed_vectors_exactly(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_vectors.py"), str(tmp_path / "v")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr

    def files(root: Path) -> dict[str, bytes]:
        return {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        }

    fresh, committed = files(tmp_path / "v"), files(VECTORS)
    assert sorted(fresh) == sorted(committed)
    for rel, data in fresh.items():
        assert committed[rel] == data, f"docs/vectors/{rel} differs: run scripts/make_vectors.py"


def test_every_proof_verifies_with_the_light_client() -> None:
    v = load()
    site = VECTORS / "site"
    policy = (site / "log" / "policy").read_bytes()
    first = v["checkpoints"][0]["size"]
    for d in v["dreams"]:
        proof = (site / "dreams" / d["id"] / "proof.tlog-proof").read_bytes()
        record = (site / "dreams" / d["id"] / "record.json").read_bytes()
        result = lightclient.verify_proof(proof, record, policy)
        assert (result.id, result.index, result.leaf_data) == (
            d["id"],
            d["index"],
            d["leafData"].encode(),
        )
    a = v["dreams"][0]
    newer = lightclient.verify_proof(
        (site / "dreams" / a["id"] / "proof.tlog-proof").read_bytes(),
        (site / "dreams" / a["id"] / "record.json").read_bytes(),
        policy,
        newer=(site / "log" / "checkpoint").read_bytes(),
        consistency=(site / "log" / "consistency" / str(first)).read_bytes(),
    ).newer
    assert newer is not None and newer.size == v["checkpoints"][-1]["size"]


def test_values_follow_from_the_protocol_alone() -> None:
    """Recomputed with hashlib, rfc8785 and cryptography: docs/protocol.md §1–§4."""
    v = load()
    author = seed_of(v["author"]["seedLabel"])
    public = raw_public(author)
    assert b64url(public) == v["author"]["publicKey"]
    assert v["author"]["keyId"] == "sha256:" + hashlib.sha256(public).hexdigest()[:16]
    for d in v["dreams"]:
        submitted = json.loads((VECTORS / "submitted" / f"{d['id']}.json").read_bytes())
        signed = {k: v for k, v in submitted.items() if k != "sig"}
        data = rfc8785.dumps(signed)
        assert data == (VECTORS / "signed-bytes" / f"{d['id']}.jcs").read_bytes()
        assert data.decode() == d["signedBytes"]
        signature = author.sign(data)  # Ed25519 is deterministic (RFC 8032)
        assert b64url(signature) == submitted["sig"]["value"] == d["signature"]
        assert hashlib.sha256(signature).hexdigest()[:16] == d["id"]
        salt = b64url(hashlib.sha256(d["saltLabel"].encode()).digest())
        record = json.loads((VECTORS / "site" / "dreams" / d["id"] / "record.json").read_bytes())
        assert record == {
            "format": "dreampool-record/v1",
            "id": d["id"],
            "index": d["index"],
            "salt": salt,
            "dream": submitted,
        }
        commitment_input = rfc8785.dumps({"dream": submitted, "salt": salt})
        assert commitment_input.decode() == d["commitmentInput"]
        commitment = hashlib.sha256(commitment_input).hexdigest()
        assert commitment == d["commitment"]
        leaf = rfc8785.dumps({"v": 1, "kind": "dream", "id": d["id"], "commitment": commitment})
        assert leaf.decode() == d["leafData"]
        assert hashlib.sha256(b"\x00" + leaf).hexdigest() == d["leafHash"]
    leaves = [leaf["data"].encode() for leaf in v["leaves"]]
    for cp in v["checkpoints"]:
        root = mth(leaves[: cp["size"]])
        assert base64.b64encode(root).decode() == cp["rootBase64"]
        note = (VECTORS / "site" / "log" / "checkpoints" / str(cp["size"])).read_bytes()
        text = f"{v['origin']}\n{cp['size']}\n{cp['rootBase64']}\n".encode()
        assert note.startswith(text + b"\n")
        check_note_signature(note, text, v["origin"], v["log"]["seedLabel"])


def mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 §2.1 Merkle Tree Hash, written straight from the RFC."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def check_note_signature(note: bytes, text: bytes, origin: str, seed_label: str) -> None:
    """C2SP signed-note: `— <name> base64(key ID ‖ Ed25519 signature)`, signed deterministically."""
    key = seed_of(seed_label)
    key_id = hashlib.sha256(origin.encode() + b"\n\x01" + raw_public(key)).digest()[:4]
    line = "— " + origin + " " + base64.b64encode(key_id + key.sign(text)).decode() + "\n"
    assert note == text + b"\n" + line.encode()


def test_no_private_key_is_written() -> None:
    v = load()
    secrets = [hashlib.sha256(v["author"]["seedLabel"].encode()).digest()]
    secrets.append(hashlib.sha256(v["log"]["seedLabel"].encode()).digest())
    encodings = [
        form
        for seed in secrets
        for form in (seed.hex().encode(), b64url(seed).encode(), base64.b64encode(seed))
    ]
    for path in VECTORS.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"PRIVATE+KEY" not in data, path
            assert not any(form in data for form in encodings), path


@pytest.mark.parametrize("flip", [0, 7, 30])
def test_a_changed_record_fails(flip: int) -> None:
    v = load()
    d = v["dreams"][0]
    site = VECTORS / "site"
    record = bytearray((site / "dreams" / d["id"] / "record.json").read_bytes())
    at = record.index(b'"title": "') + 10 + flip
    record[at] ^= 0x01
    with pytest.raises(VerificationError):
        lightclient.verify_proof(
            (site / "dreams" / d["id"] / "proof.tlog-proof").read_bytes(),
            bytes(record),
            (site / "log" / "policy").read_bytes(),
        )


def test_the_protocol_doc_quotes_the_vectors() -> None:
    """Every hash, key, id and signature docs/protocol.md shows is one the vectors hold."""
    doc = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
    everything = b"".join(p.read_bytes() for p in VECTORS.rglob("*") if p.is_file())
    quoted = re.findall(
        r"[0-9a-f]{64}|\b[0-9a-f]{16}\b|[A-Za-z0-9+/]{43}=|[A-Za-z0-9+/]{88,}={0,2}"
        r"|[A-Za-z0-9_-]{86}|\b[A-Za-z0-9_-]{43}\b",
        doc,
    )
    assert len(quoted) >= 10
    for value in quoted:
        assert value.encode() in everything, f"docs/protocol.md quotes {value}, not in the vectors"
