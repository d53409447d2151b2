"""Goose sessions (block/goose), in both of the forms Goose has stored them:

- before 1.10, ``~/.local/share/goose/sessions/<id>.jsonl``: a first line of session
  metadata (``working_dir``, ``description``, ``message_count``, ``total_tokens``,
  ``input_tokens``, ``output_tokens``, ``accumulated_*``, ``schedule_id``), then one
  ``Message`` a line;
- since, ``~/.local/share/goose/sessions/sessions.db`` (SQLite): ``sessions`` (``id``,
  ``name`` / ``description``, ``working_dir``, ``session_type``, ``created_at``, the token
  counts, ``provider_name``, ``model_config_json``) and ``messages`` (``session_id``,
  ``role``, ``content_json``, ``created_timestamp``, ``tokens``, ``metadata_json``).

A ``Message`` is ``{id, role: user|assistant, created, content, metadata}``; ``content`` a
list of ``{type, ...}``: ``text``, ``image`` (``mimeType``), ``thinking`` (the reasoning),
``redactedThinking``, ``toolRequest`` (``id``, ``toolCall: {status: success, value: {name,
arguments}} | {status: error, error}``) in an assistant message and ``toolResponse``
(``id`` — the request's — and ``toolResult``, whose ``value`` is an MCP ``CallToolResult``
or, in old files, a bare list of contents) in the next user message.

Goose's compaction (``context_mgmt::compact_messages``) keeps every message and flips its
``metadata``: the compacted history becomes ``agentVisible: false`` (still shown to the
user), then comes the summary — a *user* message with ``userVisible: false,
agentVisible: true`` — and an assistant message, equally hidden from the user, telling the
model "Your context was compacted…" (``at the user's request`` when it was ``/compact``).
The summary becomes a ``NativeCompaction`` (source "goose") and its summary row, the
history before it archived, and the continuation note a meta row. A later compaction hides
the earlier summary from the model too: a user message hidden from both is the older
summary, read the same way. Before Goose 1.14 a ``conversationCompacted`` content marked
the spot with no summary kept: a compaction with only its marker.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from hermes_web.importers import agent_common, sqlite_file
from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    epoch,
    json_lines,
    keep_damage,
    safe_id,
)
from hermes_web.importers.sqlite_detect import open_agent_db
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_GOOSE
NATIVE = "goose"
# A Goose Message as serde writes it: id?, role, created, content — in that order.
MESSAGE_LINE = re.compile(
    r'"role"\s*:\s*"(?:user|assistant)"\s*,\s*"created"\s*:\s*-?\d+\s*,\s*"content"\s*:\s*\['
)
# The legacy file's first line: the session metadata, in any key order (Goose's loader,
# session/legacy.rs, fills in message_count when an old file lacks it).
METADATA_LINE = re.compile(
    r'\A\s*\{(?=[^\n]*"working_dir"\s*:)(?=[^\n]*"(?:description|message_count)"\s*:)'
)
CONTINUATION = "Your context was compacted"
MANUAL = "at the user's request"
TOKEN_KEYS = (
    *("total_tokens", "input_tokens", "output_tokens", "accumulated_total_tokens"),
    *("accumulated_input_tokens", "accumulated_output_tokens", "message_count"),
)
SESSION_COLUMNS = (
    *("id", "name", "description", "session_type", "working_dir", "created_at", "updated_at"),
    *TOKEN_KEYS[:-1],
    *("schedule_id", "provider_name", "model_config_json"),
)
MESSAGE_COLUMNS = (
    *("id", "message_id", "role", "content_json", "created_timestamp", "tokens"),
    "metadata_json",
)


def is_goose_jsonl(head: str) -> bool:
    """Whether the start of a text file is a Goose session file (metadata line or messages)."""
    return bool(METADATA_LINE.match(head) or MESSAGE_LINE.search(head))


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """The one session of a Goose ``<id>.jsonl`` (an unreadable line is left out and
    named; a torn last line is what a running Goose leaves)."""
    reader = _Reader(file)
    reader.session.public_id = safe_id(Path(file).stem)
    damage = ParsedSession(source=SOURCE)
    for number, record in json_lines(stream, file, damage):
        if not isinstance(record, dict):
            raise ImportProblem(file, number, "a record that is not a JSON object")
        reader.session.records += 1
        if "role" not in record and "content" not in record:
            if reader.session.records == 1:
                _metadata(reader.session, record)
                reader.session.skip("session metadata line (kept on the session)")
                continue
            raise ImportProblem(file, number, "a line that is neither metadata nor a message")
        reader.add(record.get("content"), record, record.get("metadata"), number)
    session = reader.finish()
    keep_damage(session, damage)
    yield session


def _metadata(session: ParsedSession, data: dict) -> None:
    """Title, working directory, model and token counts from a metadata line or row."""
    session.title = agent_common.clip_title(str(data.get("name") or data.get("description") or ""))
    recorded = {k: data[k] for k in TOKEN_KEYS if isinstance(data.get(k), int)}
    for key in ("session_type", "schedule_id", "provider_name"):
        if data.get(key):
            recorded[key] = data[key]
    session.extra["goose"] = recorded
    session.created_at = session.created_at or epoch(data.get("created_at"))
    if data.get("working_dir"):
        session.extra["cwd"] = str(data["working_dir"])
    config = data.get("model_config") or data.get("model_config_json")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except (ValueError, RecursionError):
            config = None
    if isinstance(config, dict) and isinstance(config.get("model_name"), str):
        session.model = config["model_name"]


class _Reader:
    """Goose messages in order, turned into rows (shared by the file and the database)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.session = ParsedSession(source=SOURCE, line=1)
        self.rows: list[ParsedMessage] = []
        self.waiting: NativeCompaction | None = None  # its continuation note comes next

    def add(self, content: Any, record: dict, metadata: Any, where: int) -> None:
        session = self.session
        role = record.get("role")
        if role not in ("user", "assistant"):
            raise ImportProblem(self.file, where, f"unknown role {role!r} (user or assistant)")
        if not isinstance(content, list) or not all(isinstance(p, dict) for p in content):
            raise ImportProblem(self.file, where, "'content' is not a list of JSON objects")
        meta = metadata if isinstance(metadata, dict) else {}
        user_visible = meta.get("userVisible", meta.get("user_visible", True)) is not False
        agent_visible = meta.get("agentVisible", meta.get("agent_visible", True)) is not False
        when = epoch(record.get("created"))
        extra: dict = {"line": where} if where else {}
        if record.get("id"):
            extra["message_id"] = str(record["id"])
        if not agent_visible:
            extra["agent_visible"] = False  # history Goose compacted away from the model
        texts = [
            p["text"] for p in content if p.get("type") == "text" and isinstance(p.get("text"), str)
        ]
        text = "\n\n".join(texts)
        if not user_visible and role == "assistant" and text.startswith(CONTINUATION):
            if self.waiting is not None:
                self.waiting.trigger = "manual" if MANUAL in text else "auto"
                self.waiting = None
            self.rows.append(
                ParsedMessage(role="assistant", content=text, meta="goose_continuation",
                              extra=extra, created_at=when)
            )  # fmt: skip
            return
        if not user_visible and role == "user" and texts:
            self._compaction(text, extra, when, agent_visible)
            return
        calls, reasoning, shown = [], [], list(texts)
        for part in content:
            kind = part.get("type")
            if kind == "text":
                continue
            if kind == "thinking" and isinstance(part.get("thinking"), str):
                reasoning.append(part["thinking"])
            elif kind in ("toolRequest", "frontendToolRequest") and part.get("id"):
                calls.append(self._call(part))
            elif kind == "toolResponse" and part.get("id"):
                self._result(part, extra, when)
            elif kind == "image":
                shown.append(f"[image: {part.get('mimeType') or part.get('mime_type') or ''}]")
            elif kind == "conversationCompacted":
                self._compaction("", extra, when, True, str(part.get("msg") or ""))
            else:
                session.skip(f"{kind} content of a {role} message")
        if role == "user" and not shown:
            return  # a message of tool responses only
        if role == "assistant" and not (shown or calls or reasoning):
            session.skip("assistant message with no text, reasoning or call")
            return
        self.rows.append(
            ParsedMessage(
                role=role,
                content="\n\n".join(shown) or (None if role == "assistant" else ""),
                tool_calls=calls or None,
                reasoning="\n".join(reasoning) or None,
                extra=extra,
                created_at=when,
            )
        )

    def _call(self, part: dict) -> dict:
        call = _object(part.get("toolCall"))
        value = _object(call.get("value"))
        if call.get("status") == "success" and value.get("name"):
            return agent_common.call(str(part["id"]), str(value["name"]), value.get("arguments"))
        # Goose keeps a call the model wrote badly as an error; its response says so too.
        return agent_common.call(
            str(part["id"]), "invalid_tool_call", {"error": str(call.get("error") or "")}
        )

    def _result(self, part: dict, extra: dict, when) -> None:
        result = _object(part.get("toolResult"))
        value = result.get("value")
        row_extra = dict(extra)
        if result.get("status") == "error":
            text, row_extra["is_error"] = str(result.get("error") or ""), True
        else:
            items = value.get("content") if isinstance(value, dict) else value  # old: a list
            if isinstance(value, dict) and value.get("isError"):
                row_extra["is_error"] = True
            text = "\n".join(_content_text(c) for c in items or () if isinstance(c, dict))
        self.rows.append(
            ParsedMessage(role="tool", content=text, tool_call_id=str(part["id"]),
                          extra=row_extra, created_at=when)
        )  # fmt: skip

    def _compaction(self, summary: str, extra: dict, when, current: bool, marker="") -> None:
        compaction = NativeCompaction(
            source=NATIVE,
            created_at=when,
            summary=summary,
            marker="" if summary else (marker or "Goose compacted here; no summary was kept"),
            extra={**extra, "replaced_later": not current},
        )
        index = agent_common.compact(self.session, self.rows, compaction)
        self.waiting = compaction
        if summary.strip():
            row = agent_common.summary_row(summary, index, extra, when)
            self.rows.append(row)

    def finish(self) -> ParsedSession:
        self.session.messages = self.rows
        if self.rows and self.session.created_at is None:
            self.session.created_at = self.rows[0].created_at
        return self.session


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _content_text(item: dict) -> str:
    if isinstance(item.get("text"), str):
        return item["text"]
    if item.get("type") == "image":
        return f"[image: {item.get('mimeType') or ''}]"
    if isinstance(item.get("resource"), dict):
        resource = item["resource"]
        return str(resource.get("text") or f"[resource: {resource.get('uri') or ''}]")
    return json.dumps(item, ensure_ascii=False)


def parse_path(path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    """Every session of a Goose ``sessions.db``, oldest first; one bad message fails its
    session only."""
    yield from sqlite_file.each_session(open_agent_db(path, file), file, _sessions)


def _sessions(db: sqlite3.Connection, file: str) -> sqlite_file.Sessions:
    """Check the tables; the sessions, oldest first, and how one is read."""
    names, found = sqlite_file.agent_tables(
        db,
        file,
        "Goose",
        {
            "sessions": (SESSION_COLUMNS, ("id",)),
            "messages": (MESSAGE_COLUMNS, ("role", "content_json")),
        },
    )
    session_columns, message_columns = found["sessions"], found["messages"]
    order = " ORDER BY created_at, id" if "created_at" in session_columns else " ORDER BY id"

    def read(row: dict, number: int) -> ParsedSession:
        # Goose reads a conversation back in insertion order (its autoincrement id).
        messages = sqlite_file.rows(
            db,
            names["messages"],
            message_columns,
            " WHERE session_id = ? ORDER BY rowid",
            (str(row["id"]),),
        )
        return _db_session(row, messages, file, number)

    return sqlite_file.rows(db, names["sessions"], session_columns, order), read


def _db_session(row: dict, messages: list[dict], file: str, number: int) -> ParsedSession:
    reader = _Reader(file)
    session = reader.session
    session.line = number
    session.public_id = safe_id(str(row["id"]))
    _metadata(session, row)
    session.created_at = epoch(row.get("created_at"))
    for message in messages:
        session.records += 1
        where = f"message {message.get('id')}"
        content = _loaded(message.get("content_json"), file, where, "content_json")
        metadata = _loaded(message.get("metadata_json"), file, where, "metadata_json")
        record = {
            "role": message.get("role"),
            "created": message.get("created_timestamp"),
            "id": message.get("message_id") or "",
        }
        try:
            reader.add(content, record, metadata, 0)
        except ImportProblem as problem:
            raise ImportProblem(file, 0, f"{where}: {problem.problem}") from None
        if reader.rows and isinstance(message.get("tokens"), int):
            reader.rows[-1].extra.setdefault("tokens", message["tokens"])
    return reader.finish()


def _loaded(value: Any, file: str, where: str, column: str) -> Any:
    if value in (None, ""):
        return None
    try:
        return json.loads(value)
    except (TypeError, ValueError, RecursionError):
        raise ImportProblem(file, 0, f"{where}: '{column}' is not JSON") from None
