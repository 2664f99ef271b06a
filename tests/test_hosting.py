"""The build says when its site passes (or nears) the 1 GB GitHub Pages publishes
(builder.site.hosting), from its manifest's sizes; the command prints the warning."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from builder.site import hosting
from tests.pools import PoolFixture, make_pool


@pytest.mark.parametrize(
    ("total", "fit"),
    [(0, "ok"), (800, "ok"), (801, "approaching"), (1000, "approaching"), (1001, "over")],
)
def test_pages_fit_against_a_limit(total: int, fit: str) -> None:
    assert hosting.pages_fit(total, 1000) == fit


def test_the_limit_is_githubs_1_gb() -> None:
    assert hosting.PAGES_LIMIT == 10**9
    assert hosting.pages_fit(10**9) == "approaching"
    assert hosting.pages_fit(10**9 + 1) == "over"
    assert hosting.pages_fit(8 * 10**8) == "ok"


def files_on_disk(site: Path) -> int:
    """What the manifest saves the build from doing: walk the tree and add it up."""
    return sum(
        os.lstat(os.path.join(folder, name)).st_size
        for folder, _, names in os.walk(site.resolve())
        for name in names
    )


@pytest.fixture
def pool(tmp_path: Path) -> PoolFixture:
    made = make_pool(tmp_path)
    made.add("ada", 2)
    return made


def test_the_report_has_the_sites_size_from_its_manifest(pool: PoolFixture, tmp_path: Path) -> None:
    site = tmp_path / "site"
    signer = parse_private_key(pool.log_key)
    first = buildmod.build(pool.content, site, signer=signer)
    assert first.site_bytes == files_on_disk(site) > 0
    assert first.pages_fit == "ok"
    # A second build keeps most files (hard links): they still count.
    pool.add("bob", 1)
    second = buildmod.build(pool.content, site, signer=signer)
    assert second.site_bytes == files_on_disk(site) > first.site_bytes


def build_with_limit(
    pool: PoolFixture, out: Path, run: Any, monkeypatch: pytest.MonkeyPatch, limit: int
) -> Any:
    monkeypatch.setattr(hosting, "PAGES_LIMIT", limit)
    monkeypatch.setenv("DREAMPOOL_LOG_KEY", pool.log_key)
    result = run("build", "--content", pool.content, "--out", out, "--quiet")
    assert result.code == 0, result
    return result


def test_the_build_summary_warns_over_and_near_the_pages_limit(
    pool: PoolFixture, tmp_path: Path, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "site"
    quiet = build_with_limit(pool, out, run, monkeypatch, 10**9)
    assert "warning" not in quiet.out + quiet.err
    size = files_on_disk(out)

    over = build_with_limit(pool, out, run, monkeypatch, size - 1)
    (line,) = [x for x in over.out.splitlines() if x.startswith("warning:")]
    assert f"the site is {size / 1e9:.2f} GB, over the " in line
    assert '(GitHub Docs, "GitHub Pages limits")' in line
    assert "`dreampool deploy s3://BUCKET/PREFIX`" in line and "dreampool init --host s3" in line
    assert '(docs/operators.md, "Object storage and a CDN")' in line
    assert over.out.index("built ") < over.out.index("warning:")  # after the summary line

    near = build_with_limit(pool, out, run, monkeypatch, size * 10 // 9)  # 90%
    (line,) = [x for x in near.out.splitlines() if x.startswith("warning:")]
    assert "90% of the " in line and "over the" not in line
    assert "`dreampool deploy s3://BUCKET/PREFIX`" in line
