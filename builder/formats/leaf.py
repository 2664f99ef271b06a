"""The log leaf wire format: docs/protocol.md §3, the one module that reads and writes it.

A leaf's data is the JCS (RFC 8785) of one small object, of one of three kinds::

    dream    {"v":1,"kind":"dream","id":<16 hex>,"commitment":<64 hex>}
    key      {"v":1,"kind":"key","keyId":"sha256:<16 hex>","publicKey":<b64url>,"author":<name>}
    erasure  {"v":1,"kind":"erasure","id":<16 hex>,"reason":"author-request"|"legal"|"abuse"}

:class:`DreamLeaf`, :class:`KeyLeaf` and :class:`ErasureLeaf` are those objects as
typed, frozen values; each checks its fields when it is made, so no value of them
breaks a rule of one leaf. :func:`encode` gives a value's leaf data;
:func:`parse` is its strict inverse: it accepts exactly the bytes :func:`encode`
can give (so ``encode(parse(b)) == b`` for every ``b`` it accepts) and refuses
anything else with a :class:`LeafError` naming the member and what §3 wants.

Pure: no I/O. A caller reading leaves from somewhere (``content/log/leaves``, a
site's entry bundles, a proof's ``extra`` line) says where in its own error,
around :attr:`LeafError.message`.

Only rules of one leaf live here. The rules *across* leaves (each id logged at
most once, a key leaf before its dream's leaf, key retirement, an erasure naming
an earlier dream leaf) belong to whoever replays the log
(:mod:`builder.log.logbuild`, ``tests/independent_verifier.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from builder.errors import DreampoolError, SignatureError
from builder.formats import dream as dreamfmt
from builder.formats import ed25519, strictjson
from builder.formats.b64 import b64url_decode, b64url_encode

__all__ = [
    "MAX_LEAF_SIZE",
    "REASONS",
    "DreamLeaf",
    "ErasureLeaf",
    "KeyLeaf",
    "Leaf",
    "LeafError",
    "encode",
    "parse",
]

# docs/protocol.md §3: the three reasons an erasure leaf may give.
REASONS: Final = ("author-request", "legal", "abuse")

# The largest leaf §3 allows is a key leaf with a 64-code-point author of
# 4-byte characters: about 400 bytes. Anything past this is refused before it
# is parsed.
MAX_LEAF_SIZE: Final = 1024

# docs/protocol.md §3: each kind's exact member set ("each leaf holds exactly the
# members shown").
_MEMBERS: Final = {
    "dream": frozenset({"v", "kind", "id", "commitment"}),
    "key": frozenset({"v", "kind", "keyId", "publicKey", "author"}),
    "erasure": frozenset({"v", "kind", "id", "reason"}),
}
_ID = re.compile(r"[0-9a-f]{16}")  # §3 dream, erasure: 16 lowercase hex (§1's dream id)
_COMMITMENT = re.compile(r"[0-9a-f]{64}")  # §3 dream: 64 lowercase hex (§2's commitment)
_KEY_ID = re.compile(r"sha256:[0-9a-f]{16}")  # §3 key: §1's keyId

# The exact JCS bytes of every valid dream and erasure leaf (docs/protocol.md §3:
# members sorted by code point, no whitespace, hex and reasons need no escape).
# Bytes matching one of these are a leaf, so :func:`parse` takes them without the
# general path (strict JSON, then JCS again): a log is mostly dream leaves, and
# every build reads all of them. Anything else, valid key leaves included, takes
# the general path, which also names what is wrong; tests/test_leaf.py checks
# that both paths agree.
_DREAM_BYTES = re.compile(
    rb'\{"commitment":"([0-9a-f]{64})","id":"([0-9a-f]{16})","kind":"dream","v":1\}'
)
_ERASURE_BYTES = re.compile(
    rb'\{"id":"([0-9a-f]{16})","kind":"erasure","reason":"(author-request|legal|abuse)","v":1\}'
)


class LeafError(DreampoolError):
    """Bytes (or values) that are no leaf of docs/protocol.md §3.

    ``member`` is the JSON member at fault (``"commitment"``, ``"keyId"`` …), or
    ``""`` when the fault is the leaf as a whole (not JSON, not canonical, an
    unknown member). ``message`` starts with the member, as ``/commitment: …``,
    says what §3 wants, and never echoes a member's value."""

    def __init__(self, member: str, rule: str) -> None:
        super().__init__(
            f"/{member}: {rule}" if member else rule,
            hint="a log leaf is exactly one of the three objects of docs/protocol.md §3",
        )
        self.member = member


def _check_id(value: object, member: str = "id") -> None:
    # docs/protocol.md §3: "id is 16 lowercase hex".
    if not (isinstance(value, str) and _ID.fullmatch(value)):
        raise LeafError(member, f"must be a dream id, 16 lowercase hex characters; {_shape(value)}")


def _shape(value: object) -> str:
    """What a value is, without echoing it (a leaf comes from a hostile file)."""
    if isinstance(value, str):
        return f"is a string of {len(value)} characters"
    if value is None:
        return "is null"
    if isinstance(value, bool):
        return "is a boolean"
    if isinstance(value, dict):
        return "is an object"
    if isinstance(value, list):
        return "is an array"
    return "is a number"


@dataclass(frozen=True, slots=True)
class DreamLeaf:
    """``{"v":1,"kind":"dream","id","commitment"}``: a dream was logged, committed to by
    ``commitment`` = hex(H(JCS({"dream", "salt"}))) (docs/protocol.md §2)."""

    id: str
    commitment: str
    kind: ClassVar[str] = "dream"

    def __post_init__(self) -> None:
        _check_id(self.id)
        # docs/protocol.md §3: "commitment 64" lowercase hex.
        if not (isinstance(self.commitment, str) and _COMMITMENT.fullmatch(self.commitment)):
            raise LeafError(
                "commitment",
                f"must be 64 lowercase hex characters (a SHA-256); {_shape(self.commitment)}",
            )


@dataclass(frozen=True, slots=True)
class KeyLeaf:
    """``{"v":1,"kind":"key","keyId","publicKey","author"}``: an author's key joined the
    log's key directory. ``public_key`` holds the raw 32 bytes; the leaf carries their
    b64url."""

    key_id: str
    public_key: bytes
    author: str
    kind: ClassVar[str] = "key"

    def __post_init__(self) -> None:
        # docs/protocol.md §3: publicKey is b64url of 32 bytes which pass §1's
        # key-validity rules (size, y < p, not of small order: builder.formats.ed25519).
        if not isinstance(self.public_key, bytes):
            raise LeafError("publicKey", "must be the b64url of a 32-byte Ed25519 public key")
        try:
            ed25519.check_public_key(self.public_key)
        except SignatureError as exc:
            raise LeafError("publicKey", f"{exc.message} (docs/protocol.md §1)") from None
        # docs/protocol.md §3: keyId is §1's keyId of publicKey.
        if not (isinstance(self.key_id, str) and _KEY_ID.fullmatch(self.key_id)):
            raise LeafError(
                "keyId",
                f"must be 'sha256:' and 16 lowercase hex characters; {_shape(self.key_id)}",
            )
        if self.key_id != dreamfmt.key_id(self.public_key):
            raise LeafError(
                "keyId",
                "is not the keyId of publicKey ('sha256:' + the first 16 hex of "
                "SHA-256 of the raw key, docs/protocol.md §1)",
            )
        # docs/protocol.md §3: author follows §1's author rules (1–64 characters, §1.1).
        problems = dreamfmt.validate_author(self.author, "")
        if problems:
            raise LeafError("author", problems[0].rule)


@dataclass(frozen=True, slots=True)
class ErasureLeaf:
    """``{"v":1,"kind":"erasure","id","reason"}``: the dream ``id`` was erased; its text
    and salt are gone, its dream leaf stays."""

    id: str
    reason: str
    kind: ClassVar[str] = "erasure"

    def __post_init__(self) -> None:
        _check_id(self.id)
        # docs/protocol.md §3: reason is one of the three shown.
        if self.reason not in REASONS:
            raise LeafError("reason", f"must be one of {', '.join(REASONS)}")


Leaf = DreamLeaf | KeyLeaf | ErasureLeaf


def _object(leaf: Leaf) -> dict[str, Any]:
    """The JSON object of docs/protocol.md §3's table for ``leaf``."""
    if isinstance(leaf, DreamLeaf):
        return {"v": 1, "kind": "dream", "id": leaf.id, "commitment": leaf.commitment}
    if isinstance(leaf, KeyLeaf):
        return {
            "v": 1,
            "kind": "key",
            "keyId": leaf.key_id,
            "publicKey": b64url_encode(leaf.public_key),
            "author": leaf.author,
        }
    return {"v": 1, "kind": "erasure", "id": leaf.id, "reason": leaf.reason}


def encode(leaf: Leaf) -> bytes:
    """docs/protocol.md §3: a leaf's data is JCS of its object."""
    return strictjson.canonical(_object(leaf))


def parse(data: bytes) -> Leaf:
    """The leaf ``data`` holds, read as strictly as docs/protocol.md §3 asks.

    Refused, with a :class:`LeafError`: anything that is not strict JSON
    (:mod:`builder.formats.strictjson`: duplicate member names, invalid UTF-8 …) or more
    than :data:`MAX_LEAF_SIZE` bytes; not an object; ``v`` other than the integer 1;
    a ``kind`` other than dream, key, erasure; a missing or unknown member; a
    member that breaks its rule (see the three classes); bytes that are not the
    JCS of the object they hold. The rules are checked in that order, so the
    error names the first one broken."""
    fast = _DREAM_BYTES.fullmatch(data)
    if fast is not None:
        return DreamLeaf(fast[2].decode("ascii"), fast[1].decode("ascii"))
    fast = _ERASURE_BYTES.fullmatch(data)
    if fast is not None:
        return ErasureLeaf(fast[1].decode("ascii"), fast[2].decode("ascii"))
    return _parse_general(data)


def _parse_general(data: bytes) -> Leaf:
    """:func:`parse` without its shortcut for the common shapes: every rule, in order."""
    try:
        obj = strictjson.loads(data, max_bytes=MAX_LEAF_SIZE, max_depth=2)
    except strictjson.JSONError as exc:
        raise LeafError("", f"is not strict JSON: {exc.message}") from None
    if not isinstance(obj, dict):
        raise LeafError("", "must be a JSON object (docs/protocol.md §3)")
    # docs/protocol.md §3: "v is the integer 1".
    v = obj.get("v")
    if type(v) is not int or v != 1:
        raise LeafError("v", "must be the integer 1 (the only leaf version, docs/protocol.md §3)")
    # docs/protocol.md §3: "These three kinds are all of v1 … MUST refuse a leaf of any
    # other kind".
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in _MEMBERS:
        raise LeafError("kind", "must be dream, key or erasure (docs/protocol.md §3)")
    # docs/protocol.md §3: "Each leaf holds exactly the members shown".
    want = _MEMBERS[kind]
    missing = sorted(want - obj.keys())
    if missing:
        raise LeafError("", f"a {kind} leaf lacks member(s) {', '.join(missing)}")
    unknown = sorted(obj.keys() - want)
    if unknown:
        shown = ", ".join(repr(name[:32]) for name in unknown[:4])
        raise LeafError(
            "",
            f"a {kind} leaf holds exactly {', '.join(sorted(want))}; unknown member(s) {shown}",
        )
    leaf: Leaf
    if kind == "dream":
        leaf = DreamLeaf(obj["id"], obj["commitment"])
    elif kind == "key":
        public = obj["publicKey"]
        try:
            raw = b64url_decode(public) if isinstance(public, str) else None
        except ValueError as exc:
            raise LeafError("publicKey", f"must be unpadded base64url: {exc}") from None
        if raw is None:
            raise LeafError("publicKey", f"must be a b64url string; {_shape(public)}")
        leaf = KeyLeaf(obj["keyId"], raw, obj["author"])
    else:
        leaf = ErasureLeaf(obj["id"], obj["reason"])
    # docs/protocol.md §3: "its data is JCS-canonical"; one leaf, one spelling.
    if encode(leaf) != data:
        raise LeafError(
            "",
            "is not JCS-canonical (RFC 8785: members sorted, no whitespace, "
            "shortest escapes): one leaf has one spelling",
        )
    return leaf
