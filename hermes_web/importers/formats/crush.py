"""Crush sessions: the SQLite ``.crush/crush.db`` (with its ``-wal``, where a running Crush
keeps its newest rows), tables ``sessions``, ``messages`` and ``files``.

A message is ``{role: user|assistant|tool|system, parts}``, ``parts`` a JSON list of
``{type, data}``: ``text``, ``reasoning`` (``thinking``), ``tool_call`` (``id``, ``name``,
``input``), ``tool_result`` (``tool_call_id``, ``content``, ``is_error``), ``image_url`` /
``binary`` and ``finish`` (why the turn ended). ``sessions.summary_message_id`` names the
message Crush's ``summarize`` wrote: what came before it is archived and it becomes the
summary row of a native compaction (source "crush"); Crush records no tokens per message,
so the session's own prompt / completion token counts are kept with it. A session with a
``parent_session_id`` is a sub-agent's (the ``agent`` tool) or a title's, linked to its
parent. ``files`` (the versions of files Crush edited) is not a conversation: not read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes_web.importers import agent_common, sqlite_file
from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    epoch,
    safe_id,
)
from hermes_web.importers.links import SUB_AGENT
from hermes_web.importers.sqlite_detect import open_agent_db
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_CRUSH
SESSION_COLUMNS = (
    *("id", "parent_session_id", "title", "message_count", "prompt_tokens"),
    *("completion_tokens", "cost", "created_at", "updated_at", "summary_message_id"),
)
MESSAGE_COLUMNS = ("id", "role", "parts", "model", "provider", "created_at", "finished_at")
_MS_FROM = 100_000_000_000  # epoch values past this are milliseconds (Crush wrote both)


def _when(value: Any):
    if isinstance(value, int | float) and value > _MS_FROM:
        value = value / 1000
    return epoch(value)


def parse_path(path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    """Every session of a ``crush.db``, oldest first; one bad message fails its session."""
    yield from sqlite_file.each_session(open_agent_db(path, file), file, _sessions)


def _sessions(db: sqlite3.Connection, file: str) -> sqlite_file.Sessions:
    """Check the tables; the sessions, oldest first, and how one is read."""
    names, found = sqlite_file.agent_tables(
        db,
        file,
        "Crush",
        {
            "sessions": (SESSION_COLUMNS, ("id",)),
            "messages": (MESSAGE_COLUMNS, ("id", "role", "parts")),
        },
    )
    session_columns, message_columns = found["sessions"], found["messages"]
    order = " ORDER BY created_at, id" if "created_at" in session_columns else " ORDER BY id"
    message_order = "created_at, rowid" if "created_at" in message_columns else "rowid"

    def read(row: dict, number: int) -> ParsedSession:
        messages = sqlite_file.rows(
            db,
            names["messages"],
            message_columns,
            f" WHERE session_id = ? ORDER BY {message_order}",
            (str(row["id"]),),
        )
        return _session(row, messages, file, number)

    return sqlite_file.rows(db, names["sessions"], session_columns, order), read


def _parts(message: dict, file: str) -> list[dict]:
    try:
        parts = json.loads(message["parts"]) if isinstance(message["parts"], str) else None
    except (ValueError, RecursionError):
        parts = None
    if not isinstance(parts, list):
        raise ImportProblem(file, 0, f"message {message['id']}: 'parts' is not a JSON list")
    return [p for p in parts if isinstance(p, dict)]


def _session(row: dict, messages: list[dict], file: str, line: int) -> ParsedSession:
    session = ParsedSession(source=SOURCE, line=line)
    session.public_id = safe_id(str(row["id"]))
    session.title = agent_common.clip_title(str(row.get("title") or ""))
    session.created_at = _when(row.get("created_at"))
    if row.get("parent_session_id"):
        session.parent_id = safe_id(str(row["parent_session_id"]))
        session.kind = SUB_AGENT
    recorded = {
        k: row[k]
        for k in ("prompt_tokens", "completion_tokens", "cost", "message_count")
        if row.get(k) is not None
    }
    session.extra = {"crush": recorded}
    summary_id = row.get("summary_message_id") or ""
    rows: list[ParsedMessage] = []
    for message in messages:
        session.records += 1
        role = message.get("role")
        extra = {"message_id": message["id"]}
        when = _when(message.get("created_at"))
        if message.get("model") and not session.model:
            session.model = str(message["model"])
        parts = _parts(message, file)
        if summary_id and message["id"] == summary_id:
            _compaction(session, rows, parts, message, recorded, when)
            continue
        if role == "tool":
            for part in parts:
                _result(session, rows, part, extra, when)
            continue
        if role not in ("user", "assistant", "system"):
            session.skip(f"message of role {role!r}")
            continue
        texts, reasoning, calls = [], [], []
        for part in parts:
            kind, data = part.get("type"), part.get("data")
            data = data if isinstance(data, dict) else {}
            if kind == "text" and isinstance(data.get("text"), str):
                texts.append(data["text"])
            elif kind == "reasoning" and isinstance(data.get("thinking"), str):
                reasoning.append(data["thinking"])
            elif kind == "tool_call" and data.get("id") and data.get("name"):
                calls.append(
                    agent_common.call(str(data["id"]), str(data["name"]), data.get("input"))
                )
            elif kind == "image_url":
                texts.append(f"[image: {data.get('url') or ''}]")
            elif kind == "binary":
                texts.append(f"[attachment: {data.get('path') or data.get('mime_type') or ''}]")
            elif kind == "finish":
                if data.get("reason"):
                    extra["finish"] = data["reason"]
                if data.get("message"):  # an error or cancellation Crush showed
                    extra["finish_message"] = data["message"]
            else:
                session.skip(f"{kind} part of a {role} message")
        if role == "system":
            rows.append(
                ParsedMessage(
                    role="system",
                    content="\n\n".join(texts),
                    meta="crush_system",
                    extra=extra,
                    created_at=when,
                )
            )
            continue
        if role == "user" or texts or calls or reasoning:
            rows.append(
                ParsedMessage(
                    role=role,
                    content="\n\n".join(texts) or (None if role == "assistant" else ""),
                    tool_calls=calls or None,
                    reasoning="\n".join(reasoning) or None,
                    extra=extra,
                    created_at=when,
                )
            )
        else:
            session.skip("assistant message with no text, reasoning or call")
    session.messages = rows
    return session


def _result(session, rows, part: dict, extra: dict, when) -> None:
    kind, data = part.get("type"), part.get("data")
    data = data if isinstance(data, dict) else {}
    if kind == "finish":
        return
    if kind != "tool_result" or not data.get("tool_call_id"):
        session.skip(f"{kind} part of a tool message")
        return
    result_extra = dict(extra)
    if data.get("is_error"):
        result_extra["is_error"] = True
    if data.get("metadata"):
        result_extra["metadata"] = data["metadata"]
    rows.append(
        ParsedMessage(
            role="tool",
            content=agent_common.as_text(data.get("content")),
            tool_call_id=str(data["tool_call_id"]),
            tool_name=str(data.get("name") or ""),
            extra=result_extra,
            created_at=when,
        )
    )


def _compaction(session, rows, parts, message, recorded: dict, when) -> None:
    summary = "\n\n".join(
        p["data"]["text"]
        for p in parts
        if p.get("type") == "text"
        and isinstance(p.get("data"), dict)
        and isinstance(p["data"].get("text"), str)
    )
    index = agent_common.compact(
        session,
        rows,
        NativeCompaction(
            source="crush",
            trigger="",  # Crush records no trigger (auto-summarize or the command)
            created_at=when,
            summary=summary,
            marker="" if summary else "Crush summarized here; no summary was recorded",
            extra={"message_id": message["id"], "session_tokens": recorded},
        ),
    )
    if summary.strip():
        rows.append(agent_common.summary_row(summary, index, {"message_id": message["id"]}, when))
