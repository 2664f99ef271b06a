"""Checkpoints and cosignatures (builder.formats.checkpoint).

Vectors: the examples of c2sp.org/tlog-checkpoint and tlog-cosignature (CC BY
4.0) and a cosignature of transparency-dev/formats note_cosigv1_test.go
(Apache-2.0). A naive reference builds the cosigned message from the spec
text and verifies it with ``cryptography`` directly.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import DreampoolError, SignatureError, VerificationError
from builder.formats.checkpoint import (
    MAX_TREE_SIZE,
    Checkpoint,
    CheckpointError,
    CosignatureVerifier,
    Cosigner,
    cosign,
    cosignature_timestamp,
    format_checkpoint,
    generate_cosigner_key,
    open_checkpoint,
    parse_checkpoint,
    parse_cosigner_key,
    parse_cosigner_private_key,
    sign_checkpoint,
)
from builder.formats.note import (
    SIG_ED25519,
    NoteError,
    Signature,
    Signer,
    encode_private_key,
    parse_signature_line,
    parse_verifier_key,
    sign_note,
    split_note,
)

SPEC_TEXT = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
SPEC_LOG_SIG = (
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5"
    "/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)
SPEC_COSIG = (
    "— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlr"
    "DJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
)
# transparency-dev/formats note/note_cosigv1_test.go.
TD_COSIG_VKEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
TD_COSIG_B64 = (
    "ZGhGuQAAAABm/qTPeyKXD+R2rzyQsxPiP8mXum7qq/iF0u4vanlqJyocWODBt97w9uL+8qT7S5gxEHWWOworDcFi"
    "EBYJXORmnFBOBA=="
)

ORIGIN = "example.org/dreams"
LOG_SKEY = encode_private_key(ORIGIN, SIG_ED25519, bytes([7]) * 32)
LOG = Signer.from_seed(ORIGIN, bytes([7]) * 32)
W1 = Cosigner.from_seed("witness.example/w1", bytes([8]) * 32)
W2 = Cosigner.from_seed("witness.example/w2", bytes([9]) * 32)
ROOT = hashlib.sha256(b"").digest()
CP = Checkpoint(ORIGIN, 5, ROOT)


# ---------------------------------------------------------------------------
# Checkpoint text


def test_spec_checkpoint_round_trip() -> None:
    cp = parse_checkpoint(SPEC_TEXT)
    assert cp.origin == "example.com/behind-the-sofa"
    assert cp.size == 20852163
    assert cp.root == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    assert cp.extensions == ()
    assert format_checkpoint(cp) == SPEC_TEXT


def test_spec_signed_examples_are_well_formed_notes() -> None:
    text, sigs = split_note((SPEC_TEXT + "\n" + SPEC_LOG_SIG + SPEC_COSIG).encode())
    assert text == SPEC_TEXT
    assert [s.name for s in sigs] == ["example.com/behind-the-sofa", "witness.example.com/w1"]


def test_spec_cosignature_line() -> None:
    sig = parse_signature_line(SPEC_COSIG[:-1])
    assert sig.name == "witness.example.com/w1"
    assert sig.key_id.hex() == "8d66cf3f"
    assert len(sig.key_id + sig.signature) == 76
    assert cosignature_timestamp(sig) == 1679315147


def test_transparency_dev_cosignature_vectors() -> None:
    v = parse_cosigner_key(TD_COSIG_VKEY)
    assert (v.name, v.key_id.hex(), v.algorithm) == ("remora.n621.de", "da77ade7", 0x04)
    assert v.vkey == TD_COSIG_VKEY
    raw = base64.b64decode(TD_COSIG_B64)
    sig = Signature("remora.n621.de", raw[:4], raw[4:])
    assert cosignature_timestamp(sig) == 1727964367


def test_extensions_round_trip() -> None:
    cp = Checkpoint(ORIGIN, 0, ROOT, ("ext one", "— two"))
    text = format_checkpoint(cp)
    assert text == f"{ORIGIN}\n0\n{base64.b64encode(ROOT).decode()}\next one\n— two\n"
    assert parse_checkpoint(text) == cp


_R = base64.b64encode(ROOT).decode()


@pytest.mark.parametrize(
    "text",
    [
        f"o\n07\n{_R}\n",  # leading zero
        f"o\n00\n{_R}\n",
        f"o\n+7\n{_R}\n",
        f"o\n-1\n{_R}\n",
        f"o\n 7\n{_R}\n",
        f"o\n7 \n{_R}\n",
        f"o\n1_000\n{_R}\n",
        f"o\n\u0663\n{_R}\n",  # an Arabic-Indic digit, which int() would take
        f"o\n9223372036854775808\n{_R}\n",  # 2^63
        f"o\n99999999999999999999\n{_R}\n",
        f"o\n7\n{_R}",  # missing final newline
        f"o\n7\n{_R}\n\n",  # extra blank line
        f"\no\n7\n{_R}\n",
        f"o\n\n7\n{_R}\n",
        f"o\n7\n{_R}\next\n\n",
        f"\n7\n{_R}\n",  # empty origin
        "o\n7\n",  # two lines
        "o\n7\nnot base64!\n",
        f"o\n7\n{_R[:-1]}\n",  # unpadded
        f"o\n7\n{base64.b64encode(bytes(31)).decode()}\n",
        f"o\n7\n{base64.b64encode(bytes(33)).decode()}\n",
        f"o\n7\n{_R[:-2]}V=\n",  # non-zero trailing bits
        f"o\r\n7\n{_R}\n",
        f"o\t\n7\n{_R}\n",
        f"o\ud800\n7\n{_R}\n",
    ],
)
def test_parse_checkpoint_refuses(text: str) -> None:
    with pytest.raises(CheckpointError):
        parse_checkpoint(text)


def test_largest_size_accepted() -> None:
    assert parse_checkpoint(f"o\n9223372036854775807\n{_R}\n").size == MAX_TREE_SIZE
    assert parse_checkpoint(f"o\n0\n{_R}\n").size == 0


def test_checkpoint_constructor_refuses() -> None:
    for args in (
        ("", 1, ROOT, ()),
        ("a\nb", 1, ROOT, ()),
        (ORIGIN, -1, ROOT, ()),
        (ORIGIN, 1 << 63, ROOT, ()),
        (ORIGIN, True, ROOT, ()),
        (ORIGIN, 1, ROOT[:31], ()),
        (ORIGIN, 1, ROOT, ("",)),
        (ORIGIN, 1, ROOT, ("a\nb",)),
    ):
        with pytest.raises(CheckpointError):
            Checkpoint(*args)


# ---------------------------------------------------------------------------
# Signing and opening


def _signed(cp: Checkpoint = CP, *cosigners: Cosigner, timestamp: int = 1700000000) -> bytes:
    data = sign_checkpoint(cp, LOG)
    for c in cosigners:
        data += cosign(format_checkpoint(cp), c, timestamp).encode()
    return data


def test_sign_open_round_trip_with_cosignatures() -> None:
    data = _signed(CP, W1, W2)
    cp, names = open_checkpoint(data, LOG.verifier, [W1.verifier, W2.verifier])
    assert cp == CP
    assert names == (W1.name, W2.name)
    # A witness the caller does not know is ignored, not an error.
    cp, names = open_checkpoint(data, LOG.verifier, [W2.verifier])
    assert names == (W2.name,)
    cp, names = open_checkpoint(data, LOG.verifier)
    assert names == ()


def test_log_key_name_must_be_origin() -> None:
    other = Signer.from_seed("other.example/log", bytes([7]) * 32)
    with pytest.raises(CheckpointError, match="origin"):
        sign_checkpoint(CP, other)
    data = sign_note(format_checkpoint(CP), [other])
    with pytest.raises(VerificationError, match="origin") as info:
        open_checkpoint(data, other.verifier)
    assert info.value.step == 1


def test_open_checkpoint_failures() -> None:
    data = _signed(CP, W1)
    stranger = Signer.from_seed(ORIGIN, bytes([1]) * 32)
    with pytest.raises(VerificationError) as info:
        open_checkpoint(data, stranger.verifier, [W1.verifier])
    assert info.value.step == 1  # not signed by that log key
    only_witness = format_checkpoint(CP) + "\n" + cosign(format_checkpoint(CP), W1, 1)
    with pytest.raises(VerificationError, match="not signed by the log key"):
        open_checkpoint(only_witness.encode(), LOG.verifier, [W1.verifier])
    tampered = data.replace(b"\n5\n", b"\n6\n", 1)
    with pytest.raises(VerificationError):
        open_checkpoint(tampered, LOG.verifier, [W1.verifier])
    bad_cosig = data[:-10] + (b"A" if data[-10:-9] != b"A" else b"B") + data[-9:]
    with pytest.raises(DreampoolError):
        open_checkpoint(bad_cosig, LOG.verifier, [W1.verifier])
    not_checkpoint = sign_note("just\ntext\n", [LOG])
    with pytest.raises(CheckpointError):
        open_checkpoint(not_checkpoint, LOG.verifier)


# ---------------------------------------------------------------------------
# Cosignatures


def test_cosignature_matches_naive_reference() -> None:
    text = format_checkpoint(CP)
    line = cosign(text, W1, 1679315147)
    sig = parse_signature_line(line[:-1])
    raw = sig.key_id + sig.signature
    assert len(raw) == 4 + 8 + 64
    # Key ID: SHA-256(<name> || "\n" || 0x04 || 32-byte public key)[:4].
    assert raw[:4] == hashlib.sha256(W1.name.encode() + b"\n\x04" + W1.public_key).digest()[:4]
    assert int.from_bytes(raw[4:12], "big") == 1679315147
    message = b"cosignature/v1\ntime 1679315147\n" + text.encode()
    Ed25519PublicKey.from_public_bytes(W1.public_key).verify(raw[12:], message)
    W1.verifier.verify(text.encode(), sig.signature)
    with pytest.raises(SignatureError):
        W2.verifier.verify(text.encode(), sig.signature)


def test_cosignature_covers_extension_lines() -> None:
    cp = Checkpoint(ORIGIN, 5, ROOT, ("ext",))
    data = _signed(cp, W1)
    assert open_checkpoint(data, LOG.verifier, [W1.verifier])[1] == (W1.name,)
    text = format_checkpoint(cp).encode()
    sig = parse_signature_line(cosign(format_checkpoint(cp), W1, 5)[:-1])
    with pytest.raises(SignatureError):
        W1.verifier.verify(text.replace(b"ext", b"exu"), sig.signature)


def test_cosignature_timestamp_bounds() -> None:
    text = format_checkpoint(CP)
    for ts in (-1, 1 << 63):
        with pytest.raises(CheckpointError):
            cosign(text, W1, ts)
    assert cosignature_timestamp(parse_signature_line(cosign(text, W1, (1 << 63) - 1)[:-1]))
    huge = (1 << 63).to_bytes(8, "big") + bytes(64)
    with pytest.raises(SignatureError, match="2\\^63"):
        W1.verifier.verify(text.encode(), huge)
    with pytest.raises(CheckpointError):
        cosignature_timestamp(Signature(W1.name, W1.key_id, huge))
    with pytest.raises(SignatureError, match="want 72"):
        W1.verifier.verify(text.encode(), bytes(64))
    with pytest.raises(CheckpointError):
        cosign("not a checkpoint\n", W1, 1)


def test_cosigner_keys() -> None:
    skey, vkey = generate_cosigner_key("w.example/new")
    cosigner, verifier = parse_cosigner_private_key(skey), parse_cosigner_key(vkey)
    assert cosigner.verifier == verifier and verifier.vkey == vkey
    assert base64.b64decode(vkey.split("+", 2)[2])[0] == 0x04
    assert cosigner.seed.hex() not in repr(cosigner)
    line = cosign(format_checkpoint(CP), cosigner, 42)
    data = sign_checkpoint(CP, LOG) + line.encode()
    assert open_checkpoint(data, LOG.verifier, [verifier])[1] == ("w.example/new",)
    # Types are not interchangeable.
    with pytest.raises(CheckpointError, match="type 0x01"):
        parse_cosigner_key(LOG.verifier.vkey)
    with pytest.raises(NoteError, match="type 0x04"):
        parse_verifier_key(vkey)
    parts = skey.split("+", 4)
    with pytest.raises(NoteError, match="key ID does not match"):
        parse_cosigner_private_key("+".join([*parts[:3], "00000000", parts[4]]))
    with pytest.raises(NoteError, match="want 0x04"):
        parse_cosigner_private_key(LOG_SKEY)
    with pytest.raises(CheckpointError):
        CosignatureVerifier(W1.name, LOG.key_id, W1.public_key)


# ---------------------------------------------------------------------------
# Properties


@settings(max_examples=200, deadline=None)
@given(
    origin=st.text(st.characters(min_codepoint=0x20, codec="utf-8"), min_size=1),
    size=st.integers(0, MAX_TREE_SIZE),
    root=st.binary(min_size=32, max_size=32),
    extensions=st.lists(
        st.text(st.characters(min_codepoint=0x20, codec="utf-8"), min_size=1),
        max_size=3,
    ),
)
def test_format_parse_round_trip(
    origin: str, size: int, root: bytes, extensions: list[str]
) -> None:
    cp = Checkpoint(origin, size, root, tuple(extensions))
    assert parse_checkpoint(format_checkpoint(cp)) == cp


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_parse_arbitrary_text_only_raises_dreampool_errors(text: str) -> None:
    try:
        cp = parse_checkpoint(text)
    except DreampoolError:
        return
    assert format_checkpoint(cp) == text


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_flipping_a_byte_fails_or_drops_only_that_witness(data: st.DataObject) -> None:
    signed = _signed(CP, W1)
    log_part = len(sign_checkpoint(CP, LOG))
    i = data.draw(st.integers(0, len(signed) - 1))
    flipped = bytearray(signed)
    flipped[i] ^= data.draw(st.integers(1, 255))
    try:
        cp, names = open_checkpoint(bytes(flipped), LOG.verifier, [W1.verifier])
    except DreampoolError:
        return
    # Only a flip in the cosignature line can leave the checkpoint valid, and
    # then only by making the line an unknown key's, which is ignored.
    assert i >= log_part
    assert cp == CP and names == ()
