"""``dreampool import memos``: a MemOS Dream diary entry as a draft dream.

MemOS Dream (MemTensor/MemOS, ``memos.dream``) consolidates memories offline and, for
each run, writes a diary entry (its ``DreamDiaryEntry``)::

    {"diary_id": "dream_diary_…", "title": "…", "summary": "…", "dream_entry": "…",
     "motive": {"motive_id": "…", "motive_type": "conflict", "description": "…",
                "memory_ids": ["…"]},
     "themes": ["…"], "context_events": […], "created_at": "2026-05-06T…",
     "status": "completed"}

Its diary API (``POST /dream/diary``) answers ``{"code": 200, "message": "…",
"data": [entries]}``, naming the id ``task_id``. This module reads any of: one entry,
a JSON array of entries, or that API answer. With more than one entry, ``--entry ID``
(a ``diary_id`` or ``task_id``) picks one; a draft is one dream.

Parsing is strict (:mod:`builder.formats.strictjson`, at most 1 MiB): a field not listed above
(or ``task_id``) is refused, and so is a field of the wrong type. ``title`` and
``summary`` are required; the others may be absent or null.

The mapping, and what is not copied:

* ``title`` → ``title``, line breaks as spaces. Over 120 characters (the dream limit)
  it is cut to at most 119 and an ellipsis, and a note says so.
* ``summary`` → ``summary``; over 800 characters is refused (shorten it: a cut
  summary would misquote the dream).
* ``motive`` → the summary's last paragraph, ``Motive (conflict): <description>``: it
  says why the dream happened, which is neither a finding nor a plan, so it is not
  an entry. If it does not fit in the 800 characters it is left out, with a note.
  ``motive_id`` and ``memory_ids`` are MemOS-internal and not copied.
* ``dream_entry`` → ``entries``, one per paragraph (blank-line separated); a paragraph
  over 300 characters is split between sentences (and, for a sentence over 300,
  between words, or between characters of a script written without spaces), never
  shortened. A run of over 300 characters with no such place is refused. A
  paragraph that opens like a lesson ("Lesson", "Learned", "Takeaway", "Insight",
  "教训", "经验", "启示", …) becomes ``lesson`` entries with confidence
  ``unconfirmed`` (the dream reasoned it, nobody has checked it); every other one
  ``theory`` with confidence ``theory``. Each entry's ``source`` is
  ``MemOS Dream diary`` and the entry's date. An empty ``dream_entry`` makes the
  entries from the summary instead. More than 50 entries are refused.
* ``themes`` → ``tags``: trimmed, spaces collapsed, repeats dropped; a theme over 32
  characters and any after the eighth are left out, with a note.
* ``context_events`` are the memories the dream recalled, which may be private: read,
  never copied. ``status`` other than ``completed`` is refused: an unfinished dream is
  not published. ``created_at`` only dates the sources.
* ``consent`` is ``{"share": true, "derivatives": false, "anonymize": false}``: derived
  patterns and anonymity are the author's choices to make in the draft, not defaults.
* ``author`` is ``--author``, or absent for ``dreampool sign`` to fill in from the key.

Tabs become spaces and CRLF/CR line ends become LF (the dream format refuses both);
any other control, bidi or invisible character is refused, never stripped silently.
The draft is not redacted here (``sign`` does that); the notes say which fields
``sign`` will redact, by field and kind only, and which it will refuse to sign
(personal data that shows only once rendered: :mod:`builder.text.readerview`).

**Cuts never split what redaction must see whole** (issue 19): a number or a key
cut in two passes redaction as two harmless halves. So a title or a paragraph is
cut only between tokens (at white space, or beside a character of a script
written without spaces: :func:`builder.text.mdrender.cuttable`), never inside a
match of the redaction rules run on the whole field (``138 1234 5678`` holds
spaces, and stays whole), and the cut part of a title is dropped whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from builder import files
from builder.errors import InputError, Problem
from builder.formats import dream as dreamfmt
from builder.formats import strictjson
from builder.text import readerview, redact
from builder.text.mdrender import cuttable

__all__ = ["MAX_INPUT", "import_memos", "import_memos_with_notes", "read_diary"]

MAX_INPUT = 1024 * 1024
ENTRY_FIELDS = (
    "diary_id",
    "task_id",
    "title",
    "summary",
    "dream_entry",
    "motive",
    "themes",
    "context_events",
    "created_at",
    "status",
)
MOTIVE_FIELDS = ("motive_id", "motive_type", "description", "memory_ids")
CONSENT = {"share": True, "derivatives": False, "anonymize": False}
SOURCE = "MemOS Dream diary"

TITLE_MAX = 120
SUMMARY_MAX = 800
ENTRY_MAX = 300
ENTRIES_MAX = 50
TAG_MAX = 32
TAGS_MAX = 8

_LESSON = re.compile(
    r"(?i)(?:lessons?\b|learned\b|learnt\b|i learned\b|we learned\b|takeaways?\b|insights?\b"
    r"|key insight\b|教训|经验|启示|收获|心得)"
)
# A sentence ends at . ! ? … and their full-width forms, before a space or after a
# CJK full stop (which needs no space).
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？])")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# What the dream format refuses (docs/protocol.md §1, builder.formats.dream): C0 and C1 controls
# but newline (tab and CR are replaced before this check), bidi controls, zero-width
# and invisible characters.
_HIDDEN = re.compile(
    "[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u2069\ufeff]"
)


def import_memos(
    data: bytes, file: str, *, author: str | None = None, entry: str | None = None
) -> dict[str, Any]:
    """The draft dream of the diary entry in ``data`` (see the module doc)."""
    return import_memos_with_notes(data, file, author=author, entry=entry)[0]


def import_memos_with_notes(
    data: bytes, file: str, *, author: str | None = None, entry: str | None = None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The draft, and notes on what was cut, left out or will be redacted by ``sign``.

    Raises :class:`InputError` naming ``file`` and the field for anything refused.
    """
    try:
        doc = strictjson.loads(data, max_bytes=MAX_INPUT)
    except strictjson.JSONError as exc:
        raise InputError(
            [Problem(file, "", exc.message, exc.line)],
            hint="give the JSON of a MemOS Dream diary entry (or the diary API's answer)",
        ) from None
    pointer, obj = _pick(doc, file, entry)
    notes: list[str] = []
    draft = _convert(obj, file, pointer, notes)
    if author is not None:
        problems = dreamfmt.validate_author(author, "--author")
        if problems:
            raise InputError(
                problems, hint="an author name is a public pseudonym of 1–64 characters"
            )
        draft = {"author": author, **draft}
    # Validate as a draft; without an author yet, as `sign` will fill it in.
    check = draft if "author" in draft else {"author": "-", **draft}
    problems = dreamfmt.validate(check, file, require_sig=False)
    if problems:
        raise InputError(problems, hint="fix the diary entry's fields listed, then import again")
    redacted, changes = redact.redact_dream(draft)
    for change in changes:
        notes.append(f"`dreampool sign` will redact {change.pointer}: {change.kind}")
    for finding in readerview.findings(redacted):
        notes.append(
            f"`dreampool sign` will refuse {finding.pointer}: it shows {finding.kind} "
            "once rendered; write it plainly or remove it"
        )
    return draft, tuple(notes)


def _pick(doc: Any, file: str, wanted: str | None) -> tuple[str, dict[str, Any]]:
    """The one diary entry of ``doc``: itself, or one of an array or ``data`` array."""
    if isinstance(doc, dict) and "data" in doc and "title" not in doc:
        unknown = sorted(set(doc) - {"code", "message", "data"})
        if unknown:
            raise InputError([Problem(file, f"/{unknown[0]}", "unknown field of a diary answer")])
        if doc.get("code", 200) != 200:
            raise InputError(
                [Problem(file, "/code", "the diary answer is an error, not entries")],
                hint="query the diary again and import a successful answer",
            )
        items, base = doc["data"], "/data"
    elif isinstance(doc, list):
        items, base = doc, ""
    elif isinstance(doc, dict):
        if wanted is not None and wanted not in (doc.get("diary_id"), doc.get("task_id")):
            raise InputError([Problem(file, "", f"the entry is not {wanted}")])
        return "", doc
    else:
        raise InputError([Problem(file, "", "must be a diary entry object, or a list of them")])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InputError([Problem(file, base, "must be an array of diary entry objects")])
    if wanted is not None:
        found = [
            (n, i) for n, i in enumerate(items) if wanted in (i.get("diary_id"), i.get("task_id"))
        ]
        if len(found) != 1:
            raise InputError(
                [Problem(file, base, f"holds {len(found)} entries with id {wanted}, want 1")]
            )
        n, item = found[0]
        return f"{base}/{n}", item
    if len(items) != 1:
        raise InputError(
            [Problem(file, base, f"holds {len(items)} diary entries; a draft is one dream")],
            hint="pick one with --entry ID (its diary_id or task_id)",
        )
    return f"{base}/0", items[0]


def _convert(obj: dict[str, Any], file: str, at: str, notes: list[str]) -> dict[str, Any]:
    problems = [
        Problem(file, f"{at}/{_escape(k)}", f"unknown field (allowed: {', '.join(ENTRY_FIELDS)})")
        for k in obj
        if k not in ENTRY_FIELDS
    ]
    for name in ("title", "summary"):
        if not isinstance(obj.get(name), str):
            problems.append(Problem(file, f"{at}/{name}", "is required and must be a string"))
    for name in ("dream_entry", "created_at", "status", "diary_id", "task_id"):
        if obj.get(name) is not None and not isinstance(obj[name], str):
            problems.append(Problem(file, f"{at}/{name}", "must be a string"))
    themes = obj.get("themes")
    if themes is not None and not (
        isinstance(themes, list) and all(isinstance(t, str) for t in themes)
    ):
        problems.append(Problem(file, f"{at}/themes", "must be an array of strings"))
    motive = obj.get("motive")
    if isinstance(motive, dict):
        problems += [
            Problem(file, f"{at}/motive/{_escape(k)}", "unknown field of a motive")
            for k in motive
            if k not in MOTIVE_FIELDS
        ]
        for name in ("motive_type", "description", "motive_id"):
            if motive.get(name) is not None and not isinstance(motive[name], str):
                problems.append(Problem(file, f"{at}/motive/{name}", "must be a string"))
    elif motive is not None and not isinstance(motive, str):
        problems.append(Problem(file, f"{at}/motive", "must be an object, a string or null"))
    status = obj.get("status")
    if isinstance(status, str) and status != "completed":
        problems.append(
            Problem(file, f"{at}/status", "is not completed: only finished dreams are imported")
        )
    if problems:
        raise InputError(
            problems, hint="this is not a MemOS Dream diary entry as dreampool reads it"
        )

    created = obj.get("created_at") or ""
    source = f"{SOURCE}, {created[:10]}" if _DATE.match(created) else SOURCE

    title = " ".join(_clean(obj["title"], file, f"{at}/title", notes).split())
    if len(title) > TITLE_MAX:
        cut = _last_cut(title, TITLE_MAX - 1, _protected(title))
        if cut is None:
            raise InputError(
                [Problem(file, f"{at}/title", f"has no space in its first {TITLE_MAX} characters")],
                hint="a title is cut only between words, never inside one: shorten it",
            )
        title = title[:cut].rstrip() + "…"
        notes.append(f"title cut to {len(title)} characters (with an ellipsis)")
    summary = _clean(obj["summary"], file, f"{at}/summary", notes).strip()
    if len(summary) > SUMMARY_MAX:
        raise InputError(
            [Problem(file, f"{at}/summary", f"is {len(summary)} characters, want at most 800")],
            hint="shorten the summary in the diary entry; it is not cut, to avoid misquoting",
        )
    line = _motive_line(motive, file, f"{at}/motive", notes)
    if line:
        joined = f"{summary}\n\n{line}" if summary else line
        if len(joined) <= SUMMARY_MAX:
            summary = joined
        else:
            notes.append("the motive does not fit in the 800-character summary: left out")

    body = _clean(obj.get("dream_entry") or "", file, f"{at}/dream_entry", notes)
    if not body.strip():
        notes.append("dream_entry is empty: entries are made from the summary")
        body = summary
    entries = _entries(body, source, notes, file, f"{at}/dream_entry")
    if not entries:
        raise InputError(
            [Problem(file, f"{at}/dream_entry", "holds no text: a dream needs an entry")]
        )
    if len(entries) > ENTRIES_MAX:
        raise InputError(
            [
                Problem(
                    file,
                    f"{at}/dream_entry",
                    f"makes {len(entries)} entries of at most {ENTRY_MAX} characters, "
                    f"a dream holds at most {ENTRIES_MAX}",
                )
            ],
            hint="shorten dream_entry, or split the diary entry into several dreams",
        )

    tags = _tags(
        [_clean(t, file, f"{at}/themes/{i}", notes) for i, t in enumerate(themes or [])], notes
    )
    if obj.get("context_events"):
        notes.append("context_events are not copied: they are the memories recalled, maybe private")
    return {
        "title": title,
        "summary": summary,
        "entries": entries,
        "tags": tags,
        "consent": dict(CONSENT),
    }


def _clean(text: str, file: str, pointer: str, notes: list[str]) -> str:
    """CRLF/CR → LF and tab → space (noted); other hidden characters are refused."""
    fixed = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    if fixed != text:
        notes.append(f"{pointer}: tabs and CR line ends replaced by spaces and LF")
    bad = _HIDDEN.search(fixed)
    if bad:
        raise InputError(
            [Problem(file, pointer, f"holds U+{ord(bad.group()):04X} at character {bad.start()}")],
            hint="remove control, bidi and invisible characters from the diary entry",
        )
    return fixed


def _motive_line(motive: Any, file: str, pointer: str, notes: list[str]) -> str:
    if isinstance(motive, str):
        description, kind = motive, None
    elif isinstance(motive, dict):
        description, kind = motive.get("description") or "", motive.get("motive_type")
    else:
        return ""
    description = " ".join(_clean(description, file, pointer, notes).split())
    if not description:
        return ""
    return f"Motive ({kind}): {description}" if kind else f"Motive: {description}"


def _entries(
    body: str, source: str, notes: list[str], file: str, pointer: str
) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = []
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
    for number, paragraph in enumerate(paragraphs, 1):
        lesson = bool(_LESSON.match(paragraph))
        chunks = _chunks(paragraph)
        if chunks is None:
            raise InputError(
                [
                    Problem(
                        file,
                        pointer,
                        f"paragraph {number} holds over {ENTRY_MAX} characters with no "
                        "space or sentence end to split it at",
                    )
                ],
                hint="break the long word up (an entry holds 300 characters, and a word is "
                "never cut: a cut could split personal data past redaction)",
            )
        if len(chunks) > 1:
            notes.append(f"dream_entry paragraph {number} split into {len(chunks)} entries")
        for chunk in chunks:
            entries.append(
                {
                    "text": chunk,
                    "type": "lesson" if lesson else "theory",
                    "confidence": "unconfirmed" if lesson else "theory",
                    "source": source,
                }
            )
    return entries


def _protected(text: str) -> list[tuple[int, int]]:
    """The spans redaction replaces in the whole ``text``, which no cut may enter."""
    return [(start, end) for start, end, _ in redact.spans(text)]


def _last_cut(
    text: str, limit: int, protected: list[tuple[int, int]], *, sentences: bool = False
) -> int | None:
    """The last place at or before ``limit`` (> 0) where ``text`` may be cut:
    after a sentence if ``sentences`` and one ends there, else between words,
    else beside an unspaced character; never inside a protected span."""

    def free(at: int) -> bool:
        return not any(start < at < end for start, end in protected)

    if sentences:
        ends = [m.start() for m in _SENTENCE_END.finditer(text, 0, limit + 1)]
        ends = [e for e in ends if 0 < e <= limit and free(e)]
        if ends:
            return ends[-1]
    for at in range(limit, 0, -1):
        if text[at].isspace() and free(at):
            return at
    for at in range(limit, 0, -1):
        if cuttable(text, at) and free(at):
            return at
    return None


def _chunks(paragraph: str) -> list[str] | None:
    """``paragraph`` in pieces of at most 300 characters, split after sentences,
    then between words (or beside unspaced characters), never inside a token
    or a redaction match of the whole paragraph; only the white space at a
    split is lost. None if a run of over 300 characters has no place to split."""
    protected = _protected(paragraph)
    chunks: list[str] = []
    at = 0
    while len(paragraph) - at > ENTRY_MAX:
        cut = _last_cut(
            paragraph[at:], ENTRY_MAX, [(s - at, e - at) for s, e in protected], sentences=True
        )
        if cut is None:
            return None
        chunks.append(paragraph[at : at + cut].rstrip())
        at += cut
        while at < len(paragraph) and paragraph[at].isspace():
            at += 1
    if at < len(paragraph):
        chunks.append(paragraph[at:])
    return [c for c in chunks if c]


def _tags(themes: Sequence[str], notes: list[str]) -> list[str]:
    tags: list[str] = []
    for theme in themes:
        tag = " ".join(theme.split())
        if not tag or tag in tags:
            continue
        if len(tag) > TAG_MAX:
            notes.append(f"a theme of {len(tag)} characters is left out (tags hold {TAG_MAX})")
            continue
        tags.append(tag)
    if len(tags) > TAGS_MAX:
        notes.append(f"{len(tags) - TAGS_MAX} theme(s) after the eighth left out")
        tags = tags[:TAGS_MAX]
    return tags


def _escape(name: str) -> str:
    """RFC 6901 §3, and never a long or odd key echoed back."""
    shown = name if len(name) <= 40 and name.isprintable() else "…"
    return shown.replace("~", "~0").replace("/", "~1")


# --- the command ----------------------------------------------------------------------


def read_diary(
    path: Path, *, author: str | None, entry: str | None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``dreampool import memos``: the draft made from the diary file at ``path`` and the
    notes for its author (what was not copied, what ``dreampool sign`` will redact).

    Only a regular file is read, without blocking (a FIFO would hang), and at most
    :data:`MAX_INPUT` bytes of it."""
    try:
        data, size = files.read_head(path, MAX_INPUT)
    except OSError as exc:
        raise InputError([Problem(str(path), "", f"cannot read: {exc.strerror or exc}")]) from None
    if size > MAX_INPUT:  # its real size, not the MAX_INPUT + 1 bytes read
        raise InputError(
            [Problem(str(path), "", f"file is {size} bytes, the limit is {MAX_INPUT}")],
            hint="give the JSON of one MemOS Dream diary entry (or the diary API's answer)",
        )
    return import_memos_with_notes(data, str(path), author=author, entry=entry)
