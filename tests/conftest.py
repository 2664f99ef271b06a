"""Shared test fixtures: the published vectors, an isolated key store, the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
# The standards' published vectors, copied into the repository with their
# provenance (tests/vectors/README.md): a clean clone tests itself.
VECTORS = REPO / "tests" / "vectors"

# How many files each vector folder holds. A missing or emptied folder fails the
# suite (test_vectors_present.py, and vector_files at collection), never turns a
# parametrized vector test into zero tests.
VECTOR_COUNTS: dict[str, int] = {
    "merkle/inclusion": 98,
    "merkle/consistency": 98,
    "jcs/input": 6,
    "jcs/output": 6,
    "ed25519": 1,
    "note": 2,
}


def vector_files(folder: str) -> list[Path]:
    """Every vector file under ``tests/vectors/<folder>``, sorted; raises if any is missing.

    Called at import time by the vector tests, so an absent folder is a
    collection error that fails the run, not a silent empty parametrization.
    """
    files = sorted(p for p in (VECTORS / folder).rglob("*") if p.is_file())
    want = VECTOR_COUNTS[folder]
    if len(files) != want:
        raise FileNotFoundError(
            f"tests/vectors/{folder} holds {len(files)} files, expected {want}: "
            "restore them from their sources (tests/vectors/README.md)"
        )
    return files


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty DREAMPOOL_HOME outside any git tree."""
    path = tmp_path / "dphome"
    monkeypatch.setenv("DREAMPOOL_HOME", str(path))
    return path


class CLIResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"CLIResult(code={self.code}, out={self.out!r}, err={self.err!r})"


@pytest.fixture
def pages_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every list page rendered in the test's own process, never by a forked
    worker (builder.site.assemble._write_pages): for a test that counts the
    calls of a page's renderer, which it sees only here."""
    from builder.site import assemble

    monkeypatch.setattr(assemble, "PAGES_FORK_MIN", 10**9)


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Callable[..., CLIResult]:
    def go(*args: str | Path) -> CLIResult:
        from builder.cli import main as cli

        capsys.readouterr()
        try:
            code = cli.main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CLIResult(code, captured.out, captured.err)

    return go


def draft(**overrides: Any) -> dict[str, Any]:
    """A valid unsigned dream draft."""
    base: dict[str, Any] = {
        "author": "ada",
        "title": "Pin the parser version",
        "summary": "Upgrading the parser **silently** changed output.",
        "entries": [
            {
                "text": "Minor releases of the parser changed tokenization.",
                "type": "lesson",
                "confidence": "confirmed",
            },
            {
                "text": "Pin exact versions in the lock file.",
                "type": "rule",
                "confidence": "confirmed",
                "source": "incident review",
            },
        ],
        "tags": ["python", "packaging"],
        "consent": {"share": True, "derivatives": True, "anonymize": False},
    }
    base.update(overrides)
    return base


def write_json(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=2), encoding="utf-8")
    return path
