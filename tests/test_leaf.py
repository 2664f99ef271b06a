"""builder.formats.leaf, the log leaf wire format of docs/protocol.md §3.

Witnesses: every leaf the project publishes or ships (docs/vectors, the sample
pool's log, the golden pool's log, the example of §3) parses, and encodes back
to the same bytes. Properties: parse and encode are inverse on every leaf, and
whatever parse accepts is the encoding of what it returns. A table of malformed
leaves, each refused naming the rule it breaks."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.formats import dream as dreamfmt
from builder.formats import ed25519, tiles
from builder.formats import leaf as leaffmt
from builder.formats.b64 import b64url_encode
from builder.formats.tlogproof import parse_tlog_proof
from tests.conftest import REPO

DOCS_VECTORS = REPO / "docs" / "vectors"
VALUES: dict[str, Any] = json.loads((DOCS_VECTORS / "vectors.json").read_text(encoding="utf-8"))

# One leaf of each kind, from the published vectors (docs/vectors/vectors.json).
DREAM = VALUES["dreams"][0]["leafData"].encode()
KEY = VALUES["leaves"][0]["data"].encode()
ERASURE = VALUES["large"]["erasure"]["leafData"].encode()


# --- witnesses --------------------------------------------------------------------


def _bundle_width(path: Path) -> int:
    """c2sp.org/tlog-tiles: ``entries/NNN`` is full (256), ``entries/NNN.p/W`` holds W."""
    return int(path.name) if path.parent.name.endswith(".p") else tiles.TILE_WIDTH


def published_leaves() -> list[tuple[str, bytes]]:
    """Every leaf the repository holds, named by where it is."""
    found: list[tuple[str, bytes]] = []
    for i, d in enumerate(VALUES["dreams"]):
        found.append((f"vectors.json dreams[{i}].leafData", d["leafData"].encode()))
    for entry in VALUES["leaves"]:
        found.append((f"vectors.json leaves[{entry['index']}]", entry["data"].encode()))
    found.append(("vectors.json large.erasure", VALUES["large"]["erasure"]["leafData"].encode()))
    found.append(
        ("vectors.json large.rotation", VALUES["large"]["rotation"]["keyLeafData"].encode())
    )
    for path in sorted(DOCS_VECTORS.rglob("tile/entries/**/*")):
        if path.is_file():
            bundle = tiles.decode_entry_bundle(path.read_bytes(), _bundle_width(path))
            name = path.relative_to(REPO).as_posix()
            found += [(f"{name} entry {i}", data) for i, data in enumerate(bundle)]
    for path in sorted(DOCS_VECTORS.rglob("*.tlog-proof")):
        extra = parse_tlog_proof(path.read_bytes()).extra
        assert extra is not None, path
        found.append((f"{path.relative_to(REPO).as_posix()} extra", extra))
    for root in (REPO / "content", REPO / "tests" / "golden" / "content"):
        for path in sorted((root / "log" / "leaves").glob("*.jsonl")):
            name = path.relative_to(REPO).as_posix()
            lines = path.read_bytes().splitlines()
            found += [(f"{name}:{n}", data) for n, data in enumerate(lines, start=1)]
    return found


PUBLISHED = published_leaves()


def test_the_witnesses_hold_every_kind() -> None:
    """The parametrization below is not vacuous: it holds hundreds of leaves, of all
    three kinds, from each source."""
    kinds = {type(leaffmt.parse(data)) for _, data in PUBLISHED}
    assert kinds == {leaffmt.DreamLeaf, leaffmt.KeyLeaf, leaffmt.ErasureLeaf}
    sources = {name.split(" ")[0].split(":")[0].split("/")[0] for name, _ in PUBLISHED}
    assert {"vectors.json", "docs", "content", "tests"} <= sources
    assert len(PUBLISHED) > 300


@pytest.mark.parametrize(("where", "data"), PUBLISHED, ids=[name for name, _ in PUBLISHED])
def test_every_published_leaf_parses_and_encodes_to_its_bytes(where: str, data: bytes) -> None:
    assert leaffmt.encode(leaffmt.parse(data)) == data, where


def test_the_example_of_section_3_is_dream_a() -> None:
    """docs/protocol.md §3's example, read from the document itself."""
    text = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = text.split("## 3. Log leaves", 1)[1].split("## 4.", 1)[0]
    example = re.search(r"```text\n(.*?)\n```", section, re.S)
    assert example is not None
    data = example[1].encode()
    assert leaffmt.parse(data) == leaffmt.DreamLeaf(
        VALUES["dreams"][0]["id"], VALUES["dreams"][0]["commitment"]
    )
    assert hashlib.sha256(b"\0" + data).hexdigest() == VALUES["dreams"][0]["leafHash"]


def test_the_vectors_key_leaf_is_the_authors_key() -> None:
    parsed = leaffmt.parse(KEY)
    assert isinstance(parsed, leaffmt.KeyLeaf)
    assert b64url_encode(parsed.public_key) == VALUES["author"]["publicKey"]
    assert parsed.key_id == VALUES["author"]["keyId"]


# --- properties -------------------------------------------------------------------

_HEX = "0123456789abcdef"
ids = st.text(_HEX, min_size=16, max_size=16)
# Letters of several scripts, digits, punctuation, a space, a combining accent,
# a character outside the BMP, and characters that JCS escapes (all of which the
# author rules then refuse: the filter keeps what docs/protocol.md §1 allows).
_AUTHOR_CHARS = 'adaZ09-_. 林ŁжΩé\u0301\U0001f600"\\\u00e9\n\t\u202e'
authors = st.text(st.sampled_from(_AUTHOR_CHARS), min_size=1, max_size=64).filter(
    lambda name: not dreamfmt.validate_author(name, "")
)
public_keys = st.binary(min_size=32, max_size=32).map(ed25519.public_key_of)

dream_leaves = st.builds(leaffmt.DreamLeaf, ids, st.text(_HEX, min_size=64, max_size=64))
key_leaves = public_keys.flatmap(
    lambda pk: st.builds(leaffmt.KeyLeaf, st.just(dreamfmt.key_id(pk)), st.just(pk), authors)
)
erasure_leaves = st.builds(leaffmt.ErasureLeaf, ids, st.sampled_from(leaffmt.REASONS))
leaves = dream_leaves | key_leaves | erasure_leaves


@settings(max_examples=200)
@given(leaves)
def test_parse_inverts_encode(value: leaffmt.Leaf) -> None:
    assert leaffmt.parse(leaffmt.encode(value)) == value


def _parse_or_error(data: bytes) -> leaffmt.Leaf | str:
    try:
        return leaffmt.parse(data)
    except leaffmt.LeafError as exc:
        return exc.message


def _edited(data: bytes, at: int, byte: int, how: str) -> bytes:
    at %= len(data) + 1
    if how == "insert":
        return data[:at] + bytes([byte]) + data[at:]
    if how == "delete":
        return data[:at] + data[at + 1 :]
    return data[:at] + bytes([byte]) + data[at + 1 :]


@settings(max_examples=400)
@given(
    leaves,
    st.lists(
        st.tuples(
            st.integers(0, 600), st.integers(0, 255), st.sampled_from(["insert", "delete", "set"])
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_whatever_parse_accepts_is_the_encoding_of_what_it_returns(
    value: leaffmt.Leaf, edits: list[tuple[int, int, str]]
) -> None:
    """Bytes near a leaf (a few bytes inserted, deleted or changed): parse either
    refuses them or returns a leaf whose encoding is exactly them, and the shortcut
    for common shapes agrees with the general path."""
    data = leaffmt.encode(value)
    for at, byte, how in edits:
        data = _edited(data, at, byte, how)
    got = _parse_or_error(data)
    if not isinstance(got, str):
        assert leaffmt.encode(got) == data
    try:
        general: leaffmt.Leaf | str = leaffmt._parse_general(data)
    except leaffmt.LeafError as exc:
        general = exc.message
    assert isinstance(got, str) == isinstance(general, str)
    if not isinstance(got, str):
        assert got == general


json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=70)
)


@settings(max_examples=300)
@given(
    leaves,
    st.sampled_from(["v", "kind", "id", "commitment", "keyId", "publicKey", "author", "reason"]),
    json_scalars,
    st.booleans(),
)
def test_an_object_one_member_away_is_refused_or_the_same_leaf(
    value: leaffmt.Leaf, member: str, new: Any, drop: bool
) -> None:
    """A leaf object with one member set to any JSON value, or dropped, in JCS form:
    refused, or (the value was valid for that member) a leaf encoding to it."""
    obj = json.loads(leaffmt.encode(value))
    if drop:
        obj.pop(member, None)
    else:
        obj[member] = new
    data = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    got = _parse_or_error(data)
    if not isinstance(got, str):
        assert leaffmt.encode(got) == data


# --- what parse refuses -----------------------------------------------------------

_A_ID = VALUES["dreams"][0]["id"]
_A_COMMIT = VALUES["dreams"][0]["commitment"]
_P = 2**255 - 19


def _jcs(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _dream(**change: Any) -> bytes:
    obj: dict[str, Any] = {"v": 1, "kind": "dream", "id": _A_ID, "commitment": _A_COMMIT}
    obj.update(change)
    return _jcs({k: v for k, v in obj.items() if v is not ...})


def _key(**change: Any) -> bytes:
    obj = json.loads(KEY)
    obj.update(change)
    return _jcs({k: v for k, v in obj.items() if v is not ...})


def _erasure(**change: Any) -> bytes:
    obj = json.loads(ERASURE)
    obj.update(change)
    return _jcs({k: v for k, v in obj.items() if v is not ...})


def _raw_key(raw: bytes) -> bytes:
    return _key(publicKey=b64url_encode(raw), keyId=dreamfmt.key_id(raw))


# (name, bytes, the member the error names ("" for the whole leaf), words it says)
MALFORMED: list[tuple[str, bytes, str, str]] = [
    ("not-json", b'{"v":1,', "", "not strict JSON"),
    ("not-utf8", b'{"v":1,"kind":"\xff"}', "", "not valid UTF-8"),
    ("bom", b"\xef\xbb\xbf" + DREAM, "", "byte order mark"),
    ("empty", b"", "", "not strict JSON"),
    ("too-big", _dream(id="0" * 2000), "", "limit is 1024"),
    ("not-an-object", b"[1]", "", "must be a JSON object"),
    ("nested", b'{"v":{"v":{"v":1}}}', "", "nested deeper"),
    ("duplicate-key", DREAM[:-1] + b',"v":1}', "", "duplicate member name 'v'"),
    ("duplicate-id", DREAM.replace(b'"id"', b'"id":"' + b"0" * 16 + b'","id"'), "", "duplicate"),
    ("no-v", _dream(v=...), "v", "must be the integer 1"),
    ("v-2", _dream(v=2), "v", "must be the integer 1"),
    ("v-string", _dream(v="1"), "v", "must be the integer 1"),
    ("v-true", _dream(v=True), "v", "must be the integer 1"),
    ("v-float", DREAM.replace(b'"v":1', b'"v":1.0'), "v", "must be the integer 1"),
    ("no-kind", _dream(kind=...), "kind", "dream, key or erasure"),
    ("unknown-kind", _dream(kind="note"), "kind", "dream, key or erasure"),
    ("kind-case", _dream(kind="Dream"), "kind", "dream, key or erasure"),
    ("missing-commitment", _dream(commitment=...), "", "lacks member(s) commitment"),
    ("missing-id", _dream(id=...), "", "lacks member(s) id"),
    ("extra-key", _dream(tier="maintainer"), "", "unknown member(s) 'tier'"),
    ("erasure-with-commitment", _erasure(commitment=_A_COMMIT), "", "unknown member(s)"),
    ("dream-with-reason", _dream(reason="legal"), "", "unknown member(s) 'reason'"),
    ("id-15-hex", _dream(id=_A_ID[:15]), "id", "16 lowercase hex"),
    ("id-17-hex", _dream(id=_A_ID + "0"), "id", "16 lowercase hex"),
    ("id-upper-hex", _dream(id=_A_ID.upper()), "id", "16 lowercase hex"),
    ("id-not-hex", _dream(id="g" * 16), "id", "16 lowercase hex"),
    ("id-number", _dream(id=12), "id", "16 lowercase hex"),
    ("commitment-upper-hex", _dream(commitment=_A_COMMIT.upper()), "commitment", "lowercase hex"),
    ("commitment-not-hex", _dream(commitment="z" * 64), "commitment", "64 lowercase hex"),
    ("commitment-short", _dream(commitment=_A_COMMIT[:-2]), "commitment", "64 lowercase hex"),
    ("commitment-null", _dream(commitment=None), "commitment", "is null"),
    ("erasure-bad-id", _erasure(id="x"), "id", "16 lowercase hex"),
    ("reason-unknown", _erasure(reason="spam"), "reason", "author-request, legal, abuse"),
    ("reason-case", _erasure(reason="Legal"), "reason", "author-request, legal, abuse"),
    ("reason-list", _erasure(reason=["legal"]), "reason", "author-request, legal, abuse"),
    ("keyid-not-of-key", _key(keyId="sha256:" + "0" * 16), "keyId", "not the keyId of publicKey"),
    ("keyid-upper", _key(keyId=json.loads(KEY)["keyId"].upper()), "keyId", "16 lowercase hex"),
    ("keyid-no-prefix", _key(keyId=json.loads(KEY)["keyId"][7:]), "keyId", "'sha256:'"),
    ("publickey-padded", _key(publicKey=json.loads(KEY)["publicKey"] + "="), "publicKey", "base64"),
    ("publickey-std-b64", _key(publicKey="+" * 43), "publicKey", "base64"),
    ("publickey-31-bytes", _raw_key(b"\x07" * 31), "publicKey", "31 bytes, want 32"),
    ("publickey-identity", _raw_key(b"\x01" + b"\0" * 31), "publicKey", "small order"),
    ("publickey-y-ge-p", _raw_key((_P + 1).to_bytes(32, "little")), "publicKey", "y >= p"),
    ("publickey-number", _key(publicKey=7), "publicKey", "is a number"),
    ("author-empty", _key(author=""), "author", "1–64"),
    ("author-65", _key(author="a" * 65), "author", "1–64"),
    ("author-newline", _key(author="ada\nbob"), "author", "newline"),
    ("author-bidi", _key(author="ada\u202e"), "author", "docs/protocol.md §1.1"),
    ("author-number", _key(author=1), "author", "must be a string"),
    ("spaces", DREAM.replace(b",", b", "), "", "not JCS-canonical"),
    (
        "unsorted",
        b'{"v":1,"kind":"dream","id":"%s","commitment":"%s"}'
        % (_A_ID.encode(), _A_COMMIT.encode()),
        "",
        "not JCS-canonical",
    ),
    ("escaped-letter", DREAM.replace(b'"kind":"dream"', b'"kind":"\\u0064ream"'), "", "not JCS"),
    ("trailing-newline", DREAM + b"\n", "", "not JCS-canonical"),
    ("author-escaped", KEY.replace(b'"vector-author"', b'"vector\\u002dauthor"'), "", "not JCS"),
]


@pytest.mark.parametrize(
    ("data", "member", "words"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_a_malformed_leaf_is_refused_naming_the_rule(data: bytes, member: str, words: str) -> None:
    with pytest.raises(leaffmt.LeafError) as info:
        leaffmt.parse(data)
    assert info.value.member == member
    assert words in info.value.message
    assert info.value.message.startswith(f"/{member}: " if member else "")
    assert info.value.hint and "docs/protocol.md §3" in info.value.hint


def test_the_table_starts_from_leaves_that_parse() -> None:
    """The malformed leaves are one change away from valid ones, not from garbage."""
    assert leaffmt.parse(_dream()) == leaffmt.parse(DREAM)
    assert leaffmt.parse(_key()) == leaffmt.parse(KEY)
    assert leaffmt.parse(_erasure()) == leaffmt.parse(ERASURE)
    seed_key = ed25519.public_key_of(b"\x05" * 32)
    assert isinstance(leaffmt.parse(_raw_key(seed_key)), leaffmt.KeyLeaf)


@pytest.mark.parametrize(
    ("make", "member"),
    [
        (lambda: leaffmt.DreamLeaf(_A_ID.upper(), _A_COMMIT), "id"),
        (lambda: leaffmt.DreamLeaf(_A_ID, "0" * 63), "commitment"),
        (lambda: leaffmt.ErasureLeaf(_A_ID, "spam"), "reason"),
        (lambda: leaffmt.KeyLeaf("sha256:" + "0" * 16, b"\x01" + b"\0" * 31, "ada"), "publicKey"),
        (
            lambda: leaffmt.KeyLeaf("sha256:" + "0" * 16, ed25519.public_key_of(b"\1" * 32), "ada"),
            "keyId",
        ),
        (
            lambda: leaffmt.KeyLeaf(
                dreamfmt.key_id(ed25519.public_key_of(b"\1" * 32)),
                ed25519.public_key_of(b"\1" * 32),
                "",
            ),
            "author",
        ),
    ],
)
def test_no_value_breaks_a_rule_so_encode_never_writes_a_bad_leaf(make: Any, member: str) -> None:
    """The writers (the build, scripts/make_vectors.py) make values, not bytes: a
    value that §3 refuses cannot be made, so it is never logged."""
    with pytest.raises(leaffmt.LeafError) as info:
        make()
    assert info.value.member == member
