"""Small server-rendered SVG bar charts: no JavaScript and no chart library, so the dashboard
works without scripts and nothing is fetched from a CDN. The SVG carries a <title> and a text
table follows it in the page for screen readers."""

from dataclasses import dataclass
from datetime import date

from django.utils.dateformat import format as date_format
from django.utils.html import format_html, format_html_join

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 640, 180, 44, 22, 10


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    w: float
    h: float
    label: str


def axis_top(largest: int) -> int:
    """The y axis's top: the smallest of 2, 4, 6, 8, 10 × 10^k at or above ``largest``, so the
    middle grid line is a whole number too (counts, minor units) — a top of 1 or 3 labelled its
    middle line 0 or 2."""
    scale = 1
    while True:
        for m in (2, 4, 6, 8, 10):
            if m * scale >= largest:
                return m * scale
        scale *= 10


def bar_chart_svg(*, title: str, days: list[date], values: list[int], unit_format=str) -> str:
    """A bar per day, the y axis from 0 to ``axis_top`` of the largest value, three grid lines."""
    top = axis_top(max([*values, 1]))
    plot_w, plot_h = WIDTH - PAD_LEFT - 4, HEIGHT - PAD_BOTTOM - PAD_TOP
    step = plot_w / max(len(values), 1)
    bars = []
    for i, (day, value) in enumerate(zip(days, values, strict=True)):
        h = plot_h * value / top
        bars.append(
            Bar(
                x=PAD_LEFT + i * step + step * 0.15,
                y=PAD_TOP + plot_h - h,
                w=step * 0.7,
                h=h,
                label=f"{date_format(day, 'j M')}: {unit_format(value)}",  # month in the active language
            )
        )
    grid = format_html_join(
        "",
        '<line x1="{}" x2="{}" y1="{}" y2="{}" class="grid"/><text x="{}" y="{}" class="axis" '
        'text-anchor="end">{}</text>',
        (
            (
                PAD_LEFT,
                WIDTH,
                f"{PAD_TOP + plot_h * (1 - f):.1f}",
                f"{PAD_TOP + plot_h * (1 - f):.1f}",
                PAD_LEFT - 4,
                f"{PAD_TOP + plot_h * (1 - f) + 4:.1f}",
                unit_format(top * n // 2),
            )
            for f, n in ((0, 0), (0.5, 1), (1, 2))
        ),
    )
    rects = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}" class="bar"><title>{}</title></rect>',
        ((f"{b.x:.1f}", f"{b.y:.1f}", f"{b.w:.1f}", f"{b.h:.1f}", b.label) for b in bars),
    )
    ticks = format_html_join(
        "",
        '<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>',
        (
            (f"{PAD_LEFT + i * step + step / 2:.1f}", HEIGHT - 6, f"{d:%d/%m}")
            for i, d in enumerate(days)
            if (len(days) - 1 - i) % 7 == 0  # counted from today, so the last tick is today
        ),
    )
    return format_html(
        '<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}"><title>{}</title>{}{}{}</svg>',
        WIDTH,
        HEIGHT,
        title,
        title,
        grid,
        rects,
        ticks,
    )
