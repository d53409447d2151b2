"""The compare page: what became of each message in two compactions of one conversation
(kept, slimmed in place, summarized…) and where the two differ."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hermes_web.presenters.vocabulary import SLIM_KINDS

# ---------------------------------------------------------------- fates

FATE_LABELS = {
    "kept": "kept verbatim",
    "slimmed": "kept, slimmed",
    "summarized": "summarized",
    "dropped": "dropped",
}
# Kinds that replace a head or tail message's text with a line (the message stays, shorter).
_SLIM_IN_PLACE = frozenset(SLIM_KINDS)


def message_fates(report: Mapping[str, Any]) -> list[str]:
    """What happened to each input message: kept, slimmed, summarized or dropped.

    Head and tail messages are kept (slimmed when an action rewrote them); middle messages
    are summarized; a skipped or aborted run keeps everything.
    """
    count = len(report.get("message_tokens") or ()) or (report.get("counts") or {}).get(
        "messages_before", 0
    )
    if report.get("status") != "compacted":
        return ["kept"] * count
    fates = ["dropped"] * count
    bounds = report.get("boundaries") or {}
    for part, fate in (("head", "kept"), ("middle", "summarized"), ("tail", "kept")):
        start, end = (list(bounds.get(part) or [0, 0]) + [0, 0])[:2]
        for i in range(max(0, start), min(end, count)):
            fates[i] = fate
    for action in report.get("slimming") or []:
        index = action.get("index")
        if (
            isinstance(index, int)
            and 0 <= index < count
            and fates[index] == "kept"
            and action.get("kind") in _SLIM_IN_PLACE
        ):
            fates[index] = "slimmed"
    return fates


def fate_diff(a: Mapping[str, Any], b: Mapping[str, Any], *, limit: int = 400) -> dict[str, Any]:
    """Per input message, the fate under run A and under run B, and the rows where they differ.

    Both runs must have compacted the same input (same conversation, same snapshot); when the
    lengths differ, the shorter list decides how many rows are compared.
    """
    return fates_diff(message_fates(a), message_fates(b), limit=limit)


def fates_diff(fa: Sequence[str], fb: Sequence[str], *, limit: int = 400) -> dict[str, Any]:
    """``fate_diff`` of two fate lists already computed (``message_fates``)."""
    n = min(len(fa), len(fb))
    differ = [
        {
            "index": i,
            "a": fa[i],
            "b": fb[i],
            "a_label": FATE_LABELS[fa[i]],
            "b_label": FATE_LABELS[fb[i]],
        }
        for i in range(n)
        if fa[i] != fb[i]
    ]
    totals = [
        {
            "fate": fate,
            "label": label,
            "a": fa.count(fate),
            "b": fb.count(fate),
        }
        for fate, label in FATE_LABELS.items()
    ]
    return {
        "totals": totals,
        "differ": differ[:limit],
        "differ_count": len(differ),
        "compared": n,
        "same_length": len(fa) == len(fb),
    }
