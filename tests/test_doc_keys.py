"""Every verifier key shown in the docs is a real one: its key ID matches its key.

docs/protocol.md §4.1 gives the vkey grammar: ``<name>+<key ID>+<base64>``,
where the name ends at the first ``+``, the key ID is the next 8 lowercase hex
digits, and the rest (which may itself hold ``+``) is standard padded base64
of the signature type byte and the public key. The key ID is
SHA-256(name || 0x0A || type || public key)[:4] (c2sp.org/signed-note
§Signatures). A reader copying an example must not be handed a key whose ID
is wrong, nor one elided with an ellipsis that only looks like a key.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest

from builder.formats import checkpoint, note

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), REPO / "docs/vectors/README.md"])

# A candidate: a name (no whitespace, no '+', no quote or bracket), '+', 8 hex, '+', a tail.
_CANDIDATE = re.compile(r"([^\s+`'\"()\[\]<>]+)\+([0-9a-f]{8})\+(\S*)")
_B64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def split_vkey(vkey: str) -> tuple[str, str, str]:
    """docs/protocol.md §4.1: name to the first '+', then 8 hex, '+', the base64 rest."""
    name, _, rest = vkey.partition("+")
    key_id, plus, key_b64 = rest[:8], rest[8:9], rest[9:]
    assert re.fullmatch(r"[0-9a-f]{8}", key_id) and plus == "+", vkey
    return name, key_id, key_b64


def doc_vkeys() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for line in path.read_text(encoding="utf-8").splitlines():
            for m in _CANDIDATE.finditer(line):
                tail = m.group(3)
                b64 = re.match(r"[A-Za-z0-9+/=]*", tail)
                assert b64 is not None
                rest = tail[b64.end() :]
                assert not rest.startswith(("…", "...")), (
                    f"{path.relative_to(REPO)}: elided key {m.group(0)}; show the whole key"
                )
                found.append(
                    (str(path.relative_to(REPO)), m.group(1) + "+" + m.group(2) + "+" + b64.group())
                )
    return found


VKEYS = doc_vkeys()


def test_the_docs_show_keys_including_one_whose_base64_holds_a_plus() -> None:
    assert len(VKEYS) >= 6
    assert any("+" in split_vkey(v)[2] for _, v in VKEYS)


@pytest.mark.parametrize(("where", "vkey"), VKEYS, ids=[f"{w}:{v[:40]}" for w, v in VKEYS])
def test_doc_vkey_key_id_matches_its_key(where: str, vkey: str) -> None:
    name, key_id, key_b64 = split_vkey(vkey)
    assert _B64.fullmatch(key_b64) and key_b64, f"{where}: {vkey}: not padded base64"
    raw = base64.b64decode(key_b64, validate=True)
    assert base64.b64encode(raw).decode() == key_b64, f"{where}: non-canonical base64"
    assert raw[0] in (note.SIG_ED25519, note.SIG_COSIGNATURE_V1) and len(raw) == 33, where
    want = hashlib.sha256(name.encode() + b"\n" + raw[:1] + raw[1:]).digest()[:4].hex()
    assert key_id == want, f"{where}: {vkey}: key ID {key_id}, computed {want}"
    # And the project's own parsers agree, key validity included.
    if raw[0] == note.SIG_ED25519:
        assert note.parse_verifier_key(vkey).vkey == vkey
    else:
        assert checkpoint.parse_cosigner_key(vkey).vkey == vkey
