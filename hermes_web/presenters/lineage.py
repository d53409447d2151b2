"""The lineage page's charts: tokens before/after per compaction and the tokens each one
saved, as coordinates for inline SVG (no chart library, no script)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# ---------------------------------------------------------------- timeline


def timeline_chart(
    points: Sequence[Mapping[str, Any]],
    *,
    width: int = 720,
    height: int = 240,
    threshold: int | None = None,
    window: int | None = None,
    agent_lines: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Bar pairs (before, after) per compaction for an inline SVG, plus lines and warnings.

    ``points`` are ``{"label", "before", "after", "status", "reason", "url", "when"}`` in
    time order. The threshold is always inside the scale; the window only when it is at most
    twice the tallest bar (otherwise it would flatten every bar), else ``window_off_chart``.
    Warnings: an automatic compaction skipped by anti-thrash, and two committed compactions
    in a row that each saved less than 10 %.

    ``agent_lines`` (``{"agent", "value", ...}``): an agent's own threshold, drawn like the
    window (only when at most twice the tallest bar; each gets ``on_chart``).
    """
    tallest = max([p.get("before") or 0 for p in points] + [1])
    window_tokens = window or 0
    window_on_chart = bool(window_tokens) and window_tokens <= 2 * max(tallest, threshold or 0)
    agents = [
        {**line, "on_chart": line["value"] <= 2 * max(tallest, threshold or 0)}
        for line in agent_lines
    ]
    top: int = max(
        tallest,
        threshold or 0,
        window_tokens if window_on_chart else 0,
        *(line["value"] for line in agents if line["on_chart"]),
        1,
    )
    pad_left, pad_bottom, pad_top = 64, 44, 10
    plot_h = height - pad_bottom - pad_top
    slot = (width - pad_left - 10) / max(1, len(points))
    bar_w = max(2.0, min(28.0, slot / 2.6))
    bars = []
    # Date labels on the time axis: at most about eight, always the first and the last.
    every = max(1, -(-len(points) // 8))
    for i, p in enumerate(points):
        x = pad_left + i * slot + slot / 2
        before = p.get("before") or 0
        after = p.get("after") or 0
        hb = plot_h * before / top
        ha = plot_h * after / top
        bars.append(
            {
                **p,
                "x_before": round(x - bar_w, 1),
                "x_after": round(x, 1),
                "y_before": round(pad_top + plot_h - hb, 1),
                "y_after": round(pad_top + plot_h - ha, 1),
                "h_before": round(hb, 1),
                "h_after": round(ha, 1),
                "x_label": round(x, 1),
                "show_date": i % every == 0 or i == len(points) - 1,
                "saved_percent": round(100.0 * (before - after) / before, 1) if before else None,
            }
        )
    drawn = [
        (name, name, value)
        for name, value in (
            ("threshold", threshold),
            ("window", window if window_on_chart else None),
        )
        if value
    ] + [
        (f"{line['agent']}'s threshold", "agent", line["value"])
        for line in agents
        if line["on_chart"]
    ]
    lines = [
        {
            "name": name,
            "kind": kind,
            "value": value,
            "y": round(pad_top + plot_h - plot_h * value / top, 1),
        }
        for name, kind, value in drawn
    ]
    warnings = []
    low_streak = 0
    for p in bars:
        reason = str(p.get("reason") or "")
        # services.compactions records the anti-thrash skip as reason "ineffective".
        if p.get("status") == "skipped" and (reason == "ineffective" or "thrash" in reason):
            warnings.append(
                f"{p['label']}: automatic compaction skipped by the anti-thrash rule (the last compactions each saved < 10 %)."
            )
        if p.get("status") == "committed" and p["saved_percent"] is not None:
            low_streak = low_streak + 1 if p["saved_percent"] < 10 else 0
            if low_streak >= 2:
                warnings.append(
                    f"{p['label']}: two compactions in a row saved less than 10 % — the context refills as fast as it is compacted."
                )
    ticks = [
        {"value": round(top * f), "y": round(pad_top + plot_h - plot_h * f, 1)} for f in (0, 0.5, 1)
    ]
    return {
        "width": width,
        "height": height,
        "bar_width": round(bar_w, 1),
        "bars": bars,
        "ticks": ticks,
        "lines": lines,
        "threshold": threshold,
        "window": window,
        "window_off_chart": bool(window) and not window_on_chart,
        "agent_lines": agents,
        "axis_x": pad_left,
        "axis_y": pad_top + plot_h,
        "label_y": height - 24,
        "date_y": height - 8,
        "warnings": warnings,
    }


def saved_chart(points: Sequence[tuple[Any, int]], *, width: int = 360, height: int = 90) -> dict:
    """Small bar chart of tokens saved per committed compaction (oldest first) for an SVG."""
    top = max([saved for _, saved in points] + [1])
    slot = width / max(1, len(points))
    bars = []
    for i, (when, saved) in enumerate(points):
        h = round((height - 14) * max(0, saved) / top, 1)
        bars.append(
            {
                "x": round(i * slot + 1, 1),
                "w": round(min(28.0, max(1.0, slot - 2)), 1),
                "y": round(height - 12 - h, 1),
                "h": h,
                "saved": saved,
                "when": when,
            }
        )
    return {
        "width": width,
        "height": height,
        "bars": bars,
        "total": sum(saved for _, saved in points),
        "top": top,
    }
