"""``dreampool import memos``: MemOS Dream diary entries as draft dreams (builder.agents.memos)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.agents import memos
from builder.errors import InputError
from builder.formats import dream as dreamfmt
from tests.conftest import CLIResult

ENTRY: dict[str, Any] = {
    "diary_id": "dream_diary_3f2a9c",
    "title": "Two memories disagree about the deploy window",
    "summary": "One memory says deploys happen on Tuesdays, another says any weekday.",
    "dream_entry": (
        "The Tuesday rule is older; the weekday memory came after the CI change. "
        "Probably the rule was relaxed when CI got faster.\n\n"
        "Lesson: when two memories conflict, prefer the one written after the change "
        "that explains the difference.\n\n"
        "部署窗口的规则可能已经改变。我们需要确认。"
    ),
    "motive": {
        "motive_id": "m-1",
        "motive_type": "conflict",
        "description": "two memories about deploy days contradict each other",
        "memory_ids": ["a", "b"],
    },
    "themes": ["deploy", "ci", "deploy", "  memory   conflicts "],
    "context_events": [{"memory": "private note about a colleague"}],
    "created_at": "2026-05-06T03:12:00",
    "status": "completed",
}


def convert(obj: Any, **kwargs: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return memos.import_memos_with_notes(data, "diary.json", **kwargs)


def entry(**changes: Any) -> dict[str, Any]:
    obj = {**ENTRY, **changes}
    return {k: v for k, v in obj.items() if v is not ...}


def test_a_diary_entry_becomes_a_draft() -> None:
    draft, notes = convert(ENTRY)
    source = "MemOS Dream diary, 2026-05-06"
    assert draft == {
        "title": ENTRY["title"],
        "summary": ENTRY["summary"]
        + "\n\nMotive (conflict): two memories about deploy days contradict each other",
        "entries": [
            {
                "text": "The Tuesday rule is older; the weekday memory came after the CI change. "
                "Probably the rule was relaxed when CI got faster.",
                "type": "theory",
                "confidence": "theory",
                "source": source,
            },
            {
                "text": "Lesson: when two memories conflict, prefer the one written after the "
                "change that explains the difference.",
                "type": "lesson",
                "confidence": "unconfirmed",
                "source": source,
            },
            {
                "text": "部署窗口的规则可能已经改变。我们需要确认。",
                "type": "theory",
                "confidence": "theory",
                "source": source,
            },
        ],
        "tags": ["deploy", "ci", "memory conflicts"],
        "consent": {"share": True, "derivatives": False, "anonymize": False},
    }
    assert any("context_events are not copied" in n for n in notes)
    assert "private note" not in json.dumps(draft, ensure_ascii=False)
    assert "memory_ids" not in json.dumps(draft) and "m-1" not in json.dumps(draft)
    assert dreamfmt.validate({"author": "x", **draft}, "d", require_sig=False) == []


def test_the_diary_api_answer_and_lists_are_read() -> None:
    api = {"code": 200, "message": "Dream diary retrieved successfully", "data": [ENTRY]}
    assert convert(api)[0] == convert(ENTRY)[0]
    assert convert([ENTRY])[0] == convert(ENTRY)[0]
    other = entry(diary_id="dream_diary_other", title="Another dream")
    with pytest.raises(InputError, match="holds 2 diary entries") as info:
        convert({"code": 200, "message": "ok", "data": [ENTRY, other]})
    assert info.value.hint is not None and "--entry" in info.value.hint
    picked, _ = convert([ENTRY, other], entry="dream_diary_other")
    assert picked["title"] == "Another dream"
    api_item = {k: v for k, v in other.items() if k != "diary_id"} | {"task_id": "t-9"}
    assert convert({"data": [ENTRY, api_item]}, entry="t-9")[0]["title"] == "Another dream"
    with pytest.raises(InputError, match="holds 0 entries with id nope"):
        convert([ENTRY, other], entry="nope")
    with pytest.raises(InputError, match="is an error"):
        convert({"code": 503, "message": "graph_db is unavailable.", "data": []})


def test_author_is_optional_and_checked() -> None:
    assert "author" not in convert(ENTRY)[0]
    assert convert(ENTRY, author="ada")[0]["author"] == "ada"
    with pytest.raises(InputError, match="--author"):
        convert(ENTRY, author="")


@pytest.mark.parametrize(
    ("changes", "pointer"),
    [
        ({"mood": "happy"}, "/mood"),
        ({"title": ...}, "/title"),
        ({"summary": 3}, "/summary"),
        ({"themes": "deploy"}, "/themes"),
        ({"status": "failed"}, "/status"),
        ({"motive": {"description": "x", "extra": 1}}, "/motive/extra"),
        ({"motive": 7}, "/motive"),
        ({"dream_entry": "a\u202eb"}, "/dream_entry"),
        ({"title": "zero\u200bwidth"}, "/title"),
    ],
)
def test_what_is_refused(changes: dict[str, Any], pointer: str) -> None:
    with pytest.raises(InputError) as info:
        convert(entry(**changes))
    assert [p.pointer for p in info.value.problems] == [pointer]


def test_strict_json() -> None:
    with pytest.raises(InputError, match=r"diary\.json"):
        memos.import_memos(b'{"title": "a", "title": "b"}', "diary.json")
    with pytest.raises(InputError):
        memos.import_memos(b"[1, 2]", "diary.json")
    with pytest.raises(InputError):
        memos.import_memos(b"x" * (memos.MAX_INPUT + 1), "diary.json")


def test_a_long_title_is_cut_with_an_ellipsis_and_a_note() -> None:
    draft, notes = convert(entry(title="word " * 30))
    assert draft["title"] == ("word " * 24).rstrip() + "…" and len(draft["title"]) == 120
    assert any("title cut" in n for n in notes)
    assert convert(entry(title="line\nbreak"))[0]["title"] == "line break"
    cjk = convert(entry(title="很长的标题" * 30))[0]["title"]
    assert cjk == ("很长的标题" * 30)[:119] + "…"


def test_a_title_is_never_cut_inside_a_word() -> None:
    """Issue 19: a cut inside a word can split personal data past redaction, so
    a title of one word over 120 characters is refused, not cut."""
    with pytest.raises(InputError, match="/title: has no space in its first 120"):
        convert(entry(title="t" * 130))


def test_a_long_summary_is_refused_and_a_motive_that_does_not_fit_is_left_out() -> None:
    with pytest.raises(InputError, match="want at most 800"):
        convert(entry(summary="s" * 801))
    draft, notes = convert(entry(summary="s" * 790))
    assert draft["summary"] == "s" * 790
    assert any("motive does not fit" in n for n in notes)
    assert convert(entry(motive="just a string"))[0]["summary"].endswith(
        "\n\nMotive: just a string"
    )
    assert convert(entry(motive=None))[0]["summary"] == ENTRY["summary"]


def test_long_paragraphs_are_split_never_shortened() -> None:
    sentence = "This sentence has exactly some words in it to fill space. "
    paragraph = (sentence * 12).strip()
    cjk = "这是一个很长的句子。" * 40
    words = " ".join(["word"] * 100)
    draft, notes = convert(entry(dream_entry="\n\n".join([paragraph, cjk, words])))
    texts = [e["text"] for e in draft["entries"]]
    assert all(1 <= len(t) <= 300 for t in texts)
    assert " ".join(t for t in texts if t.startswith("This")) == paragraph
    assert "".join(t for t in texts if t.startswith("这")) == cjk
    assert " ".join(t for t in texts if t.startswith("word")) == words
    assert any("split into" in n for n in notes)
    # Issue 19: a word is never cut (it could split personal data past redaction).
    with pytest.raises(InputError, match="paragraph 1 holds over 300 characters with no space"):
        convert(entry(dream_entry="x" * 650))


def test_too_many_entries_are_refused() -> None:
    body = "\n\n".join(f"paragraph {i}" for i in range(51))
    with pytest.raises(InputError, match="a dream holds at most 50"):
        convert(entry(dream_entry=body))


def test_an_empty_dream_entry_uses_the_summary() -> None:
    draft, notes = convert(entry(dream_entry="", motive=None))
    assert [e["text"] for e in draft["entries"]] == [ENTRY["summary"]]
    assert any("entries are made from the summary" in n for n in notes)
    with pytest.raises(InputError, match="needs an entry"):
        convert(entry(dream_entry=" ", summary="", motive=None))


def test_themes_become_at_most_eight_short_unique_tags() -> None:
    themes = [f"t{i}" for i in range(10)] + ["x" * 33, "t1"]
    draft, notes = convert(entry(themes=themes))
    assert draft["tags"] == [f"t{i}" for i in range(8)]
    assert any("left out (tags hold 32)" in n for n in notes)
    assert any("after the eighth" in n for n in notes)
    assert "tags" in convert(entry(themes=...))[0] and convert(entry(themes=...))[0]["tags"] == []


def test_tabs_and_cr_are_normalized_with_a_note() -> None:
    draft, notes = convert(entry(dream_entry="a\tb\r\nc", created_at="yesterday"))
    assert draft["entries"][0]["text"] == "a b\nc"
    assert draft["entries"][0]["source"] == "MemOS Dream diary"
    assert any("tabs and CR" in n for n in notes)


def test_notes_name_what_sign_will_redact() -> None:
    _, notes = convert(entry(dream_entry="Mail ada@example.org about it."))
    assert "`dreampool sign` will redact /entries/0/text: email" in notes
    assert not any("ada@example.org" in n for n in notes)


def test_the_command_writes_a_draft_that_signs(
    tmp_path: Path,
    home: Path,
    run: Callable[..., CLIResult],
) -> None:
    diary = tmp_path / "diary.json"
    diary.write_text(json.dumps({"data": [ENTRY]}), encoding="utf-8")
    printed = run("import", "memos", diary)
    assert printed.code == 0, printed.err
    assert json.loads(printed.out) == convert(ENTRY)[0]
    assert "dreampool: note: context_events are not copied" in printed.err
    out = tmp_path / "draft.json"
    assert run("import", "memos", diary, "-o", out, "--author", "ada").code == 0
    assert json.loads(out.read_text(encoding="utf-8"))["author"] == "ada"
    key = run("keygen", "--author", "ada")
    assert key.code == 0
    key_id = key.out.split("keyId")[1].split()[0]
    signed = tmp_path / "signed.json"
    result = run("sign", out, "--key", key_id, "-o", signed)
    assert result.code == 0, result.err
    assert run("verify", signed).code == 0
    missing = run("import", "memos", tmp_path / "missing.json")
    assert missing.code == 1 and "cannot read" in missing.err and "Traceback" not in missing.err
    with pytest.raises(InputError, match="cannot read"):
        memos.read_diary(tmp_path / "missing.json", author=None, entry=None)
