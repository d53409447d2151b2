"""Qwen Code chats (``~/.qwen/projects/<cwd>/chats/<session id>.jsonl``).

Qwen Code forked Gemini CLI but records a session like Claude Code does: one record a
line, ``{uuid, parentUuid, sessionId, timestamp, type, cwd, version, gitBranch}``, where
``type`` is ``user`` / ``assistant`` / ``tool_result`` / ``system``. The ``message`` of a
record is the Gemini API ``Content`` it sent or received, ``{role: user|model, parts}``:

- ``text`` parts (``thought: true`` ones are the model's reasoning), ``functionCall``
  parts (an assistant call, ``{id, name, args}``), ``functionResponse`` parts (its result,
  ``{id, name, response: {output}|{error}}``, on ``tool_result`` records whose
  ``toolCallResult`` holds the status);
- ``usageMetadata`` and ``model`` on assistant records (kept per row);
- ``system`` records by ``subtype``: ``chat_compression`` is Qwen Code's own compression
  (``systemPayload.info`` has ``originalTokenCount`` / ``newTokenCount``,
  ``compressedHistory`` the Contents sent from then on, its first user text the summary):
  a ``NativeCompaction`` (source "qwen-code") archiving the rows before it;
  ``slash_command`` is a meta row; ``custom_title`` names the session; ``ui_telemetry``
  and the rest are bookkeeping, counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from hermes_web.importers.agent_common import as_text, call, clip_title, compact, summary_row
from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    epoch,
    image_part,
    json_lines,
    keep_damage,
    safe_id,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_QWEN_CODE
NATIVE = "qwen-code"
RECORD_TYPES = ("user", "assistant", "tool_result", "system")
# Bookkeeping that never reached the model: counted in the fidelity report.
QUIET_SUBTYPES = {
    "ui_telemetry": "UI telemetry record",
    "at_command": "@-command record",
    "attribution_snapshot": "attribution snapshot",
    "file_history_snapshot": "file history snapshot",
}


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """The one session of a Qwen Code chat file (an unreadable line is left out and named;
    a torn last line is what a running Qwen Code leaves)."""
    reader = _Reader(file)
    damage = ParsedSession(source=SOURCE)  # the lines that could not be read
    for number, record in json_lines(stream, file, damage):
        if not isinstance(record, dict):
            raise ImportProblem(file, number, "a record that is not a JSON object")
        reader.add(record, number)
    session = reader.finish()
    keep_damage(session, damage)
    yield session


class _Reader:
    """Builds the session record by record, in file order (the order Qwen Code appended)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.session = ParsedSession(source=SOURCE, line=1)
        self.info: dict = {}
        self.title = ""
        self.custom_title = ""
        self.first: Any = None
        self.last: Any = None

    def add(self, record: dict, number: int) -> None:
        session = self.session
        session.records += 1
        kind = record.get("type")
        if kind not in RECORD_TYPES:
            raise ImportProblem(
                self.file,
                number,
                f"unknown record type {kind!r} (expected user, assistant, tool_result or system)",
            )
        if not session.public_id and isinstance(record.get("sessionId"), str):
            session.public_id = safe_id(record["sessionId"])
        for key in ("cwd", "version", "gitBranch"):
            if isinstance(record.get(key), str) and record[key]:
                self.info.setdefault(key, record[key])
        when = epoch(record.get("timestamp"))
        self.first = self.first or when
        self.last = when or self.last
        extra: dict = {"line": number}
        if isinstance(record.get("uuid"), str):
            extra["qwen_uuid"] = record["uuid"]
        if kind == "system":
            self._system(record, number, extra, when)
            return
        message = record.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
            raise ImportProblem(self.file, number, f"a {kind} record without message parts")
        parts = message["parts"]
        for index, part in enumerate(parts, 1):
            if not isinstance(part, dict):
                raise ImportProblem(self.file, number, f"part {index} is not a JSON object")
        if kind == "assistant":
            self._assistant(record, parts, number, extra, when)
        else:
            self._user(record, parts, number, extra, when)

    def _user(self, record: dict, parts: list, number: int, extra: dict, when) -> None:
        """A user turn, or (``tool_result`` records) the results of the calls before it."""
        session = self.session
        status = (record.get("toolCallResult") or {}).get("status")
        content: list[dict] = []
        for part in parts:
            response = part.get("functionResponse")
            if isinstance(response, dict):
                call_id = response.get("id")
                if not isinstance(call_id, str) or not call_id:
                    raise ImportProblem(self.file, number, "a functionResponse without an id")
                result_extra = dict(extra)
                if isinstance(status, str):
                    result_extra["status"] = status
                session.messages.append(
                    ParsedMessage(
                        role="tool",
                        content=_output(response.get("response")),
                        tool_call_id=call_id,
                        tool_name=str(response.get("name") or ""),
                        extra=result_extra,
                        created_at=when,
                    )
                )
            elif isinstance(part.get("text"), str):
                content.append({"type": "text", "text": part["text"]})
            elif isinstance(part.get("inlineData"), dict):
                data = part["inlineData"]
                url = f"data:{data.get('mimeType', '')};base64,{data.get('data', '')}"
                content.append(image_part(url))
        if not content:
            return
        text = "\n".join(p["text"] for p in content if p["type"] == "text")
        body: Any = text if all(p["type"] == "text" for p in content) else content
        session.messages.append(
            ParsedMessage(role="user", content=body, extra=extra, created_at=when)
        )
        self.title = self.title or text

    def _assistant(self, record: dict, parts: list, number: int, extra: dict, when) -> None:
        session = self.session
        if isinstance(record.get("model"), str) and record["model"]:
            session.model = session.model or record["model"]
            extra["model"] = record["model"]
        if isinstance(record.get("usageMetadata"), dict):
            extra["usage"] = record["usageMetadata"]
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[dict] = []
        for part in parts:
            function = part.get("functionCall")
            if isinstance(function, dict):
                call_id, name = function.get("id"), function.get("name")
                if not isinstance(call_id, str) or not call_id:
                    raise ImportProblem(self.file, number, "a functionCall without an id")
                if not isinstance(name, str):
                    raise ImportProblem(self.file, number, f"call {call_id}: name is not text")
                calls.append(call(call_id, name, function.get("args")))
            elif isinstance(part.get("text"), str):
                (thoughts if part.get("thought") else texts).append(part["text"])
        session.messages.append(
            ParsedMessage(
                role="assistant",
                content="\n".join(texts) or None,
                tool_calls=calls or None,
                reasoning="\n\n".join(thoughts) or None,
                extra=extra,
                created_at=when,
            )
        )

    def _system(self, record: dict, number: int, extra: dict, when) -> None:
        session = self.session
        subtype = record.get("subtype")
        payload = record.get("systemPayload")
        payload = payload if isinstance(payload, dict) else {}
        if subtype == "chat_compression":
            self._compression(payload, extra, when)
        elif subtype == "slash_command":
            if payload.get("phase", "invocation") == "invocation":
                command = str(payload.get("rawCommand") or "")
                session.messages.append(
                    ParsedMessage(
                        role="user", content=command, meta="command", extra=extra, created_at=when
                    )
                )
                session.skip("slash command (kept as a meta row)")
            else:
                session.skip("slash command output")
        elif subtype == "custom_title":
            if isinstance(payload.get("customTitle"), str):
                self.custom_title = payload["customTitle"]  # the newest wins, as in its list
            session.skip("custom title record")
        else:
            session.skip(QUIET_SUBTYPES.get(str(subtype), f"system record ({subtype})"))

    def _compression(self, payload: dict, extra: dict, when) -> None:
        """Qwen Code's own compression: its figures and its summary verbatim. Its
        ``compressedHistory`` is the summary turn, the model's acknowledgement and the
        Contents it kept: the rows matching those stay active (``kept_by``) after the
        summary row, every other row before it is archived as replaced."""
        session = self.session
        info: dict = payload["info"] if isinstance(payload.get("info"), dict) else {}
        history = payload.get("compressedHistory")
        history = [c for c in history if isinstance(c, dict)] if isinstance(history, list) else []
        summary, tail = "", history
        if history and history[0].get("role") == "user":
            summary = _parts_text(history[0])
            tail = history[2:] if len(history) > 1 and history[1].get("role") == "model" else []
        kept = _kept_rows(session.messages, tail)
        compaction_extra = dict(extra)
        compaction_extra["compressed_history_contents"] = len(history)
        compaction_extra["kept_rows"] = len(kept)
        if "compressionStatus" in info:
            compaction_extra["compression_status"] = info["compressionStatus"]
        replaced = [m for m in session.messages if id(m) not in kept]
        index = compact(
            session,
            session.messages,
            NativeCompaction(
                source=NATIVE,
                created_at=when,
                tokens_before=_count(info.get("originalTokenCount")),
                tokens_after=_count(info.get("newTokenCount")),
                summary=summary,
                marker="" if summary else "chat compressed (no summary recorded)",
                extra=compaction_extra,
            ),
            replaced,
        )
        at = len(session.messages)
        for position, message in enumerate(session.messages):
            if id(message) in kept:
                message.kept_by = index
                at = min(at, position)
        if summary:  # sent before the kept Contents, as Qwen Code rebuilds its history
            session.messages.insert(at, summary_row(summary, index, extra, when))
        session.skip("chat compression record (kept as a native compaction)")

    def finish(self) -> ParsedSession:
        session = self.session
        if not session.public_id:
            session.public_id = safe_id(self.file.rsplit("/", 1)[-1].rsplit(".", 1)[0])
        session.created_at, session.ended_at = self.first, self.last
        session.title = clip_title(self.custom_title or self.title)
        session.extra = {"qwen_code": self.info}
        return session


def _parts_text(content: dict) -> str:
    return "\n".join(
        p["text"]
        for p in content.get("parts") or ()
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    )


def _kept_rows(messages: list[ParsedMessage], tail: list[dict]) -> set[int]:
    """The rows (by ``id()``) a compression kept: its Contents after the summary matched to
    the active rows, from the end (call ids for calls and results, text for the rest)."""
    kept: set[int] = set()
    rows = [m for m in messages if m.active and not m.meta]
    cursor = len(rows)
    for content in reversed(tail):
        parts = [p for p in content.get("parts") or () if isinstance(p, dict)]
        calls = {
            p["functionCall"].get("id") for p in parts if isinstance(p.get("functionCall"), dict)
        }
        answers = {
            p["functionResponse"].get("id")
            for p in parts
            if isinstance(p.get("functionResponse"), dict)
        }
        text = _parts_text(content)
        for position in range(cursor - 1, -1, -1):
            row = rows[position]
            if answers and row.role == "tool" and row.tool_call_id in answers:
                found = [r for r in rows[:cursor] if r.role == "tool" and r.tool_call_id in answers]
                kept.update(id(r) for r in found)
                cursor = min(rows.index(r) for r in found)
                break
            if calls and row.role == "assistant":
                if {c["id"] for c in row.tool_calls or ()} & calls:
                    kept.add(id(row))
                    cursor = position
                    break
            elif not answers and not calls and text and row.role in ("user", "assistant"):
                body = row.content if isinstance(row.content, str) else ""
                if body == text:
                    kept.add(id(row))
                    cursor = position
                    break
    return kept


def _output(response: Any) -> str:
    """A functionResponse's ``response`` as the text the model read."""
    if isinstance(response, dict) and set(response) <= {"output", "error"} and response:
        return as_text(response.get("output", response.get("error")))
    return as_text(response)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
