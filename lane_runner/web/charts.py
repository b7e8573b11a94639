"""Bar charts as inline SVG, drawn on the server: no script, no CDN, nothing to load.

Pure: figures in, markup out. Every label passes ``text.shown`` and is escaped here,
since the SVG is marked safe for the template that places it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from lane_runner.web.text import shown

WIDTH = 640
BAR_HEIGHT = 22
GAP = 6
LABEL_WIDTH = 170
VALUE_WIDTH = 110


@dataclass(frozen=True)
class Bar:
    """One bar: what it counts and how much."""

    label: str
    value: float


def _label(text: str) -> Markup:
    return escape(str(shown(text)))


def horizontal(title: str, bars: Sequence[Bar], unit: str) -> Markup:
    """One bar per row, longest to scale; ``unit``: ``$`` before a dollar figure, else
    after (``tokens``). An empty chart says so instead of drawing nothing."""
    if not bars:
        return Markup('<p class="empty">{}: nothing spent in this period</p>').format(title)
    top = max(bar.value for bar in bars) or 1.0
    span = WIDTH - LABEL_WIDTH - VALUE_WIDTH
    height = len(bars) * (BAR_HEIGHT + GAP) + GAP
    rows = []
    for index, bar in enumerate(bars):
        y = GAP + index * (BAR_HEIGHT + GAP)
        length = max(1.0, span * bar.value / top) if bar.value > 0 else 0.0
        figure = f"${bar.value:,.4f}" if unit == "$" else f"{bar.value:,.0f} {unit}"
        rows.append(
            Markup(
                '<g><text x="{lx}" y="{ty}" text-anchor="end">{label}</text>'
                '<rect x="{x}" y="{y}" width="{w:.1f}" height="{h}" rx="3"><title>{label}: '
                "{figure}</title></rect>"
                '<text x="{vx:.1f}" y="{ty}">{figure}</text></g>'
            ).format(
                lx=LABEL_WIDTH - 8, ty=y + BAR_HEIGHT - 6, label=_label(bar.label),
                x=LABEL_WIDTH, y=y, w=length, h=BAR_HEIGHT, figure=figure,
                vx=LABEL_WIDTH + length + 6,
            )
        )
    return Markup(
        '<figure class="chart"><figcaption>{title}</figcaption>'
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{title}" '
        'viewBox="0 0 {width} {height}" width="100%">{rows}</svg></figure>'
    ).format(title=title, width=WIDTH, height=height, rows=Markup("").join(rows))
