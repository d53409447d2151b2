"""The words every page, the Markdown export and the API docs use for stored values, and the
warnings a compaction report carries (pure: report dicts in, dicts out)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from compaction import CompactionConfig

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
        "opencode": "opencode's own",
        "crush": "Crush's own",
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
        "agent:opencode": "opencode's own",
        "agent:crush": "Crush's own",
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
    # Why a run did not compact (``Compaction.reason``, the report's ``reason``).
    "reason": {
        "summary_not_smaller": "the summary would not have been smaller than what it replaces",
        "nothing_to_compact": "there was nothing between the head and the tail to summarize",
        "ineffective": "the latest compactions saved too little, so automatic compaction paused",
        "superseded": "a newer compaction of the same conversation replaced this one",
        "summary_failed": "every summarizer failed, and this run was set to abort then",
        "summary_auth_error": "the summarizer's API key was refused",
        "below_threshold": "the conversation is below the threshold",
        "threshold": "the conversation reached the threshold",
        "forced": "asked for by hand",
        "locked": "another compaction of this conversation was running",
        "ended": "the conversation had ended",
        "undone": "it was undone",
    },
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
    """The one word the pages use for a stored ``value`` of ``kind`` (trigger, status, …).

    A code the vocabulary does not know reads as words (underscores become spaces), so no
    raw ``snake_case`` reaches a person.
    """
    if value is None or value == "":
        return "—"
    known = VOCABULARY.get(kind, {}).get(str(value))
    if known is not None:
        return known
    return str(value).replace("_", " ") if kind == "reason" else str(value)


def number(value: Any, *, missing: str = "not reported") -> str:
    """A count for people: thousands separators (``125,824``), ``missing`` for None/blank."""
    if value is None or value == "":
        return missing
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}"
    try:
        return f"{int(str(value)):,}"
    except ValueError:
        return str(value)


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
            if warning.get("code") == "threshold_at_window" and _default_threshold_lowered(report):
                continue
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
    # The tail as it was sent: hermes's passes (pressure demotion, lean-tail stubs) may have
    # slimmed it well below the input's tail, and the engine judges that one.
    tail = tokens.get("tail_slimmed", tokens.get("tail"))
    if _number(tail) and _number(threshold) and tail > threshold:
        add(
            "tail_over_threshold",
            f"The tail kept verbatim is {tail:,} tokens, over the {threshold:,}-token threshold.",
        )
    if report.get("fallbacks") and report.get("summarizer") == "deterministic":
        add("summarizer_fallback", "The model summarizers failed; the deterministic one wrote it.")
    return list(found.values())


def _default_threshold_lowered(report: Mapping[str, Any]) -> bool:
    """True when the engine lowered a threshold nobody set: the percentage and the floor are
    the engine's defaults and the threshold it used is below the window. The engine notes
    this as ``threshold_at_window`` ("the configured threshold … was lowered"), which is not
    so for a default chat on a small window, and nothing is wrong: the threshold works."""
    config = report.get("config") or {}
    threshold = (report.get("tokens") or {}).get("threshold")
    window = config.get("context_length")
    if not (_number(threshold) and _number(window)) or threshold >= window:
        return False
    return all(
        config.get(name, default) == default for name, default in _THRESHOLD_DEFAULTS.items()
    )


_THRESHOLD_DEFAULTS = {
    name: CompactionConfig.__dataclass_fields__[name].default
    for name in ("threshold_percent", "min_threshold_tokens")
}


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
