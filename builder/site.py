"""Everything a reader sees, as one plan ``{path: bytes}``.

Pages (:mod:`builder.render`), aggregate patterns (:mod:`builder.patterns`),
feeds, sitemap and the JSON API (:mod:`builder.feeds`) are each rendered from
the :class:`~builder.model.SiteModel` alone, then merged with the log's files
(:func:`builder.logbuild.publish`). Two stages claiming one path is a bug,
refused here rather than letting one silently win.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from builder import agents, feeds, parallel, patterns, render
from builder.model import SiteModel
from builder.writer import PlanError


def render_site(model: SiteModel) -> dict[str, bytes]:
    # The patterns (keyword segmentation is the slow part) are computed in a
    # forked process while the pages render, and placed on their page last.
    with parallel.background(_patterns_html, model) as pending:
        pages = render.render_pages(model, pending)
    parts = [
        ("pages", pages),
        ("feeds", feeds.render_feeds(model)),
        ("agents", agents.render_agent_exports(model)),
    ]
    return merge(parts)


def _patterns_html(model: SiteModel) -> str:
    return str(patterns.render_patterns_html(patterns.compute_patterns(model)))


def merge(parts: Sequence[tuple[str, Mapping[str, bytes]]]) -> dict[str, bytes]:
    plan: dict[str, bytes] = {}
    owner: dict[str, str] = {}
    for name, part in parts:
        for path, data in part.items():
            if path in plan:
                raise PlanError(
                    f"{path} is written by both {owner[path]} and {name}",
                    hint="each site path has one owner; rename one of them",
                )
            plan[path] = data
            owner[path] = name
    return plan
