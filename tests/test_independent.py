"""Acceptance: the built log verifies under an implementation written from the
specs alone (tests/independent_verifier.py imports nothing of builder/)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from tests.conftest import REPO
from tests.independent_verifier import VerificationError as IndependentError
from tests.independent_verifier import verify_site
from tests.pools import make_pool


def test_sample_pool_verifies_independently(tmp_path: Path) -> None:
    content = tmp_path / "content"
    shutil.copytree(REPO / "content", content)
    buildmod.build(content, tmp_path / "site", signer=None)
    report = verify_site(tmp_path / "site")
    text = str(report)
    assert "46 inclusion proofs" in text and "1 erased" in text, text


def test_growth_and_erasure_verify_independently(tmp_path: Path, run: Any) -> None:
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    site = tmp_path / "site"
    ids = tp.add("ada", 260)
    buildmod.build(tp.content, site, signer=signer)
    tp.add("bob", 3)
    buildmod.build(tp.content, site, signer=signer)
    for p in tp.content.parent.glob("in-*.json"):
        p.unlink()
    assert run("erase", ids[5], "--reason", "legal", "--content", tp.content).code == 0
    buildmod.build(tp.content, site, signer=signer)
    verify_site(site, tp.vkey)


def test_independent_verifier_catches_a_flipped_record(tmp_path: Path) -> None:
    tp = make_pool(tmp_path)
    (dream_id,) = tp.add("ada", 1)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    record = site / "dreams" / dream_id / "record.json"
    record.write_text(record.read_text().replace('"ada"', '"adb"'))
    with pytest.raises(IndependentError):
        verify_site(site, tp.vkey)
