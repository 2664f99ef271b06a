"""Lint and strict types are part of the test suite, so CI holds them."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.conftest import REPO


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(REPO / ".venv" / "bin")) or shutil.which(name)
    assert path, f"{name} is not installed; install the test extra: pip install -e '.[test]'"
    return path


def test_ruff_clean() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "builder", "tests"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "builder"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
