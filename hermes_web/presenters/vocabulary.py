"""The words every page, the Markdown export and the API docs use for stored values, and the
warnings a compaction report carries (pure: report dicts in, dicts out)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

ALIGNMENT_LABELS = {
    "tool_group_kept_whole": "cut moved so a tool call and its results stay together",
    "latest_user_pulled_in": "latest user message pulled into the tail",
    "latest_assistant_pulled_in": "latest assistant reply pulled into the tail",
    "head_aligned_past_tools": "head extended past tool results so none is orphaned",
}
SANITIZATION_LABELS = {
    "dropped_orphan_result": "dropped a tool result whose call was gone",
    "inserted_stub": "inserted a stub result for a call whose result was gone",
    "stripped_call": "removed a tool call whose result was gone",
}
TRUNCATION_MARKER = "\n...[truncated]...\n"

# One word per stored value, used by every page, the Markdown export and the API docs.
# The engine says "forced" where the web layer stores "manual": both read "manual".
VOCABULARY: dict[str, dict[str, str]] = {
    "trigger": {
        "auto": "automatic",
        "manual": "manual",
        "forced": "manual",
        "what_if": "what-if",
        "unknown": "not recorded",  # an agent's own compaction whose transcript omits it
    },
    "status": {
        "queued": "queued",
        "running": "running",
        "committed": "committed",
        "skipped": "skipped",
        "aborted": "aborted",
        "failed": "failed",
        "dry_run": "dry run",
        "compacted": "compacted",
    },
    "mode": {"rotation": "rotation", "in_place": "in-place"},
    "summarizer": {
        "aux": "auxiliary model",
        "main": "main model",
        "deterministic": "deterministic (no model)",
        "auto": "auto (auxiliary → main → deterministic)",
        # An agent's own compaction: its summary was written by the agent.
        "claude-code": "Claude Code's own",
        "codex": "Codex's own",
        "gemini-cli": "Gemini CLI's own",
        "openhands": "OpenHands's own",
        "pi": "Pi's own",
        "copilot-cli": "Copilot CLI's own",
        "cline": "Cline's own",
        "roo-code": "Roo Code's own",
        "continue": "Continue's own",
        "hermes": "Hermes's own",
    },
    "profile": {
        "classic": "classic",
        "hermes": "hermes",
        # An agent's own compaction has no profile of ours: it is the agent's own way.
        "agent:claude-code": "Claude Code's own",
        "agent:codex": "Codex's own",
        "agent:gemini-cli": "Gemini CLI's own",
        "agent:openhands": "OpenHands's own",
        "agent:pi": "Pi's own",
        "agent:copilot-cli": "Copilot CLI's own",
        "agent:cline": "Cline's own",
        "agent:roo-code": "Roo Code's own",
        "agent:continue": "Continue's own",
        "agent:hermes": "Hermes's own",
    },
    "slim": {
        "fold": "fold",
        "truncate": "truncation",
        "image": "image stripped",
        "dedup": "duplicate output",
        "args_shrink": "arguments shrunk",
        "image_retire": "tool image retired",
        "demote": "pressure demotion",
        "lean_tail": "lean-tail stub",
    },
    "region": {"head": "head", "middle": "middle", "tail": "tail"},
}
SLIM_KINDS = tuple(VOCABULARY["slim"])
REGIONS = tuple(VOCABULARY["region"])
WARNING_TITLES = {
    "over_threshold": "Still over the threshold",
    "over_window": "Still over the context window",
    "tail_over_threshold": "The protected tail alone exceeds the threshold",
    "cannot_make_room": "Could not make room",
    "summarizer_fallback": "A fallback summarizer wrote the summary",
    "threshold_at_window": "Threshold at or above the window",
}
# Warnings that mean the next turn may fail; the others are informational.
SERIOUS_WARNINGS = frozenset({"over_threshold", "over_window", "cannot_make_room"})


def tally_compactions(rows: Iterable[tuple[str, str, int]]) -> dict[str, int]:
    """The one count of compactions every page shows, from ``(status, trigger, n)`` rows.

    "committed" is what the conversation list counts; what-if (dry) runs and runs that
    were skipped, aborted, failed or are still queued are counted apart, so the list, the
    conversation page and the timeline give the same numbers.
    """
    tally = {"committed": 0, "what_if": 0, "undone": 0, "other": 0, "total": 0}
    for status, trigger, n in rows:
        if trigger == "what_if":
            tally["what_if"] += n
        elif status in ("committed", "undone"):  # an undone run was committed, then reverted
            tally[status] += n
        else:
            tally["other"] += n
        tally["total"] += n
    return tally


def term(kind: str, value: Any) -> str:
    """The one word the pages use for a stored ``value`` of ``kind`` (trigger, status, …)."""
    if value is None or value == "":
        return "—"
    return VOCABULARY.get(kind, {}).get(str(value), str(value))


def report_profile(report: Mapping[str, Any]) -> str:
    """The profile a report was made with; reports stored before profiles existed are classic."""
    return str(report.get("profile") or (report.get("config") or {}).get("profile") or "classic")


def report_warnings(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The engine's warnings, plus the same checks made on older reports that have none.

    Each warning is ``{"code", "title", "message", "serious"}``; one per code.
    """
    found: dict[str, dict[str, Any]] = {}

    def add(code: str, message: str) -> None:
        if code and code not in found:
            found[code] = {
                "code": code,
                "title": WARNING_TITLES.get(code, code.replace("_", " ")),
                "message": message,
                "serious": code in SERIOUS_WARNINGS,
            }

    for warning in report.get("warnings") or []:
        if isinstance(warning, Mapping):
            add(str(warning.get("code") or ""), str(warning.get("message") or ""))
    if report.get("status") != "compacted":
        return list(found.values())
    tokens = report.get("tokens") or {}
    after, threshold = tokens.get("after"), tokens.get("threshold")
    window = (report.get("config") or {}).get("context_length")
    if _number(after) and _number(window) and after > window:
        add("over_window", f"{after:,} tokens after compaction, over the {window:,}-token window.")
    if _number(after) and _number(threshold) and after > threshold:
        add(
            "over_threshold",
            f"{after:,} tokens after compaction, still over the {threshold:,}-token threshold: "
            "the next turn will compact again.",
        )
    if _number(threshold) and _number(window) and threshold >= window:
        add(
            "threshold_at_window",
            f"The threshold ({threshold:,} tokens) is at or above the {window:,}-token window: "
            "automatic compaction cannot start before the context overflows.",
        )
    tail = tokens.get("tail")
    if _number(tail) and _number(threshold) and tail > threshold:
        add(
            "tail_over_threshold",
            f"The tail kept verbatim is {tail:,} tokens, over the {threshold:,}-token threshold.",
        )
    if report.get("fallbacks") and report.get("summarizer") == "deterministic":
        add("summarizer_fallback", "The model summarizers failed; the deterministic one wrote it.")
    return list(found.values())


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
