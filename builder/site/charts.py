"""Charts as SVG the build writes: no script is needed to read them.

Pure functions from labels and numbers to one self-contained ``<svg>``
string each: ``role="img"``, named by its ``<title>`` (``aria-labelledby``)
and described by a ``<desc>`` that lists every value (screen readers do not
read bars), no scripts, styles or external references, every label escaped.
Each chart is drawn in a ``viewBox`` and sized by the page (``width: 100%``
in style.css), in user units chosen so that its text renders at 12 px or
more in a 390 px wide page: a 320-unit wide chart in a column of at least
300 px gives 13-unit text at least 12.2 px.

Colours come from classes the stylesheet maps to custom properties, per
theme (``.bar``, ``.seg-<series>``, ``.suppressed``); the ``fill``
attributes are only the fallback of a page without the stylesheet. Text is
``currentColor``, the page's own text colour.

Two charts, one of each shape: :func:`columns_svg` (a count per month, on
the patterns page and, for the pool's totals, the log page:
:mod:`builder.site.timeline`) and :func:`stacked_bars_svg` (a row per tag).

Python, not template macros (``templates/_macros.html``): a chart is a
fragment computed from numbers (slot widths, rounding that tiles a bar,
labels cut to fit, which counts have room to show), arithmetic a template
language would only hide; as functions they are pure and tested as such
(tests/test_patterns.py). The page around a chart is still its template's;
the chart's own text is escaped here (:func:`esc`), and the page places the
result as trusted markup.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence

from markupsafe import escape

from builder.text.xmltext import xml_safe

__all__ = ["WIDTH", "columns_svg", "esc", "stacked_bars_svg"]

WIDTH = 320
_FONT_SIZE = 13
_SPARK_W, _SPARK_H = 96, 28
_ID_RE = re.compile(r"[a-z][a-z0-9-]*")
_BAR_FILL = "#3346b8"
_MUTED_FILL = "#6b7280"


def esc(text: str) -> str:
    """Text safe inside an SVG (or HTML) element or attribute: escaped, and
    characters XML 1.0 forbids (which would make the SVG unparseable) as
    U+FFFD, as in the feeds (:func:`builder.text.xmltext.xml_safe`)."""
    return str(escape(xml_safe(text)))


def _text_width(text: str, size: int = _FONT_SIZE) -> int:
    """A rough width in user units: wide (CJK) characters count double."""
    return sum(size if unicodedata.east_asian_width(c) in "WF" else size * 6 // 10 for c in text)


def _fit(text: str, width: int) -> str:
    if _text_width(text) <= width:
        return text
    while text and _text_width(text + "…") > width:
        text = text[:-1]
    return text + "…"


def _open(chart_id: str, css: str, width: int, height: int, title: str, desc: str) -> list[str]:
    if not _ID_RE.fullmatch(chart_id):
        raise ValueError(f"chart_id must match {_ID_RE.pattern}, is {chart_id!r}")
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {css}" role="img" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" '
        f'aria-labelledby="{chart_id}-title" aria-describedby="{chart_id}-desc" '
        f'font-family="system-ui, sans-serif" font-size="{_FONT_SIZE}">',
        f'<title id="{chart_id}-title">{esc(title)}</title>',
        f'<desc id="{chart_id}-desc">{esc(desc)}</desc>',
    ]


def stacked_bars_svg(
    rows: Sequence[tuple[str, Sequence[tuple[str, int]]]],
    *,
    chart_id: str,
    title: str,
    fills: Mapping[str, str] | None = None,
) -> str:
    """Horizontal bars, one a row, each stacked from its (series, count)
    segments in the order given, with the row's label on the left and its
    total on the right. Segments carry ``class="seg-<series>"``; with one
    series and no ``fills`` it is a plain bar chart (``class="bar"``).

    Requires counts >= 0. A label longer than its column is cut with an
    ellipsis on screen; the ``<desc>`` and each row's ``<title>`` keep it
    whole, with every segment's count."""
    fills = fills or {}
    row_h, bar_h, pad, total_w = 24, 16, 6, 36
    longest = max((_text_width(label) for label, _ in rows), default=0)
    label_w = min(max(longest, 40), WIDTH * 2 // 5) + pad
    bar_max = WIDTH - label_w - total_w - pad
    totals = [sum(n for _, n in segs) for _, segs in rows]
    peak = max(totals, default=0)
    height = row_h * max(len(rows), 1) + 4

    def says(label: str, segs: Sequence[tuple[str, int]], total: int) -> str:
        parts = ", ".join(f"{s} {n}" for s, n in segs if n)
        return f"{label}: {total}" + (f" ({parts})" if parts and (fills or len(segs) > 1) else "")

    desc = "; ".join(says(lb, s, t) for (lb, s), t in zip(rows, totals, strict=True)) or "no data"
    out = _open(chart_id, "chart-bars", WIDTH, height, title, desc)
    if not rows:
        out.append(f'<text x="0" y="{_FONT_SIZE + 4}" fill="currentColor">no data</text>')
    for i, ((label, segs), total) in enumerate(zip(rows, totals, strict=True)):
        y = i * row_h + 2
        out.append(f"<g><title>{esc(says(label, segs, total))}</title>")
        out.append(
            f'<text x="{label_w - pad}" y="{y + 13}" text-anchor="end" fill="currentColor">'
            f"{esc(_fit(label, label_w - pad))}</text>"
        )
        # Cumulative rounding, so the segments tile the bar without gaps.
        bar = bar_max * total // peak if peak else 0
        done = 0
        for series, n in segs:
            if n <= 0:
                continue
            x0 = label_w + bar * done // total
            x1 = label_w + bar * (done + n) // total
            done += n
            css = f"seg seg-{esc(series)}" if fills or len(segs) > 1 else "bar"
            fill = fills.get(series, _BAR_FILL)
            out.append(
                f'<rect class="{css}" x="{x0}" y="{y}" width="{x1 - x0}" height="{bar_h}" '
                f'fill="{fill}"/>'
            )
        out.append(f'<text x="{label_w + bar + 4}" y="{y + 13}" fill="currentColor">{total}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _says(buckets: Sequence[tuple[str, int | None]], unit: str, suppressed: str) -> str:
    """Every bucket in words; three or more empty ones in a row as one span
    ("2024-02 to 2025-06: 0 dreams"), so a long empty stretch costs one phrase."""
    parts = []
    i = 0
    while i < len(buckets):
        j = i
        while buckets[i][1] == 0 and j + 1 < len(buckets) and buckets[j + 1][1] == 0:
            j += 1
        if j - i >= 2:
            parts.append(f"{buckets[i][0]} to {buckets[j][0]}: 0 {unit}")
        else:
            parts += [
                f"{label}: {suppressed if n is None else f'{n} {unit}'}"
                for label, n in buckets[i : j + 1]
            ]
        i = j + 1
    return "; ".join(parts)


def columns_svg(
    buckets: Sequence[tuple[str, int | None]],
    *,
    chart_id: str,
    title: str,
    unit: str,
    suppressed: str = "not shown",
    mark: str = "–",
    spark: bool = False,
) -> str:
    """Vertical bars over time, one per (label, count) bucket in order; a
    count of None is a suppressed bucket, drawn as a dashed outline and said
    in words (``suppressed``) in the ``<desc>`` and by ``mark`` above it. ``unit`` names what is
    counted (``"dreams"``). With ``spark`` it is a sparkline: a small chart
    with no text of its own, so no text can be too small; else the counts
    stand above the bars (each, or every n-th where they would overlap) and the
    labels (first, last and as many between as fit) below them. An empty
    bucket draws no bar, and a run of them is one phrase of the ``<desc>``."""
    desc = _says(buckets, unit, suppressed)
    width, height = (_SPARK_W, _SPARK_H) if spark else (WIDTH, 150)
    top, bottom = (2, 2) if spark else (_FONT_SIZE + 6, _FONT_SIZE + 8)
    plot = height - top - bottom
    out = _open(chart_id, "chart-spark" if spark else "chart-columns", width, height, title, desc)
    count = max(len(buckets), 1)
    slot = width / count
    # A gap of 1 unit, or a fifth of a slot narrower than 5 units (a trend of more
    # than 96 months, whose slot is under 1 unit): a column never narrower than 0.1.
    gap = max(1.0, slot / 5) if slot >= 5 else slot / 5
    peak = max((n for _, n in buckets if n), default=0)
    every = max(1, -(-count * 64 // width))  # a label every `every` slots: 64 units each
    # A count every `counted` slots, so no two overlap: the widest count and a gap of 4
    # units fit between two shown ones (the <desc> says every count).
    widest = max((_text_width(mark if n is None else str(n)) for _, n in buckets), default=0)
    counted = max(1, math.ceil((widest + 4) / slot))
    for i, (label, n) in enumerate(buckets):
        w = max(0.1, round(min(slot - gap, 16 if spark else 48), 1))
        x = round(i * slot + (slot - w) / 2, 1)
        if n is None:
            h = max(3, plot // 4)
            out.append(
                f'<rect class="suppressed" x="{x}" y="{top + plot - h}" width="{w}" height="{h}" '
                f'fill="none" stroke="{_MUTED_FILL}" stroke-dasharray="3 2"/>'
            )
        else:
            h = plot * n // peak if peak else 0
            if n and not h:
                h = 1
            if h:  # an empty month draws nothing: a pool's span of months may be long
                out.append(
                    f'<rect class="bar" x="{x}" y="{top + plot - h}" width="{w}" '
                    f'height="{h}" fill="{_BAR_FILL}"/>'
                )
        if spark:
            continue
        mid = round(x + w / 2, 1)
        above = f"{top + plot - h - 4}"
        if i % counted == 0:
            out.append(
                f'<text x="{mid}" y="{above}" text-anchor="middle" fill="currentColor">'
                f"{esc(mark if n is None else str(n))}</text>"
            )
        if i % every == 0 or (i == count - 1 and i % every >= every // 2 + 1):
            out.append(
                f'<text x="{mid}" y="{height - 4}" text-anchor="middle" fill="currentColor">'
                f"{esc(label)}</text>"
            )
    out.append("</svg>")
    return "".join(out)
