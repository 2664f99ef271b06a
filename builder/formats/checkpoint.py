"""Checkpoints (c2sp.org/tlog-checkpoint@v1.0.0) and witness cosignatures
(c2sp.org/tlog-cosignature@v1.0.1, the Ed25519 type 0x04).

Checkpoint
----------

A checkpoint is the text of a signed note (:mod:`builder.formats.note`): at least
three non-empty lines, each ending in a newline:

1. the **origin**, a non-empty identifier of the log (here a scheme-less URL
   prefix such as ``example.org/dreams``, docs/protocol.md §4);
2. the **tree size**, ASCII decimal with no leading zero (``0`` when empty);
3. the **root hash**, base64 of the 32-byte RFC 6962 root at that size;
4. optional **extension lines**, each non-empty, opaque.

The example of tlog-checkpoint::

    example.com/behind-the-sofa
    20852163
    CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

    — example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=

The log signs with an Ed25519 note key (type 0x01) whose name equals the
origin: tlog-checkpoint says SHOULD, docs/protocol.md §4 makes it a MUST, and
:func:`open_checkpoint` refuses anything else. Sizes are refused from 2^63 up.
Parsing is canonical: every text :func:`parse_checkpoint` accepts is exactly
what :func:`format_checkpoint` writes for the result.

Cosignature
-----------

A witness adds a note signature line of type 0x04 to the checkpoint::

    — witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==

Its base64 decodes to 76 bytes: the key ID ``8d66cf3f`` =
SHA-256(name || 0x0A || 0x04 || 32-byte public key)[:4], then the
``timestamped_signature``: an 8-byte big-endian timestamp (POSIX seconds, at
most 2^63 - 1; here 1679315147) and a 64-byte Ed25519 signature over

    cosignature/v1
    time 1679315147
    <the whole checkpoint text, extension lines included, final newline included>

(tlog-cosignature §Ed25519 signed message: a header line, a ``time`` line with
the decimal timestamp, then the note body without the signature lines).
"""  # noqa: E501

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from builder.errors import DreampoolError, SignatureError, VerificationError
from builder.formats import ed25519
from builder.formats.b64 import b64_decode as b64decode_canonical
from builder.formats.b64 import b64_encode as b64encode
from builder.formats.note import (
    MAX_NOTE_SIZE,
    SIG_COSIGNATURE_V1,
    Signature,
    Signer,
    Verifier,
    decode_private_key,
    decode_verifier_key,
    encode_private_key,
    encode_verifier_key,
    is_valid_name,
    key_id,
    open_note,
    sign_note,
)

ROOT_SIZE = 32
MAX_TREE_SIZE = (1 << 63) - 1
MAX_TIMESTAMP = (1 << 63) - 1
TIMESTAMP_SIZE = 8
COSIGNATURE_SIZE = TIMESTAMP_SIZE + ed25519.SIGNATURE_SIZE

# tlog-checkpoint §Note text: ASCII decimal, no leading zeroes unless 0.
# 19 digits bound the work before the 2^63 check.
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")
_CONTROL = re.compile("[\x00-\x1f]")


class CheckpointError(DreampoolError):
    """A checkpoint or a cosignature is malformed."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A log's tree head: origin, tree size, RFC 6962 root, extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_line(self.origin, "origin")
        if isinstance(self.size, bool) or not 0 <= self.size <= MAX_TREE_SIZE:
            raise CheckpointError(f"tree size must be in [0, 2^63), got {self.size}")
        if len(self.root) != ROOT_SIZE:
            raise CheckpointError(f"root hash is {len(self.root)} bytes, want {ROOT_SIZE}")
        for ext in self.extensions:
            _check_line(ext, "extension line")


def format_checkpoint(cp: Checkpoint) -> str:
    """The note text of cp, according to c2sp.org/tlog-checkpoint."""
    lines = [cp.origin, str(cp.size), b64encode(cp.root), *cp.extensions]
    return "".join(line + "\n" for line in lines)


def parse_checkpoint(text: str) -> Checkpoint:
    """Parse checkpoint note text strictly (tlog-checkpoint §Note text).

    Refuses: a missing final newline, fewer than three lines, any empty line,
    a size with a sign, a leading zero or 2^63 and up, a root that is not
    canonical base64 of exactly 32 bytes, and control characters.
    """
    if len(text) > MAX_NOTE_SIZE:
        raise CheckpointError(f"checkpoint is {len(text)} characters, want at most {MAX_NOTE_SIZE}")
    if not text.endswith("\n"):
        raise CheckpointError("checkpoint text must end in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise CheckpointError(
            f"checkpoint has {len(lines)} lines, want at least 3 (origin, size, root)"
        )
    for number, line in enumerate(lines, 1):
        if not line:
            raise CheckpointError(f"checkpoint line {number} is empty, want non-empty lines")
    origin, size_text, root_text, *extensions = lines
    if not _DECIMAL.fullmatch(size_text):
        raise CheckpointError(
            "checkpoint line 2: tree size is not a decimal with no leading zero, below 2^63"
        )
    size = int(size_text)
    if size > MAX_TREE_SIZE:
        raise CheckpointError("checkpoint line 2: tree size is 2^63 or more")
    try:
        root = b64decode_canonical(root_text)
    except ValueError:
        raise CheckpointError("checkpoint line 3: root hash is not canonical base64") from None
    if len(root) != ROOT_SIZE:
        raise CheckpointError(f"checkpoint line 3: root hash is {len(root)} bytes, want 32")
    return Checkpoint(origin, size, root, tuple(extensions))


def sign_checkpoint(cp: Checkpoint, signer: Signer) -> bytes:
    """The checkpoint as a note signed by the log key, whose name must be the origin."""
    if signer.name != cp.origin:
        raise CheckpointError(
            "log key name does not equal the checkpoint origin (docs/protocol.md §4)",
            hint="generate the log key with the pool's origin as its name",
        )
    return sign_note(format_checkpoint(cp), [signer])


def open_checkpoint(
    data: bytes,
    log_verifier: Verifier,
    witness_verifiers: Iterable[CosignatureVerifier] = (),
) -> tuple[Checkpoint, tuple[str, ...]]:
    """Verify a signed checkpoint; return it and the key names of the witnesses that cosigned.

    1. The note must parse and every signature by a given key must verify
       (signed-note; a bad cosignature fails the whole checkpoint too).
    2. The log key must have signed.
    3. The text must be a checkpoint whose origin is the log key's name.

    Malformed input raises :class:`NoteError` or :class:`CheckpointError`;
    a failed check raises :class:`VerificationError` with step 1 (docs/protocol.md §5).
    Quorum is the caller's: :func:`builder.formats.policy.check_quorum`.
    """
    witnesses = tuple(witness_verifiers)
    try:
        note = open_note(data, [log_verifier, *witnesses])
    except SignatureError as e:
        raise VerificationError(f"checkpoint: {e.message}", step=1, hint=e.hint) from e
    log_id = (log_verifier.name, log_verifier.key_id)
    if not any((s.name, s.key_id) == log_id for s in note.signatures):
        raise VerificationError(
            "checkpoint is not signed by the log key "
            f"{log_verifier.name}+{log_verifier.key_id.hex()}",
            step=1,
            hint="check the policy's log key; the checkpoint may come from another log",
        )
    cp = parse_checkpoint(note.text)
    if cp.origin != log_verifier.name:
        raise VerificationError(
            "checkpoint origin does not equal the log key name (docs/protocol.md §4)",
            step=1,
            hint="the checkpoint belongs to another log",
        )
    names: list[str] = []
    for s in note.signatures:
        if (s.name, s.key_id) != log_id and s.name not in names:
            names.append(s.name)
    return cp, tuple(names)


# ---------------------------------------------------------------------------
# Cosignatures (tlog-cosignature, Ed25519, signature type 0x04)


def cosigned_message(text: bytes, timestamp: int) -> bytes:
    """The bytes an Ed25519 cosignature signs (tlog-cosignature §Ed25519 signed message)."""
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise CheckpointError("cosignature timestamp must be in [0, 2^63)")
    # Header line, then "time", one space, decimal without leading zeroes, then the note body.
    return b"cosignature/v1\ntime " + str(timestamp).encode("ascii") + b"\n" + text


@dataclass(frozen=True, slots=True)
class CosignatureVerifier:
    """A witness's Ed25519 cosignature key (type 0x04). Construction checks every field."""

    name: str
    key_id: bytes
    public_key: bytes
    algorithm: int = SIG_COSIGNATURE_V1

    def __post_init__(self) -> None:
        if self.algorithm != SIG_COSIGNATURE_V1:
            raise CheckpointError(
                f"cosigner algorithm is 0x{self.algorithm:02x}, want 0x04 (cosignature/v1)"
            )
        if not is_valid_name(self.name):
            raise CheckpointError("cosigner key name is invalid")
        ed25519.check_public_key(self.public_key, on_curve=True)  # a vkey (§4.1)
        if self.key_id != key_id(self.name, SIG_COSIGNATURE_V1, self.public_key):
            raise CheckpointError("cosigner key ID does not match its name and public key")

    @classmethod
    def from_public_key(cls, name: str, public_key: bytes) -> CosignatureVerifier:
        """The cosignature verifier of a raw 32-byte Ed25519 key under name."""
        ed25519.check_public_key(public_key, on_curve=True)
        return cls(name, key_id(name, SIG_COSIGNATURE_V1, public_key), public_key)

    @property
    def vkey(self) -> str:
        """This key as a vkey string of type 0x04."""
        return encode_verifier_key(self.name, SIG_COSIGNATURE_V1, self.public_key)

    def verify(self, text: bytes, signature: bytes) -> None:
        """Check a ``timestamped_signature`` over the checkpoint text."""
        if len(signature) != COSIGNATURE_SIZE:
            raise SignatureError(
                f"cosignature is {len(signature)} bytes, want {COSIGNATURE_SIZE} "
                "(timestamp and Ed25519 signature)"
            )
        timestamp = int.from_bytes(signature[:TIMESTAMP_SIZE], "big")
        if timestamp > MAX_TIMESTAMP:
            # tlog-cosignature §Format: "It MUST NOT exceed 2^63 - 1".
            raise SignatureError("cosignature timestamp exceeds 2^63 - 1")
        ed25519.verify(
            self.public_key, cosigned_message(text, timestamp), signature[TIMESTAMP_SIZE:]
        )


@dataclass(frozen=True, slots=True)
class Cosigner:
    """A witness's Ed25519 cosigning key (type 0x04); its seed never appears in repr."""

    name: str
    key_id: bytes
    public_key: bytes
    seed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not is_valid_name(self.name):
            raise CheckpointError("cosigner key name is invalid")
        if len(self.seed) != ed25519.SEED_SIZE:
            raise CheckpointError(f"cosigner seed is {len(self.seed)} bytes, want 32")
        if self.public_key != ed25519.public_key_of(self.seed):
            raise CheckpointError("cosigner public key does not match its seed")
        if self.key_id != key_id(self.name, SIG_COSIGNATURE_V1, self.public_key):
            raise CheckpointError("cosigner key ID does not match its name and public key")

    @classmethod
    def from_seed(cls, name: str, seed: bytes) -> Cosigner:
        """The cosigner of a 32-byte Ed25519 seed under name."""
        if len(seed) != ed25519.SEED_SIZE:
            raise CheckpointError(f"cosigner seed is {len(seed)} bytes, want 32")
        public_key = ed25519.public_key_of(seed)
        return cls(name, key_id(name, SIG_COSIGNATURE_V1, public_key), public_key, seed)

    @property
    def verifier(self) -> CosignatureVerifier:
        """The matching verifier."""
        return CosignatureVerifier(self.name, self.key_id, self.public_key)


def generate_cosigner_key(name: str) -> tuple[str, str]:
    """A fresh witness key for name, as (private key, verifier key) strings of type 0x04."""
    if not is_valid_name(name):
        raise CheckpointError("cosigner key name is invalid")
    seed = ed25519.generate_seed()
    return (
        encode_private_key(name, SIG_COSIGNATURE_V1, seed),
        encode_verifier_key(name, SIG_COSIGNATURE_V1, ed25519.public_key_of(seed)),
    )


def parse_cosigner_key(vkey: str) -> CosignatureVerifier:
    """Parse a witness vkey ``<name>+<key ID>+<base64(0x04 || public key)>``."""
    name, kid, sig_type, public_key = decode_verifier_key(vkey)
    if sig_type != SIG_COSIGNATURE_V1:
        raise CheckpointError(
            f"witness key has signature type 0x{sig_type:02x}, want 0x04 (cosignature/v1)",
            hint="a log key (type 0x01) is read with builder.formats.note.parse_verifier_key",
        )
    if len(public_key) != ed25519.PUBLIC_KEY_SIZE:
        raise CheckpointError(f"witness key holds {len(public_key)} key bytes, want 32")
    return CosignatureVerifier(name, kid, public_key)


def parse_cosigner_private_key(skey: str) -> Cosigner:
    """Parse a witness private key of type 0x04; errors never echo any of it."""
    name, seed = decode_private_key(skey, SIG_COSIGNATURE_V1)
    return Cosigner.from_seed(name, seed)


def cosign(checkpoint_text: str, cosigner: Cosigner, timestamp: int) -> str:
    """The cosignature line (with its newline) of cosigner over a checkpoint at timestamp.

    Append it to the signed checkpoint note's bytes to add the cosignature.
    """
    parse_checkpoint(checkpoint_text)
    message = cosigned_message(checkpoint_text.encode("utf-8"), timestamp)
    raw = timestamp.to_bytes(TIMESTAMP_SIZE, "big") + ed25519.sign(cosigner.seed, message)
    return Signature(cosigner.name, cosigner.key_id, raw).line()


def cosignature_timestamp(sig: Signature) -> int:
    """The timestamp of a type 0x04 cosignature (verify it first: this trusts nothing)."""
    if len(sig.signature) != COSIGNATURE_SIZE:
        raise CheckpointError(f"cosignature is {len(sig.signature)} bytes, want {COSIGNATURE_SIZE}")
    timestamp = int.from_bytes(sig.signature[:TIMESTAMP_SIZE], "big")
    if timestamp > MAX_TIMESTAMP:
        raise CheckpointError("cosignature timestamp exceeds 2^63 - 1")
    return timestamp


def _check_line(value: str, what: str) -> None:
    if not value:
        raise CheckpointError(f"checkpoint {what} is empty")
    if _CONTROL.search(value):
        raise CheckpointError(f"checkpoint {what} holds a newline or control character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CheckpointError(f"checkpoint {what} is not valid UTF-8") from None
