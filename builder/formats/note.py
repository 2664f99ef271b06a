"""Signed notes, according to c2sp.org/signed-note@v1.0.0, with Ed25519 keys.

A note is UTF-8 text signed by one or more keys. The text must be ignored
unless a trusted key signed it and the signature verified, so the only way to
read a note's text here is :func:`open_note`, which verifies.

Format
------

A signed note is a text ending in newline (U+000A), a blank line, then one or
more signature lines, each: em dash (U+2014), space, key name, space, base64 of
``key ID (4 bytes, big-endian) || signature``, newline. The whole note is UTF-8
with no ASCII control character other than newline. The text may contain
blank lines: it ends at the *last* blank line of the note. The signature
covers the text including its final newline, not the separating blank line.

Key names are non-empty, valid UTF-8, and hold no Unicode space and no plus
(U+002B). A key is identified by the pair (name, key ID), where

    key ID = SHA-256(key name || 0x0A || signature type || public key)[:4]

and the signature type of plain Ed25519 is 0x01 (0x04 is the timestamped
witness cosignature of c2sp.org/tlog-cosignature, in :mod:`builder.formats.checkpoint`).

Keys are written as in golang.org/x/mod/sumdb/note:

* verifier key (vkey): ``<name>+<key ID, 8 lowercase hex>+<base64(type || public key)>``
* private key: ``PRIVATE+KEY+<name>+<key ID>+<base64(type || 32-byte seed)>``

Worked example
--------------

The example of the signed-note spec, with the verifier key
``example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k``::

    This is an example message.

    — example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=

The vkey's base64 decodes to 0x01 (Ed25519) and the 32-byte public key;
SHA-256("example.com/foo" || 0x0A || 0x01 || key) starts with 53 0d 90 3a,
the key ID. The signature line's base64 decodes to 68 bytes: that key ID, then
the 64-byte Ed25519 signature of the 28 bytes ``This is an example message.\\n``.

Strictness
----------

:func:`open_note` refuses the whole note, never skipping a line, when any line
is malformed; when a signature from a known key fails to verify (the spec's
SHOULD); when no known key signed it (the spec's MUST); when it has more than
:data:`MAX_SIGNATURES` signature lines or exceeds :data:`MAX_NOTE_SIZE` bytes
(bounded work, as Go's ``numSig > 100``). Base64 must be canonical (padded, zero
trailing bits), so no two byte strings carry the same signature. Every
signature by a known key is verified, repeats included (Go skips repeats).
Verifier keys must be lowercase hex and canonical base64, and Ed25519 keys of
small order are refused (docs/protocol.md §1, :func:`builder.formats.ed25519.check_public_key`).
Signatures
from unknown keys, even ones sharing a name or a key ID (not both) with a known
key, are kept as unverified: the spec says verifiers MUST ignore them.
"""  # noqa: E501

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from builder.errors import DreampoolError, SignatureError
from builder.formats import ed25519

# Strict base64 lives in one place; these names stay for the note-format modules.
from builder.formats.b64 import b64_decode as b64decode_canonical
from builder.formats.b64 import b64_encode as b64encode

# Signature type identifier bytes (signed-note §Signature types).
SIG_ED25519 = 0x01
SIG_COSIGNATURE_V1 = 0x04

KEY_ID_SIZE = 4
MAX_NOTE_SIZE = 1 << 20
MAX_SIGNATURES = 100
MAX_KEY_SIZE = 4096

EM_DASH = "\u2014"
_SIG_PREFIX = EM_DASH + " "
_PRIVATE_PREFIX = "PRIVATE+KEY+"

# ASCII control characters other than newline (signed-note §Format).
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f]")
# Any ASCII control character, for key names and single lines.
_ANY_CONTROL = re.compile("[\x00-\x1f]")
_KEY_ID_HEX = re.compile("[0-9a-f]{8}")

# Unicode White_Space, the set Go's unicode.IsSpace reports: a key name holds
# none of them (signed-note §Format, "MUST NOT contain any Unicode spaces").
_UNICODE_SPACES = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


class NoteError(DreampoolError):
    """A note, a key or a signature line is malformed."""


def is_valid_name(name: str) -> bool:
    """Report whether name is a valid key name (signed-note §Format).

    Non-empty, valid UTF-8, no Unicode space, no ``+``; and, stricter than the
    spec, no ASCII control character, since a note could never carry it.
    """
    if not name or "+" in name or _ANY_CONTROL.search(name):
        return False
    if any(ch in _UNICODE_SPACES for ch in name):
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    """SHA-256(key name || 0x0A || signature type || public key)[:4] (signed-note §Signatures)."""
    material = name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_key
    return hashlib.sha256(material).digest()[:KEY_ID_SIZE]


# ---------------------------------------------------------------------------
# Keys


def encode_verifier_key(name: str, sig_type: int, public_key: bytes) -> str:
    """The vkey ``<name>+<key ID hex>+<base64(type || public key)>``."""
    _check_name(name, "key name")
    kid = key_id(name, sig_type, public_key)
    return f"{name}+{kid.hex()}+{b64encode(bytes([sig_type]) + public_key)}"


def decode_verifier_key(vkey: str) -> tuple[str, bytes, int, bytes]:
    """Split a vkey into (name, key ID, signature type, public key), checking the key ID.

    Does not check the key material against its type; :func:`parse_verifier_key`
    and :func:`builder.formats.checkpoint.parse_cosigner_key` do.
    """
    if vkey.startswith(_PRIVATE_PREFIX):
        raise NoteError(
            "verifier key: this is a private key, not a verifier key",
            hint="give the verifier key (<name>+<hash>+<key>); keep the private key secret",
        )
    if len(vkey) > MAX_KEY_SIZE:
        raise NoteError(f"verifier key is {len(vkey)} characters, want at most {MAX_KEY_SIZE}")
    name, sep1, rest = vkey.partition("+")
    hash_hex, sep2, key_b64 = rest.partition("+")
    if not sep1 or not sep2:
        raise NoteError("verifier key is malformed: want <name>+<key ID>+<base64 key>")
    _check_name(name, "verifier key name")
    if not _KEY_ID_HEX.fullmatch(hash_hex):
        raise NoteError("verifier key: key ID is not 8 lowercase hex digits")
    try:
        raw = b64decode_canonical(key_b64)
    except ValueError:
        raise NoteError("verifier key: key is not canonical base64") from None
    if len(raw) < 2:
        raise NoteError("verifier key: key is too short to hold a type and a public key")
    sig_type, public_key = raw[0], raw[1:]
    want = key_id(name, sig_type, public_key)
    if want != bytes.fromhex(hash_hex):
        raise NoteError(
            f"verifier key: key ID {hash_hex} does not match its name and key (want {want.hex()})",
            hint="the key ID is SHA-256(name || 0x0A || type || public key)[:4]",
        )
    return name, want, sig_type, public_key


def encode_private_key(name: str, sig_type: int, seed: bytes) -> str:
    """The private key ``PRIVATE+KEY+<name>+<key ID hex>+<base64(type || seed)>`` of a seed."""
    _check_name(name, "key name")
    if len(seed) != ed25519.SEED_SIZE:
        raise NoteError(f"private seed is {len(seed)} bytes, want {ed25519.SEED_SIZE}")
    kid = key_id(name, sig_type, ed25519.public_key_of(seed))
    return f"{_PRIVATE_PREFIX}{name}+{kid.hex()}+{b64encode(bytes([sig_type]) + seed)}"


def decode_private_key(skey: str, sig_type: int) -> tuple[str, bytes]:
    """Split an Ed25519-based private key of the given type into (name, seed).

    The key ID is checked against the public key derived from the seed. No
    error message holds any part of skey.
    """
    malformed = "private key is malformed: want PRIVATE+KEY+<name>+<key ID>+<base64 key>"
    if len(skey) > MAX_KEY_SIZE:
        raise NoteError(f"private key is {len(skey)} characters, want at most {MAX_KEY_SIZE}")
    if not skey.startswith(_PRIVATE_PREFIX):
        raise NoteError(malformed, hint="a private key starts with PRIVATE+KEY+")
    name, sep1, rest = skey[len(_PRIVATE_PREFIX) :].partition("+")
    hash_hex, sep2, key_b64 = rest.partition("+")
    if not sep1 or not sep2 or not is_valid_name(name) or not _KEY_ID_HEX.fullmatch(hash_hex):
        raise NoteError(malformed)
    try:
        raw = b64decode_canonical(key_b64)
    except ValueError:
        raise NoteError(malformed) from None
    if len(raw) != 1 + ed25519.SEED_SIZE:
        raise NoteError(f"private key holds {len(raw)} key bytes, want {1 + ed25519.SEED_SIZE}")
    if raw[0] != sig_type:
        raise NoteError(f"private key has signature type 0x{raw[0]:02x}, want 0x{sig_type:02x}")
    seed = raw[1:]
    if key_id(name, sig_type, ed25519.public_key_of(seed)) != bytes.fromhex(hash_hex):
        raise NoteError("private key: key ID does not match the key")
    return name, seed


class NoteVerifier(Protocol):
    """A key that can check note signatures: the pair (name, key ID) selects it."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> bytes: ...

    def verify(self, text: bytes, signature: bytes) -> None:
        """Raise :class:`SignatureError` unless signature (key ID removed) signs text."""
        ...


class NoteSigner(Protocol):
    """A key that can sign note text."""

    @property
    def name(self) -> str: ...

    @property
    def key_id(self) -> bytes: ...

    def sign(self, text: bytes) -> bytes:
        """The signature of text, without the key ID."""
        ...


@dataclass(frozen=True, slots=True)
class Verifier:
    """An Ed25519 (type 0x01) note verifier key. Construction checks every field."""

    name: str
    key_id: bytes
    public_key: bytes
    algorithm: int = SIG_ED25519

    def __post_init__(self) -> None:
        if self.algorithm != SIG_ED25519:
            raise NoteError(f"verifier algorithm is 0x{self.algorithm:02x}, want 0x01 (Ed25519)")
        _check_name(self.name, "verifier key name")
        ed25519.check_public_key(self.public_key, on_curve=True)  # a vkey (§4.1)
        if self.key_id != key_id(self.name, SIG_ED25519, self.public_key):
            raise NoteError("verifier key ID does not match its name and public key")

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> Verifier:
        """The verifier of a raw 32-byte Ed25519 public key under name."""
        ed25519.check_public_key(public_key, on_curve=True)
        return cls(name, key_id(name, SIG_ED25519, public_key), public_key)

    @property
    def vkey(self) -> str:
        """This key as a vkey string."""
        return encode_verifier_key(self.name, SIG_ED25519, self.public_key)

    def verify(self, text: bytes, signature: bytes) -> None:
        """Ed25519 over the note text (signed-note §Ed25519 signatures)."""
        ed25519.verify(self.public_key, text, signature)


@dataclass(frozen=True, slots=True)
class Signer:
    """An Ed25519 (type 0x01) note signing key; its seed never appears in repr."""

    name: str
    key_id: bytes
    public_key: bytes
    seed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        _check_name(self.name, "signer key name")
        if len(self.seed) != ed25519.SEED_SIZE:
            raise NoteError(f"private seed is {len(self.seed)} bytes, want {ed25519.SEED_SIZE}")
        if self.public_key != ed25519.public_key_of(self.seed):
            raise NoteError("signer public key does not match its seed")
        if self.key_id != key_id(self.name, SIG_ED25519, self.public_key):
            raise NoteError("signer key ID does not match its name and public key")

    @classmethod
    def from_seed(cls, name: str, seed: bytes) -> Signer:
        """The signer of a 32-byte Ed25519 seed under name."""
        if len(seed) != ed25519.SEED_SIZE:
            raise NoteError(f"private seed is {len(seed)} bytes, want {ed25519.SEED_SIZE}")
        public_key = ed25519.public_key_of(seed)
        return cls(name, key_id(name, SIG_ED25519, public_key), public_key, seed)

    @property
    def verifier(self) -> Verifier:
        """The matching verifier."""
        return Verifier(self.name, self.key_id, self.public_key)

    def sign(self, text: bytes) -> bytes:
        """Ed25519 over the note text."""
        return ed25519.sign(self.seed, text)


def generate_key(name: str) -> tuple[str, str]:
    """A fresh Ed25519 key for name, as (private key, verifier key) strings."""
    _check_name(name, "key name")
    seed = ed25519.generate_seed()
    return (
        encode_private_key(name, SIG_ED25519, seed),
        encode_verifier_key(name, SIG_ED25519, ed25519.public_key_of(seed)),
    )


def parse_verifier_key(vkey: str) -> Verifier:
    """Parse an Ed25519 (type 0x01) vkey; refuse every malformed or other-type key."""
    name, kid, sig_type, public_key = decode_verifier_key(vkey)
    if sig_type != SIG_ED25519:
        raise NoteError(
            f"verifier key has signature type 0x{sig_type:02x}, want 0x01 (Ed25519)",
            hint=(
                "a witness key (type 0x04) is read with "
                "builder.formats.checkpoint.parse_cosigner_key"
            ),
        )
    if len(public_key) != ed25519.PUBLIC_KEY_SIZE:
        raise NoteError(
            f"verifier key holds {len(public_key)} key bytes, want {ed25519.PUBLIC_KEY_SIZE}"
        )
    return Verifier(name, kid, public_key)


def parse_private_key(skey: str) -> Signer:
    """Parse an Ed25519 (type 0x01) private key; errors never echo any of it."""
    name, seed = decode_private_key(skey, SIG_ED25519)
    return Signer.from_seed(name, seed)


# ---------------------------------------------------------------------------
# Notes


@dataclass(frozen=True, slots=True)
class Signature:
    """One signature line: the key's name and ID and the signature bytes after the ID."""

    name: str
    key_id: bytes
    signature: bytes

    def __post_init__(self) -> None:
        _check_name(self.name, "signature key name")
        if len(self.key_id) != KEY_ID_SIZE:
            raise NoteError(f"signature key ID is {len(self.key_id)} bytes, want {KEY_ID_SIZE}")
        if not self.signature:
            raise NoteError("signature is empty")

    def line(self) -> str:
        """``— <name> <base64(key ID || signature)>`` and a newline."""
        return f"{_SIG_PREFIX}{self.name} {b64encode(self.key_id + self.signature)}\n"


@dataclass(frozen=True, slots=True)
class Note:
    """An opened note: its text, the verified signatures and the unknown-key ones."""

    text: str
    signatures: tuple[Signature, ...]
    unverified: tuple[Signature, ...]


def parse_signature_line(line: str) -> Signature:
    """Parse one signature line, without its newline (signed-note §Signatures)."""
    if not line.startswith(_SIG_PREFIX):
        raise NoteError("signature line does not start with an em dash and a space")
    name, sep, sig_b64 = line[len(_SIG_PREFIX) :].partition(" ")
    if not sep:
        raise NoteError("signature line has no space between key name and signature")
    if not is_valid_name(name):
        raise NoteError("signature line has an invalid key name")
    try:
        raw = b64decode_canonical(sig_b64)
    except ValueError:
        raise NoteError("signature line: signature is not canonical base64") from None
    # 4 bytes of key ID and a non-empty signature, as Go's len(sig) < 5 check.
    if len(raw) <= KEY_ID_SIZE:
        raise NoteError(f"signature line holds {len(raw)} bytes, want more than {KEY_ID_SIZE}")
    return Signature(name, raw[:KEY_ID_SIZE], raw[KEY_ID_SIZE:])


def split_note(data: bytes) -> tuple[str, tuple[Signature, ...]]:
    """Check a note's syntax and split it into text and signatures, verifying nothing.

    The text must not be trusted: use :func:`open_note`. This is for tools
    that must look at a note before they know its keys (which log to ask).
    """
    if len(data) > MAX_NOTE_SIZE:
        raise NoteError(f"note is {len(data)} bytes, want at most {MAX_NOTE_SIZE}")
    # signed-note §Format: valid UTF-8, no ASCII control character but newline.
    try:
        msg = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NoteError(f"note is not valid UTF-8 (byte {e.start})") from None
    bad = _CONTROL.search(msg)
    if bad:
        raise NoteError(f"note holds an ASCII control character at character {bad.start()}")
    # The text is separated from the signatures by the last empty line; it
    # keeps its final newline, not the blank line.
    split = msg.rfind("\n\n")
    if split < 0:
        raise NoteError("note has no blank line before its signatures")
    text, block = msg[: split + 1], msg[split + 2 :]
    if not block or not block.endswith("\n"):
        raise NoteError("note has no signature lines, or its last line has no newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        # Bounded work, like Go's numSig > 100.
        raise NoteError(f"note has {len(lines)} signature lines, want at most {MAX_SIGNATURES}")
    sigs = []
    for number, line in enumerate(lines, 1):
        try:
            sigs.append(parse_signature_line(line))
        except NoteError as e:
            raise NoteError(f"signature line {number}: {e.message}") from None
    return text, tuple(sigs)


def open_note(data: bytes, verifiers: Iterable[NoteVerifier]) -> Note:
    """Parse a note and verify its signatures against the known verifiers.

    1. Check the syntax (:func:`split_note`); any bad line fails the note.
    2. A signature whose (name, key ID) matches a known verifier must verify,
       or the whole note fails with :class:`SignatureError`.
    3. Other signatures are kept, once each, as unverified.
    4. At least one known key must have signed, or :class:`SignatureError`.
    """
    known: dict[tuple[str, bytes], NoteVerifier] = {}
    for v in verifiers:
        prior = known.setdefault((v.name, bytes(v.key_id)), v)
        if prior != v:
            raise NoteError(
                f"two different verifier keys share the name and key ID {v.name}+{v.key_id.hex()}",
                hint="the key list is ambiguous; remove one of the two keys",
            )

    # Step 1.
    text, sigs = split_note(data)
    text_bytes = text.encode("utf-8")

    verified: list[Signature] = []
    unverified: list[Signature] = []
    for sig in sigs:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            # Step 3: signed-note §Signatures, "MUST ignore signatures from unknown keys".
            if sig not in unverified:
                unverified.append(sig)
            continue
        # Step 2: "if the key name and ID match a known key, verifiers MUST verify".
        try:
            verifier.verify(text_bytes, sig.signature)
        except SignatureError as e:
            raise SignatureError(
                f"note signature by {sig.name}+{sig.key_id.hex()} does not verify: {e.message}",
                hint="the note was altered or signed by another key; do not use its text",
            ) from None
        if sig not in verified:
            verified.append(sig)

    # Step 4: "if no signature from a known key verifies successfully, clients MUST reject".
    if not verified:
        raise SignatureError(
            "note has no signature by a known key",
            hint="check that the verifier key is the one that signed this note",
        )
    return Note(text, tuple(verified), tuple(unverified))


def format_note(text: str, signatures: Sequence[Signature]) -> bytes:
    """Assemble a note from its text and signatures; refuse what open_note would refuse."""
    _check_text(text)
    if not signatures:
        raise NoteError("a note needs at least one signature")
    if len(signatures) > MAX_SIGNATURES:
        raise NoteError(f"{len(signatures)} signatures, want at most {MAX_SIGNATURES}")
    data = (text + "\n" + "".join(s.line() for s in signatures)).encode("utf-8")
    if len(data) > MAX_NOTE_SIZE:
        raise NoteError(f"note would be {len(data)} bytes, want at most {MAX_NOTE_SIZE}")
    return data


def sign_note(text: str, signers: Sequence[NoteSigner]) -> bytes:
    """Sign text (which must end in a newline) with each signer, in order."""
    _check_text(text)
    seen = set()
    for s in signers:
        if (s.name, bytes(s.key_id)) in seen:
            raise NoteError(f"signer {s.name}+{s.key_id.hex()} is given twice")
        seen.add((s.name, bytes(s.key_id)))
    text_bytes = text.encode("utf-8")
    return format_note(text, [Signature(s.name, s.key_id, s.sign(text_bytes)) for s in signers])


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise NoteError("note text must end in a newline (signed-note §Format)")
    bad = _CONTROL.search(text)
    if bad:
        raise NoteError(f"note text holds an ASCII control character at character {bad.start()}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NoteError("note text is not valid UTF-8 (a lone surrogate)") from None


def _check_name(name: str, what: str) -> None:
    if not is_valid_name(name):
        raise NoteError(
            f"{what} is invalid: want non-empty UTF-8 with no space, '+' or control character"
        )
