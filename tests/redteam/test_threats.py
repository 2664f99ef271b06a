"""THREATS.md and the tests keep each other honest.

Every threat names at least one test, and every test it names exists (the file,
and a test function of that name in it); every red-team test names, in its
docstring, a threat that THREATS.md describes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO

THREATS = REPO / "THREATS.md"
TESTS = REPO / "tests"
_HEADING = re.compile(r"^\*\*(T\d+) — ", re.MULTILINE)
_REF = re.compile(r"`((?:[\w-]+/)*test_\w+\.py)?::(test_\w+)")


def _sections() -> dict[str, str]:
    text = THREATS.read_text(encoding="utf-8")
    starts = [(m.group(1), m.start()) for m in _HEADING.finditer(text)]
    ends = [s for _, s in starts[1:]] + [text.index("\n## Out of scope")]
    return {tid: text[start:end] for (tid, start), end in zip(starts, ends, strict=True)}


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_threat_names_tests_that_exist() -> None:
    sections = _sections()
    ids = _HEADING.findall(THREATS.read_text(encoding="utf-8"))
    # Numbered as found; grouped by topic, so T101 may come before T100.
    assert len(sections) >= 40 and len(ids) == len(set(ids)), "a threat id is used twice"
    for tid, text in sections.items():
        assert re.search(r"Status: \*\*(defended|detected|accepted risk)\*\*", text) or (
            "**accepted risk**" in text
        ), f"{tid} has no status"
        refs = []
        last_file = None
        # A `::name` reference continues the file named just before it.
        for m in _REF.finditer(text):
            last_file = m.group(1) or last_file
            assert last_file, f"{tid}: {m.group(0)} names no file"
            refs.append((last_file, m.group(2)))
        assert refs, f"{tid} names no test"
        for file, name in refs:
            path = TESTS / file
            assert path.is_file(), f"{tid}: {file} does not exist"
            assert name in _functions(path), f"{tid}: {file} has no {name}"


def test_every_red_team_test_names_a_threat() -> None:
    known = set(_sections())
    for path in sorted((TESTS / "redteam").glob("test_*.py")):
        if path.name == "test_threats.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                doc = ast.get_docstring(node) or ""
                named = set(re.findall(r"\bT\d+\b", doc))
                assert named, f"{path.name}::{node.name} names no threat"
                assert named <= known, f"{path.name}::{node.name} names {named - known}"
