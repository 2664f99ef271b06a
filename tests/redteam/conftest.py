"""Fixtures the red-team modules share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pools import PoolFixture
from tests.redteam.test_gate import published_repo


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PoolFixture:
    """A published pool committed as a pull request's target branch, the
    current folder its repository's root (tests/redteam/test_gate.py)."""
    return published_repo(tmp_path, monkeypatch)
