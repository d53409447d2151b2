"""Hermes Agent sessions: the JSONL export (one session object per line) and ``state.db``.

See reference §13: message flags ``active``/``compacted``/``_compressed_summary``, content
stored as ``"\\x00json:"`` / ``"\\x01json:"`` + JSON for lists and dicts, ``tool_calls`` as
JSON text, rotation chains through ``parent_session_id``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from compaction import PREFIX_OPENING
from hermes_web.importers.base import (
    ImportProblem,
    ParsedMessage,
    ParsedSession,
    check_role,
    epoch,
    iter_lines,
    json_line,
    text_of,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_HERMES
JSON_PREFIXES = ("\x00json:", "\x01json:")
SUMMARY_OPENINGS = ("[CONTEXT COMPACTION", PREFIX_OPENING, "[CONTEXT SUMMARY]:")
# Message keys that become Message fields; everything else is kept in Message.extra.
_FIELDS = {
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "reasoning",
    "active",
    "compacted",
    "_compressed_summary",
    "id",
    "session_id",
    "timestamp",
}


def decode_content(value: Any) -> Any:
    """Prefixed JSON → list/dict; anything unreadable stays the plain text it is."""
    if isinstance(value, str):
        for prefix in JSON_PREFIXES:
            if value.startswith(prefix):
                try:
                    return json.loads(value[len(prefix) :])
                except json.JSONDecodeError:
                    return value
    return value


def _json_field(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def is_summary_row(row: dict, content: Any) -> bool:
    if row.get("_compressed_summary"):
        return True
    text = text_of(content).lstrip()
    return text.startswith(SUMMARY_OPENINGS)


def _flag(value: Any, default: bool) -> bool:
    if value is None:
        return default
    return bool(int(value)) if isinstance(value, int | str | float) else bool(value)


def parse_message(row: dict, file: str, line: int, session_id: str) -> ParsedMessage:
    if not isinstance(row, dict):
        raise ImportProblem(
            file, line, f"a message is {type(row).__name__}, not an object", session_id
        )
    role = check_role(row.get("role"), file, line, session_id)
    content = decode_content(row.get("content"))
    tool_calls = _json_field(row.get("tool_calls"))
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise ImportProblem(file, line, "tool_calls is not a list", session_id)
    active = _flag(row.get("active"), True)
    compacted = _flag(row.get("compacted"), False)
    extra = {k: _json_field(v) for k, v in row.items() if k not in _FIELDS and v not in (None, "")}
    if not active and not compacted:
        extra["superseded"] = True  # a carried-forward duplicate or a rewound row
    reasoning = row.get("reasoning") or row.get("reasoning_content") or None
    return ParsedMessage(
        role=role,
        content=content,
        tool_calls=tool_calls or None,
        tool_call_id=str(row.get("tool_call_id") or ""),
        tool_name=str(row.get("tool_name") or row.get("name") or ""),
        reasoning=reasoning,
        active=active,
        archived=not active,
        is_summary=is_summary_row(row, content),
        extra=extra,
        created_at=epoch(row.get("timestamp")),
    )


def _session(obj: dict, file: str, line: int) -> ParsedSession:
    session_id = obj.get("id")
    if not isinstance(session_id, str) or not session_id.strip():
        raise ImportProblem(file, line, "session object has no string 'id'")
    messages = obj.get("messages")
    if not isinstance(messages, list):
        raise ImportProblem(file, line, "session object has no 'messages' list", session_id)
    keep = (
        "cwd",
        "git_branch",
        "profile_name",
        "model_config",
        "input_tokens",
        "output_tokens",
        "message_count",
    )
    return ParsedSession(
        source=SOURCE,
        public_id=session_id.strip()[:100],
        title=str(obj.get("title") or obj.get("display_name") or "")[:200],
        model=str(obj.get("model") or ""),
        messages=[parse_message(m, file, line, session_id) for m in messages],
        created_at=epoch(obj.get("started_at")),
        ended_at=epoch(obj.get("ended_at")),
        end_reason=str(obj.get("end_reason") or "")[:32],
        parent_id=str(obj.get("parent_session_id") or ""),
        extra={
            "hermes": {k: obj[k] for k in keep if obj.get(k) not in (None, "")},
            "hermes_source": obj.get("source"),
        },
        line=line,
    )


def parse_jsonl(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """One session per line; a bad line is one failed session, the others still import."""
    for number, text in iter_lines(stream, file):
        if isinstance(text, ImportProblem):
            yield text
            continue
        try:
            obj = json_line(text, file, number)
            if not isinstance(obj, dict):
                raise ImportProblem(
                    file, number, f"expected a session object, got a JSON {type(obj).__name__}"
                )
            yield _session(obj, file, number)
        except ImportProblem as problem:
            yield problem


# --- state.db --------------------------------------------------------------------------

_REQUIRED = {
    "sessions": {"id", "parent_session_id", "started_at"},
    "messages": {"id", "session_id", "role", "content"},
}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}  # noqa: S608 - fixed names


def open_state_db(path: Path, file: str) -> tuple[sqlite3.Connection, dict[str, set[str]]]:
    """Open read-only (never writes, never creates) and check it is Hermes's schema."""
    try:
        db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        columns = {table: _columns(db, table) for table in _REQUIRED}
    except sqlite3.DatabaseError as error:
        raise ImportProblem(file, 0, f"not a readable SQLite database: {error}") from None
    for table, needed in _REQUIRED.items():
        if not columns[table]:
            db.close()
            raise ImportProblem(file, 0, f"not a Hermes state.db: it has no '{table}' table")
        if missing := needed - columns[table]:
            db.close()
            raise ImportProblem(
                file,
                0,
                f"not a Hermes state.db: table '{table}' lacks {', '.join(sorted(missing))}",
            )
    return db, columns


def parse_db(path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    db, columns = open_state_db(path, file)
    try:
        order = "started_at, id"
        for number, row in enumerate(
            db.execute(f"SELECT * FROM sessions ORDER BY {order}"), start=1
        ):  # noqa: S608
            obj = dict(row)
            where = f"session {obj.get('id')}"
            try:
                cursor = db.execute(
                    "SELECT * FROM messages WHERE session_id = ? ORDER BY id", (obj["id"],)
                )
                obj["messages"] = [dict(m) for m in cursor]
                yield _session(obj, file, number)
            except ImportProblem as problem:
                problem.line = problem.line or number
                yield problem
            except sqlite3.DatabaseError as error:
                yield ImportProblem(file, number, f"cannot read {where}: {error}")
    except sqlite3.DatabaseError as error:
        yield ImportProblem(file, 0, f"cannot read sessions: {error}")
    finally:
        db.close()
