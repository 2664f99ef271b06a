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

:func:`bar_chart` draws one series as an SVG made by the build (no script),
sized by its ``viewBox`` to its container, every label escaped here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

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


# The chart's user units: 360 wide, so text of 13 units is 12.9 CSS px at
# 390 px (a 358 px column): style.css keeps a chart at most 24rem wide, so
# it never grows past 1.07x either.
WIDTH, HEIGHT = 360, 200
FONT = 13
_LEFT, _RIGHT, _TOP, _BOTTOM = 6, 6, 24, 26


def bar_chart(
    chart_id: str, title: str, desc: str, rows: Sequence[tuple[str, int]], unit: str
) -> Markup:
    """A bar a row (label, value), oldest first; the axis names the first and
    last month and the largest value. ``role="img"`` with a ``<title>`` and a
    ``<desc>`` (the values in words); the page's table is the full text."""
    e = escape
    top = max((v for _, v in rows), default=0)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    base = HEIGHT - _BOTTOM
    out = [
        f'<svg class="timeline-chart" id="{e(chart_id)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-labelledby="{e(chart_id)}-t {e(chart_id)}-d" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{e(chart_id)}-t">{e(title)}</title>',
        f'<desc id="{e(chart_id)}-d">{e(desc)}</desc>',
        f'<text class="timeline-max" x="{_LEFT}" y="{FONT + 2}" font-size="{FONT}">'
        f"{e(f'{top:,} {unit}')}</text>",
    ]
    if rows:
        step = plot_w / len(rows)
        bar = min(max(step * 0.8, 1.0), 48.0)
        for i, (label, value) in enumerate(rows):
            h = plot_h * value / top if top else 0.0
            x = _LEFT + i * step + (step - bar) / 2
            out.append(
                f'<rect class="timeline-bar" x="{x:.2f}" y="{base - h:.2f}" '
                f'width="{bar:.2f}" height="{h:.2f}"><title>{e(label)}: {value:,}</title></rect>'
            )
        y = HEIGHT - 8
        first = e(rows[0][0])
        out.append(
            f'<text class="timeline-axis" x="{_LEFT}" y="{y}" font-size="{FONT}">{first}</text>'
        )
        if len(rows) > 1:
            out.append(
                f'<text class="timeline-axis" x="{WIDTH - _RIGHT}" y="{y}" font-size="{FONT}" '
                f'text-anchor="end">{e(rows[-1][0])}</text>'
            )
    out.append(
        f'<line class="timeline-base" x1="{_LEFT}" y1="{base}" x2="{WIDTH - _RIGHT}" y2="{base}"/>'
    )
    out.append("</svg>")
    return Markup("".join(out))


def describe(rows: Sequence[tuple[str, int]], what: str) -> str:
    """A chart's ``<desc>``: the span and the first and last values, in words."""
    if not rows:
        return f"No {what} yet."
    (first, a), (last, b) = rows[0], rows[-1]
    if len(rows) == 1:
        return f"{b:,} {what} in {last}."
    return f"From {a:,} {what} in {first} to {b:,} in {last}, month by month."


def charts(model: SiteModel) -> tuple[list[Month], list[tuple[str, Markup]]]:
    """The rows and the three charts of the log page, each with its caption:
    dreams, authors and log entries at the end of each month."""
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
        (title, bar_chart(cid, f"{title}, by month", describe(points, unit), points, unit))
        for cid, title, unit, points in series
    ]
