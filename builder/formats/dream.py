"""A signed dream: docs/protocol.md §1.

A dream is a strict JSON object (at most 64 KiB)::

    {"author": "ada", "title": "…", "summary": "…",
     "entries": [{"text": "…", "type": "lesson", "confidence": "confirmed"}],
     "tags": ["rust"], "lineage": {"parent": "<id>", "generation": 1},
     "consent": {"share": true, "derivatives": false, "anonymize": false},
     "sig": {"alg": "ed25519", "keyId": "sha256:<16 hex>",
             "publicKey": "<b64url 32 bytes>", "value": "<b64url 64 bytes>"}}

* signed bytes = JCS of the object holding exactly the present fields among
  author, title, summary, entries, tags, lineage, consent (``sig`` is not
  signed);
* keyId = ``"sha256:"`` + first 16 hex of SHA-256(raw public key);
* id = first 16 hex of SHA-256(raw 64-byte signature).

Which fields are optional: docs/protocol.md marks ``entries[].source``,
``lineage``, ``lineage.parent`` and ``consent.derivatives`` (default false)
as optional, and signs "the fields … that are present". We read ``summary``
(an empty summary is allowed anyway) and ``tags`` (an empty list is allowed)
as optional too, and everything else as required. Optional fields are
omitted, never ``null``.

:func:`validate` lists every rule a value breaks, as :class:`Problem` rows
with a JSON pointer, without echoing values (a value may be a secret): sizes
are given instead. Lengths are counted in Unicode code points.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from builder.errors import InputError, Problem, SignatureError
from builder.formats import ed25519, strictjson, unicodepolicy
from builder.formats.b64 import b64url_decode, b64url_encode

MAX_BYTES = 64 * 1024

ENTRY_TYPES = ("fact", "decision", "preference", "lesson", "rule", "warning", "theory", "plan")
CONFIDENCES = ("confirmed", "unconfirmed", "theory")
SIGNED_FIELDS = ("author", "title", "summary", "entries", "tags", "lineage", "consent")
TOP_FIELDS = (*SIGNED_FIELDS, "sig")
REQUIRED_TOP = ("author", "title", "entries", "consent", "sig")

# Unicode hygiene: every text field follows one policy, docs/protocol.md §1.1
# (builder.formats.unicodepolicy): no default-ignorable, control, format, private-use,
# unassigned, surrogate or separator code point, but for the narrow exceptions
# it states (an emoji's presentation selector, ZWJ in an emoji sequence, ZWNJ
# and ZWJ where a script joins). Newline only where Markdown or prose needs it.
_TEXT_RULE = (
    "text holds no control, format, invisible, private-use or unassigned character "
    f"(docs/protocol.md §1.1, Unicode {unicodepolicy.UNICODE_VERSION})"
)

_KEY_ID_RE = re.compile(r"sha256:[0-9a-f]{16}")
_DREAM_ID_RE = re.compile(r"[0-9a-f]{16}")


def key_id(public_key: bytes) -> str:
    """docs/protocol.md §1: ``"sha256:"`` + first 16 hex chars of H(raw public key)."""
    return "sha256:" + hashlib.sha256(public_key).hexdigest()[:16]


def dream_id(signature: bytes) -> str:
    """docs/protocol.md §1: first 16 hex chars of H(raw 64-byte signature)."""
    return hashlib.sha256(signature).hexdigest()[:16]


def is_dream_id(text: str) -> bool:
    return bool(_DREAM_ID_RE.fullmatch(text))


def signed_bytes(obj: Mapping[str, Any]) -> bytes:
    """docs/protocol.md §1: JCS of the object holding exactly the present signed fields."""
    return strictjson.canonical({k: obj[k] for k in SIGNED_FIELDS if k in obj})


# The fields of a dream every page that lists it reads (title, author, tags,
# lineage, consent), beside the types of its entries: a dream's *head*. A build
# that renders a dream again only for a list page (most of an incremental build)
# needs no more, and the build's store keeps the head apart from the body, so
# that the text of dreams nobody renders is never decoded (builder.buildcache).
HEAD_FIELDS = ("author", "title", "tags", "lineage", "consent")


class Dream:
    """A dream whose format and signature have been verified, or (:func:`parse_committed`)
    whose exact object a proven log leaf commits to, which admission verified.

    Immutable. ``body`` is the signed object. A dream read back from the build's
    store (:meth:`deferred`) holds its head and a way to load the body, and
    loads it the first time ``body`` is asked for: :attr:`head`,
    :attr:`entry_types`, :attr:`author` and :attr:`title` never load it.
    """

    __slots__ = ("_body", "_head", "_load", "_types", "id", "key_id", "public_key")

    id: str
    key_id: str
    public_key: bytes
    _body: Mapping[str, Any] | None
    _head: Mapping[str, Any] | None
    _types: tuple[str, ...] | None
    _load: Callable[[], Mapping[str, Any]] | None

    def __init__(self, id: str, key_id: str, public_key: bytes, body: Mapping[str, Any]) -> None:
        self._fill(id, key_id, public_key, body, None, None, None)

    @classmethod
    def deferred(
        cls,
        id: str,
        key_id: str,
        public_key: bytes,
        head: Mapping[str, Any],
        entry_types: tuple[str, ...],
        load: Callable[[], Mapping[str, Any]],
    ) -> Dream:
        """A dream whose ``head`` (:data:`HEAD_FIELDS` present in its body) and
        entry types are known, and whose body ``load()`` gives when first asked
        for. The caller vouches that they are of one body (the build's store
        writes them together, from a dream it verified: builder.buildcache)."""
        d = cls.__new__(cls)
        d._fill(id, key_id, public_key, None, head, entry_types, load)
        return d

    def _fill(
        self,
        id: str,
        key_id: str,
        public_key: bytes,
        body: Mapping[str, Any] | None,
        head: Mapping[str, Any] | None,
        types: tuple[str, ...] | None,
        load: Callable[[], Mapping[str, Any]] | None,
    ) -> None:
        # Slot by slot, unrolled: a build fills one per dream of the pool (a
        # loop over the names was a third of reading the store's scan rows).
        init = object.__setattr__
        init(self, "id", id)
        init(self, "key_id", key_id)
        init(self, "public_key", public_key)
        init(self, "_body", body)
        init(self, "_head", head)
        init(self, "_types", types)
        init(self, "_load", load)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a Dream is immutable (tried to set {name})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Dream is immutable (tried to delete {name})")

    @property
    def body(self) -> Mapping[str, Any]:
        # _load is read before _body: a first read in another thread stores
        # _body before it clears _load, so a None _load here means _body is
        # set. Read the other way round, a reader that found _body None could
        # then find _load cleared by the other thread, and failed (review r31).
        load = self._load
        body = self._body
        if body is None:
            assert load is not None
            body = load()
            object.__setattr__(self, "_body", body)  # a race loads it twice, equal
            object.__setattr__(self, "_load", None)
        return body

    @property
    def loaded(self) -> bool:
        """Whether the body is in memory (a deferred dream's, once asked for)."""
        return self._body is not None

    @property
    def head(self) -> Mapping[str, Any]:
        """The fields of :data:`HEAD_FIELDS` the body holds, without loading it."""
        head = self._head
        if head is None:
            body = self.body
            head = {k: body[k] for k in HEAD_FIELDS if k in body}
            object.__setattr__(self, "_head", head)
        return head

    @property
    def entry_types(self) -> tuple[str, ...]:
        """Each entry's ``type``, in order, without loading a deferred body."""
        types = self._types
        if types is None:
            types = tuple(str(e["type"]) for e in self.body["entries"])
            object.__setattr__(self, "_types", types)
        return types

    @property
    def author(self) -> str:
        return str(self.head["author"])

    @property
    def title(self) -> str:
        return str(self.head["title"])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dream):
            return NotImplemented
        return (self.id, self.key_id, self.public_key, self.body) == (
            other.id,
            other.key_id,
            other.public_key,
            other.body,
        )

    __hash__ = None  # type: ignore[assignment]  # the body is a dict

    def __repr__(self) -> str:
        return f"Dream(id={self.id!r}, key_id={self.key_id!r})"

    def __reduce__(self) -> tuple[Callable[..., Dream], tuple[Any, ...]]:
        # The scan's workers hand every verified dream back pickled, over a
        # pipe (builder.parallel), and a unit to render goes to a worker the
        # same way. A deferred dream whose body was not read goes as one, with
        # its loader (which names where the body is: builder.buildcache, whose
        # store a forked worker reads itself), so that handing it to a worker
        # reads and keeps nothing here.
        load = self._load
        body = self._body
        if body is None and load is not None:
            head, types = self._head, self._types
            return (Dream.deferred, (self.id, self.key_id, self.public_key, head, types, load))
        return (Dream, (self.id, self.key_id, self.public_key, self.body))


def parse(data: bytes, file: str) -> Dream:
    """Read, validate and verify one signed dream; raise :class:`InputError` or
    :class:`SignatureError` naming ``file``."""
    obj = load_json(data, file)
    problems = validate(obj, file)
    if problems:
        raise InputError(problems, hint=_fix_hint(file))
    return verify(obj, file)


def parse_committed(
    data: bytes, file: str, committed: Callable[[Mapping[str, Any]], bool]
) -> Dream | None:
    """A logged dream read by the strict parser alone, or None.

    ``data`` goes through what :func:`parse` does before the signature (the
    strict JSON reader, the size limit, every §1 rule of :func:`validate`,
    the Unicode policy among them); then ``committed(obj)`` decides. Only a
    caller that can show the exact object was admitted passes a ``committed``
    that may say yes: :func:`builder.content.pool.scan_dreams` compares its commitment
    with a leaf of a log proven against the signed checkpoints
    (docs/protocol.md §3.1, "Checking a logged dream"). The signature is then
    not verified again: the commitment binds ``sig`` with the rest, so id and
    keyId below come from the bytes admission verified. None (any rule
    broken, a keyId that does not match its key, or no commitment) means:
    check the file in full, as a new dream is (:func:`parse`), which names
    the problems."""
    try:
        obj = load_json(data, file)
    except InputError:
        return None
    if validate(obj, file) or not committed(obj):
        return None
    sig = obj["sig"]
    public_key = b64url_decode(sig["publicKey"])
    if sig["keyId"] != key_id(public_key):
        return None
    return Dream(
        id=dream_id(b64url_decode(sig["value"])),
        key_id=sig["keyId"],
        public_key=public_key,
        body=obj,
    )


_LOAD_HINT = "dreams are strict UTF-8 JSON of at most 64 KiB; fix the file and try again"


def load_json(data: bytes, file: str, *, max_bytes: int = MAX_BYTES) -> Any:
    """Strict JSON (see :mod:`builder.formats.strictjson`), errors as :class:`InputError`."""
    if not data.strip():
        raise InputError([Problem(file, "", "the file is empty", 1)], hint=_LOAD_HINT)
    try:
        return strictjson.loads(data, max_bytes=max_bytes)
    except strictjson.JSONError as exc:
        raise InputError([Problem(file, "", exc.message, exc.line)], hint=_LOAD_HINT) from None


def too_big(file: str, size: int) -> InputError:
    """The error for a dream file of ``size`` bytes, over :data:`MAX_BYTES`.

    Readers take only ``MAX_BYTES + 1`` bytes of a file (enough to know it is
    too big); ``size`` is its real size, from ``fstat``, not what was read.
    """
    return InputError(
        [Problem(file, "", f"file is {size} bytes, the limit is {MAX_BYTES}")], hint=_LOAD_HINT
    )


def verify(obj: Mapping[str, Any], file: str) -> Dream:
    """Check signature, keyId and public key of a schema-valid dream object."""
    sig = obj["sig"]
    public_key = b64url_decode(sig["publicKey"])
    signature = b64url_decode(sig["value"])
    try:
        ed25519.verify(public_key, signed_bytes(obj), signature)
    except SignatureError as exc:
        # The equation fails on an edit; a key or signature §1 refuses comes
        # from no honest signer, and says what to do itself or gets this.
        hint = (
            "the dream was changed after signing, or signed with another key; "
            "sign the draft again with `dreampool sign`"
            if exc.message == "signature does not verify"
            else exc.hint
            or "no Ed25519 signer makes such a signature (docs/protocol.md §1); "
            "sign the draft again with `dreampool sign`"
        )
        raise SignatureError(f"{file}: /sig: {exc.message}", hint=hint) from None
    want = key_id(public_key)
    if sig["keyId"] != want:
        raise SignatureError(
            f"{file}: /sig/keyId: does not match the public key (want {want})",
            hint="keyId is 'sha256:' + the first 16 hex of SHA-256 of the raw public key",
        )
    return Dream(id=dream_id(signature), key_id=want, public_key=public_key, body=obj)


def sign(draft: Mapping[str, Any], seed: bytes) -> dict[str, Any]:
    """Sign a draft (its ``sig``, if any, is replaced). The draft must validate."""
    body = {k: draft[k] for k in SIGNED_FIELDS if k in draft}
    public_key = ed25519.public_key_of(seed)
    signature = ed25519.sign(seed, signed_bytes(body))
    body["sig"] = {
        "alg": "ed25519",
        "keyId": key_id(public_key),
        "publicKey": b64url_encode(public_key),
        "value": b64url_encode(signature),
    }
    return body


def validate_author(name: Any, file: str, pointer: str = "") -> list[Problem]:
    """The docs/protocol.md §1 rules for an author pseudonym alone."""
    return validate_text(name, file, pointer, 1, 64)


def validate_text(
    value: Any, file: str, pointer: str, lo: int, hi: int, *, newline: bool = False
) -> list[Problem]:
    """The rules of a dream's text fields for one value: a string of ``lo``–``hi``
    characters that docs/protocol.md §1.1 (:mod:`builder.formats.unicodepolicy`) allows,
    with no newline unless ``newline``."""
    v = _Validator(file)
    v.string(pointer, value, lo, hi, newline=newline)
    return v.problems


def _fix_hint(file: str) -> str:
    return f"fix the fields listed above in {file} (docs/protocol.md §1), then sign it again"


# --- schema --------------------------------------------------------------


def validate(obj: Any, file: str, *, require_sig: bool = True) -> list[Problem]:
    """Every docs/protocol.md §1 rule ``obj`` breaks (empty list: it is well formed).

    With ``require_sig=False`` a draft (no ``sig``) is checked.
    """
    v = _Validator(file)
    if not isinstance(obj, dict):
        v.add("", f"must be a JSON object, is {_kind(obj)}")
        return v.problems
    allowed = TOP_FIELDS if require_sig else (*SIGNED_FIELDS, "sig")
    v.unknown("", obj, allowed)
    required = REQUIRED_TOP if require_sig else tuple(f for f in REQUIRED_TOP if f != "sig")
    v.required("", obj, required)
    if "author" in obj:
        v.string("/author", obj["author"], 1, 64)
    if "title" in obj:
        v.string("/title", obj["title"], 1, 120)
    if "summary" in obj:
        v.string("/summary", obj["summary"], 0, 800, newline=True)
    if "entries" in obj:
        v.entries(obj["entries"])
    if "tags" in obj:
        v.tags(obj["tags"])
    if "lineage" in obj:
        v.lineage(obj["lineage"])
    if "consent" in obj:
        v.consent(obj["consent"])
    if require_sig and "sig" in obj:
        v.sig(obj["sig"])
    return v.problems


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    return "an object"


class _Validator:
    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    def add(self, pointer: str, rule: str) -> None:
        self.problems.append(Problem(self.file, pointer, rule))

    def unknown(self, pointer: str, obj: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
        for name in obj:
            if name not in allowed:
                shown = name if len(name) <= 40 and not unicodepolicy.first_refused(name) else "…"
                self.add(
                    f"{pointer}/{_escape(shown)}",
                    f"unknown field (allowed here: {', '.join(allowed)})",
                )

    def required(self, pointer: str, obj: Mapping[str, Any], names: tuple[str, ...]) -> None:
        for name in names:
            if name not in obj:
                self.add(f"{pointer}/{name}", "is required but missing")

    def string(self, pointer: str, value: Any, lo: int, hi: int, *, newline: bool = False) -> bool:
        if not isinstance(value, str):
            self.add(pointer, f"must be a string of {lo}–{hi} characters, is {_kind(value)}")
            return False
        n = len(value)  # Python str length counts code points
        if not lo <= n <= hi:
            self.add(pointer, f"must be {lo}–{hi} characters, is {n}")
            return False
        bad = unicodepolicy.first_refused(value, newline=newline)  # docs/protocol.md §1.1
        if bad is None:
            return True
        if bad.what.startswith("a lone surrogate"):  # strict JSON has none; other readers may
            self.add(
                pointer,
                f"holds a lone surrogate at character {bad.index}, which is not Unicode text",
            )
        else:
            where = "" if newline else " (newlines are allowed only in summary and entry text)"
            self.add(pointer, f"holds {bad.describe()}; {_TEXT_RULE}{where}")
        return False

    def entries(self, value: Any) -> None:
        if not isinstance(value, list):
            self.add("/entries", f"must be an array of 1–50 entries, is {_kind(value)}")
            return
        if not 1 <= len(value) <= 50:
            self.add("/entries", f"must hold 1–50 entries, holds {len(value)}")
        for i, entry in enumerate(value[:50]):
            p = f"/entries/{i}"
            if not isinstance(entry, dict):
                self.add(
                    p, f"must be an object {{text, type, confidence, source?}}, is {_kind(entry)}"
                )
                continue
            self.unknown(p, entry, ("text", "type", "confidence", "source"))
            self.required(p, entry, ("text", "type", "confidence"))
            if "text" in entry:
                self.string(f"{p}/text", entry["text"], 1, 300, newline=True)
            if "type" in entry:
                self.choice(f"{p}/type", entry["type"], ENTRY_TYPES)
            if "confidence" in entry:
                self.choice(f"{p}/confidence", entry["confidence"], CONFIDENCES)
            if "source" in entry:
                self.string(f"{p}/source", entry["source"], 0, 300)

    def choice(self, pointer: str, value: Any, allowed: tuple[str, ...]) -> None:
        if value not in allowed or not isinstance(value, str):
            self.add(pointer, f"must be one of {', '.join(allowed)}")

    def tags(self, value: Any) -> None:
        if not isinstance(value, list):
            self.add("/tags", f"must be an array of 0–8 strings, is {_kind(value)}")
            return
        if len(value) > 8:
            self.add("/tags", f"must hold 0–8 tags, holds {len(value)}")
        seen: set[str] = set()
        for i, tag in enumerate(value[:8]):
            if self.string(f"/tags/{i}", tag, 1, 32) and tag in seen:
                self.add(f"/tags/{i}", "repeats an earlier tag")
            if isinstance(tag, str):
                seen.add(tag)

    def lineage(self, value: Any) -> None:
        if not isinstance(value, dict):
            self.add("/lineage", f"must be an object {{parent?, generation}}, is {_kind(value)}")
            return
        self.unknown("/lineage", value, ("parent", "generation"))
        self.required("/lineage", value, ("generation",))
        if "parent" in value:
            self.string("/lineage/parent", value["parent"], 1, 64)
        if "generation" in value:
            gen = value["generation"]
            if type(gen) is not int or not 0 <= gen <= 1000:
                self.add("/lineage/generation", f"must be an integer 0–1000, is {_kind(gen)}")

    def consent(self, value: Any) -> None:
        if not isinstance(value, dict):
            self.add(
                "/consent",
                f"must be an object {{share, derivatives, anonymize}}, is {_kind(value)}",
            )
            return
        self.unknown("/consent", value, ("share", "derivatives", "anonymize"))
        self.required("/consent", value, ("share", "anonymize"))
        if "share" in value and value["share"] is not True:
            self.add(
                "/consent/share", "must be true: only dreams consented for sharing enter a pool"
            )
        for name in ("derivatives", "anonymize"):
            if name in value and not isinstance(value[name], bool):
                self.add(f"/consent/{name}", f"must be true or false, is {_kind(value[name])}")

    def sig(self, value: Any) -> None:
        if not isinstance(value, dict):
            self.add(
                "/sig", f"must be an object {{alg, keyId, publicKey, value}}, is {_kind(value)}"
            )
            return
        self.unknown("/sig", value, ("alg", "keyId", "publicKey", "value"))
        self.required("/sig", value, ("alg", "keyId", "publicKey", "value"))
        if "alg" in value and value["alg"] != "ed25519":
            self.add("/sig/alg", 'must be "ed25519"')
        if "keyId" in value and not (
            isinstance(value["keyId"], str) and _KEY_ID_RE.fullmatch(value["keyId"])
        ):
            self.add("/sig/keyId", 'must be "sha256:" followed by 16 lowercase hex characters')
        for name, size in (("publicKey", 32), ("value", 64)):
            if name in value:
                self.b64url(f"/sig/{name}", value[name], size)

    def b64url(self, pointer: str, value: Any, size: int) -> None:
        if not isinstance(value, str):
            self.add(pointer, f"must be unpadded base64url of {size} bytes, is {_kind(value)}")
            return
        try:
            raw = b64url_decode(value)
        except ValueError as exc:
            self.add(pointer, f"{exc} ({len(value)} characters)")
            return
        if len(raw) != size:
            self.add(pointer, f"must decode to {size} bytes, decodes to {len(raw)}")


def _escape(name: str) -> str:
    """RFC 6901 §3: escape ``~`` and ``/`` in a pointer segment."""
    return name.replace("~", "~0").replace("/", "~1")


def commitment(dream: Any, salt: str) -> str:
    """docs/protocol.md §2: hex(H(JCS({"dream": dream, "salt": salt}))), what a
    dream leaf commits to (§3): the dream as published, bound to its salt."""
    return hashlib.sha256(strictjson.canonical({"dream": dream, "salt": salt})).hexdigest()
