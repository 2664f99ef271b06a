"""Privacy attacks (THREATS.md T15–T17): personal data that slips past redaction,
and erased text that comes back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builder.content import pool
from builder.errors import InputError
from builder.formats import dream as dreamfmt
from builder.log import erase
from builder.text import redact
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, dump, seed_of, set_tier, signed, submit, tree


@pytest.fixture
def tp(tmp_path: Path) -> PoolFixture:
    return make_pool(tmp_path)


# (id, text holding personal data, the kind it must be redacted as). The ones
# marked "regression" passed as clean text before redact.py folded them.
EVASIONS = [
    ("fullwidth-digits", "call １３８１２３４５６７８ now", "phone"),
    ("fullwidth-in-cjk", "联系我１３８１２３４５６７８谢谢", "phone"),
    ("cjk-adjacent", "联系我13812345678谢谢", "phone"),
    ("spaced", "call 138 1234 5678", "phone"),
    ("dotted", "call 138.1234.5678", "phone"),
    ("dashed", "call 138-1234-5678", "phone"),
    ("ideographic-space", "call 138\u30001234\u30005678", "phone"),
    ("no-break-space", "call 138\u00a01234\u00a05678", "phone"),
    ("en-dash", "call 138\u20131234\u20135678", "phone"),  # regression
    ("figure-dash", "call 138\u20121234\u20125678", "phone"),  # regression
    ("minus-sign", "call +44\u221220\u22127946\u22120958", "phone"),  # regression
    ("thin-space", "call 138\u20091234\u20095678", "phone"),  # regression
    ("arabic-indic-digits", "call ١٣٨١٢٣٤٥٦٧٨", "phone"),  # regression
    ("persian-digits", "call ۱۳۸۱۲۳۴۵۶۷۸", "phone"),  # regression
    ("devanagari-digits", "call १३८१२३४५६७८", "phone"),  # regression
    ("math-bold-digits", "call 𝟏𝟑𝟖𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖", "phone"),  # regression
    ("mixed-digit-scripts", "call 1٣8१2３4५6७8", "phone"),  # regression
    ("plus86-fullwidth", "call ＋８６ １３８ １２３４ ５６７８", "phone"),
    ("e164-fullwidth", "call ＋４４ ２０ ７９４６ ０９５８", "phone"),
    ("fullwidth-at", "mail ada＠example.com", "email"),
    ("small-at", "mail ada﹫example.com", "email"),
    ("fullwidth-everything", "mail ａｄａ＠ｅｘａｍｐｌｅ．ｃｏｍ", "email"),
    ("uppercase", "mail ADA@EXAMPLE.COM", "email"),
    ("cyrillic-in-domain", "mail ada@ex\u0430mple.com", "email"),  # regression
    ("idn-domain", "mail ada@bücher.de", "email"),  # regression
    ("cjk-domain", "mail ada@例子.广告", "email"),  # regression
    ("fullwidth-ip", "host １９２．１６８．１．１０", "ip"),
    ("arabic-indic-ip", "host ١٩٢.١٦٨.١.١٠", "ip"),  # regression
    ("grouped-id", "id 110105 19491231 002X", "id"),
    ("fullwidth-id", "id １１０１０５１９４９１２３１００２Ｘ", "id"),
    ("url-token", "see https://x.org/a?access_token=abcdef123456&page=2", "secret"),
    # Issue 18: national formats, one of which was published.
    ("nanp-dashed", "call 415-555-0199", "phone"),  # regression
    ("nanp-paren", "call (415) 555-0199", "phone"),  # regression
    ("nanp-dotted", "call 415.555.0199", "phone"),  # regression
    ("trunk-cn", "call 020-12345678", "phone"),  # regression
    ("labelled", "tel: 4155550199", "phone"),  # regression
    ("nanp-en-dash", "call 415\u2013555\u20130199", "phone"),  # regression
    ("trunk-fullwidth", "call ０２０－１２３４５６７８", "phone"),  # regression
]


@pytest.mark.parametrize(
    ("text", "kind"), [(t, k) for _, t, k in EVASIONS], ids=[i for i, _, _ in EVASIONS]
)
def test_redaction_evasion_is_refused_by_the_pool_and_redacted_by_the_signer(
    tp: PoolFixture, text: str, kind: str
) -> None:
    """T15: personal data written to slip past a pattern (other widths, other
    scripts' digits, other separators, look-alike or internationalized domains).
    A dream signed with it unredacted is refused; ``dreampool sign`` replaces it."""
    obj = signed(summary=text)
    with pytest.raises(InputError) as info:
        pool.check_dream(dump(obj), "f")
    assert f"personal data ({kind})" in str(info.value.problems)
    redacted, kinds = redact.redact_text(text)
    assert kind in kinds and f"[{kind}]" in redacted
    clean = dreamfmt.sign(redact.redact_dream(signed(summary=text))[0], seed_of("ada"))
    pool.check_dream(dump(clean), "f")  # the signer's output is admitted


def test_redaction_keeps_the_text_around_a_match() -> None:
    """T15: folding is one code point to one, so the replacement lands on the
    original text and nothing beside a match changes, whatever its script."""
    text = "见 १३८१२३४५६७८ 或 ada@bücher.de，谢谢"
    assert redact.redact_text(text)[0] == "见 [phone] 或 [email]，谢谢"


@pytest.mark.parametrize(
    ("fields", "pointer"),
    [
        ({"tags": ["ok", "ada@example.com"]}, "/tags/1"),
        ({"tags": ["１３８１２３４５６７８"]}, "/tags/0"),
        ({"lineage": {"parent": "13812345678", "generation": 1}}, "/lineage/parent"),
        ({"lineage": {"parent": "bob@example.org", "generation": 1}}, "/lineage/parent"),
        (
            {
                "entries": [
                    {
                        "text": "t",
                        "type": "fact",
                        "confidence": "theory",
                        "source": "https://x.org/?token=s3cr3tvalue",
                    }
                ]
            },
            "/entries/0/source",
        ),
        ({"title": "ask 192.168.10.12"}, "/title"),
    ],
)
def test_personal_data_in_tags_lineage_and_sources_is_refused(
    tp: PoolFixture, fields: dict[str, object], pointer: str
) -> None:
    """T16: the policy covers every text field, not just the prose: a tag, a
    lineage parent and an entry's source are public too (tags become page names)."""
    obj = signed(**fields)
    src = tp.content.parent / "pii.json"
    src.write_bytes(dump(obj))
    before = tree(tp.content)
    with pytest.raises(InputError) as info:
        pool.submit(tp.content, [src])
    assert any(p.pointer == pointer for p in info.value.problems), info.value.problems
    assert tree(tp.content) == before
    assert "13812345678" not in str(info.value.problems)  # never echoes the value


def test_personal_data_in_an_author_name_is_refused(tp: PoolFixture) -> None:
    """T16: the author name becomes a key leaf, logged for ever: it must be clean
    before it is ever logged."""
    obj = signed("ada.lovelace@example.com")
    with pytest.raises(InputError) as info:
        pool.check_dream(dump(obj), "f")
    assert any(p.pointer == "/author" for p in info.value.problems)


CANARIES = (
    "quillfeathercanary",  # title
    "saltmarshcanary",  # summary
    "driftwoodcanary",  # entry text
    "lanternsourcecanary",  # entry source
    "harbourtagcanary",  # a tag only this dream has
    "tidepoolparentcanary",  # lineage parent (free text, not a dream id)
    "灯塔看守人的账本",  # CJK title words
)


def _forms(text: str) -> list[bytes]:
    """The ways a text can appear in a file: UTF-8, JSON \\u escapes, lowercased."""
    forms = {text, text.lower()}
    out = [f.encode("utf-8") for f in forms]
    out += [json.dumps(f)[1:-1].encode("ascii") for f in forms]
    out += [json.dumps(f).encode("ascii")[1:-1].upper() for f in forms if not f.isascii()]
    return out


def _holders(root: Path, needles: list[bytes]) -> list[str]:
    return sorted(path for path, data in tree(root).items() if any(n in data for n in needles))


def test_erased_text_never_reappears_anywhere_in_the_site(tp: PoolFixture, tmp_path: Path) -> None:
    """T17: after erasure no file of the built site holds any of the dream's text,
    its signature or its salt: pages, feeds, search index, patterns, the JSON API,
    the sitemap, the log's files and whatever else a build writes (agents/ and
    llms.txt included); nor does content/ (the git history is the operator's
    step). A keyword the dream shared with one other author drops out of the
    patterns, and the log keeps only the commitment, now unlinkable."""
    title = f"The {CANARIES[0]} and {CANARIES[6]}"
    (gone,) = submit(
        tp,
        signed(
            "ada",
            title=title,
            summary=f"Notes on the {CANARIES[1]} and quixoticshared work.",
            entries=[
                {
                    "text": f"Found {CANARIES[2]} at dawn.",
                    "type": "fact",
                    "confidence": "confirmed",
                    "source": f"{CANARIES[3]} logbook",
                }
            ],
            tags=[CANARIES[4], "shared"],
            lineage={"parent": CANARIES[5], "generation": 3},
        ),
    )
    submit(tp, signed("bob", title="Bob on quixoticshared things", tags=["shared"]))
    set_tier(tp, "ada", "member")
    set_tier(tp, "bob", "member")
    site = tmp_path / "site"
    build(tp, site)
    record = json.loads((site / "dreams" / gone / "record.json").read_text())
    secrets = [record["dream"]["sig"]["value"], record["salt"]]
    needles = [n for c in CANARIES for n in _forms(c)] + [s.encode() for s in secrets]
    before = _holders(site, needles)
    # The check can see them: the text was in pages, feeds, search, API and patterns.
    for expected in (
        "search/shard-0.json",
        "feed.xml",
        "api/dreams/0.json",
        f"dreams/{gone}/index.html",
    ):
        assert expected in before, (expected, before)
    assert "quixoticshared" in (site / "patterns" / "index.html").read_text()
    for path in tp.content.parent.glob("in-*.json"):
        path.unlink()  # submitted copies outside the pool
    erase.erase(tp.content, gone, "author-request")
    report = build(tp, site)
    assert report.erased == [gone]
    assert _holders(site, needles) == []
    assert _holders(tp.content, needles) == []
    assert "quixoticshared" not in (site / "patterns" / "index.html").read_text()
    assert not (site / "dreams" / gone / "record.json").exists()
    assert (site / "dreams" / gone / "proof.tlog-proof").exists()  # the commitment stays
    assert not (site / "tags" / CANARIES[4]).exists()


def test_a_dream_logged_before_the_policy_caught_its_number_can_be_erased(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T15, issue 18 (regression): a national-format number passed `sign` and
    was published. With the stronger policy the pool refuses that logged dream,
    and `dreampool erase`, the remedy, refused it too: it read the dream with
    the redaction rule. Erasure checks format and signature only."""
    older = tuple(r for r in redact._RULES if r[1] not in (redact._national, redact._labelled))
    with monkeypatch.context() as old_policy:
        old_policy.setattr(redact, "_RULES", older)
        (leaked,) = submit(tp, signed(summary="call me on 415-555-0199"))
        submit(tp, signed(title="Stays"))
        build(tp, tmp_path / "site")
    with pytest.raises(InputError, match=r"personal data \(phone\)"):
        pool.check_dream((tp.content / "dreams" / f"{leaked}.json").read_bytes(), "f")
    for path in tp.content.parent.glob("in-*.json"):
        path.unlink()  # submitted copies outside the pool
    erase.erase(tp.content, leaked, "legal")
    report = build(tp, tmp_path / "site")
    assert report.erased == [leaked]
    assert _holders(tmp_path / "site", [b"415-555-0199"]) == []


def test_erase_with_an_unreadable_request_is_an_error_not_a_traceback(
    tp: PoolFixture, tmp_path: Path, run: Any
) -> None:
    """T17, T41 (regression): a missing or symlinked request file ended ``dreampool
    erase`` in a bare OSError; now it is reported, and nothing is erased."""
    (dream_id,) = submit(tp, signed(title="Stays until asked properly"))
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "nowhere.json")
    for request in (tmp_path / "missing.json", link):
        result = run(
            "erase",
            dream_id,
            "--reason",
            "author-request",
            "--request",
            request,
            "--content",
            tp.content,
        )
        assert result.code == 1 and "dreampool: error:" in result.err, result
        assert "Traceback" not in result.err
        assert (tp.content / "dreams" / f"{dream_id}.json").exists()
