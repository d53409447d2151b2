"""opencode sessions: the SQLite ``opencode.db`` (1.2 and later: tables ``session``,
``message``, ``part``, each row's JSON in ``data``; 1.16 adds ``session_message`` and
``event``, which repeat what the three tables hold and are not read) and the older per-file
JSON storage ``storage/session/<project>/<id>.json`` with ``storage/message/<session>/<id>.json``
and ``storage/part/<message>/<id>.json``.

A message is ``{role, time, modelID|model, tokens, summary, …}``; its parts, in id order, are
``text``, ``reasoning``, ``tool`` (``callID``, ``tool``, ``state``: ``status``, ``input``,
``output`` or ``error``), ``step-start`` / ``step-finish`` (one model call each, its tokens),
``file``, ``compaction`` and bookkeeping (``snapshot``, ``patch``, ``agent``, ``subtask``…).
Each step of an assistant message is one assistant row with its tool calls, followed by the
calls' results. A user message holding a ``compaction`` part, then the assistant message
flagged ``summary: true``, is opencode's own compaction: the rows before it are archived, the
summary row follows (source "opencode", its summary verbatim, the summarizer's tokens as
recorded). A session with a ``parent_id`` is a sub-agent's (the ``task`` tool), linked to it.

Only the session tables are read: never ``account``, ``credential`` nor ``control_account``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hermes_web.importers import agent_common, budget, sqlite_file
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

SOURCE = Session.Source.IMPORT_OPENCODE
TABLES = ("session", "message", "part")
SESSION_COLUMNS = ("id", "parent_id", "title", "directory", "version", "time_created")
# Parts that are bookkeeping of the UI or the workspace, not what the model saw.
_QUIET = {"snapshot", "patch", "agent", "retry", "subtask"}


def _ms(value: Any):
    """opencode's times are epoch milliseconds."""
    return epoch(value / 1000) if isinstance(value, int | float) else epoch(value)


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _load(text: Any, file: str, where: str) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str | bytes) else None
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise ImportProblem(file, 0, f"{where}: its data is not a JSON object")
    return value


def parse_path(path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    """Every session of an ``opencode.db``, or the session of a storage JSON file."""
    with open(path, "rb") as stream:
        head = stream.read(len(sqlite_file.MAGIC))
    if sqlite_file.is_sqlite(head):
        yield from _parse_db(path, file)
    else:
        yield from _parse_storage(path, file)


# --- the SQLite database --------------------------------------------------------------


def _parse_db(path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    yield from sqlite_file.each_session(open_agent_db(path, file), file, _sessions)


def _sessions(db: sqlite3.Connection, file: str) -> sqlite_file.Sessions:
    """Check the tables; the sessions, oldest first, and how one is read."""
    names = sqlite_file.require_tables(db, file, TABLES)
    if missing := [t for t in TABLES if t not in names]:
        raise ImportProblem(file, 0, f"not an opencode.db: it has no '{missing[0]}' table")
    columns = sqlite_file.columns(db, names["session"], SESSION_COLUMNS)
    if "id" not in columns:
        raise ImportProblem(file, 0, "not an opencode.db: table 'session' lacks id")
    order = " ORDER BY time_created, id" if "time_created" in columns else " ORDER BY id"
    message_sql = (
        f"SELECT id, data, time_created FROM {sqlite_file.quoted(names['message'])} "  # noqa: S608
        "WHERE session_id = ? ORDER BY time_created, id"
    )
    part_sql = (
        f"SELECT p.message_id, p.data FROM {sqlite_file.quoted(names['part'])} p "  # noqa: S608
        f"JOIN {sqlite_file.quoted(names['message'])} m ON m.id = p.message_id "
        "WHERE m.session_id = ? ORDER BY p.id"
    )

    def read(row: dict, number: int) -> ParsedSession:
        session_id = str(row["id"])
        messages = []
        parts: dict[str, list[dict]] = {}
        for part_message, data in db.execute(part_sql, (session_id,)):
            parts.setdefault(str(part_message), []).append(
                _load(data, file, f"part of message {part_message}")
            )
        for message_id, data, created in db.execute(message_sql, (session_id,)):
            info = _load(data, file, f"message {message_id}")
            info.setdefault("id", message_id)
            info.setdefault("time", {"created": created})
            messages.append((info, parts.get(str(message_id), [])))
        return _session(row, messages, file, number)

    return sqlite_file.rows(db, names["session"], columns, order), read


# --- the JSON storage folder (opencode before 1.2) ------------------------------------


def is_storage_session(path: Path, head: str) -> bool:
    """A session file of opencode's JSON storage: ``storage/session/<project>/<id>.json``
    holding an ``ses_`` id, with the ``message`` folder beside ``session``."""
    parts = path.parts
    return (
        len(parts) >= 4
        and parts[-3] == "session"
        and path.suffix == ".json"
        and (path.parents[2] / "message").is_dir()
        and '"ses_' in head[:2048]
    )


def _read_json(path: Path, file: str) -> dict:
    budget.note_read(path)
    with open(path, "rb") as stream:
        value = agent_common.load_json(stream, f"{file} ({path.name})")
    return agent_common.expect(value, dict, file, path.name)


def _parse_storage(path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    info = _read_json(path, file)
    session_id = info.get("id")
    if not isinstance(session_id, str) or not session_id:
        raise ImportProblem(file, 1, "not an opencode session: it has no 'id'")
    storage = path.parents[2]
    messages = []
    folder = storage / "message" / session_id
    for message_path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        message = _read_json(message_path, file)
        part_folder = storage / "part" / str(message.get("id") or message_path.stem)
        parts = [_read_json(p, file) for p in sorted(part_folder.glob("*.json"))]
        messages.append((message, parts))
    messages.sort(key=lambda m: (_created(m[0]), str(m[0].get("id") or "")))
    row = {
        "id": session_id,
        "parent_id": info.get("parentID"),
        "title": info.get("title"),
        "directory": info.get("directory"),
        "version": info.get("version"),
        "time_created": (info.get("time") or {}).get("created")
        if isinstance(info.get("time"), dict)
        else None,
    }
    yield _session(row, messages, file, 1)


def _created(message: dict) -> float:
    time = message.get("time")
    value = time.get("created") if isinstance(time, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0


# --- one session ----------------------------------------------------------------------


def _session(
    row: dict, messages: list[tuple[dict, list[dict]]], file: str, line: int
) -> ParsedSession:
    session = ParsedSession(source=SOURCE, line=line)
    session.public_id = safe_id(str(row["id"]))
    session.title = agent_common.clip_title(str(row.get("title") or ""))
    session.created_at = _ms(row.get("time_created"))
    if row.get("parent_id"):
        session.parent_id = safe_id(str(row["parent_id"]))
        session.kind = SUB_AGENT
    session.extra = {
        "opencode": {k: row[k] for k in ("directory", "version") if row.get(k) not in (None, "")}
    }
    rows: list[ParsedMessage] = []
    pending: dict | None = None  # the compaction part waiting for its summary message
    for info, parts in messages:
        session.records += 1 + len(parts)
        role = info.get("role")
        when = _ms(_created(info) or None)
        extra = {"message_id": info.get("id")}
        if role == "user":
            compaction = next((p for p in parts if p.get("type") == "compaction"), None)
            if compaction is not None:
                pending = compaction
                session.skip("compaction request message (kept with the compaction)")
                continue
            _user(session, rows, parts, extra, when)
        elif role == "assistant":
            model = info.get("modelID")
            if isinstance(model, str) and model and not session.model:
                session.model = model
            if info.get("summary") is True:
                _compaction(session, rows, info, parts, pending, when)
                pending = None
                continue
            _assistant(session, rows, info, parts, extra, when)
        else:
            session.skip(f"message of role {role!r}")
    session.messages = rows
    return session


def _user(session, rows, parts, extra, when) -> None:
    texts = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            if part.get("synthetic"):  # text opencode added (a file read for an @mention)
                rows.append(
                    ParsedMessage(
                        role="user",
                        content=part["text"],
                        meta="opencode_synthetic",
                        extra=dict(extra),
                        created_at=when,
                    )
                )
                continue
            texts.append(part["text"])
        elif kind == "file":
            name = part.get("filename") or part.get("url") or "file"
            texts.append(f"[file: {name}]")
        else:
            session.skip(f"{kind} part of a user message")
    rows.append(
        ParsedMessage(role="user", content="\n\n".join(texts), extra=extra, created_at=when)
    )


def _assistant(session, rows, info, parts, extra, when) -> None:
    """One assistant row per step (model call), each followed by its tools' results."""
    step: ParsedMessage | None = None
    results: list[ParsedMessage] = []
    reasoning: list[str] = []

    def flush() -> None:
        nonlocal step, results, reasoning
        if step is not None:
            if reasoning:
                step.reasoning = "\n".join(reasoning)
            if step.content or step.tool_calls or step.reasoning:
                rows.append(step)
                rows.extend(results)
        step, results, reasoning = None, [], []

    def current() -> ParsedMessage:
        nonlocal step
        if step is None:
            step = ParsedMessage(role="assistant", content=None, extra=dict(extra), created_at=when)
        return step

    for part in parts:
        kind = part.get("type")
        if kind == "step-start":
            flush()
            current()
        elif kind == "step-finish":
            row = current()
            if isinstance(part.get("tokens"), dict):
                row.extra["opencode_tokens"] = part["tokens"]
            flush()
        elif kind == "text" and isinstance(part.get("text"), str):
            row = current()
            row.content = (row.content + "\n\n" if row.content else "") + part["text"]
        elif kind == "reasoning" and isinstance(part.get("text"), str):
            current()
            reasoning.append(part["text"])
        elif kind == "tool":
            _tool(session, current(), results, part, when)
        else:
            session.skip(f"{kind} part" if kind in _QUIET else f"{kind} part (not read)")
    flush()
    if isinstance(info.get("error"), dict):
        error = info["error"]
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        rows.append(
            ParsedMessage(
                role="assistant",
                content=f"[{error.get('name') or 'error'}] {data.get('message') or ''}".strip(),
                meta="opencode_error",
                extra=dict(extra),
                created_at=when,
            )
        )


def _tool(session, row: ParsedMessage, results: list[ParsedMessage], part: dict, when) -> None:
    call_id, name = part.get("callID"), part.get("tool")
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        session.skip("tool part without a call id or tool name")
        return
    state = _obj(part.get("state"))
    row.tool_calls = (row.tool_calls or []) + [agent_common.call(call_id, name, state.get("input"))]
    status = state.get("status")
    if status == "completed":
        text, extra = agent_common.as_text(state.get("output")), {"status": status}
    elif status == "error":
        text, extra = agent_common.as_text(state.get("error")), {"status": status, "is_error": True}
    else:  # pending / running when the session stopped: no result was recorded
        return
    if state.get("title"):
        extra["title"] = state["title"]
    if _obj(state.get("time")).get("compacted"):
        # opencode's pruning: the output is kept, the model was sent a placeholder instead
        extra["opencode_pruned"] = True
    results.append(
        ParsedMessage(
            role="tool",
            content=text,
            tool_call_id=call_id,
            tool_name=name,
            extra=extra,
            created_at=when,
        )
    )


def _compaction(session, rows, info, parts, request: dict | None, when) -> None:
    summary = "\n\n".join(
        p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)
    )
    tokens = _obj(info.get("tokens"))
    cache = _obj(tokens.get("cache"))
    read = [tokens.get("input"), cache.get("read"), cache.get("write")]
    before = (
        sum(v for v in read if isinstance(v, int)) if isinstance(tokens.get("input"), int) else None
    )
    after = tokens.get("output") if isinstance(tokens.get("output"), int) else None
    trigger = ""
    if request is not None:
        trigger = "auto" if request.get("auto") else "manual"
    index = agent_common.compact(
        session,
        rows,
        NativeCompaction(
            source="opencode",
            trigger=trigger,
            created_at=when,
            tokens_before=before,
            tokens_after=after,
            summary=summary,
            marker="" if summary else "opencode compacted here; no summary was recorded",
            extra={"message_id": info.get("id"), "tokens": tokens, "request": request or {}},
        ),
    )
    if summary.strip():
        rows.append(agent_common.summary_row(summary, index, {"message_id": info.get("id")}, when))
