"""Review r80 (0bf61043): the keys behind anonymized dreams found in build_model's
main loop. Guards: the authors list is the one the separate pass gave, for every
value a head's consent.anonymize could hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from builder.content import anonymity, pool
from builder.formats import dream as dreamfmt
from builder.formats.note import parse_private_key
from builder.log import logbuild
from builder.site.model import build_model
from tests import pools
from tests.conftest import draft
from tests.pools import make_pool

CYD = bytes([4] * 32)


@pytest.mark.parametrize("value", [True, 1, 1.0, "true", [True], {"a": 1}, False, 0, None])
def test_hidden_keys_match_the_separate_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: Any
) -> None:
    """T68: a key that signed an anonymized dream under its author's own name (a
    pool from before one-time keys) keeps that author off the authors list;
    whatever consent.anonymize a head holds, the list is the one
    ``{key for a in admitted if is_anonymized(head)}`` gave (the parent, 826c770e)."""
    monkeypatch.setitem(pools.SEEDS, "cyd", CYD)
    tp = make_pool(tmp_path)
    tp.add("ada", 1)
    monkeypatch.setattr(anonymity, "refusals", lambda *a, **k: {})
    body = draft(author="cyd", title="legacy", consent={"share": True, "anonymize": True})
    signed = tmp_path / "legacy.json"
    signed.write_text(json.dumps(dreamfmt.sign(body, CYD)), encoding="utf-8")
    pool.submit(tp.content, [signed])
    config = pool.load_config(tp.content)
    directory, _ = pool.load_keys(tp.content)
    scanned, _ = pool.scan_dreams(tp.content, directory)
    log = logbuild.update(
        tp.content, scanned, origin=config.origin, signer=parse_private_key(tp.log_key)
    )
    for a in log.dreams.values():
        if a.dream.head["author"] == "cyd":
            a.dream.head["consent"] = {"share": True, "anonymize": value}
    hidden = {a.dream.key_id for a in log.dreams.values() if anonymity.is_anonymized(a.dream.head)}
    model = build_model(log, directory, config, base_url="/")
    names = [au.name for au in model.authors]
    assert ("cyd" in names) == (not hidden)
    assert "ada" in names
    assert any(a.dream.head["author"] == "cyd" for a in log.dreams.values())
