"""Input attacks (THREATS.md T01–T10): a malicious submitter's file meets the pool.

Every hostile file is offered the two ways a dream reaches a pool: ``dreampool
submit`` (which must write nothing) and a pull request that drops the file into
``content/dreams/`` (which ``dreampool check`` must report and the build must not
admit). The schema's field-by-field refusals are in ``tests/test_dream.py``; here
is what an attacker would try against the pool as a whole.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.content import pool
from builder.errors import DreampoolError, InputError, LogError
from builder.formats import dream as dreamfmt
from builder.formats import ed25519, statement, strictjson
from builder.formats.b64 import b64url_decode, b64url_encode
from builder.log import logstate
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, dump, seed_of, set_tier, signed, submit, tree

ANY_ID = "0123456789abcdef"


@pytest.fixture
def tp(tmp_path: Path) -> PoolFixture:
    return make_pool(tmp_path)


def _file_name(data: bytes) -> str:
    """The name a pull request would give the file: its id if it has a signature."""
    try:
        value = json.loads(data)["sig"]["value"]
        return dreamfmt.dream_id(b64url_decode(value))
    except Exception:
        return ANY_ID


def assert_refused(tp: PoolFixture, data: bytes, *words: str) -> None:
    """Refused by submit (nothing written) and by check (reported, not scanned)."""
    before = tree(tp.content)
    src = tp.content.parent / "attack.json"
    src.write_bytes(data)
    with pytest.raises(DreampoolError) as info:
        pool.submit(tp.content, [src])
    assert tree(tp.content) == before
    messages = [str(info.value)]
    if isinstance(info.value, InputError):
        messages += [str(p) for p in info.value.problems]
    target = tp.content / "dreams" / f"{_file_name(data)}.json"
    target.write_bytes(data)
    try:
        problems, scanned = pool.check(tp.content)
    finally:
        target.unlink()
    assert [p for p in problems if p.file == str(target)], problems
    assert all(s.path != target for s in scanned)
    messages += [str(p) for p in problems]
    for word in words:
        assert any(word in m for m in messages), (word, messages)


def _with(change: Callable[[dict[str, Any]], None], **fields: Any) -> bytes:
    obj = signed(**fields)
    change(obj)
    return dump(obj)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _text(old: bytes, new: bytes, **fields: Any) -> bytes:
    data = dump(signed(**fields))
    assert old in data
    return data.replace(old, new, 1)


LINEAGE = {"lineage": {"generation": 1}}

# (id, bytes of the attack, words the refusal must hold)
PARSER_ATTACKS: list[tuple[str, Callable[[], bytes], tuple[str, ...]]] = [
    ("oversize-file", lambda: dump(signed()) + b" " * 65536, ("limit is 65536",)),
    ("oversize-title", lambda: dump(signed(title="t" * 121)), ("/title", "is 121")),
    (
        "oversize-entries",
        lambda: dump(signed(entries=[signed()["entries"][0]] * 51)),
        ("holds 51",),
    ),
    (
        "deep-nesting",
        lambda: _with(lambda d: d["lineage"].update(generation=_nested(40)), **LINEAGE),
        ("nested deeper than 32",),
    ),
    (
        "duplicate-key",
        lambda: b'{"author": "mallory", ' + dump(signed())[1:],
        ("duplicate member",),
    ),
    (
        "duplicate-sig-key",
        lambda: _text(b'"sig": {', b'"sig": {"value": "AAAA", '),
        ("duplicate member",),
    ),
    (
        "nan",
        lambda: _text(b'"generation": 1', b'"generation": NaN', **LINEAGE),
        ("NaN is not JSON",),
    ),
    (
        "infinity",
        lambda: _text(b'"generation": 1', b'"generation": -Infinity', **LINEAGE),
        ("Infinity is not JSON",),
    ),
    (
        "overflow",
        lambda: _text(b'"generation": 1', b'"generation": 1e999', **LINEAGE),
        ("infinity",),
    ),
    ("lone-surrogate", lambda: _text(b"Pin the", b"\\ud800Pin the"), ("lone surrogate",)),
    ("lone-low-surrogate-key", lambda: _text(b'"title"', b'"ti\\udc00tle"'), ("lone surrogate",)),
    ("invalid-utf8", lambda: _text(b"Pin the", b"P\xffn the"), ("not valid UTF-8",)),
    ("overlong-utf8", lambda: _text(b"Pin the", b"P\xc0\xafn the"), ("not valid UTF-8",)),
    ("encoded-surrogate", lambda: _text(b"Pin the", b"P\xed\xa0\x80n the"), ("not valid UTF-8",)),
    ("bom", lambda: b"\xef\xbb\xbf" + dump(signed()), ("byte order mark",)),
    (
        "int-beyond-2^53",
        lambda: _text(b'"generation": 1', b'"generation": 9007199254740993', **LINEAGE),
        ("beyond",),
    ),
    # Regression: 5,000 digits made int() raise a bare ValueError (a traceback, not a refusal).
    (
        "int-5000-digits",
        lambda: _text(b'"generation": 1', b'"generation": ' + b"9" * 5000, **LINEAGE),
        ("integer of 5000 digits",),
    ),
    (
        "float-generation",
        lambda: _text(b'"generation": 1', b'"generation": 1.0', **LINEAGE),
        ("/lineage/generation",),
    ),
    ("not-an-object", lambda: b"[" + dump(signed()) + b"]", ("must be a JSON object",)),
]


@pytest.mark.parametrize(
    ("make", "words"), [(m, w) for _, m, w in PARSER_ATTACKS], ids=[i for i, _, _ in PARSER_ATTACKS]
)
def test_parser_attacks_are_refused_and_write_nothing(
    tp: PoolFixture, make: Callable[[], bytes], words: tuple[str, ...]
) -> None:
    """T01, T02: oversize file and fields, deep nesting, duplicate keys, NaN and
    Infinity, lone surrogates, invalid UTF-8, BOM, huge integers."""
    assert_refused(tp, make(), *words)


UNKNOWN_FIELDS: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("top-tier", lambda d: d.update(tier="maintainer"), "/tier"),
    ("top-type", lambda d: d.update(type="dreampool.rotate/v1"), "/type"),
    ("entry", lambda d: d["entries"][0].update(weight=9), "/entries/0/weight"),
    ("consent", lambda d: d["consent"].update(commercial=True), "/consent/commercial"),
    ("lineage", lambda d: d["lineage"].update(root="x"), "/lineage/root"),
    ("sig", lambda d: d["sig"].update(tier="maintainer"), "/sig/tier"),
    ("null-lineage", lambda d: d.update(lineage=None), "/lineage"),
    ("null-tags", lambda d: d.update(tags=None), "/tags"),
    ("null-source", lambda d: d["entries"][0].update(source=None), "/entries/0/source"),
]


@pytest.mark.parametrize(
    ("change", "pointer"),
    [(c, p) for _, c, p in UNKNOWN_FIELDS],
    ids=[i for i, _, _ in UNKNOWN_FIELDS],
)
def test_unknown_and_null_fields_are_refused(
    tp: PoolFixture, change: Callable[[dict[str, Any]], None], pointer: str
) -> None:
    """T03: an unknown field (a self-declared tier, a statement type) or a null
    optional could carry meaning no signature covers."""
    assert_refused(tp, _with(change, **LINEAGE), pointer)


SIGNED_FIELD_GAMES: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("signed-tags-removed", lambda d: d.pop("tags")),
    ("signed-summary-removed", lambda d: d.pop("summary")),
    ("signed-lineage-removed", lambda d: d.pop("lineage")),
    ("unsigned-lineage-added", lambda d: d.update(lineage={"parent": ANY_ID, "generation": 2})),
    ("consent-escalated", lambda d: d["consent"].update(derivatives=True)),
    ("anonymity-dropped", lambda d: d["consent"].update(anonymize=False)),
    ("entry-type-changed", lambda d: d["entries"][0].update(type="rule")),
    ("source-added", lambda d: d["entries"][0].update(source="https://example.org/")),
    ("tag-added", lambda d: d["tags"].append("trusted")),
    ("author-swapped", lambda d: d.update(author="bob")),
]


@pytest.mark.parametrize(
    "change", [c for _, c in SIGNED_FIELD_GAMES], ids=[i for i, _ in SIGNED_FIELD_GAMES]
)
def test_signed_fields_cannot_be_removed_added_or_changed(
    tp: PoolFixture, change: Callable[[dict[str, Any]], None]
) -> None:
    """T04, T07, T36: a field signed but missing, or present but unsigned (consent
    to derivatives granted after signing), or the dream replayed under another name."""
    obj = signed(
        lineage={"generation": 1},
        consent={"share": True, "derivatives": False, "anonymize": True},
    )
    change(obj)
    assert_refused(tp, dump(obj), "signature does not verify")


def _resign(obj: dict[str, Any], message: bytes, seed: bytes | None = None) -> bytes:
    obj = copy.deepcopy(obj)
    obj["sig"]["value"] = b64url_encode(ed25519.sign(seed or seed_of(obj["author"]), message))
    return dump(obj)


def test_signature_over_other_bytes_is_refused(tp: PoolFixture) -> None:
    """T04: signatures by the right key over the wrong bytes: non-canonical JSON,
    the whole object with its sig, a subset of the fields, another dream."""
    obj = signed(title="Pin the parser 版本")  # non-ASCII: \u escapes differ from JCS
    body = {k: obj[k] for k in dreamfmt.SIGNED_FIELDS if k in obj}
    other = signed(title="Another dream entirely")
    for message in (
        json.dumps(body).encode(),  # spaces: not RFC 8785
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii"),  # \\u escapes
        dreamfmt.signed_bytes({k: v for k, v in body.items() if k != "consent"}),
        dreamfmt.signed_bytes(other),
        strictjson.canonical({**body, "type": statement.ROTATE}),
    ):
        assert_refused(tp, _resign(obj, message), "signature does not verify")
    transplanted = copy.deepcopy(obj)
    transplanted["sig"] = other["sig"]
    assert_refused(tp, dump(transplanted), "signature does not verify")


def test_a_signed_statement_is_no_dream(tp: PoolFixture) -> None:
    """T04: a rotation or erasure statement signed by the author is never read as
    a dream (its ``type`` field is unknown to the dream schema)."""
    for obj in (
        statement.sign({"type": statement.ERASE, "id": ANY_ID, "reason": "legal"}, seed_of("ada")),
        statement.sign(
            {
                "type": statement.ROTATE,
                "author": "ada",
                "oldKeyId": "sha256:" + "0" * 16,
                "newKeyId": "sha256:" + "1" * 16,
                "newPublicKey": "A" * 43,
            },
            seed_of("ada"),
        ),
    ):
        data = dump(obj)
        target = tp.content / "dreams" / f"{ANY_ID}.json"
        target.write_bytes(data)
        problems, scanned = pool.check(tp.content)
        target.unlink()
        assert not scanned and any("/type" in str(p) for p in problems), problems


def _s_plus_l(obj: dict[str, Any]) -> None:
    sig = b64url_decode(obj["sig"]["value"])
    s = int.from_bytes(sig[32:], "little") + ed25519.L
    obj["sig"]["value"] = b64url_encode(sig[:32] + s.to_bytes(32, "little"))


def _unused_bits(field: str) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        text = obj["sig"][field]
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        obj["sig"][field] = text[:-1] + alphabet[alphabet.index(text[-1]) ^ 1]

    return change


MALLEABLE: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("s-plus-l", _s_plus_l, "S >= L"),
    ("value-unused-bits", _unused_bits("value"), "non-canonical"),
    ("key-unused-bits", _unused_bits("publicKey"), "non-canonical"),
    ("value-padded", lambda d: d["sig"].update(value=d["sig"]["value"] + "=="), "base64"),
    (
        "value-std-alphabet",
        lambda d: d["sig"].update(value=d["sig"]["value"].replace("-", "+").replace("_", "/")),
        "/sig/value",
    ),
    ("value-63-bytes", lambda d: d["sig"].update(value=d["sig"]["value"][:84]), "/sig/value"),
    (
        "key-uppercase-keyid",
        lambda d: d["sig"].update(keyId=d["sig"]["keyId"].upper()),
        "/sig/keyId",
    ),
]


@pytest.mark.parametrize(
    ("change", "words"), [(c, w) for _, c, w in MALLEABLE], ids=[i for i, _, _ in MALLEABLE]
)
def test_malleable_and_non_canonical_signatures_are_refused(
    tp: PoolFixture, change: Callable[[dict[str, Any]], None], words: str
) -> None:
    """T05: one signature, one spelling. S + L verifies in lax verifiers; base64
    with unused bits set or padding decodes to the same bytes; each would give the
    same dream a second id."""
    obj = signed()
    while "-" not in obj["sig"]["value"] and "_" not in obj["sig"]["value"]:
        obj = signed(title=obj["title"] + ".")  # a value the alphabet swap changes
    change(obj)
    assert_refused(tp, dump(obj), words)


def _small_order_encodings() -> list[bytes]:
    out = []
    for y in sorted(ed25519.SMALL_ORDER_Y):
        for sign in (0, 1):
            out.append((y | sign << 255).to_bytes(32, "little"))
    return out


@pytest.mark.parametrize(
    "public_key", _small_order_encodings(), ids=lambda k: k.hex()[:8] + k.hex()[-2:]
)
def test_small_order_public_keys_are_refused(tp: PoolFixture, public_key: bytes) -> None:
    """T05: with a key of small order, the signature (R = B, S = 1, so [S]B = R)
    verifies every message whose [k]A is the identity in a lax verifier; the
    pool refuses every such encoding, by the key rule (R = B is of prime order,
    so the rule on R does not: review r94)."""
    obj = signed()
    obj["sig"].update(
        publicKey=b64url_encode(public_key),
        keyId=dreamfmt.key_id(public_key),
        value=b64url_encode(bytes.fromhex("58" + "66" * 31) + (1).to_bytes(32, "little")),
    )
    assert_refused(tp, dump(obj), "public key is a point of small order")


def _off_curve_key() -> bytes:
    p = ed25519.P
    d = -121665 * pow(121666, p - 2, p) % p
    y = 2
    while True:
        x2 = (y * y - 1) * pow(d * y * y + 1, p - 2, p) % p
        if x2 != 0 and pow(x2, (p - 1) // 2, p) != 1:  # no square root: not on the curve
            return y.to_bytes(32, "little")
        y += 1


@pytest.mark.parametrize(
    "public_key",
    [ed25519.P.to_bytes(32, "little"), (ed25519.P + 5).to_bytes(32, "little"), _off_curve_key()],
    ids=["y-equals-p", "y-above-p", "off-curve"],
)
def test_invalid_public_keys_are_refused(tp: PoolFixture, public_key: bytes) -> None:
    """T05: a non-canonical encoding (y >= p) or a point that is not on the curve."""
    obj = signed()
    obj["sig"].update(publicKey=b64url_encode(public_key), keyId=dreamfmt.key_id(public_key))
    assert_refused(tp, dump(obj), "/sig")


def test_key_id_that_names_another_key_is_refused(tp: PoolFixture) -> None:
    """T06: keyId must be derived from the publicKey, or a dream could claim the
    fingerprint (and so the tier) of a maintainer's key."""
    maintainer = signed("root")
    obj = signed("ada")
    obj["sig"]["keyId"] = maintainer["sig"]["keyId"]
    assert_refused(tp, dump(obj), "does not match the public key")


def test_file_named_for_another_id_is_refused(tp: PoolFixture) -> None:
    """T06: in a pull request a valid dream filed under another dream's id (to
    shadow it) is refused, and the file it was meant to replace is untouched."""
    (kept,) = submit(tp, signed(title="The original"))
    original = (tp.content / "dreams" / f"{kept}.json").read_bytes()
    intruder = tp.content / "dreams" / f"{ANY_ID}.json"
    intruder.write_bytes(dump(signed(title="The intruder")))
    problems, scanned = pool.check(tp.content)
    assert [s.dream.id for s in scanned] == [kept]
    assert any("does not match the dream id" in str(p) for p in problems)
    assert (tp.content / "dreams" / f"{kept}.json").read_bytes() == original


def test_id_collision_never_replaces_the_first_dream(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T06: ids are 64 bits, so an attacker can make two of their own dreams collide
    (2^32 signatures). Simulated with a constant id: the second is "already in the
    pool", the first stays byte for byte, and the log holds one dream."""
    monkeypatch.setattr(dreamfmt, "dream_id", lambda signature: ANY_ID)
    first, second = signed(title="First of two"), signed(title="Second of two")
    paths = []
    for n, obj in enumerate((first, second)):
        paths.append(tmp_path / f"c{n}.json")
        paths[-1].write_bytes(dump(obj))
    assert pool.submit(tp.content, [paths[0]]).added == [ANY_ID]
    result = pool.submit(tp.content, [paths[1]])
    assert result.added == [] and result.already == [ANY_ID]
    assert (tp.content / "dreams" / f"{ANY_ID}.json").read_bytes() == dump(first)
    build(tp, tmp_path / "site")
    kinds = [json.loads(x)["kind"] for x in logstate.load(tp.content).leaves]
    assert kinds == ["key", "dream"]


def test_a_dream_replayed_under_another_key_is_refused(tp: PoolFixture) -> None:
    """T07: ada's dream with bob's key and keyId but ada's signature value."""
    obj = signed("ada")
    bob = signed("bob")
    obj["sig"].update(publicKey=bob["sig"]["publicKey"], keyId=bob["sig"]["keyId"])
    assert_refused(tp, dump(obj), "signature does not verify")


def test_replaying_a_dream_adds_nothing(tp: PoolFixture, tmp_path: Path) -> None:
    """T07: the same signed bytes submitted again, under another file name, are
    the same dream (same id): nothing new is written or logged."""
    (dream_id,) = submit(tp, signed(title="Once only"))
    build(tp, tmp_path / "site")
    before = tree(tp.content)
    replay = tmp_path / "replay-copy.json"
    replay.write_bytes((tp.content / "dreams" / f"{dream_id}.json").read_bytes())
    assert pool.submit(tp.content, [replay]).already == [dream_id]
    report = build(tp, tmp_path / "site", key=False)
    assert report.admitted == [] and tree(tp.content) == before


@pytest.mark.parametrize(
    "squatter",
    ["Ada", "ADA", "ａｄａ", "ada"],
    ids=["capital", "upper", "fullwidth", "same"],
)
def test_squatting_a_name_by_case_or_width_is_refused(tp: PoolFixture, squatter: str) -> None:
    """T08: "one author name, one key" would mean little if ``Ada`` or ``ａｄａ``
    could sit beside ``ada``: names are compared by their NFKC case-folded form."""
    submit(tp, signed("ada"))
    obj = signed(squatter, seed=seed_of("mallory"))
    with pytest.raises(InputError) as info:
        submit(tp, obj)
    assert "looks like 'ada'" in str(info.value.problems) or "is held by key" in str(
        info.value.problems
    )


def test_squatting_by_normalization_is_refused(tp: PoolFixture) -> None:
    """T08: the composed and decomposed spellings of one name look identical."""
    submit(tp, signed("Jos\u00e9"))
    with pytest.raises(InputError, match="looks like"):
        submit(tp, signed("Jose\u0301", seed=seed_of("mallory")))


def test_look_alike_key_files_in_a_pull_request_fail_check(tp: PoolFixture) -> None:
    """T08, T37: a pull request that writes the squatter's key file by hand (not via
    submit) still fails ``check``, and so the build."""
    submit(tp, signed("ada"))
    mallory = signed("ＡＤＡ", seed=seed_of("mallory"))
    d = dreamfmt.parse(dump(mallory), "x")
    entry = pool.KeyEntry(d.key_id, d.author, d.public_key, "guest", "2026-01-01")
    (tp.content / "keys" / f"{d.key_id[7:]}.yaml").write_bytes(pool.format_key_entry(entry))
    (tp.content / "dreams" / f"{d.id}.json").write_bytes(dump(mallory))
    problems, _ = pool.check(tp.content)
    assert any("looks like" in p.rule for p in problems), problems
    with pytest.raises(InputError):
        build(tp, tp.content.parent / "site")


def test_cross_script_look_alike_is_refused_and_gets_no_page(
    tp: PoolFixture, tmp_path: Path
) -> None:
    """T08, T60: a Cyrillic ``аda`` is ``ada`` to the pool (Unicode TR39
    skeleton): it is refused, and ada's diary stays ada's. (Until issue 19 it was
    another name, with its own page and fingerprint: an accepted risk.)"""
    submit(tp, signed("ada"))
    with pytest.raises(InputError, match="looks like"):
        submit(tp, signed("\u0430da", title="Not by ada"))
    build(tp, tmp_path / "site")
    diary = (tmp_path / "site" / "authors" / "ada" / "index.html").read_text()
    assert "Not by ada" not in diary
    assert not [p for p in (tmp_path / "site" / "authors").iterdir() if p.name.startswith("x-")]


def test_one_key_reassigned_to_another_name_stops_the_build(
    tp: PoolFixture, tmp_path: Path
) -> None:
    """T09, T43: a maintainer edits a logged key to another author name. Its dreams
    are signed as ada, so the build refuses them and stops, naming the logged dream
    it cannot publish: the key leaf in the log keeps ada's name for ever."""
    (dream_id,) = submit(tp, signed("ada"))
    build(tp, tmp_path / "site")
    set_tier(tp, "ada", "guest")
    key = next((tp.content / "keys").iterdir())
    key.write_text(key.read_text().replace('author: "ada"', 'author: "eve"'))
    with pytest.raises(LogError, match=dream_id):
        build(tp, tmp_path / "site")


INVISIBLE = [
    ("tag-characters", "Pin it\U000e0049\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065"),
    ("soft-hyphen", "138\u00ad1234\u00ad5678"),
    ("line-separator", "two\u2028lines"),
    ("paragraph-separator", "two\u2029lines"),
    ("hangul-filler", "\u3164\u3164"),
    ("mongolian-vowel-separator", "a\u180eb"),
    ("deprecated-format", "a\u206ab"),
    ("interlinear-annotation", "a\ufff9b\ufffbc"),
    ("selector-run", "a\ufe00\ufe01\ufe02\ufe03"),
    ("supplementary-selector-run", "a\U000e0100\U000e0101"),
    ("bidi-override", "a\u202eb"),
    ("zero-width-joiner", "a\u200db"),
]


@pytest.mark.parametrize("text", [t for _, t in INVISIBLE], ids=[i for i, _ in INVISIBLE])
def test_invisible_characters_are_refused_in_every_text_field(tp: PoolFixture, text: str) -> None:
    """T10, T39: characters that render as nothing can hide text a human reviewer
    never sees but a program or a language model reads (tag characters spell ASCII
    invisibly; a soft hyphen splits a phone number past redaction)."""
    for fields in (
        {"title": "t " + text},
        {"summary": text},
        {"author": "a" + text[:40]},
        {"tags": [text[:32]]},
        {"entries": [{"text": text, "type": "fact", "confidence": "theory", "source": "s"}]},
        {"entries": [{"text": "t", "type": "fact", "confidence": "theory", "source": text}]},
    ):
        obj = dreamfmt.sign(
            {**{k: v for k, v in signed().items() if k != "sig"}, **fields}, seed_of("ada")
        )
        problems = dreamfmt.validate(obj, "f")
        assert problems, fields
    assert_refused(tp, dump(signed(title="t " + text)), "/title")


def test_one_emoji_variation_selector_is_still_fine() -> None:
    """T10, T59: the policy allows the selector an emoji takes
    (emoji-variation-sequences.txt) and emoji ZWJ sequences; an ideographic
    variation selector after a letter is refused: one per ideograph would carry a
    hidden byte (docs/protocol.md §1.1)."""
    obj = signed(title="Works \u2764\ufe0f with \U0001f469\U0001f3fd\u200d\U0001f4bb too")
    assert dreamfmt.parse(dump(obj), "f").title.startswith("Works")
    assert dreamfmt.validate(signed(title="\u845b\U000e0100"), "f")


def test_a_batch_with_one_hostile_file_admits_only_the_good_ones(
    tp: PoolFixture, tmp_path: Path
) -> None:
    """T01–T06 at the build: hostile files dropped into content/dreams are refused
    one by one, the good dream is admitted, and the log holds nothing else."""
    (good,) = submit(tp, signed(title="A good dream"))
    for n, (_, make, _) in enumerate(PARSER_ATTACKS):
        (tp.content / "dreams" / f"{n:016x}.json").write_bytes(make())
    report = build(tp, tmp_path / "site")
    assert report.admitted == [good]
    assert len(report.refused) == len(PARSER_ATTACKS)
    assert len(logstate.load(tp.content).leaves) == 2  # ada's key, the good dream
