"""Chart geometry for the "where compaction hurt" page: bar lengths as percentages of the
longest bar, and the per-hour chart as inline SVG rectangles (no script, no library)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_web.services.hurt import (
    DEEP_LIMIT,
    FAR,
    FREED_LITTLE,
    LOOP_REPEAT,
    LOOP_TURNS,
    REREAD_TURNS,
    SLACK,
    HurtReport,
)

CHART_HEIGHT = 80
BAR_WIDTH = 14
BAR_GAP = 4


def _percents(values: Sequence[float]) -> list[float]:
    top = max(values, default=0) or 1
    return [round(100 * v / top, 1) for v in values]


def _bars(items: Sequence[Any], value: str) -> list[tuple[Any, float]]:
    return list(zip(items, _percents([getattr(i, value) for i in items]), strict=True))


def hours_chart(hours: Sequence[tuple[str, int, list[str]]]) -> dict[str, Any]:
    """SVG rectangles, one per hour that had compactions: x, y, height, the hour and its count."""
    top = max((n for _, n, _ in hours), default=0) or 1
    bars = []
    for i, (hour, n, ids) in enumerate(hours):
        height = max(2, round(CHART_HEIGHT * n / top))
        bars.append(
            {
                "x": i * (BAR_WIDTH + BAR_GAP),
                "y": CHART_HEIGHT - height,
                "height": height,
                "hour": hour,
                "count": n,
                "compaction": ids[-1] if ids else "",
            }
        )
    return {
        "bars": bars,
        "width": max(1, len(bars) * (BAR_WIDTH + BAR_GAP)),
        "height": CHART_HEIGHT,
        "bar_width": BAR_WIDTH,
        "top": top,
    }


def hurt_context(report: HurtReport) -> dict[str, Any]:
    """What ``hurt.html`` prints: the report, its bars and the thresholds it used."""
    return {
        "report": report,
        "chart": hours_chart(report.hours),
        "agents": _bars(report.by_agent, "compactions"),
        "projects": _bars(report.by_project, "compactions"),
        "growth": _bars(report.growth, "value"),
        "rereads": _bars(report.rereads, "value"),
        "rules": {
            "loop_turns": LOOP_TURNS,
            "loop_repeat": LOOP_REPEAT,
            "freed_little": round(100 * FREED_LITTLE),
            "far": FAR,
            "slack": SLACK,
            "deep_limit": DEEP_LIMIT,
            "reread_turns": REREAD_TURNS,
        },
    }
