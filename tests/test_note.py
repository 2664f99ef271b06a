"""Signed notes (builder.formats.note) against c2sp.org/signed-note and Go's sumdb/note.

Three witnesses: the published vectors (the C2SP example in tests/vectors,
the golang.org/x/mod sumdb/note package doc and tests), a key ID recomputed
straight from the spec, and Hypothesis properties (sign then open; flipping
any byte fails; arbitrary input ends in a result or a DreampoolError).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import DreampoolError, SignatureError
from builder.formats import ed25519
from builder.formats.note import (
    MAX_NOTE_SIZE,
    MAX_SIGNATURES,
    SIG_COSIGNATURE_V1,
    SIG_ED25519,
    Note,
    NoteError,
    Signature,
    Signer,
    Verifier,
    b64decode_canonical,
    encode_verifier_key,
    format_note,
    generate_key,
    is_valid_name,
    key_id,
    open_note,
    parse_private_key,
    parse_signature_line,
    parse_verifier_key,
    sign_note,
    split_note,
)
from tests.conftest import VECTORS


def _vector(name: str) -> bytes:
    """A file of tests/vectors/note; a missing one fails the test (never skips it)."""
    return (VECTORS / "note" / name).read_bytes()


# C2SP signed-note example (tests/vectors/note, CC BY 4.0).
EXAMPLE_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
EXAMPLE_TEXT = "This is an example message.\n"

# golang.org/x/mod sumdb/note: package doc and note_test.go (BSD-3-Clause).
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgK"
    "vqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01o"
    "OTGwnWLox33WWd1RvMc+QQ=\n"
)

ALICE = Signer.from_seed("alice.example/log", bytes(range(32)))
BOB = Signer.from_seed("bob.example/log", bytes(range(1, 33)))


# ---------------------------------------------------------------------------
# Published vectors


def test_c2sp_example_verifies() -> None:
    data = _vector("signed-note-example.txt")
    vkey = _vector("signed-note-example.vkey").decode().strip()
    assert vkey == EXAMPLE_VKEY
    note = open_note(data, [parse_verifier_key(vkey)])
    assert note.text == EXAMPLE_TEXT
    assert [(s.name, s.key_id.hex()) for s in note.signatures] == [("example.com/foo", "530d903a")]
    assert note.unverified == ()


def test_c2sp_example_key_id_recomputed_from_spec() -> None:
    name, hash_hex, key_b64 = EXAMPLE_VKEY.split("+", 2)
    raw = base64.b64decode(key_b64)
    assert raw[0] == 0x01 and len(raw) == 33
    # key ID = SHA-256(key name || 0x0A || 0x01 || 32-byte Ed25519 public key)[:4]
    assert hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4].hex() == hash_hex
    assert key_id(name, SIG_ED25519, raw[1:]).hex() == hash_hex
    v = parse_verifier_key(EXAMPLE_VKEY)
    assert (v.name, v.key_id.hex(), v.public_key, v.algorithm) == (name, hash_hex, raw[1:], 1)
    assert v.vkey == EXAMPLE_VKEY


@pytest.mark.parametrize("mask", [0x01, 0x20, 0x80, 0xFF])
def test_c2sp_example_every_byte_flip_fails(mask: int) -> None:
    data = _vector("signed-note-example.txt")
    verifier = parse_verifier_key(EXAMPLE_VKEY)
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= mask
        with pytest.raises((NoteError, SignatureError)):
            open_note(bytes(flipped), [verifier])


def test_go_sign_is_byte_exact() -> None:
    signer = parse_private_key(PETER_SKEY)
    assert signer.key_id.hex() == "c74f20a3"
    assert signer.verifier.vkey == PETER_VKEY
    assert sign_note(GO_TEXT, [signer]) == (GO_TEXT + "\n" + PETER_SIG).encode()


def test_go_open_one_verified_one_unverified() -> None:
    msg = (GO_TEXT + "\n" + PETER_SIG + ENOCH_SIG).encode()
    peter, enoch = parse_verifier_key(PETER_VKEY), parse_verifier_key(ENOCH_VKEY)
    note = open_note(msg, [peter])
    assert note.text == GO_TEXT
    assert [s.name for s in note.signatures] == ["PeterNeumann"]
    assert [(s.name, s.key_id.hex()) for s in note.unverified] == [("EnochRoot", "af0cfe78")]
    both = open_note(msg, [peter, enoch])
    assert [s.name for s in both.signatures] == ["PeterNeumann", "EnochRoot"]
    assert both.unverified == ()
    with pytest.raises(SignatureError, match="no signature by a known key"):
        open_note(msg, [])


def test_go_invalid_signature_and_bad_messages() -> None:
    peter = parse_verifier_key(PETER_VKEY)
    with pytest.raises(SignatureError, match="PeterNeumann\\+c74f20a3"):
        open_note((GO_TEXT + "\n" + PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]).encode(), [peter])
    bad = [
        GO_TEXT,
        GO_TEXT + "\n",
        GO_TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + GO_TEXT + "\n" + PETER_SIG,
        GO_TEXT + "\n" + "— Bad Name " + PETER_SIG.split(" ")[2],
        GO_TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
    ]
    for msg in bad:
        with pytest.raises(NoteError):
            open_note(msg.encode(), [peter])
    with pytest.raises(NoteError):
        open_note(b"\xff" + (GO_TEXT + "\n" + PETER_SIG).encode(), [peter])


def test_go_key_manglings_refused() -> None:
    # golang.org/x/mod TestNewVerifier / TestNewSigner: every proper substring
    # and every single-byte increment of a key is refused.
    for key, parse in ((PETER_VKEY, parse_verifier_key), (PETER_SKEY, parse_private_key)):
        for i in range(len(key) + 1):
            for j in range(i + 1, len(key) + 1):
                if (i, j) != (0, len(key)):
                    with pytest.raises(DreampoolError):
                        parse(key[i:j])
        for i in range(len(key)):
            mangled = key[:i] + chr(ord(key[i]) + 1) + key[i + 1 :]
            with pytest.raises(DreampoolError):
                parse(mangled)
    # Wrong key length and unknown algorithm, each with an adjusted key hash.
    for vkey in (
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ):
        with pytest.raises(NoteError):
            parse_verifier_key(vkey)


# ---------------------------------------------------------------------------
# Keys


def test_generate_key_parses_and_signs() -> None:
    skey, vkey = generate_key("dreams.example/log")
    signer, verifier = parse_private_key(skey), parse_verifier_key(vkey)
    assert signer.name == verifier.name == "dreams.example/log"
    assert signer.key_id == verifier.key_id
    assert signer.verifier == verifier
    assert verifier.vkey == vkey
    note = open_note(sign_note("hello\n", [signer]), [verifier])
    assert note.text == "hello\n"


def test_private_key_errors_and_repr_never_show_secret() -> None:
    skey, _ = generate_key("secret.example")
    secret = skey.split("+", 4)[4]
    signer = parse_private_key(skey)
    assert secret not in repr(signer) and signer.seed.hex() not in repr(signer)
    for bad in (skey[:-2] + "==", skey.replace("PRIVATE+KEY+", "PRIVATE+KEYS+"), skey + "A"):
        with pytest.raises(NoteError) as info:
            parse_private_key(bad)
        assert secret[:8] not in str(info.value) and secret[:8] not in str(info.value.hint)
    with pytest.raises(NoteError, match="private key, not a verifier key") as info2:
        parse_verifier_key(skey)
    assert secret[:8] not in str(info2.value)


def test_verifier_key_refusals() -> None:
    small_order = b"\x01" + bytes(31)  # y = 1, the identity point
    with pytest.raises(SignatureError, match="small order"):
        parse_verifier_key(encode_verifier_key("x.example", SIG_ED25519, small_order))
    cosig = encode_verifier_key("w.example", SIG_COSIGNATURE_V1, ALICE.public_key)
    with pytest.raises(NoteError, match="type 0x04"):
        parse_verifier_key(cosig)
    upper = EXAMPLE_VKEY.replace("530d903a", "530D903A")
    with pytest.raises(NoteError, match="lowercase hex"):
        parse_verifier_key(upper)
    with pytest.raises(NoteError, match="canonical base64"):
        parse_verifier_key(EXAMPLE_VKEY + "=")
    with pytest.raises(NoteError):
        Verifier("a.example", b"\x00\x00\x00\x00", ALICE.public_key)


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("example.com/foo", True),
        ("é.example", True),
        ("PeterNeumann", True),
        ("", False),
        ("a b", False),
        ("a+b", False),
        ("a\tb", False),
        ("a\u00a0b", False),
        ("a\u2028b", False),
        ("a\u3000b", False),
        ("a\x85b", False),
        ("a\x01b", False),
        ("a\ud800b", False),
    ],
)
def test_key_names(name: str, valid: bool) -> None:
    assert is_valid_name(name) is valid


# ---------------------------------------------------------------------------
# Notes


def test_unknown_keys_are_kept_unverified() -> None:
    msg = sign_note("text\n", [ALICE, BOB])
    note = open_note(msg, [ALICE.verifier])
    assert [s.name for s in note.signatures] == [ALICE.name]
    assert [s.name for s in note.unverified] == [BOB.name]
    # Same name, other key ID; same key ID, other name: both unknown, not errors.
    impostor = Signer.from_seed(ALICE.name, bytes(32))
    renamed = Signature("carol.example", ALICE.key_id, b"\x00" * 64)
    msg2 = format_note("text\n", [Signature(ALICE.name, ALICE.key_id, ALICE.sign(b"text\n"))])
    msg2 += Signature(impostor.name, impostor.key_id, b"\x01" * 64).line().encode()
    msg2 += renamed.line().encode()
    note2 = open_note(msg2, [ALICE.verifier])
    assert len(note2.signatures) == 1 and len(note2.unverified) == 2


def test_known_key_bad_signature_fails_whole_note() -> None:
    good = sign_note("text\n", [ALICE])
    bad_line = Signature(BOB.name, BOB.key_id, b"\x00" * 64).line().encode()
    with pytest.raises(SignatureError, match=re.escape("bob.example/log")):
        open_note(good + bad_line, [ALICE.verifier, BOB.verifier])


def test_duplicate_signatures() -> None:
    line = sign_note("t\n", [ALICE]).split(b"\n\n", 1)[1]
    note = open_note(b"t\n\n" + line * 3, [ALICE.verifier])
    assert len(note.signatures) == 1
    with pytest.raises(NoteError, match="given twice"):
        sign_note("t\n", [ALICE, ALICE])


def test_ambiguous_verifiers_refused() -> None:
    other = Verifier.from_public_key(ALICE.name, BOB.public_key)
    fake = _FakeVerifier(ALICE.name, ALICE.key_id)
    with pytest.raises(NoteError, match="share the name and key ID"):
        open_note(sign_note("t\n", [ALICE]), [ALICE.verifier, fake])
    # The same verifier twice is not ambiguous.
    open_note(sign_note("t\n", [ALICE]), [ALICE.verifier, ALICE.verifier, other])


class _FakeVerifier:
    def __init__(self, name: str, kid: bytes) -> None:
        self.name, self.key_id = name, kid

    def verify(self, text: bytes, signature: bytes) -> None:
        return None


def test_signature_count_bound() -> None:
    lines = [Signature(f"k{i}.example", b"\x00\x00\x00\x00", b"\x01") for i in range(101)]
    signed = sign_note("t\n", [ALICE]).decode()
    ok = signed + "".join(s.line() for s in lines[: MAX_SIGNATURES - 1])
    assert len(open_note(ok.encode(), [ALICE.verifier]).unverified) == MAX_SIGNATURES - 1
    with pytest.raises(NoteError, match="at most 100"):
        open_note((ok + lines[-1].line()).encode(), [ALICE.verifier])
    with pytest.raises(NoteError, match="at most 100"):
        format_note("t\n", lines)


def test_size_bound() -> None:
    big = "x" * MAX_NOTE_SIZE + "\n"
    with pytest.raises(NoteError, match="bytes, want at most"):
        sign_note(big, [ALICE])
    with pytest.raises(NoteError, match="bytes, want at most"):
        open_note(big.encode() + b"\n" + b"x", [ALICE.verifier])


def test_text_rules() -> None:
    for text in ("no newline", "a\r\n", "tab\there\n", "\x00\n"):
        with pytest.raises(NoteError):
            sign_note(text, [ALICE])
    # Blank lines inside the text are allowed: the last blank line splits.
    text = "first\n\nthird\n\n"
    note = open_note(sign_note(text, [ALICE]), [ALICE.verifier])
    assert note.text == text
    assert note.text == split_note(sign_note(text, [ALICE]))[0]


def test_non_canonical_signature_base64_refused() -> None:
    data = _vector("signed-note-example.txt").decode()
    assert data.endswith("aQM=\n")
    tampered = data[:-3] + "N=\n"  # "N" differs from "M" only in the ignored trailing bits
    assert base64.b64decode(tampered.split(" ")[-1]) == base64.b64decode(data.split(" ")[-1])
    with pytest.raises(NoteError, match="canonical base64"):
        open_note(tampered.encode(), [parse_verifier_key(EXAMPLE_VKEY)])


def test_signature_line_parsing() -> None:
    sig = parse_signature_line(PETER_SIG[:-1])
    assert (sig.name, sig.key_id.hex(), len(sig.signature)) == ("PeterNeumann", "c74f20a3", 64)
    assert sig.line() == PETER_SIG
    for bad in ("- PeterNeumann AAAAAAA=", "— PeterNeumann", "—  AAAAAAA=", "— a AAAA"):
        with pytest.raises(NoteError):
            parse_signature_line(bad)


def test_b64decode_canonical() -> None:
    assert b64decode_canonical("QQ==") == b"A"
    for bad in ("QR==", "QQ", "QQ=", "Q Q==", "QQ==\n", "Q\u00e9==", "-_=="):
        with pytest.raises(ValueError):
            b64decode_canonical(bad)


# ---------------------------------------------------------------------------
# Properties

_TEXT_CHARS = st.characters(
    codec="utf-8",
    exclude_characters="".join(chr(c) for c in range(0x20) if c != 0x0A),
)


@settings(max_examples=150, deadline=None)
@given(st.text(_TEXT_CHARS, max_size=200))
def test_sign_open_round_trip(body: str) -> None:
    text = body + "\n"
    msg = sign_note(text, [ALICE, BOB])
    note = open_note(msg, [ALICE.verifier, BOB.verifier])
    assert note == Note(text, note.signatures, ())
    assert [s.name for s in note.signatures] == [ALICE.name, BOB.name]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_flipping_any_byte_fails(data: st.DataObject) -> None:
    msg = sign_note("origin.example\n42\n", [ALICE])
    i = data.draw(st.integers(0, len(msg) - 1))
    mask = data.draw(st.integers(1, 255))
    flipped = bytearray(msg)
    flipped[i] ^= mask
    with pytest.raises((NoteError, SignatureError)):
        open_note(bytes(flipped), [ALICE.verifier])


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300).map(lambda s: s.encode("utf-8", "surrogatepass")),
    )
)
def test_open_arbitrary_bytes_only_raises_dreampool_errors(data: bytes) -> None:
    with contextlib.suppress(DreampoolError):
        open_note(data, [ALICE.verifier])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_parse_arbitrary_keys_only_raises_dreampool_errors(text: str) -> None:
    for parse in (parse_verifier_key, parse_private_key, parse_signature_line):
        with contextlib.suppress(DreampoolError):
            parse(text)


def test_ed25519_key_ids_match_go_for_generated_keys() -> None:
    # GenerateKey in Go: hash over name, "\n", then the 33-byte encoded key.
    skey, vkey = generate_key("gen.example")
    name, hash_hex, key_b64 = vkey.split("+", 2)
    raw = base64.b64decode(key_b64)
    assert hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4].hex() == hash_hex
    seed = base64.b64decode(skey.split("+", 4)[4])[1:]
    assert ed25519.public_key_of(seed) == raw[1:]
