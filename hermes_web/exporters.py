"""Exports: the active conversation as OpenAI messages, a Hermes-compatible JSONL line, reports.

text = export_session_text(session, "openai")      # or "hermes-jsonl"
chunks = iter_session_export(session, "openai")     # the same text, streamed in constant memory
text = export_report_text(compaction, "report-md")  # or "report-json"

Session exports are produced chunk by chunk from rows read in batches (``.iterator()``), so
exporting a million-message session costs a batch of rows of memory, not the session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from compaction import report_to_markdown
from hermes_web.models import Compaction, Message, Session
from hermes_web.presenters.vocabulary import VOCABULARY, report_warnings
from hermes_web.validation import scrub_surrogates

SESSION_FORMATS = ("openai", "hermes-jsonl")
REPORT_FORMATS = ("report-json", "report-md")
FORMATS = SESSION_FORMATS + REPORT_FORMATS
CONTENT_TYPES = {
    "openai": "application/json",
    "hermes-jsonl": "application/x-ndjson",
    "report-json": "application/json",
    "report-md": "text/markdown; charset=utf-8",
}
EXTENSIONS = {"openai": "json", "hermes-jsonl": "jsonl", "report-json": "json", "report-md": "md"}


def _epoch(value) -> float | None:
    return value.timestamp() if value else None


def hermes_message(message: Message, session_id: str) -> dict:
    """A row as Hermes's ``get_messages`` returns it (decoded content, flags as ints)."""
    superseded = bool(message.extra.get("superseded"))
    row = {
        "id": message.position + 1,
        "session_id": session_id,
        "role": message.role,
        "content": message.content,
        "tool_call_id": message.tool_call_id or None,
        "tool_calls": message.tool_calls,
        "tool_name": message.tool_name or None,
        "timestamp": _epoch(message.created_at),
        "token_count": message.token_count,
        "reasoning": message.reasoning,
        "_compressed_summary": int(message.is_summary),
        "active": int(message.active),
        "compacted": int(message.archived and not superseded),
    }
    row.update({k: v for k, v in message.extra.items() if k not in row and k != "superseded"})
    return row


# Rows per database batch, and messages per yielded chunk of text.
BATCH = 2000


def hermes_session(session: Session) -> dict:
    """One Hermes export object (``export_session``): the session row plus every message."""
    messages = [hermes_message(m, session.public_id) for m in session.messages.order_by("position")]
    active = sum(1 for m in messages if m["active"])
    return {**_hermes_header(session, message_count=active), "messages": messages}


def _hermes_header(session: Session, *, message_count: int | None = None) -> dict:
    """The session fields of a Hermes export object, in its key order, without the messages
    (``message_count`` is counted in the database unless the caller already has it)."""
    if message_count is None:
        message_count = Message.objects.filter(session_id=session.pk, active=True).count()
    header = {
        "id": session.public_id,
        "source": session.extra.get("hermes_source") or "hermes-web",
        "model": session.model or None,
        "parent_session_id": session.parent.public_id if session.parent is not None else None,
    }
    if isinstance(session.extra.get("sub_agent"), dict):
        # A child of its parent, not a rotation of it: the import links it as one.
        header["sub_agent"] = session.extra["sub_agent"]
    return {
        **header,
        "started_at": _epoch(session.created_at),
        "ended_at": _epoch(session.ended_at),
        "end_reason": session.end_reason or None,
        "title": session.title or None,
        "message_count": message_count,
    }


def _iter_hermes_line(session: Session) -> Iterator[str]:
    """One session's JSONL line, in chunks: byte for byte ``json.dumps(hermes_session(s))``."""
    header = json.dumps(_hermes_header(session), ensure_ascii=False)
    yield header[:-1] + ', "messages": ['
    rows = session.messages.order_by("position").iterator(chunk_size=BATCH)
    parts: list[str] = []
    first = True
    for message in rows:
        text = json.dumps(hermes_message(message, session.public_id), ensure_ascii=False)
        parts.append(text if first else ", " + text)
        first = False
        if len(parts) >= BATCH:
            yield "".join(parts)
            parts = []
    parts.append("]}\n")
    yield "".join(parts)


def iter_hermes_jsonl(sessions) -> Iterator[str]:
    """Hermes JSONL, one line per session, streamed."""
    for session in sessions:
        yield from _iter_hermes_line(session)


def _iter_openai(session: Session) -> Iterator[str]:
    """The active messages as an indented JSON list, in chunks: byte for byte
    ``json.dumps(openai_messages(session), indent=2)`` plus a newline, except that an
    agent's own summary row is exported as the agent wrote it (a prompt wraps it)."""
    rows = (
        Message.objects.filter(session_id=session.pk, active=True)
        .order_by("position")
        .values_list(*Message.ENGINE_COLUMNS)
        .iterator(chunk_size=BATCH)
    )
    parts: list[str] = []
    empty = True
    for row in rows:
        message = Message.engine_dict(*row)
        text = json.dumps(message, ensure_ascii=False, indent=2).replace("\n", "\n  ")
        parts.append(("[\n  " if empty else ",\n  ") + text)
        empty = False
        if len(parts) >= BATCH:
            yield "".join(parts)
            parts = []
    parts.append("[]\n" if empty else "\n]\n")
    yield "".join(parts)


def iter_session_export(session: Session, fmt: str) -> Iterator[str]:
    """The export of ``session`` in ``fmt`` as chunks of text (constant memory).

    Raises:
        ValueError: an unknown format (raised at once, before any chunk).
    """
    if fmt == "openai":
        return _iter_openai(session)
    if fmt == "hermes-jsonl":
        return iter_hermes_jsonl([session])
    raise ValueError(
        f"unknown session export format {fmt!r} (expected {', '.join(SESSION_FORMATS)})"
    )


def export_session_text(session: Session, fmt: str) -> str:
    """The whole export as one string (small sessions, tests); prefer ``iter_session_export``."""
    return "".join(iter_session_export(session, fmt))


def report_document(compaction: Compaction) -> dict:
    return {
        "compaction": {
            "id": compaction.public_id,
            "session": compaction.session.public_id,
            "result_session": compaction.result_session.public_id
            if compaction.result_session is not None
            else None,
            "status": compaction.status,
            "reason": compaction.reason,
            "mode": compaction.mode,
            "trigger": compaction.trigger,
            "focus": compaction.focus,
            "error": compaction.error,
            "queued_at": compaction.queued_at.isoformat(),
            "finished_at": compaction.finished_at.isoformat() if compaction.finished_at else None,
            "source": compaction.source,
            "replay_of": (
                compaction.replay_of.public_id if compaction.replay_of is not None else None
            ),
        },
        "report": compaction.report,
        **(_native_document(compaction) if compaction.is_native else {}),
    }


def _native_document(compaction: Compaction) -> dict:
    """An agent's own compaction: what its transcript recorded, and our replays of it."""
    return {
        "native": {
            "agent": compaction.get_source_display(),
            "summary": compaction.native_summary,
            "marker": compaction.native_marker,
            "tokens_before_recorded": compaction.tokens_before,
            "tokens_after_recorded": compaction.tokens_after,
            "recorded": compaction.native_record,
            "summarizer_transcript": compaction.summarizer_transcript,
        },
        "replays": replay_comparison(compaction),
    }


def replay_comparison(native: Compaction) -> list[dict]:
    """Per finished replay of ``native`` (newest per profile): its tokens after, its summary
    and the facts each side kept (``presenters.native.facts_kept``); what Compare shows."""
    from hermes_web.presenters.native import facts_kept
    from hermes_web.services.native import latest_replays

    out: list[dict[str, Any]] = []
    for run in latest_replays(native):
        if not run.is_finished:
            out.append({"id": run.public_id, "status": run.status})
            continue
        run.refresh_from_db(fields=["report"])
        facts = facts_kept(native, run) or {}
        report = run.report or {}
        tokens = report.get("tokens") or {}
        out.append(
            {
                "id": run.public_id,
                "status": run.status,
                "profile": (run.config or {}).get("profile", ""),
                "tokens_after": {"agent": native.tokens_after, "ours": tokens.get("after")},
                "tokens_after_counted": {
                    "agent": ((native.report or {}).get("tokens") or {}).get("counted_after"),
                    "ours": tokens.get("after"),
                },
                "summary": {"agent": native.native_summary, "ours": report.get("summary")},
                "facts": {
                    "total": facts.get("total", 0),
                    "agent": facts.get("a", 0),
                    "ours": facts.get("b", 0),
                    "by_kind": facts.get("by_kind", []),
                    "only_agent": [f["value"] for f in facts.get("only_a", [])],
                    "only_ours": [f["value"] for f in facts.get("only_b", [])],
                },
            }
        )
    return out


def export_report_text(compaction: Compaction, fmt: str) -> str:
    """The report as a document; a lone surrogate quoted from a stored row (SQLite keeps
    them) becomes U+FFFD, so the text can always be written as UTF-8."""
    return scrub_surrogates(_report_text(compaction, fmt))


def _report_text(compaction: Compaction, fmt: str) -> str:
    if fmt == "report-json":
        return json.dumps(report_document(compaction), ensure_ascii=False, indent=2) + "\n"
    if fmt == "report-md":
        if not compaction.report or "counts" not in compaction.report:
            detail = compaction.error or compaction.reason or "no engine report"
            return f"# Compaction report\n\n- **Status:** {compaction.status} ({detail})\n"
        # The stored trigger (manual, automatic, what-if) is what the pages show; the engine
        # only knows forced or automatic.
        return report_to_markdown(
            # The warnings the pages show (one list, see report_warnings), in their words.
            {
                **compaction.report,
                "trigger": compaction.trigger,
                "warnings": report_warnings(compaction.report),
            },
            words=VOCABULARY,
        )
    raise ValueError(f"unknown report export format {fmt!r} (expected {', '.join(REPORT_FORMATS)})")


def latest_report(session: Session) -> Compaction | None:
    """The newest compaction of this session that produced a report."""
    return (
        Compaction.objects.filter(session=session, report__isnull=False)
        .order_by("-queued_at", "-pk")
        .first()
    )
