"""An agent's own compaction in the inspector and in Compare: what the agent recorded, the
rows it replaced / its summary / the rows it kept, its summary by section, and the facts
each side kept when our engine replays the same rows."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.cache import cache

from compaction import END_MARKER, SUMMARY_PREFIX
from compaction.messages import content_text
from hermes_web.caching import AUDIT_SECONDS, audit_key
from hermes_web.models import Compaction, Message
from hermes_web.presenters.facts import FACT_KIND_LABELS, FACT_KINDS, fact_survival_audit
from hermes_web.presenters.inspector import heading_sections as native_sections
from hermes_web.presenters.messages import message_view

SAMPLE_ROWS = 40  # replaced / kept rows listed on the page (the rest: a link to them)


def _rows(rows: Iterable[Message]) -> list[dict[str, Any]]:
    rows = list(rows)
    agents = agent_summary_texts(rows)
    return [
        {
            "position": row.position,
            "role": row.role,
            "tokens": row.token_count,
            "text": message_view(
                {"content": agents.get(row.position, row.content)}, preview_chars=160
            )["text"],
            "calls": len(row.tool_calls or ()),
            "archived": row.archived,
        }
        for row in rows
    ]


def native_context(c: Compaction) -> dict[str, Any]:
    """What the inspector shows of an agent's own compaction (pure reads of the stored rows
    and of the report ``importers.native`` wrote)."""
    report = c.report or {}
    recorded = report.get("native") or {}
    tokens = report.get("tokens") or {}
    replaced = c.input_rows()
    kept_positions = list(recorded.get("kept_positions") or ())
    result_session = c.result_session_id or c.session_id
    kept = Message.objects.filter(session_id=result_session, position__in=kept_positions)
    summary_row = None
    if recorded.get("summary_position") is not None:
        summary_row = Message.objects.filter(
            session_id=result_session, position=recorded["summary_position"]
        ).first()
    transcript = c.summarizer_transcript or {}
    summarizer_input = transcript.get("input") or []
    return {
        "label": c.source_label,
        "agent": c.get_source_display(),
        "recorded": recorded,
        "tokens_before_recorded": c.tokens_before,
        "tokens_after_recorded": c.tokens_after,
        "tokens_before_counted": tokens.get("counted_before"),
        "tokens_after_counted": tokens.get("counted_after"),
        "replaced_count": (report.get("counts") or {}).get("messages_before") or 0,
        "replaced": _rows(replaced[:SAMPLE_ROWS]),
        "first_position": recorded.get("first_position"),
        "summary_row": summary_row,
        "kept_count": len(kept_positions),
        "kept": _rows(kept.order_by("position")[:SAMPLE_ROWS]),
        "sections": native_sections(c.native_summary),
        "marker": c.native_marker,
        "record_rows": sorted(
            (k, json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list) else v)
            for k, v in (c.native_record or {}).items()
        ),
        "summarizer_input": [
            {"role": m.get("role", ""), "text": content_text(m.get("content"))}
            for m in summarizer_input
            if isinstance(m, Mapping)
        ],
        "summarizer_output": transcript.get("output") or "",
    }


# ---------------------------------------------------------------- Compare


def row_text(row: Mapping[str, Any]) -> str:
    """A row as the text a fact could survive in: its content and its calls' arguments."""
    parts = [content_text(row.get("content"))]
    for call in row.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(str(function.get("arguments") or ""))
    return "\n".join(parts)


def _unwrapped(content: Any) -> str:
    """A stored summary row's text without the prefix and end marker we wrap it in: their
    sentences are ours, not facts of the conversation."""
    body = content_text(content)
    return body.split(SUMMARY_PREFIX, 1)[-1].split(END_MARKER, 1)[0].strip()


def _after_text(c: Compaction, rows: list[dict[str, Any]]) -> str:
    """Everything of the compacted rows the next turn still sees after ``c``: an agent's
    summary and the rows it kept; our summary and the head and tail kept verbatim."""
    report = c.report or {}
    if c.is_native:
        recorded = report.get("native") or {}
        kept = Message.objects.filter(
            session_id=c.result_session_id or c.session_id,
            position__in=recorded.get("kept_positions") or (),
        ).values("content", "tool_calls")
        return "\n".join([c.native_summary, *(row_text(r) for r in kept)])
    if report.get("status") != "compacted":
        return "\n".join(row_text(r) for r in rows)  # nothing compacted: everything stays
    bounds = report.get("boundaries") or {}
    verbatim = []
    for part in ("head", "tail"):
        start, end = (list(bounds.get(part) or [0, 0]) + [0, 0])[:2]
        verbatim += rows[start:end]
    return "\n".join([str(report.get("summary") or ""), *(row_text(r) for r in verbatim)])


def facts_kept(a: Compaction, b: Compaction) -> dict[str, Any] | None:
    """Facts (paths, commands, errors, constraints, numbers, URLs) of the rows an agent's
    compaction replaced, and which of them each side still carries: the agent's summary
    and kept rows, our summary and verbatim head and tail. None unless one of the two is
    an agent's compaction and the other a replay of it (they compacted the same rows)."""
    native = a if a.is_native else b if b.is_native else None
    other = b if native is a else a
    if native is None or other.replay_of_id != native.pk:
        return None
    # Both finished runs never change: the facts of the pair are read once an hour at most.
    key = f"{audit_key(a)}:facts:{audit_key(b)}"
    facts = cache.get(key)
    if facts is None:
        facts = _facts_kept(a, b, native)
        cache.set(key, facts, AUDIT_SECONDS)
    return facts


def _facts_kept(a: Compaction, b: Compaction, native: Compaction) -> dict[str, Any]:
    for run in (a, b):
        if "report" in run.get_deferred_fields():
            run.refresh_from_db(fields=["report"])
    rows = [
        {**row, "content": _unwrapped(row["content"])} if row.pop("is_summary") else row
        for row in native.input_rows().values("role", "content", "tool_calls", "is_summary")
    ]
    audits = {run.pk: fact_survival_audit(rows, _after_text(run, rows)) for run in (a, b)}
    left, right = audits[a.pk], audits[b.pk]
    by_kind = []
    for kind in FACT_KINDS:
        totals = [
            next((k for k in audit["by_kind"] if k["kind"] == kind), None)
            for audit in (left, right)
        ]
        if totals[0] is None:
            continue
        by_kind.append(
            {
                "kind": kind,
                "label": FACT_KIND_LABELS[kind],
                "total": totals[0]["total"],
                "a": totals[0]["kept"],
                "b": totals[1]["kept"] if totals[1] else 0,
            }
        )
    kept_a = {(f["kind"], f["value"]) for f in left["facts"] if f["survived"]}
    kept_b = {(f["kind"], f["value"]) for f in right["facts"] if f["survived"]}
    return {
        "total": left["total"],
        "a": left["kept"],
        "b": right["kept"],
        "a_score": left["score"],
        "b_score": right["score"],
        "by_kind": by_kind,
        "only_a": [f for f in left["facts"] if (f["kind"], f["value"]) in kept_a - kept_b],
        "only_b": [f for f in right["facts"] if (f["kind"], f["value"]) in kept_b - kept_a],
    }


def agent_summary_texts(rows: Iterable[Message]) -> dict[int, str]:
    """The agent's own words for each agent's summary row, by row position. An import now
    stores the row as the agent wrote it (prompts wrap it: ``Message.prompt_content``); rows
    imported before that hold it inside our prefix and end marker, and a page still shows
    what the agent wrote, byte for byte. Hermes writes the prefix itself: its rows are
    already verbatim and are left alone."""
    wanted = {
        str(row.extra["native_compaction"]): row.position
        for row in rows
        if row.is_summary
        and isinstance(row.extra, dict)
        and isinstance(row.extra.get("native_compaction"), str)
    }
    if not wanted:
        return {}
    texts = (
        Compaction.objects.filter(public_id__in=wanted)
        .exclude(source__in=(Compaction.Source.OURS, Compaction.Source.HERMES))
        .exclude(native_summary="")
        .values_list("public_id", "native_summary")
    )
    return {wanted[public_id]: text for public_id, text in texts}
