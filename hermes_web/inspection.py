"""Pure helpers that turn a stored compaction report and messages into what the pages show.

Nothing here touches the database or renders HTML: inputs are report dicts (as stored in
``Compaction.report``) and OpenAI-format message dicts; outputs are plain dicts and lists
that the templates print (always escaped). Keeping them pure makes them unit-testable and
keeps the views thin.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from compaction import END_MARKER, PREFIX_OPENING, SUMMARY_PREFIX
from compaction.messages import content_text, parse_arguments

__all__ = [
    "ALIGNMENT_LABELS",
    "REGIONS",
    "SLIM_KINDS",
    "VOCABULARY",
    "anchor_for",
    "extract_facts",
    "json_fields",
    "fact_survival_audit",
    "fate_diff",
    "fates_diff",
    "message_fates",
    "message_view",
    "ref_segments",
    "report_profile",
    "report_warnings",
    "saved_chart",
    "slimming_page",
    "split_view",
    "summary_diff",
    "summary_sections",
    "tally_compactions",
    "term",
    "timeline_chart",
    "token_strip",
    "word_diff",
]

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

# ---------------------------------------------------------------- vocabulary

# One word per stored value, used by every page, the Markdown export and the API docs.
# The engine says "forced" where the web layer stores "manual": both read "manual".
VOCABULARY: dict[str, dict[str, str]] = {
    "trigger": {"auto": "automatic", "manual": "manual", "forced": "manual", "what_if": "what-if"},
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
    },
    "profile": {"classic": "classic", "hermes": "hermes"},
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


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


SAFE_IMAGE_RE = re.compile(r"^data:image/(png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+/=\s]+$")
PREVIEW_CHARS = 3_000


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
                "percent": _percent(part_tokens, before),
            }
        )
    threshold = tokens.get("threshold")
    marker = _percent(threshold, before) if threshold and before else None
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


def _percent(part: Any, whole: Any) -> float:
    try:
        return round(100.0 * float(part) / float(whole), 2) if whole else 0.0
    except (TypeError, ValueError):
        return 0.0


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


def summary_sections(summary: str | None) -> dict[str, Any]:
    """Split a summary message into its prefix, ``## `` sections and end marker."""
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
    preamble_lines: list[str] = []
    sections: list[dict[str, str]] = []
    for line in text.strip("\n").splitlines():
        if line.startswith("## "):
            sections.append({"heading": line[3:].strip(), "body": ""})
        elif sections:
            sections[-1]["body"] += line + "\n"
        else:
            preamble_lines.append(line)
    for section in sections:
        section["body"] = section["body"].strip("\n")
    return {
        "prefix": prefix.strip(),
        "preamble": "\n".join(preamble_lines).strip(),
        "sections": sections,
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


# ---------------------------------------------------------------- fact-survival audit

URL_RE = re.compile(r"https?://[^\s\"'<>`)\]}]+")
PATH_RE = re.compile(
    r"(?<![\w/.:-])(?:~?/)?(?:[\w.-]+/)+[\w.-]*\.[A-Za-z0-9]{1,8}\b|(?<![\w/.:-])/(?:[\w.-]+/)+[\w.-]+"
)
ERROR_RE = re.compile(
    r"^[ \t>E]*([A-Z]\w*(?:Error|Exception|Failure|Exit)|FAILED|fatal|error|ERROR)\b:?[ \t]*([^\n]{0,120})$",
    re.MULTILINE,
)
NUMBER_UNIT_RE = re.compile(
    r"\b\d+(?:[.,]\d+)?\s?(?:ms|s|sec|seconds?|minutes?|min|hours?|h|days?|KB|MB|GB|TB|KiB|MiB|GiB|kB|bytes?|"
    r"tokens?|px|%|chars?|characters|lines?|files?|tests?|rows?|requests?|connections?|workers?)(?![\w])"
)
CONSTRAINT_RE = re.compile(
    r"\b(never|always|don't|do not|must|mustn't|only|without asking|make sure|avoid|prefer|keep it|"
    r"should not|shouldn't|no more than|at most|at least)\b",
    re.IGNORECASE,
)
COMMAND_ARGS = ("command", "cmd", "script")
PER_KIND_LIMIT = 200
AUDIT_TOOL_CHARS = 8_000
FACT_KINDS = ("constraint", "command", "path", "url", "error", "number")
FACT_KIND_LABELS = {
    "constraint": "user constraints",
    "command": "commands",
    "path": "file paths",
    "url": "URLs",
    "error": "error strings",
    "number": "numbers with units",
}


def extract_facts(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Identifiers worth keeping, taken from messages (normally the compacted middle).

    - constraints: sentences of user messages with never/always/must/only/don't/…;
    - commands: the ``command`` argument of tool calls;
    - paths and URLs: from every message and tool-call argument;
    - errors: ``SomethingError: text`` lines from any message (mostly tool output);
    - numbers with units: from user and assistant text only (tool output is too noisy).

    Each fact is ``{"kind", "value", "index"}``; duplicates are dropped and each kind is
    capped at ``PER_KIND_LIMIT`` so a huge middle stays quick to audit.
    """
    facts: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in FACT_KINDS}

    def add(kind: str, value: str, index: int) -> None:
        value = value.strip().rstrip(".,;:")
        bucket = facts[kind]
        if len(value) < 3 or len(bucket) >= PER_KIND_LIMIT:
            return
        # "(turn 3) Never …" and "(turn 9) Never …" are the same constraint.
        key = (kind, _normalize(re.sub(r"^\(.{0,20}?\)\s*", "", value)))
        if key not in bucket:
            bucket[key] = {"kind": kind, "value": value, "index": index}

    for index, message in enumerate(messages):
        role = message.get("role")
        text = content_text(message.get("content"), images=False)
        if role == "tool":
            text = _unwrap_json(text)
            if len(text) > AUDIT_TOOL_CHARS:
                # A 50 KB file read is mostly code; its errors and paths sit at the ends.
                half = AUDIT_TOOL_CHARS // 2
                text = text[:half] + "\n" + text[-half:]
        if role == "user":
            for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
                if CONSTRAINT_RE.search(sentence) and len(sentence) <= 300:
                    add("constraint", sentence, index)
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {} if isinstance(call, Mapping) else {}
            arguments = function.get("arguments") if isinstance(function, Mapping) else None
            parsed = parse_arguments(call)
            for name in COMMAND_ARGS:
                if isinstance(parsed.get(name), str):
                    add("command", parsed[name], index)
            args_text = arguments if isinstance(arguments, str) else json.dumps(parsed)
            _paths_and_urls(args_text, index, add)
        _paths_and_urls(text, index, add)
        for match in ERROR_RE.finditer(text):
            name, rest = match.group(1), match.group(2).strip()
            if name[0].isupper() or rest:
                add("error", f"{name}: {rest}".strip(" :") if rest else name, index)
        if role in ("user", "assistant"):
            for match in NUMBER_UNIT_RE.finditer(text):
                add("number", match.group(0), index)
    return [fact for kind in FACT_KINDS for fact in facts[kind].values()]


def _unwrap_json(text: str) -> str:
    """Tool results are often JSON (``{"output": "...", "exit_code": 1}``): audit the strings."""
    if not text.startswith("{"):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict):
        return text
    return "\n".join(str(v) for v in value.values() if isinstance(v, str | int | float))


def _paths_and_urls(text: str, index: int, add) -> None:
    urls = URL_RE.findall(text)
    for url in urls:
        add("url", url, index)
    without_urls = URL_RE.sub(" ", text)
    for match in PATH_RE.finditer(without_urls):
        add("path", match.group(0), index)


def _normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9_./-]{3,}", text.lower()))


def _survives(
    fact: Mapping[str, Any], summary: str, summary_norm: str, summary_words: set[str]
) -> bool:
    value = fact["value"]
    if value in summary or _normalize(value) in summary_norm:
        return True
    if fact["kind"] == "number":
        return _normalize(value).replace(" ", "") in summary_norm.replace(" ", "")
    if fact["kind"] in ("constraint", "error"):
        # Summaries paraphrase: count it kept when most of its distinctive words are there.
        words = _words(value)
        return bool(words) and len(words & summary_words) / len(words) >= 0.8
    return False


def fact_survival_audit(middle: Sequence[Mapping[str, Any]], summary: str | None) -> dict[str, Any]:
    """Which identifiers from the compacted middle survive in the summary.

    Returns ``{"facts": [..., "survived"], "total", "kept", "score" (0–100 or None),
    "lost": [...], "by_kind": [{"kind", "label", "total", "kept"}]}``.
    """
    summary = summary or ""
    summary_norm = _normalize(summary)
    summary_words = _words(summary)
    facts = []
    for fact in extract_facts(middle):
        facts.append({**fact, "survived": _survives(fact, summary, summary_norm, summary_words)})
    kept = sum(1 for f in facts if f["survived"])
    by_kind = []
    for kind in FACT_KINDS:
        of_kind = [f for f in facts if f["kind"] == kind]
        if of_kind:
            by_kind.append(
                {
                    "kind": kind,
                    "label": FACT_KIND_LABELS[kind],
                    "total": len(of_kind),
                    "kept": sum(1 for f in of_kind if f["survived"]),
                }
            )
    return {
        "facts": facts,
        "total": len(facts),
        "kept": kept,
        "score": round(100.0 * kept / len(facts), 1) if facts else None,
        "lost": [f for f in facts if not f["survived"]],
        "by_kind": by_kind,
    }


# ---------------------------------------------------------------- messages


def anchor_for(tool_call_id: str) -> str:
    """A DOM id fragment for a tool call id: safe characters plus a short hash (ids vary wildly)."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", tool_call_id)[:48]
    digest = hashlib.sha1(tool_call_id.encode()).hexdigest()[:6]
    return f"{safe}-{digest}"


def message_view(
    message: Mapping[str, Any], *, max_tokens: int = 0, preview_chars: int = PREVIEW_CHARS
) -> dict[str, Any]:
    """What the conversation view prints for one message (text is escaped by the template).

    Images become thumbnails only for inline ``data:image/...;base64`` URLs; any other image
    URL (``javascript:``, remote hosts) is shown as text and never fetched or linked.
    """
    content = message.get("content")
    texts: list[str] = []
    images: list[dict[str, str]] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and part.get("type") in (
                "image_url",
                "input_image",
                "image",
            ):
                url = part.get("image_url")
                url = url.get("url") if isinstance(url, Mapping) else url
                url = str(url or part.get("url") or "")
                if SAFE_IMAGE_RE.match(url):
                    images.append({"src": url, "text": ""})
                else:
                    images.append({"src": "", "text": url[:200] or "(image)"})
            elif isinstance(part, Mapping):
                texts.append(str(part.get("text") or ""))
            else:
                texts.append(str(part))
    elif content is not None:
        texts.append(
            content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        )
    text = "\n".join(texts)
    calls = []
    for call in message.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") or {}
        arguments = function.get("arguments") if isinstance(function, Mapping) else ""
        parsed = parse_arguments(call)
        pretty = (
            json.dumps(parsed, indent=2, ensure_ascii=False) if parsed else str(arguments or "")
        )
        call_id = str(call.get("id") or "")
        calls.append(
            {
                "id": call_id,
                "anchor": anchor_for(call_id) if call_id else "",
                "name": str(function.get("name") or "") if isinstance(function, Mapping) else "",
                "arguments": pretty,
            }
        )
    reasoning = message.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        reasoning = json.dumps(reasoning, ensure_ascii=False, indent=2)
    tokens = int(message.get("token_count") or 0)
    tool_call_id = str(message.get("tool_call_id") or "")
    return {
        "text": text[:preview_chars],
        "truncated": max(0, len(text) - preview_chars),
        "chars": len(text),
        "images": images,
        "calls": calls,
        "reasoning": reasoning or "",
        "result_anchor": anchor_for(tool_call_id) if tool_call_id else "",
        "token_percent": _percent(tokens, max_tokens) if max_tokens else 0.0,
        "fields": json_fields(text) if len(text) <= preview_chars else [],
    }


def json_fields(text: str) -> list[dict[str, str]]:
    """A tool result that is a JSON object, as fields with their string values unescaped.

    ``{"output": "line 1\\nline 2", "exit_code": 0}`` shows ``output`` as two real lines
    instead of one escaped string. Anything else (not JSON, not an object) gives ``[]``.
    """
    if not text.startswith("{") or not text.rstrip().endswith("}"):
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    if not isinstance(value, dict):
        return []
    return [
        {
            "key": str(key),
            "value": item
            if isinstance(item, str)
            else json.dumps(item, indent=2, ensure_ascii=False),
        }
        for key, item in value.items()
    ]


def word_diff(before: str, after: str) -> dict[str, list[dict[str, str]]]:
    """Word-level diff of a before/after pair: runs of ``{"op": "same"|"del"|"ins", "text"}``.

    ``before`` gets the ``same`` and ``del`` runs, ``after`` the ``same`` and ``ins`` runs;
    whitespace is kept so each side reads as its original text.
    """
    a, b = re.split(r"(\s+)", before), re.split(r"(\s+)", after)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    left: list[dict[str, str]] = []
    right: list[dict[str, str]] = []

    def push(side: list[dict[str, str]], op: str, text: str) -> None:
        if not text:
            return
        if side and side[-1]["op"] == op:
            side[-1]["text"] += text
        else:
            side.append({"op": op, "text": text})

    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            push(left, "same", "".join(a[i1:i2]))
            push(right, "same", "".join(b[j1:j2]))
        else:
            push(left, "del", "".join(a[i1:i2]))
            push(right, "ins", "".join(b[j1:j2]))
    return {"before": left, "after": right}


# ---------------------------------------------------------------- timeline


def timeline_chart(
    points: Sequence[Mapping[str, Any]],
    *,
    width: int = 720,
    height: int = 240,
    threshold: int | None = None,
    window: int | None = None,
) -> dict[str, Any]:
    """Bar pairs (before, after) per compaction for an inline SVG, plus lines and warnings.

    ``points`` are ``{"label", "before", "after", "status", "reason", "url", "when"}`` in
    time order. The threshold is always inside the scale; the window only when it is at most
    twice the tallest bar (otherwise it would flatten every bar), else ``window_off_chart``.
    Warnings: an automatic compaction skipped by anti-thrash, and two committed compactions
    in a row that each saved less than 10 %.
    """
    tallest = max([p.get("before") or 0 for p in points] + [1])
    window_on_chart = bool(window) and window <= 2 * max(tallest, threshold or 0)
    top = max(tallest, threshold or 0, window if window_on_chart else 0, 1)
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
    lines = []
    for name, value in (("threshold", threshold), ("window", window if window_on_chart else None)):
        if value:
            lines.append(
                {
                    "name": name,
                    "value": value,
                    "y": round(pad_top + plot_h - plot_h * value / top, 1),
                }
            )
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
