"""The compaction report: everything the inspector shows, JSON-serializable."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CompactionReport", "report_to_markdown"]


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What happened in one ``compact()`` call.

    Attributes:
        status: ``"compacted"``, ``"skipped"`` or ``"aborted"``.
        reason: why it was skipped or aborted (None when compacted).
        config: the config used, as a dict.
        focus: the focus topic.
        now: the date used for temporal anchoring (ISO).
        trigger: ``"forced"`` or ``"auto"`` (from ``force``).
        counts: ``{"messages_before", "messages_after"}``.
        boundaries: ``{"head", "middle", "tail"}`` half-open ranges into the input list.
        alignment: cut moves as ``{"kind", "from", "to"}``.
        message_tokens: tokens per input message.
        tokens: ``{"before", "after", "head", "middle", "tail", "summary", "saved", "ratio",
            "threshold", "provider_prompt_tokens"}``.
        slimming: fold/truncate/image actions (``SlimAction`` dicts).
        slimming_totals: per kind ``{"count", "chars_before", "chars_after"}``.
        summarizer_input: the serialized slimmed middle as given to the summarizer.
        summarizer_prompt: the full prompt when an LLM was called, else None.
        summary: the summary message content (prefix, body, end marker).
        summary_body: the body only.
        summary_role: role of the message holding the summary.
        summary_index: its index in the output list.
        summarizer: ``"aux"``, ``"main"``, ``"deterministic"`` or None.
        summarizer_model: the model that wrote the summary.
        fallbacks: failed summarizer stages (stage, model, kind, status_code, message).
        previous_summary_used: whether an earlier summary was carried forward.
        sanitization: tool-pair repairs (kind, tool_call_id, index).
        output_message_tokens: tokens per output message.
        timings_ms: per phase and total.
        profile: the config's profile (``"classic"`` or ``"hermes"``).
        warnings: ``{"code", "message"}`` for each way the result misses its budgets
            (``over_threshold``, ``over_window``, ``tail_over_threshold``,
            ``cannot_make_room``, ``summarizer_fallback``, ``threshold_at_window``).
        redactions: secrets redacted from the summarizer input and deterministic summary.
        tokens_estimated: names of ``tokens`` figures that are estimates, not exact counts.
    """

    status: str
    reason: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    focus: str | None = None
    now: str = ""
    trigger: str = "auto"
    counts: Mapping[str, int] = field(default_factory=dict)
    boundaries: Mapping[str, list[int]] = field(default_factory=dict)
    alignment: tuple[Mapping[str, Any], ...] = ()
    message_tokens: tuple[int, ...] = ()
    tokens: Mapping[str, Any] = field(default_factory=dict)
    slimming: tuple[Mapping[str, Any], ...] = ()
    slimming_totals: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    summarizer_input: str | None = None
    summarizer_prompt: str | None = None
    summary: str | None = None
    summary_body: str | None = None
    summary_role: str | None = None
    summary_index: int | None = None
    summarizer: str | None = None
    summarizer_model: str | None = None
    fallbacks: tuple[Mapping[str, Any], ...] = ()
    previous_summary_used: bool = False
    sanitization: tuple[Mapping[str, Any], ...] = ()
    output_message_tokens: tuple[int, ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    profile: str = "classic"
    warnings: tuple[Mapping[str, str], ...] = ()
    redactions: int = 0
    tokens_estimated: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-serializable data (lists and dicts)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self) -> str:
        """``json.dumps(self.to_dict())``."""
        return json.dumps(self.to_dict(), ensure_ascii=False)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _fence(text: str) -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}\n{text}\n{ticks}"


def report_to_markdown(report: Mapping[str, Any]) -> str:
    """Render a report dict (``CompactionReport.to_dict()``) as Markdown."""
    r = report
    tokens = r.get("tokens") or {}
    counts = r.get("counts") or {}
    lines = [
        "# Compaction report",
        "",
        f"- **Status:** {r.get('status')}" + (f" ({r['reason']})" if r.get("reason") else ""),
        f"- **Date:** {r.get('now')}",
        f"- **Trigger:** {r.get('trigger', 'auto')}",
        f"- **Profile:** {r.get('profile') or 'classic'}",
    ]
    if r.get("focus"):
        lines.append(f"- **Focus:** {r['focus']}")
    lines += [
        f"- **Messages:** {counts.get('messages_before')} → {counts.get('messages_after')}",
        f"- **Tokens:** {tokens.get('before')} → {tokens.get('after')} "
        f"(saved {tokens.get('saved')}, ratio {tokens.get('ratio')})",
        f"- **Threshold:** {tokens.get('threshold')}; provider prompt tokens: "
        f"{tokens.get('provider_prompt_tokens')}",
        f"- **Summarizer:** {r.get('summarizer')}"
        + (f" ({r['summarizer_model']})" if r.get("summarizer_model") else ""),
        f"- **Previous summary carried forward:** {'yes' if r.get('previous_summary_used') else 'no'}",
        "",
        "## Boundaries",
        "",
        "| part | range | tokens |",
        "|---|---|---|",
    ]
    for part in ("head", "middle", "tail"):
        span = (r.get("boundaries") or {}).get(part)
        lines.append(f"| {part} | {span} | {tokens.get(part)} |")
    if r.get("warnings"):
        lines += ["", "## Warnings", ""]
        lines += [f"- `{w.get('code')}`: {w.get('message')}" for w in r["warnings"]]
    if r.get("redactions"):
        lines += ["", f"Secrets redacted from the summarizer input and summary: {r['redactions']}"]
    if r.get("alignment"):
        lines += ["", "## Alignment", ""]
        lines += [f"- {e['kind']}: {e['from']} → {e['to']}" for e in r["alignment"]]
    totals = r.get("slimming_totals") or {}
    if totals:
        lines += [
            "",
            "## Slimming",
            "",
            "| kind | count | chars before | chars after |",
            "|---|---|---|---|",
        ]
        for kind, t in totals.items():
            lines.append(f"| {kind} | {t['count']} | {t['chars_before']} | {t['chars_after']} |")
        folds = [a for a in r.get("slimming") or [] if a.get("kind") == "fold"]
        if folds:
            lines += ["", "Folds:", ""]
            lines += [f"- #{a['index']}: `{a['fold_line']}`" for a in folds[:200]]
            if len(folds) > 200:
                lines.append(f"- … {len(folds) - 200} more")
    if r.get("fallbacks"):
        lines += ["", "## Summarizer fallbacks", ""]
        lines += [
            f"- {f['stage']} `{f['model']}`: {f['kind']} ({f['status_code']}) {f['message']}"
            for f in r["fallbacks"]
        ]
    if r.get("sanitization"):
        lines += ["", "## Sanitization", ""]
        lines += [f"- {s['kind']} `{s['tool_call_id']}` at {s['index']}" for s in r["sanitization"]]
    if r.get("summary"):
        lines += [
            "",
            f"## Summary ({r.get('summary_role')} message #{r.get('summary_index')})",
            "",
            _fence(str(r["summary"])),
        ]
    if r.get("summarizer_prompt"):
        lines += ["", "## Summarizer prompt", "", _fence(str(r["summarizer_prompt"]))]
    elif r.get("summarizer_input"):
        lines += ["", "## Summarizer input", "", _fence(str(r["summarizer_input"]))]
    timings = r.get("timings_ms") or {}
    if timings:
        lines += ["", "## Timings (ms)", ""]
        lines.append(", ".join(f"{k} {v}" for k, v in timings.items()))
    return "\n".join(lines) + "\n"
