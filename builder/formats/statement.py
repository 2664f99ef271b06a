"""Signed statements other than dreams (docs/protocol.md §1, last rule).

Any object an author key signs besides a dream names what it is in a
``"type"`` field, so no signed object can be mistaken for another: a dream
has no ``type`` and its signed bytes never hold one. A statement is signed
over JCS of every field but ``sig``; ``sig`` has the dream's shape
``{alg, keyId, publicKey, value}``.

Types:

* ``dreampool.rotate/v1`` ``{author, oldKeyId, newKeyId, newPublicKey}``,
  signed by the old key: the author moves to a new key.
* ``dreampool.erase/v1`` ``{id, reason}``, signed by the dream's key: the
  author asks for a dream to be erased.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builder.errors import InputError, Problem, SignatureError
from builder.formats import ed25519, strictjson
from builder.formats.b64 import b64url_decode, b64url_encode
from builder.formats.dream import key_id, validate_author

ROTATE = "dreampool.rotate/v1"
ERASE = "dreampool.erase/v1"

FIELDS: dict[str, tuple[str, ...]] = {
    ROTATE: ("author", "oldKeyId", "newKeyId", "newPublicKey"),
    ERASE: ("id", "reason"),
}


def sign(obj: Mapping[str, Any], seed: bytes) -> dict[str, Any]:
    body = {k: v for k, v in obj.items() if k != "sig"}
    public_key = ed25519.public_key_of(seed)
    body["sig"] = {
        "alg": "ed25519",
        "keyId": key_id(public_key),
        "publicKey": b64url_encode(public_key),
        "value": b64url_encode(ed25519.sign(seed, strictjson.canonical(body))),
    }
    return body


def verify(obj: Any, file: str, expected_type: str) -> str:
    """Check shape and signature of a statement; return the signing keyId."""
    if not isinstance(obj, dict) or obj.get("type") != expected_type:
        raise InputError([Problem(file, "/type", f'must be "{expected_type}"')])
    wanted = ("type", *FIELDS[expected_type], "sig")
    problems = [Problem(file, f"/{k}", "unknown field") for k in obj if k not in wanted]
    problems += [Problem(file, f"/{k}", "is required but missing") for k in wanted if k not in obj]
    problems += [
        Problem(file, f"/{k}", "must be a string")
        for k in FIELDS[expected_type]
        if k in obj and not isinstance(obj[k], str)
    ]
    if expected_type == ROTATE and isinstance(obj.get("author"), str):
        # The name a key leaf will carry: a dream's author rules (docs/protocol.md §1.1).
        problems += validate_author(obj["author"], file, "/author")
    sig = obj.get("sig")
    if not isinstance(sig, dict) or set(sig) != {"alg", "keyId", "publicKey", "value"}:
        problems.append(Problem(file, "/sig", "must be an object {alg, keyId, publicKey, value}"))
    if problems:
        raise InputError(problems)
    assert isinstance(sig, dict)
    try:
        public_key = b64url_decode(str(sig["publicKey"]))
        signature = b64url_decode(str(sig["value"]))
    except ValueError as exc:
        raise InputError([Problem(file, "/sig", str(exc))]) from None
    body = {k: v for k, v in obj.items() if k != "sig"}
    try:
        ed25519.verify(public_key, strictjson.canonical(body), signature)
    except SignatureError as exc:
        raise SignatureError(f"{file}: /sig: {exc.message}") from None
    if sig.get("alg") != "ed25519" or sig.get("keyId") != key_id(public_key):
        raise SignatureError(f"{file}: /sig/keyId: does not match the public key")
    return key_id(public_key)
