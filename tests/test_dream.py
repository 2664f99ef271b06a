"""docs/protocol.md §1: the dream format, checked against an independent reading."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import InputError, SignatureError
from builder.formats import dream as dreamfmt
from tests.conftest import draft

SEED = bytes(range(32))


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def independent_check(signed: dict[str, Any]) -> str:
    """docs/protocol.md §1 written out again, using none of the package's helpers.

    Returns the dream id.
    """
    body = {
        k: signed[k]
        for k in ("author", "title", "summary", "entries", "tags", "lineage", "consent")
        if k in signed
    }
    message = rfc8785.dumps(body)
    public_key = _b64url_decode(signed["sig"]["publicKey"])
    signature = _b64url_decode(signed["sig"]["value"])
    assert len(public_key) == 32 and len(signature) == 64
    assert "=" not in signed["sig"]["publicKey"] + signed["sig"]["value"]
    Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    assert signed["sig"]["alg"] == "ed25519"
    assert signed["sig"]["keyId"] == "sha256:" + hashlib.sha256(public_key).hexdigest()[:16]
    return hashlib.sha256(signature).hexdigest()[:16]


def test_keygen_and_sign_verify_independently(run: Any, home: Path, tmp_path: Path) -> None:
    made = run("keygen", "--author", "ada")
    assert made.code == 0, made
    key_id = made.out.split("keyId")[1].split()[0]
    src = tmp_path / "draft.json"
    src.write_text(json.dumps(draft(lineage={"generation": 0})), encoding="utf-8")
    signed_path = tmp_path / "signed.json"
    result = run("sign", src, "--key", key_id, "-o", signed_path)
    assert result.code == 0, result
    signed = json.loads(signed_path.read_text(encoding="utf-8"))
    dream_id = independent_check(signed)
    assert dream_id in result.err
    assert dreamfmt.parse(signed_path.read_bytes(), "x").id == dream_id
    assert run("verify", signed_path).code == 0


def test_private_key_file_is_0600_and_outside_git(run: Any, home: Path) -> None:
    assert run("keygen", "--author", "ada").code == 0
    files = list((home / "keys").iterdir())
    assert len(files) == 1
    assert files[0].stat().st_mode & 0o777 == 0o600
    assert (home / "keys").stat().st_mode & 0o777 == 0o700


def test_keygen_refuses_inside_a_git_tree(run: Any, tmp_path: Path, monkeypatch: Any) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.setenv("DREAMPOOL_HOME", str(repo / "cfg"))
    result = run("keygen", "--author", "ada")
    assert result.code == 1
    assert "git work tree" in result.err and "hint:" in result.err
    assert not (repo / "cfg").exists()


def test_signing_is_deterministic_so_ids_are_stable() -> None:
    a = dreamfmt.sign(draft(), SEED)
    b = dreamfmt.sign(copy.deepcopy(draft()), SEED)
    assert a == b
    assert independent_check(a) == independent_check(b)


def test_sig_is_not_signed_and_field_order_does_not_matter() -> None:
    signed = dreamfmt.sign(draft(), SEED)
    reordered = dict(reversed(list(signed.items())))
    data = json.dumps(reordered).encode()
    assert dreamfmt.parse(data, "x").id == independent_check(signed)


def signed_bytes_of(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


# --- refusals: each names the file and the JSON pointer ------------------------

LONG = "x" * 301


@pytest.mark.parametrize(
    ("change", "pointer", "words"),
    [
        (lambda d: d.update(author=""), "/author", "1–64 characters, is 0"),
        (lambda d: d.update(author="a" * 65), "/author", "is 65"),
        (lambda d: d.update(title="t" * 121), "/title", "is 121"),
        (lambda d: d.update(title="梦" * 121), "/title", "is 121"),  # code points, not bytes
        (lambda d: d.update(summary="s" * 801), "/summary", "is 801"),
        (lambda d: d.update(entries=[]), "/entries", "1–50 entries, holds 0"),
        (lambda d: d.update(entries=d["entries"] * 26), "/entries", "holds 52"),
        (lambda d: d["entries"][1].update(text=LONG), "/entries/1/text", "is 301"),
        (lambda d: d["entries"][0].update(type="rumour"), "/entries/0/type", "one of fact"),
        (lambda d: d["entries"][0].update(confidence="sure"), "/entries/0/confidence", "confirmed"),
        (lambda d: d["entries"][0].update(source=LONG), "/entries/0/source", "is 301"),
        (lambda d: d["entries"][0].update(mood="x"), "/entries/0/mood", "unknown field"),
        (lambda d: d["entries"][0].pop("type"), "/entries/0/type", "required"),
        (lambda d: d.update(tags=["t"] * 9), "/tags", "holds 9"),
        (lambda d: d.update(tags=["t" * 33]), "/tags/0", "is 33"),
        (lambda d: d.update(tags=["a", "a"]), "/tags/1", "repeats"),
        (lambda d: d.update(tags=[""]), "/tags/0", "is 0"),
        (lambda d: d.update(lineage={"generation": 1001}), "/lineage/generation", "0–1000"),
        (lambda d: d.update(lineage={"generation": True}), "/lineage/generation", "0–1000"),
        (lambda d: d.update(lineage={"parent": "p"}), "/lineage/generation", "required"),
        (
            lambda d: d.update(lineage={"parent": "p" * 65, "generation": 1}),
            "/lineage/parent",
            "is 65",
        ),
        (
            lambda d: d.update(consent={"share": False, "anonymize": False}),
            "/consent/share",
            "true",
        ),
        (lambda d: d.update(consent={"share": True}), "/consent/anonymize", "required"),
        (lambda d: d["consent"].update(derivatives="yes"), "/consent/derivatives", "true or false"),
        (lambda d: d.update(summary=None), "/summary", "is null"),
        (lambda d: d.update(extra=1), "/extra", "unknown field"),
        (lambda d: d.pop("title"), "/title", "required"),
        (lambda d: d.update(title="a\u202eb"), "/title", "U+202E"),
        (lambda d: d.update(title="a\u2067b"), "/title", "U+2067"),
        (lambda d: d.update(title="a\u200bb"), "/title", "U+200B"),
        (lambda d: d.update(summary="a\ufeffb"), "/summary", "U+FEFF"),
        (lambda d: d.update(summary="a\u2063b"), "/summary", "U+2063"),
        (lambda d: d.update(title="a\x07b"), "/title", "U+0007"),
        (lambda d: d.update(title="a\x85b"), "/title", "U+0085"),
        (lambda d: d.update(title="two\nlines"), "/title", "newline"),
        (lambda d: d.update(tags=["a\nb"]), "/tags/0", "newline"),
        (lambda d: d["entries"][0].update(text="tab\there"), "/entries/0/text", "U+0009"),
    ],
)
def test_schema_refusals(change: Any, pointer: str, words: str, run: Any, tmp_path: Path) -> None:
    obj = dreamfmt.sign(draft(), SEED)
    change(obj)
    path = tmp_path / "bad.json"
    path.write_bytes(signed_bytes_of(obj))
    result = run("verify", path)
    assert result.code == 1
    assert f"{path}: {pointer}: " in result.err, result.err
    assert words in result.err


def test_newlines_allowed_in_summary_and_entry_text() -> None:
    obj = dreamfmt.sign(
        draft(
            summary="a\nb", entries=[{"text": "one\ntwo", "type": "fact", "confidence": "theory"}]
        ),
        SEED,
    )
    dreamfmt.parse(signed_bytes_of(obj), "x")


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        (lambda s: s.update(alg="rsa"), "/sig/alg"),
        (lambda s: s.update(keyId="sha256:XYZ"), "/sig/keyId"),
        (lambda s: s.update(publicKey=s["publicKey"] + "="), "/sig/publicKey"),
        (lambda s: s.update(publicKey=s["publicKey"][:-2]), "/sig/publicKey"),
        (lambda s: s.update(value="!" * 86), "/sig/value"),
        (lambda s: s.pop("value"), "/sig/value"),
    ],
)
def test_sig_shape_refusals(change: Any, pointer: str, run: Any, tmp_path: Path) -> None:
    obj = dreamfmt.sign(draft(), SEED)
    change(obj["sig"])
    path = tmp_path / "bad.json"
    path.write_bytes(signed_bytes_of(obj))
    result = run("verify", path)
    assert result.code == 1 and f"{path}: {pointer}:" in result.err, result.err


def test_signature_over_other_bytes_refused(run: Any, tmp_path: Path) -> None:
    obj = dreamfmt.sign(draft(), SEED)
    obj["title"] = "Changed after signing"
    path = tmp_path / "bad.json"
    path.write_bytes(signed_bytes_of(obj))
    result = run("verify", path)
    assert result.code == 1 and f"{path}: /sig: signature does not verify" in result.err


def test_key_id_must_match_key(run: Any, tmp_path: Path) -> None:
    obj = dreamfmt.sign(draft(), SEED)
    obj["sig"]["keyId"] = "sha256:" + "0" * 16
    path = tmp_path / "bad.json"
    path.write_bytes(signed_bytes_of(obj))
    result = run("verify", path)
    assert result.code == 1 and "/sig/keyId" in result.err


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"\xef\xbb\xbf{}", "byte order mark"),
        (b'{"author": "a", "author": "b"}', "duplicate"),
        (b'{"n": NaN}', "NaN"),
        (b'{"n": 9007199254740993}', "2^53"),
        (b'{"s": "\\udc00"}', "surrogate"),
        (b"[" * 40 + b"]" * 40, "nested"),
        (b'{"s": "' + b"a" * 70000 + b'"}', "limit is 65536"),
        (b"\xc3\x28", "UTF-8"),
        (b"[]", "must be a JSON object"),
    ],
)
def test_json_refusals_name_the_file(data: bytes, words: str, run: Any, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    result = run("verify", path)
    assert result.code == 1 and str(path) in result.err and words in result.err, result.err


def test_errors_never_echo_values(run: Any, tmp_path: Path) -> None:
    secret = "hunter2-very-secret-value-" * 3
    obj = dreamfmt.sign(draft(), SEED)
    obj["author"] = secret
    path = tmp_path / "bad.json"
    path.write_bytes(signed_bytes_of(obj))
    result = run("verify", path)
    assert result.code == 1 and "hunter2" not in result.err + result.out


def test_optional_fields_may_not_be_null() -> None:
    obj = dreamfmt.sign(draft(), SEED)
    obj["lineage"] = None
    with pytest.raises(InputError) as info:
        dreamfmt.parse(signed_bytes_of(obj), "f.json")
    assert info.value.problems[0].pointer == "/lineage"


SIGNED = json.dumps(
    dreamfmt.sign(draft(lineage={"parent": "abc", "generation": 2}), SEED),
    ensure_ascii=False,
    separators=(",", ":"),
).encode()


@settings(max_examples=300)
@given(st.data())
def test_flipping_any_byte_of_a_signed_dream_fails(data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(SIGNED) - 1))
    delta = data.draw(st.integers(1, 255))
    mangled = bytearray(SIGNED)
    mangled[index] ^= delta
    with pytest.raises((InputError, SignatureError)):
        dreamfmt.parse(bytes(mangled), "f.json")


@pytest.mark.parametrize("author", ["", "a" * 65, "bad\u202ename", "two\nlines"])
def test_keygen_refuses_bad_author_names(author: str, run: Any, home: Path) -> None:
    result = run("keygen", "--author", author)
    assert result.code == 1 and "--author" in result.err and "hint:" in result.err
    assert not (home / "keys").exists() or not list((home / "keys").iterdir())


@pytest.mark.parametrize("author", ["anonymous", "Anonymous", "ANONYMOUS"])
def test_keygen_refuses_the_reserved_name(author: str, run: Any, home: Path) -> None:
    """A new user's audit (23rd session): `keygen --author anonymous` made a
    key whose every dream `submit` then refused."""
    result = run("keygen", "--author", author)
    assert result.code == 1 and "is reserved for anonymized dreams" in result.err
    assert "--anonymize" in result.err
    assert not (home / "keys").exists() or not list((home / "keys").iterdir())


def test_sign_names_an_overlong_field_of_a_large_draft(
    run: Any, home: Path, tmp_path: Path
) -> None:
    """A new user's audit (23rd session): a draft with a 100 KB title was
    refused as "file is 103036 bytes, the limit is 65536", naming no field;
    a draft may be larger than the dream it signs, so the field is named."""
    key_id = run("keygen", "--author", "ada").out.split("keyId")[1].split()[0]
    src = tmp_path / "draft.json"
    src.write_text(json.dumps(draft(author="ada", title="x" * 102_400)), encoding="utf-8")
    out = tmp_path / "signed.json"
    result = run("sign", src, "--key", key_id, "-o", out)
    assert result.code == 1
    assert "/title: must be 1–120 characters, is 102400" in result.err, result.err
    assert "the limit is 65536" not in result.err
    assert not out.exists()


def test_rotate_refuses_a_key_to_itself(run: Any, home: Path, tmp_path: Path) -> None:
    """A new user's audit (23rd session): a rotation from a key to itself was
    written (and announced as retiring the key), and `submit` refused it."""
    key_id = run("keygen", "--author", "ada").out.split("keyId")[1].split()[0]
    out = tmp_path / "r.json"
    result = run("rotate", "--old", key_id, "--new", key_id, "-o", out)
    assert result.code == 1 and f"is the old key {key_id} itself" in result.err
    assert not out.exists()


def test_sign_refuses_a_draft_for_another_author(run: Any, home: Path, tmp_path: Path) -> None:
    key_id = run("keygen", "--author", "ada").out.split("keyId")[1].split()[0]
    src = tmp_path / "draft.json"
    src.write_text(json.dumps(draft(author="someone-else")), encoding="utf-8")
    out = tmp_path / "signed.json"
    result = run("sign", src, "--key", key_id, "-o", out)
    assert result.code == 1 and f"{src}: /author:" in result.err and not out.exists()


def test_sign_refuses_an_invalid_draft_and_writes_nothing(
    run: Any, home: Path, tmp_path: Path
) -> None:
    key_id = run("keygen", "--author", "ada").out.split("keyId")[1].split()[0]
    src = tmp_path / "draft.json"
    src.write_text(json.dumps(draft(title="")), encoding="utf-8")
    out = tmp_path / "signed.json"
    result = run("sign", src, "--key", key_id, "-o", out)
    assert result.code == 1 and f"{src}: /title:" in result.err and not out.exists()


def test_missing_input_file_is_an_error_not_a_traceback(
    run: Any, home: Path, tmp_path: Path
) -> None:
    key_id = run("keygen", "--author", "ada").out.split("keyId")[1].split()[0]
    result = run("sign", tmp_path / "missing.json", "--key", key_id)
    assert result.code == 1 and "missing.json: No such file or directory" in result.err


def test_validate_text_holds_a_text_field_to_a_dreams_rules() -> None:
    """One value checked as a dream's text field is (pool.yaml's settings and a
    key file's author use it), lone surrogates included: strict JSON never
    yields one, another reader may."""

    def rules(value: Any, **kw: Any) -> list[str]:
        return [
            f"{p.pointer}: {p.rule}" for p in dreamfmt.validate_text(value, "f", "/t", 1, 9, **kw)
        ]

    assert rules("fine") == [] and rules("two\nlines", newline=True) == []
    assert rules("a\ud800") == [
        "/t: holds a lone surrogate at character 1, which is not Unicode text"
    ]
    assert rules("a\u202e") == [
        "/t: holds U+202E (a bidi control) at character 1; text holds no control, format, "
        "invisible, private-use or unassigned character (docs/protocol.md §1.1, Unicode "
        "15.0.0) (newlines are allowed only in summary and entry text)"
    ]
    assert rules("") == ["/t: must be 1–9 characters, is 0"]
    assert rules(3) == ["/t: must be a string of 1–9 characters, is an integer"]
    assert [p.pointer for p in dreamfmt.validate_author("x" * 65, "k", "/author")] == ["/author"]


def test_key_store_messages_name_the_folder_dreampool_home_chose(
    run: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 18 (regression): with DREAMPOOL_HOME set, a missing key's hint sent
    the user to ~/.config/dreampool/keys, where their keys are not."""
    monkeypatch.setenv("DREAMPOOL_HOME", str(tmp_path / "elsewhere"))
    src = tmp_path / "draft.json"
    src.write_text(json.dumps(draft()), encoding="utf-8")
    result = run("sign", src, "--key", "sha256:0123456789abcdef")
    assert result.code == 1
    keys = tmp_path / "elsewhere" / "keys"
    assert f"no key sha256:0123456789abcdef in your key store {keys}" in result.err
    assert f"hint: your key store is {keys} (from DREAMPOOL_HOME)" in result.err
    assert ".config" not in result.err

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.setenv("DREAMPOOL_HOME", str(repo / "cfg"))
    result = run("keygen", "--author", "ada")
    assert result.code == 1 and f"the key store {repo / 'cfg' / 'keys'} is inside" in result.err
    assert f"(it is {str(repo / 'cfg')!r} now)" in result.err and ".config" not in result.err

    monkeypatch.delenv("DREAMPOOL_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    result = run("sign", src, "--key", "sha256:0123456789abcdef")
    default = tmp_path / "home" / ".config" / "dreampool" / "keys"
    assert f"hint: your key store is {default} (the default; set DREAMPOOL_HOME" in result.err
