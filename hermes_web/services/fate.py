"""Follow a fact: where a string first appeared in a conversation's chain, and its fate in each
later compaction (ours committed, an agent's native one, our replay of it, a what-if dry run).

The fate in one compaction is decided by ``fate_in`` (pure: the run's input messages, its
report and the texts of the context the model saw after it) in this order:

- ``absent``: not in the run's input (it came later, or an earlier compaction lost it);
- when the context after the run contains it: ``head`` / ``tail`` (a row kept verbatim),
  ``folded`` (its fold line kept it), ``ledger`` (the summary's fact ledger), ``summary``
  (a section of the summary, named), or ``kept`` (elsewhere in the context, e.g. a carried
  summary);
- when it does not: ``recall`` (a ``[ref:N]`` left in the context points at a row holding
  it), ``truncated`` (its row was cut in the summarizer's input and the cut removed it),
  ``folded`` (its row was folded and the fold line dropped it), or ``lost``.

The context after a run: the committed rows (``Compaction.final_rows``) for a committed run
(ours or an agent's), and for a dry run (what-if, replay) the list its report describes:
head and tail rows with their slimming applied, and the summary.

Matching is ``compaction.probes.normalize`` on both sides: case-folded, quotes dropped,
whitespace collapsed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from compaction.ledger import LEDGER_HEADING
from compaction.probes import message_text, normalize
from hermes_web.models import Compaction, Message, Session

__all__ = [
    "FATES",
    "Fate",
    "context_after",
    "fate_in",
    "follow",
    "input_messages",
]

# kind → (label, the inspector section that shows it)
FATES: dict[str, tuple[str, str]] = {
    "absent": ("not in its input", "split"),
    "head": ("kept verbatim (head)", "final-list"),
    "tail": ("kept verbatim (tail)", "final-list"),
    "folded": ("folded", "slimming"),
    "summary": ("kept in the summary", "summary"),
    "ledger": ("kept in the fact ledger", "summary"),
    "kept": ("kept in the context", "final-list"),
    "recall": ("reachable only through recall", "final-list"),
    "truncated": ("cut by truncation", "summarizer-input"),
    "lost": ("lost", "split"),
}
MAX_FINAL_ROWS = 20_000
MAX_QUERY = 500
_REF = re.compile(r"\[ref:(\d+)\]")
_HEADING = re.compile(r"^#{2,3} +(.+?)\s*$", re.MULTILINE)
# Slimming kinds that change what the model sees of a kept row (truncation only shortens
# the summarizer's input).
_VISIBLE_SLIMMING = frozenset(
    {"fold", "image", "dedup", "args_shrink", "image_retire", "demote", "lean_tail"}
)


@dataclass(frozen=True, slots=True)
class Fate:
    """The fate of one string in one compaction (see the module docstring).

    Attributes:
        kind: a key of ``FATES``.
        in_input: whether any input row holds it.
        in_final: whether the context after the run holds it.
        index: the input index of the (first) row that holds it, or None.
        detail: the fold line, the summary section, the ``[ref:N]``, the cut marker.
        anchor: the inspector section showing it (``#`` + anchor on the compaction page).
    """

    kind: str
    in_input: bool
    in_final: bool
    index: int | None = None
    detail: str = ""
    anchor: str = "split"
    rows: tuple[int, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        """What the fate is called on the page."""
        return FATES[self.kind][0]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the label."""
        return {**asdict(self), "rows": list(self.rows), "label": self.label}


def _range(report: Mapping[str, Any], part: str) -> range:
    bounds = (report.get("boundaries") or {}).get(part) or [0, 0]
    try:
        return range(int(bounds[0]), int(bounds[1]))
    except (TypeError, ValueError, IndexError):
        return range(0)


def _section_of(summary: str, at: int) -> str:
    """The heading of the summary section holding character ``at``."""
    heading = ""
    for match in _HEADING.finditer(summary):
        if match.start() > at:
            break
        heading = match.group(1)
    return heading


def fate_in(
    query: str,
    inputs: Sequence[Mapping[str, Any]],
    report: Mapping[str, Any],
    final: Sequence[str],
) -> Fate:
    """The fate of ``query`` in one compaction (see the module docstring).

    Args:
        query: the string followed.
        inputs: the run's input messages (OpenAI dicts), in order.
        report: the run's report (engine-shaped; a native run's too).
        final: the texts of the context the model saw after the run, in order.
    """
    needle = normalize(query)
    texts = [normalize(message_text(m)) for m in inputs]
    rows = tuple(i for i, text in enumerate(texts) if needle and needle in text)
    finals = [normalize(text) for text in final]
    in_final = bool(needle) and any(needle in text for text in finals)
    first = rows[0] if rows else None
    if not rows:
        kind = "kept" if in_final else "absent"
        return Fate(kind, False, in_final, None, anchor=FATES[kind][1])
    actions: dict[int, list[Mapping[str, Any]]] = {}
    for action in report.get("slimming") or ():
        if isinstance(action, Mapping) and isinstance(action.get("index"), int):
            actions.setdefault(action["index"], []).append(action)
    summary = str(report.get("summary") or "")
    head, tail = _range(report, "head"), _range(report, "tail")

    def fold_line(i: int) -> str:
        for action in actions.get(i, ()):
            if action.get("kind") in _VISIBLE_SLIMMING:
                return str(action.get("fold_line") or action.get("after") or "")
        return ""

    if in_final:
        for part, where in (("head", head), ("tail", tail)):
            for i in rows:
                if i in where and not fold_line(i):
                    return Fate(part, True, True, i, anchor=FATES[part][1], rows=rows)
        for i in rows:
            line = fold_line(i)
            if line and needle in normalize(line):
                return Fate("folded", True, True, i, line, "slimming", rows)
        at = normalize(summary).find(needle)
        if at != -1:
            ledger_at = normalize(summary).find(normalize(LEDGER_HEADING))
            if ledger_at != -1 and at > ledger_at:
                return Fate("ledger", True, True, first, LEDGER_HEADING[3:], "summary", rows)
            # The section is looked up in the raw summary at the same place in its text.
            raw_at = summary.casefold().find(query.strip().casefold())
            section = _section_of(summary, raw_at if raw_at != -1 else 0)
            return Fate("summary", True, True, first, section, "summary", rows)
        return Fate("kept", True, True, first, anchor="final-list", rows=rows)
    refs = {int(n) for text in final for n in _REF.findall(text)}
    for i in rows:
        if i in refs:
            return Fate("recall", True, False, i, f"[ref:{i}]", "final-list", rows)
    for i in rows:
        for action in actions.get(i, ()):
            if action.get("kind") == "truncate":
                return Fate("truncated", True, False, i, "...[truncated]...", "slimming", rows)
    for i in rows:
        line = fold_line(i)
        if line:
            return Fate("folded", True, False, i, line, "slimming", rows)
    return Fate("lost", True, False, first, anchor="split", rows=rows)


# ------------------------------------------------------------------- loading the contexts


def input_messages(compaction: Compaction) -> list[dict[str, Any]]:
    """The run's input rows as engine dicts, in order."""
    return [
        Message.engine_dict(*values)
        for values in compaction.input_rows().values_list(*Message.ENGINE_COLUMNS)
    ]


def context_after(compaction: Compaction, inputs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The texts of the context the model saw after ``compaction`` (see the module doc)."""
    if compaction.status == Compaction.Status.COMMITTED:
        rows = compaction.final_rows(MAX_FINAL_ROWS).values_list(*Message.ENGINE_COLUMNS)
        return [message_text(Message.engine_dict(*values)) for values in rows]
    report = compaction.report or {}
    if report.get("status") != "compacted":
        return [message_text(m) for m in inputs]  # nothing was compacted: all of it stays
    replaced: dict[int, str] = {}
    for action in report.get("slimming") or ():
        if isinstance(action, Mapping) and action.get("kind") in _VISIBLE_SLIMMING:
            index = action.get("index")
            if isinstance(index, int):
                replaced[index] = str(action.get("after") or action.get("fold_line") or "")
    texts = []
    for part in ("head", "middle_summary", "tail"):
        if part == "middle_summary":
            texts.append(str(report.get("summary") or ""))
            continue
        for i in _range(report, part):
            if 0 <= i < len(inputs):
                texts.append(replaced.get(i, message_text(inputs[i])))
    return texts


def _first_appearance(session: Session, needle: str) -> dict[str, Any] | None:
    rows = (
        Message.objects.for_lineage(session)
        .exclude(is_summary=True)
        .order_by("created_at", "session_id", "position")
        .values_list("session__public_id", "position", "role", *Message.ENGINE_COLUMNS)
    )
    for public_id, position, role, *columns in rows.iterator(chunk_size=500):
        if needle in normalize(message_text(Message.engine_dict(*columns))):
            return {"session": public_id, "position": position, "role": role}
    return None


def _entry(run: Compaction, query: str) -> dict[str, Any]:
    inputs = input_messages(run)
    final = context_after(run, inputs)
    fate = fate_in(query, inputs, run.report or {}, final)
    profile = str((run.config or {}).get("profile") or (run.report or {}).get("profile") or "")
    if run.is_native:
        kind = "native"
    elif run.replay_of_id:
        kind = "replay"
    elif run.status == Compaction.Status.DRY_RUN:
        kind = "what-if"
    else:
        kind = "ours"
    return {
        "compaction": run.public_id,
        "kind": kind,
        "label": run.source_label or (f"{kind} ({profile})" if profile else kind),
        "profile": profile,
        "status": run.status,
        "when": run.finished_at or run.queued_at,
        "session": run.session.public_id,
        "tokens_after": run.tokens_after,
        "fate": fate.to_dict(),
    }


def follow(session: Session, query: str) -> dict[str, Any]:
    """The journey of ``query`` over ``session``'s whole chain: its first appearance and its
    fate in every finished compaction (committed or dry run), oldest first; an agent's
    compaction carries its replays (``replays``) beside it.

    Raises:
        ValueError: an empty or over-long query.
    """
    query = query.strip()
    if not query:
        raise ValueError("q: type the text to follow")
    if len(query) > MAX_QUERY:
        raise ValueError(f"q: at most {MAX_QUERY} characters")
    runs = list(
        Compaction.objects.for_lineage(session)
        .filter(status__in=(Compaction.Status.COMMITTED, Compaction.Status.DRY_RUN))
        .select_related("session")
        .order_by("queued_at", "pk")
    )
    entries: list[dict[str, Any]] = []
    by_native: dict[int, dict[str, Any]] = {}
    for run in runs:
        if run.replay_of_id is None:
            entry = _entry(run, query)
            entry["replays"] = []
            entries.append(entry)
            if run.is_native:
                by_native[run.pk] = entry
    for run in runs:
        if run.replay_of_id is not None:
            entry = _entry(run, query)
            native = by_native.get(run.replay_of_id)
            if native is not None:
                native["replays"].append(entry)
            else:
                entry["replays"] = []
                entries.append(entry)
    return {
        "query": query,
        "first": _first_appearance(session, normalize(query)),
        "compactions": entries,
    }
