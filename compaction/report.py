"""The compaction report: everything the inspector shows, JSON-serializable."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction.actions import SlimAction

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
        inflight_replay: hermes: the unfinished newest request restated after the summary
            (``{"source_index", "mode", "index"}``, see ``compaction.replay``), else None.
        ledger: hermes: the fact ledger appended to the summary (``Ledger.to_dict()``: the
            facts written, by kind, and how many of each kind were left to ``recall``).
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
    inflight_replay: Mapping[str, Any] | None = None
    ledger: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-serializable data (lists and dicts)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self) -> str:
        """``json.dumps(self.to_dict())``."""
        return json.dumps(self.to_dict(), ensure_ascii=False)


def _plain(value: Any) -> Any:
    if type(value) is SlimAction:
        return value.as_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    ticks = "`" * (longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def _count(value: Any) -> str:
    """A count with thousands separators (``125,824``); "not reported" for None."""
    if value is None:
        return "not reported"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def report_to_markdown(
    report: Mapping[str, Any], words: Mapping[str, Mapping[str, str]] | None = None
) -> str:
    """Render a report dict (``CompactionReport.to_dict()``) as Markdown.

    Words match the web pages (the engine's ``forced`` trigger reads "manual"); ``words``
    (the web's vocabulary, kind -> value -> words) adds to and overrides the built-in ones,
    so the export says what the pages say. Every text that comes from the conversation
    (fold lines, tool call ids, models, messages, the summary) goes in a code span sized to
    its own backticks or in a fenced block, so it cannot break the page or add headings.
    """
    r = report
    tokens = r.get("tokens") or {}
    counts = r.get("counts") or {}
    builtin: dict[str, dict[str, str]] = {
        "trigger": {
            "auto": "automatic",
            "forced": "manual",
            "manual": "manual",
            "what_if": "what-if",
        },
        "summarizer": {
            "aux": "auxiliary model",
            "main": "main model",
            "deterministic": "deterministic (no model)",
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
    }

    vocabulary = {kind: {**builtin.get(kind, {}), **extra} for kind, extra in (words or {}).items()}
    vocabulary = {**builtin, **vocabulary}

    def word(kind: str, value: Any) -> str:
        return vocabulary.get(kind, {}).get(str(value), str(value)) if value is not None else "—"

    lines = [
        "# Compaction report",
        "",
        f"- **Status:** {word('status', r.get('status'))}"
        + (f" ({word('reason', r['reason'])})" if r.get("reason") else ""),
        f"- **Date:** {r.get('now')}",
        f"- **Trigger:** {word('trigger', r.get('trigger', 'auto'))}",
        f"- **Profile:** {r.get('profile') or 'classic'}",
    ]
    if r.get("focus"):
        lines.append(f"- **Focus:** {_escape_md(str(r['focus']))}")
    lines += [
        f"- **Messages:** {_count(counts.get('messages_before'))} → "
        f"{_count(counts.get('messages_after'))}",
        f"- **Tokens:** {_count(tokens.get('before'))} → {_count(tokens.get('after'))} "
        f"(saved {_count(tokens.get('saved'))}, ratio {tokens.get('ratio')})",
        f"- **Threshold:** {_count(tokens.get('threshold'))}; provider prompt tokens: "
        f"{_count(tokens.get('provider_prompt_tokens'))}",
        f"- **Summarizer:** {word('summarizer', r.get('summarizer'))}"
        + (f" ({_code(r['summarizer_model'])})" if r.get("summarizer_model") else ""),
        f"- **Previous summary carried forward:** {'yes' if r.get('previous_summary_used') else 'no'}",
    ]
    if r.get("redactions") is not None:
        lines.append(f"- **Secrets redacted:** {r['redactions']}")
    if r.get("tokens_estimated"):
        lines.append(
            "- **Estimated token figures:** " + ", ".join(_code(n) for n in r["tokens_estimated"])
        )
    if r.get("warnings"):
        lines += ["", "## Warnings", ""]
        lines += [
            f"- {_code(w.get('code', ''))}: {_escape_md(str(w.get('message', '')))}"
            for w in r["warnings"]
        ]
    lines += [
        "",
        "## Boundaries",
        "",
        "| part | range | tokens |",
        "|---|---|---|",
    ]
    for part in ("head", "middle", "tail"):
        span = (r.get("boundaries") or {}).get(part)
        lines.append(f"| {part} | {span} | {_count(tokens.get(part))} |")
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
            lines.append(
                f"| {word('slim', kind)} | {_count(t['count'])} | {_count(t['chars_before'])} "
                f"| {_count(t['chars_after'])} |"
            )
        written = [a for a in r.get("slimming") or [] if a.get("line") or a.get("fold_line")]
        if written:
            lines += ["", "Lines written in place of the originals:", ""]
            lines += [
                f"- message {a['index']} ({word('slim', a.get('kind'))}, "
                f"{a.get('region') or 'middle'}): "
                f"{_code(a.get('line') or a.get('fold_line'))}"
                for a in written[:200]
            ]
            if len(written) > 200:
                lines.append(f"- … {len(written) - 200} more")
    if r.get("fallbacks"):
        lines += ["", "## Summarizer fallbacks", ""]
        lines += [
            f"- {f['stage']} {_code(f['model'])}: {f['kind']} ({f['status_code']}) "
            f"{_escape_md(str(f['message']))}"
            for f in r["fallbacks"]
        ]
    if r.get("sanitization"):
        lines += ["", "## Sanitization", ""]
        lines += [
            f"- {s['kind']} {_code(s['tool_call_id'])} at {s['index']}" for s in r["sanitization"]
        ]
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


def _code(text: Any) -> str:
    """An inline code span that holds any text: fenced by one more backtick than it contains."""
    text = " ".join(str(text).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _escape_md(text: str) -> str:
    """Plain text on one line with Markdown's inline markup characters escaped."""
    return re.sub(r"([\\`*_\[\]<>|#])", r"\\\1", " ".join(text.splitlines()))
