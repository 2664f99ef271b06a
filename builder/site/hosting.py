"""Whether a built site still fits GitHub Pages.

GitHub Pages publishes a site of at most 1 GB (GitHub Docs, "GitHub Pages
limits": "Published GitHub Pages sites may be no larger than 1 GB"); a larger
upload may fail to deploy. The build knows its site's size from the manifest
it writes anyway (:attr:`builder.site.writer.SiteWriter.total_bytes`, every
file's size, no walk of the tree), and says how it stands against that limit:
``"over"`` it, ``"approaching"`` it (past :data:`APPROACHING` of it, time to
plan a move), or ``"ok"``. The command prints the warning (builder/cli); the
way out is object storage, ``dreampool deploy s3://…`` (docs/operators.md,
"Object storage and a CDN").
"""

from __future__ import annotations

from typing import Literal

PAGES_LIMIT = 1_000_000_000
"""1 GB, read as 10^9 bytes: the smaller of its two readings, so the warning
comes no later than GitHub's own check."""
APPROACHING = 0.8
"""The fixed share of the limit past which the build says the site is approaching it."""

Fit = Literal["ok", "approaching", "over"]


def pages_fit(total_bytes: int, limit: int | None = None) -> Fit:
    """How a site of ``total_bytes`` stands against ``limit`` (default :data:`PAGES_LIMIT`)."""
    limit = PAGES_LIMIT if limit is None else limit
    if total_bytes > limit:
        return "over"
    if total_bytes > limit * APPROACHING:
        return "approaching"
    return "ok"
