"""The pool over time: dreams, authors and log size by month, and their charts.

:func:`months` reads only what the log commits, so a cold build and an
incremental one show the same bytes (never the build's clock):

* a dream's month is its leaf date (:attr:`DreamView.date`), the time of the
  first checkpoint that holds its leaf (``content/log/history.jsonl``,
  builder.log.logstate); its author is the signed ``author`` field, left out
  when the dream is anonymized (docs/protocol.md §1.2);
* the log's size at the end of a month is the size of the last checkpoint
  signed by then (``log/checkpoints/<size>``, docs/protocol.md §4). A C2SP
  checkpoint carries no time: the month is history.jsonl's, which the pool
  commits beside the checkpoints but the log key does not sign.

Every month from the first checkpoint's to the last one's is a row, so the
chart's axis is linear in time; a month with no checkpoint repeats the totals
before it. Erased dreams are not counted (their leaves are: the log size).

:func:`charts` draws the totals as :func:`builder.site.charts.columns_svg`,
the column chart the patterns page draws too (the site has one).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from markupsafe import Markup

from builder.site.charts import columns_svg
from builder.site.model import SiteModel, month_span


@dataclass(frozen=True, slots=True)
class Month:
    month: str  # YYYY-MM
    dreams: int  # dreams (not erased) whose leaf was first signed this month
    total_dreams: int  # the same, up to the end of the month
    authors: int  # named authors whose first listed dream is of this month
    total_authors: int
    log_size: int  # the size of the last checkpoint signed by the end of the month


def months(model: SiteModel) -> list[Month]:
    """One row a month, oldest first, from the first checkpoint's month to the
    last one's; no rows before the first checkpoint."""
    if not model.history:
        return []
    sizes: dict[str, int] = {}
    for h in model.history:  # oldest first: the last of a month wins
        sizes[h.date[:7]] = h.size
    new_dreams = Counter(d.date[:7] for d in model.dreams)
    first_seen: dict[str, str] = {}
    for d in reversed(model.dreams):  # oldest first
        if d.author is not None:
            month = d.date[:7]
            if d.author not in first_seen or month < first_seen[d.author]:
                first_seen[d.author] = month
    new_authors = Counter(first_seen.values())
    rows: list[Month] = []
    total_d = total_a = size = 0
    for month in month_span(model.history[0].date[:7], max(sizes)):
        total_d += new_dreams[month]
        total_a += new_authors[month]
        size = sizes.get(month, size)
        rows.append(Month(month, new_dreams[month], total_d, new_authors[month], total_a, size))
    return rows


def charts(model: SiteModel) -> tuple[list[Month], list[tuple[str, Markup]]]:
    """The rows and the three charts of the log page, each with its caption:
    dreams, authors and log entries at the end of each month. Each chart's
    ``<desc>`` says every month's total; the page's table beside them is the
    same in full."""
    rows = months(model)
    series = (
        ("chart-dreams", "Dreams in the pool", "dreams", [(r.month, r.total_dreams) for r in rows]),
        (
            "chart-authors",
            "Authors with a dream",
            "authors",
            [(r.month, r.total_authors) for r in rows],
        ),
        ("chart-log", "Log entries", "log entries", [(r.month, r.log_size) for r in rows]),
    )
    return rows, [
        # Trusted markup: columns_svg escapes every label it draws.
        (title, Markup(columns_svg(points, chart_id=cid, title=f"{title}, by month", unit=unit)))
        for cid, title, unit, points in series
    ]
