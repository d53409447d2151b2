"""The inspector's panels from a stored compaction report: the head/middle/tail split, the
token strip, the slimming page (before/after per message), the summary with its ``[ref:N]``
links, and the whole page's values (``inspector_context``) and the what-if/Compare cards
(``card_context``, cached for finished runs) built from them."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.cache import cache

from compaction import END_MARKER, PREFIX_OPENING, SUMMARY_PREFIX
from hermes_web.caching import PANEL_SECONDS, card_key
from hermes_web.models import Compaction
from hermes_web.presenters.compare import message_fates
from hermes_web.presenters.messages import percent_of, word_diff
from hermes_web.presenters.refs import RefResolver
from hermes_web.presenters.vocabulary import (
    ALIGNMENT_LABELS,
    REGIONS,
    SANITIZATION_LABELS,
    SLIM_KINDS,
    TRUNCATION_MARKER,
    report_profile,
    report_warnings,
    term,
)

# ---------------------------------------------------------------- split


def split_view(report: Mapping[str, Any]) -> dict[str, Any]:
    """The head | middle | tail bar: per part its range, message count, tokens and width.

    Widths are percentages of the tokens before compaction; the threshold marker sits at
    the threshold's share of that total (capped at 100, with ``threshold_beyond`` set).
    """
    tokens = report.get("tokens") or {}
    bounds = report.get("boundaries") or {}
    per_message = list(report.get("message_tokens") or [])
    before = tokens.get("before") or sum(per_message) or 0
    parts = []
    for name in ("head", "middle", "tail"):
        start, end = (list(bounds.get(name) or [0, 0]) + [0, 0])[:2]
        part_tokens = tokens.get(name)
        if part_tokens is None:
            part_tokens = sum(per_message[start:end])
        parts.append(
            {
                "name": name,
                "start": start,
                "end": end,
                "count": max(0, end - start),
                "tokens": part_tokens,
                "percent": percent_of(part_tokens, before),
            }
        )
    threshold = tokens.get("threshold")
    marker = percent_of(threshold, before) if threshold and before else None
    alignment = [
        {
            "kind": event.get("kind", ""),
            "label": ALIGNMENT_LABELS.get(event.get("kind", ""), event.get("kind", "")),
            "from": event.get("from"),
            "to": event.get("to"),
        }
        for event in report.get("alignment") or []
    ]
    return {
        "parts": parts,
        "before": before,
        "threshold": threshold,
        "threshold_percent": min(marker, 100.0) if marker is not None else None,
        "threshold_beyond": marker is not None and marker > 100,
        "alignment": alignment,
    }


def _position(positions: Sequence[int] | None, index: Any) -> int | None:
    if positions is None or not isinstance(index, int) or not 0 <= index < len(positions):
        return None
    return positions[index]


def token_strip(
    report: Mapping[str, Any], positions: Sequence[int] | None = None, *, cells: int = 240
) -> list[dict[str, Any]]:
    """Per-message tokens as at most ``cells`` cells (consecutive messages share a cell).

    Each cell: ``{"start", "end", "tokens", "region", "level" (1–5), "position"}``, where
    ``position`` is the stored row of the cell's first message when ``positions`` (the input
    rows' positions, in order) is given, for a link to it.
    """
    per_message = list(report.get("message_tokens") or ())
    if not per_message:
        return []
    bounds = report.get("boundaries") or {}
    head_end = (list(bounds.get("head") or [0, 0]) + [0, 0])[1]
    tail_start = (list(bounds.get("tail") or [len(per_message)] * 2) + [0, 0])[0]
    size = max(1, -(-len(per_message) // cells))
    strip = []
    for start in range(0, len(per_message), size):
        end = min(start + size, len(per_message))
        region = "head" if start < head_end else "tail" if start >= tail_start else "middle"
        strip.append(
            {"start": start, "end": end, "tokens": sum(per_message[start:end]), "region": region}
        )
    top = max(cell["tokens"] for cell in strip) or 1
    for cell in strip:
        cell["level"] = 1 + min(4, int(5 * cell["tokens"] / top - 1e-9)) if cell["tokens"] else 0
        cell["position"] = _position(positions, cell["start"])
    return strip


# ---------------------------------------------------------------- slimming


# Kinds whose "after" keeps most of the original text, so a word diff shows what changed.
WORD_DIFF_KINDS = frozenset({"truncate", "args_shrink", "image", "image_retire"})


def slimming_page(
    report: Mapping[str, Any],
    *,
    kind: str = "",
    region: str = "",
    page: int = 1,
    per_page: int = 50,
    positions: Sequence[int] | None = None,
) -> dict[str, Any]:
    """One page of slimming actions, optionally of one kind and one region, plus totals.

    With ``positions`` (the stored positions of the compaction's input rows, in order), each
    row gets ``position``: where the original message is stored, for a link to it. The
    ``[ref:N]`` references the engine writes into its lines use the same input index N.

    Actions stored before regions existed were all in the middle, so a missing ``region``
    reads ``"middle"``. ``kinds`` and ``regions`` count every action (not just the filtered
    ones) so the filter links can show their counts.
    """
    kind = kind if kind in SLIM_KINDS else ""
    region = region if region in REGIONS else ""
    all_actions = report.get("slimming") or []
    kind_counts = dict.fromkeys(SLIM_KINDS, 0)
    region_counts = dict.fromkeys(REGIONS, 0)
    actions = []
    for action in all_actions:
        action_kind = action.get("kind") or ""
        action_region = action.get("region") or "middle"
        if action_kind in kind_counts:
            kind_counts[action_kind] += 1
        if action_region in region_counts:
            region_counts[action_region] += 1
        if (not kind or action_kind == kind) and (not region or action_region == region):
            actions.append(action)
    pages = max(1, -(-len(actions) // per_page))
    page = min(max(1, page), pages)
    rows = []
    for action in actions[(page - 1) * per_page : page * per_page]:
        after = str(action.get("after") or "")
        cut = None
        if action.get("kind") == "truncate" and TRUNCATION_MARKER in after:
            kept_head, _, kept_tail = after.partition(TRUNCATION_MARKER)
            cut = {"head": kept_head, "marker": TRUNCATION_MARKER.strip(), "tail": kept_tail}
        diff = None
        if action.get("kind") in WORD_DIFF_KINDS and action.get("before_excerpt") and after:
            # The excerpt is only the start of the original: compare it with the same length.
            excerpt = str(action["before_excerpt"])
            diff = word_diff(excerpt, after[: len(excerpt) + 200])
        rows.append(
            {
                **action,
                "position": _position(positions, action.get("index")),
                "diff": diff,
                "region": action.get("region") or "middle",
                "label": term("slim", action.get("kind")),
                # The text written in place of the original: one field name for every kind.
                "line": action.get("line") or action.get("fold_line") or "",
                "line_segments": ref_segments(
                    action.get("line") or action.get("fold_line") or "", positions
                ),
                "cut": cut,
                "saved": (action.get("chars_before") or 0) - (action.get("chars_after") or 0),
            }
        )
    totals = [
        {"kind": name, "label": term("slim", name), **values}
        for name, values in (report.get("slimming_totals") or {}).items()
        if isinstance(values, Mapping)
    ]
    return {
        "rows": rows,
        "totals": totals,
        "kind": kind,
        "region": region,
        "kinds": [
            {"kind": k, "label": term("slim", k), "count": n}
            for k, n in kind_counts.items()
            if n or k in ("fold", "truncate", "image")
        ],
        "regions": [{"region": r, "count": n} for r, n in region_counts.items()],
        "total": len(all_actions),
        "page": page,
        "pages": pages,
        "count": len(actions),
        "has_next": page < pages,
        "has_previous": page > 1,
    }


# ---------------------------------------------------------------- summary


REF_RE = re.compile(r"\[ref:(\d+)\]")


def ref_segments(text: str, positions: Sequence[int] | None) -> list[dict[str, Any]]:
    """Text split around the engine's ``[ref:N]`` recall references.

    Each segment is ``{"text"}``, or ``{"text", "ref", "position"}`` for a reference whose
    input index N maps to a stored row (``position`` None when it does not), so the template
    can link the reference to the whole original message.
    """
    segments: list[dict[str, Any]] = []
    last = 0
    for match in REF_RE.finditer(text or ""):
        if match.start() > last:
            segments.append({"text": text[last : match.start()]})
        index = int(match.group(1))
        segments.append(
            {"text": match.group(0), "ref": index, "position": _position(positions, index)}
        )
        last = match.end()
    if last < len(text or ""):
        segments.append({"text": text[last:]})
    return segments


# Headings summaries are written with: Markdown ("## Files"), numbered ("1. Primary Request
# and Intent:"), a bare label line ("Analysis:") or a bold line ("**Errors**").
HEADING_RE = re.compile(
    r"^\s{0,3}(?:#{1,4}\s+(?P<md>.+?)\s*#*|(?P<num>\d{1,2}\.\s+[^\n]{1,80}?):"
    r"|(?P<label>[A-Z][\w /&()'-]{1,60}):|\*\*(?P<bold>[^*\n]{1,80})\*\*:?)\s*$"
)
MARKDOWN_HEADING_RE = re.compile(r"^\s{0,3}(#{1,4})\s+\S")
FENCE_RE = re.compile(r"^\s{0,3}(```|~~~)")


def heading_sections(text: str) -> dict[str, Any]:
    """A summary (ours or an agent's) split at its headings: ``{"preamble", "sections":
    [{"heading", "body"}]}``. The one parser of every page's section count. Headings are
    Markdown lines of the summary's top level, numbered or bold lines; a bare label line ("Analysis:", as Claude Code writes)
    is one only in a summary without Markdown headings (in ours, a "Steps:" line quoted in
    the Active Task is text). Lines inside a fenced code block are never headings."""
    lines = (text or "").splitlines()
    levels = [len(m.group(1)) for line in lines if (m := MARKDOWN_HEADING_RE.match(line))]
    top = min(levels, default=0)  # "### Files" under "## Fact Ledger" is part of its body
    preamble: list[str] = []
    sections: list[dict[str, str]] = []
    fenced = False
    for line in lines:
        if FENCE_RE.match(line):
            fenced = not fenced
        match = None if fenced else HEADING_RE.match(line)
        level = len(m.group(1)) if (m := MARKDOWN_HEADING_RE.match(line)) else 0
        if match and (level == top if level else not (top and match.group("label"))):
            heading = next(v for v in match.groupdict().values() if v)
            sections.append({"heading": heading.strip(), "body": ""})
        elif sections:
            sections[-1]["body"] += line + "\n"
        else:
            preamble.append(line)
    for section in sections:
        section["body"] = section["body"].strip("\n")
    return {"preamble": "\n".join(preamble).strip(), "sections": sections}


def summary_sections(summary: str | None) -> dict[str, Any]:
    """Split a summary message into its prefix, its sections (``heading_sections``) and end marker."""
    text = summary or ""
    prefix = ""
    if text.startswith(SUMMARY_PREFIX):
        prefix, text = SUMMARY_PREFIX, text[len(SUMMARY_PREFIX) :]
    elif text.startswith(PREFIX_OPENING):
        # A prefix worded differently (older engine, imported session): up to "Summary:".
        head, sep, rest = text.partition("Summary:")
        if sep:
            prefix, text = head + sep, rest
    end_marker = ""
    if END_MARKER in text:
        text, _, _after = text.partition(END_MARKER)
        end_marker = END_MARKER
    split = heading_sections(text.strip("\n"))
    return {
        "prefix": prefix.strip(),
        "preamble": split["preamble"],
        "sections": split["sections"],
        "end_marker": end_marker,
    }


def summary_diff(a: str | None, b: str | None) -> list[dict[str, str]]:
    """A line diff of two summaries as rows ``{"op": " "|"-"|"+", "text"}`` (escaped by the template)."""
    rows = []
    for line in difflib.ndiff((a or "").splitlines(), (b or "").splitlines()):
        op, text = line[:1], line[2:]
        if op == "?":
            continue  # ndiff's intraline hints; the row pair already shows the change
        rows.append({"op": op, "text": text})
    return rows


# ---------------------------------------------------------------- page and cards


def output_token_rows(report: dict) -> list[dict]:
    """The final list's per-message tokens, the summary's marked."""
    return [
        {"index": i, "tokens": t, "summary": i == report.get("summary_index")}
        for i, t in enumerate(report.get("output_message_tokens") or [])
    ]


def one_scale(report: dict) -> dict:
    """``report`` with its before/after pair on one scale. An agent's compaction records
    the agent's own counts (its tokenizer, its system prompt and tools, or nothing at all);
    the pair, the split bar and the saving are then our tiktoken count of the stored rows
    before and after, and the agent's figures move to ``recorded_before`` and
    ``recorded_after`` (None: not recorded), shown beside ours and never mixed in a ratio.
    A report of our engine is returned as it is."""
    native = report.get("native")
    tokens = report.get("tokens") or {}
    if not isinstance(native, Mapping) or "counted_before" not in tokens:
        return report
    before, after = tokens.get("counted_before") or 0, tokens.get("counted_after") or 0
    return {
        **report,
        "tokens": {
            **tokens,
            "before": before,
            "after": after,
            "saved": before - after,
            "ratio": round(after / before, 4) if before else None,
            "recorded_before": native.get("tokens_before_recorded"),
            "recorded_after": native.get("tokens_after_recorded"),
        },
    }


def inspector_context(
    compaction: Compaction,
    *,
    slim_kind: str = "",
    slim_region: str = "",
    slim_page: int = 1,
    positions: list[int] | None = None,
    refs: RefResolver | None = None,
) -> dict:
    """Everything the inspector panels print for one run (pure reads of its report; with
    ``refs``, the summary's references are resolved to the rows their lines describe)."""
    report = one_scale(compaction.report or {})
    tokens = report.get("tokens") or {}
    summary = summary_sections(report.get("summary"))
    for section in summary["sections"]:
        section["segments"] = refs.segments(section["body"]) if refs else []
    output_tokens = report.get("output_message_tokens") or []
    return {
        "c": compaction,
        "report": report,
        "tokens": tokens,
        "split": split_view(report) if report.get("boundaries") else None,
        "slim": slimming_page(
            report, kind=slim_kind, region=slim_region, page=slim_page, positions=positions
        ),
        "profile": report_profile(report),
        "warnings": report_warnings(report),
        "redactions": report.get("redactions"),
        "estimated": set(report.get("tokens_estimated") or ()),
        "summary": summary,
        "sanitization": [
            {**s, "label": SANITIZATION_LABELS.get(s.get("kind"), s.get("kind"))}
            for s in report.get("sanitization") or []
        ],
        "output_tokens": output_token_rows(report),
        "output_total": sum(output_tokens),
        "timings": list((report.get("timings_ms") or {}).items()),
        "saved_percent": round(100 * (1 - tokens["after"] / tokens["before"]), 1)
        if tokens.get("before") and tokens.get("after") is not None
        else None,
        # The summary's row also holds a kept message when the roles had to alternate: the
        # summary's own share of "Summary tokens".
        "summary_alone": tokens["summary"] - tokens["summary_merged"]
        if tokens.get("summary_merged") and tokens.get("summary") is not None
        else None,
        "config_rows": sorted((report.get("config") or compaction.config or {}).items()),
    }


# What a side-by-side card and Compare read from the report (small, unlike the slimming list).
CARD_REPORT_KEYS = ("status", "reason", "summarizer", "summarizer_model", "counts", "summary")


def card_context(compaction: Compaction) -> dict:
    """``inspector_context`` cut to what the what-if and Compare cards show, plus each input
    message's fate; cached for finished runs, so those pages do not decode the whole report
    (megabytes at 10k messages) on every view. ``compaction`` may have ``report`` deferred.
    """
    key = card_key(compaction)
    if compaction.is_finished:
        data = cache.get(key)
        if data is not None:
            return {**data, "c": compaction}
    if "report" in compaction.get_deferred_fields():
        compaction.refresh_from_db(fields=["report"])
    ctx = inspector_context(compaction)
    report = ctx["report"]
    data = {
        **{k: ctx[k] for k in ("tokens", "split", "summary", "profile", "warnings")},
        "saved_percent": ctx["saved_percent"],
        "slim": {"total": ctx["slim"]["total"], "kinds": ctx["slim"]["kinds"]},
        "report": {k: report.get(k) for k in CARD_REPORT_KEYS},
        "structure": structure_of(report, compaction.mode),
        "fates": message_fates(report),
        "aim": replay_aim(compaction, ctx["tokens"].get("after")),
    }
    if compaction.is_finished:
        cache.set(key, data, PANEL_SECONDS)
    return {**data, "c": compaction}


# A replay within this share of the agent's budget weighs the same size (the aim).
AIM_TOLERANCE = 0.05


def replay_aim(compaction: Compaction, after: int | None) -> dict | None:
    """For a replay aimed at the agent's retained budget: that budget (our count), what the
    replay kept, and whether it came within ``AIM_TOLERANCE``; a budget out of reach says
    which way (over: the smallest context our engine keeps of these rows, its prefix and
    the last turn, is larger; under: whole rows and every fact fit in less). None otherwise."""
    if not compaction.replay_of_id or (compaction.config or {}).get("protect_first_n") != 0:
        return None
    from hermes_web.services.native import agent_budget  # services import presenters' peers

    native = Compaction.objects.only("report").filter(pk=compaction.replay_of_id).first()
    budget = agent_budget(native) if native else None
    if not budget or after is None:
        return {"budget": budget, "after": after, "off": None, "within": False}
    off = (after - budget) / budget
    return {
        "budget": budget,
        "after": after,
        "off": round(100 * off, 1),
        "within": abs(off) <= AIM_TOLERANCE,
    }


def structure_of(report: dict, mode: str) -> dict:
    """What a commit would do to the session, in message counts (for Compare).

    The counts come from each message's fate (``message_fates``), so "kept verbatim",
    "kept, slimmed" and "summarized" are the same numbers as Compare's fate table.
    """
    counts = report.get("counts") or {}
    fates = message_fates(report)
    return {
        "before": counts.get("messages_before"),
        "after": counts.get("messages_after"),
        "kept_verbatim": fates.count("kept"),
        "slimmed": fates.count("slimmed"),
        "summarized": fates.count("summarized"),
        "rotation": mode == Compaction.Mode.ROTATION,
    }
