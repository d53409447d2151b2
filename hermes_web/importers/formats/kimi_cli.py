"""Kimi CLI sessions (``~/.kimi/sessions/<work dir hash>/<session id>/context.jsonl``).

A context file is the model's context as Kimi CLI restores it, one record a line:

- OpenAI-like messages: ``user`` (text, or ``text`` / ``image_url`` parts), ``assistant``
  (``text`` and ``think`` parts, ``tool_calls`` in OpenAI form), ``tool`` (``tool_call_id``,
  text parts), ``system``;
- ``{"role": "_checkpoint", "id": N}``: a point the agent can revert to (its D-Mail);
  kept as the id on the next row (``extra["checkpoint"]``), never a row itself;
- ``{"role": "_usage", "token_count": N}``: the tokens of the whole context after a step,
  as the provider counted them; kept on the assistant row before it
  (``extra["usage"]["context_tokens"]``) and the newest as the session's.

Kimi CLI's compaction rotates the file (the old one becomes ``context_1.jsonl``) and starts
the new one with the summary: a message whose first part is ``<system>Previous context has
been compacted. Here is the compaction output:</system>`` (role ``assistant`` before 0.50,
``user`` after), followed by the preserved last messages. That message becomes a
``NativeCompaction`` (source "kimi-cli") with its summary row; its size after is the next
``_usage``, its size before the last ``_usage`` of the newest ``context_N.jsonl`` beside it. ``<system>CHECKPOINT N</system>`` user messages (what the model is told of a
checkpoint) are meta rows.

``wire.jsonl`` beside the context file (the UI's event log: a ``metadata`` line, then
``{timestamp, message: {type, payload}}`` records) gives the session its start and end
times, which the context file does not record; imported on its own it is refused with a
pointer to the context file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import IO, Any

from hermes_web.importers.agent_common import as_text, clip_title, summary_row
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
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_KIMI_CLI
NATIVE = "kimi-cli"
COMPACTED = "<system>Previous context has been compacted. Here is the compaction output:</system>"
CHECKPOINT_NOTE = re.compile(r"\A\s*<system>CHECKPOINT \d+</system>\s*\Z")
ROLES = ("user", "assistant", "tool", "system")
HEAD = 4096
# The earlier contexts of a session, renamed when it compacted or reverted to a checkpoint.
ROTATED = re.compile(r"\Acontext_\d+\.jsonl\Z")
# wire.jsonl's first line: {"type": "metadata", "protocol_version": "1.3"}.
WIRE_HEADER = re.compile(r'\A\s*\{\s*"type"\s*:\s*"metadata"\s*,\s*"protocol_version"\s*:')
WIRE_MAX_BYTES = 256 * 1024 * 1024  # read line by line; past this its times are not looked for


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """The one session of a Kimi CLI context file (an unreadable line is left out and named;
    a torn last line is what a running Kimi CLI leaves)."""
    reader = _Reader(file)
    reader.folder = _session_folder(stream, file)
    head = stream.read(HEAD)
    if WIRE_HEADER.match(head.decode("utf-8", errors="replace").lstrip("\ufeff")):
        raise ImportProblem(
            file,
            1,
            "a Kimi CLI wire.jsonl (the UI's event log): import the context.jsonl beside it, "
            "which holds the conversation",
        )
    reader.digest = hashlib.sha256(head).hexdigest()[:16]
    stream.seek(0)
    damage = ParsedSession(source=SOURCE)  # the lines that could not be read
    for number, record in json_lines(stream, file, damage):
        if not isinstance(record, dict):
            raise ImportProblem(file, number, "a record that is not a JSON object")
        reader.add(record, number)
    session = reader.finish()
    keep_damage(session, damage)
    if reader.head_compaction is not None:
        reader.head_compaction.tokens_before = _tokens_before(stream)
    wire = _wire_beside(stream)
    if wire is not None:
        _read_wire(session, wire)
    yield session


class _Reader:
    def __init__(self, file: str) -> None:
        self.file = file
        self.session = ParsedSession(source=SOURCE, line=1)
        self.checkpoint: int | None = None
        self.folder = ""
        self.head_compaction: NativeCompaction | None = None  # the file starts with it
        self.digest = ""
        self.checkpoints = 0
        self.tokens: int | None = None
        self.waiting: NativeCompaction | None = None  # a compaction whose size after is next
        self.prompt_tokens: int | None = None  # a _usage read before its assistant row
        self.last_was_message = False
        self.names: dict[str, str] = {}  # call id -> tool name: results carry only the id

    def add(self, record: dict, number: int) -> None:
        session = self.session
        session.records += 1
        role = record.get("role")
        if role == "_checkpoint":
            self.checkpoint = record.get("id") if isinstance(record.get("id"), int) else None
            self.checkpoints += 1
            session.skip("checkpoint record (kept as the next row's checkpoint)")
            return
        if role == "_usage":
            self._usage(record, number)
            return
        if role not in ROLES:
            raise ImportProblem(
                self.file,
                number,
                f"unknown role {role!r} (expected user, assistant, tool, system, "
                "_checkpoint or _usage)",
            )
        self.last_was_message = True
        extra: dict = {"line": number}
        if role == "assistant" and self.prompt_tokens is not None:
            extra["usage"], self.prompt_tokens = {"prompt_tokens": self.prompt_tokens}, None
        if self.checkpoint is not None:
            extra["checkpoint"], self.checkpoint = self.checkpoint, None
        content = record.get("content")
        parts = content if isinstance(content, list) else None
        if parts is not None:
            for index, part in enumerate(parts, 1):
                if not isinstance(part, dict):
                    raise ImportProblem(self.file, number, f"part {index} is not a JSON object")
        elif content is not None and not isinstance(content, str):
            raise ImportProblem(self.file, number, "content is neither text nor a list of parts")
        text = _text(content)
        if role in ("user", "assistant") and text.startswith(COMPACTED):
            self._compaction(text[len(COMPACTED) :].strip(), extra)
            return
        if role == "assistant":
            self._assistant(record, parts, content, number, extra)
        elif role == "tool":
            call_id = record.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise ImportProblem(self.file, number, "a tool result without a tool_call_id")
            session.messages.append(
                ParsedMessage(
                    role="tool",
                    content=text,
                    tool_call_id=call_id,
                    tool_name=self.names.get(call_id, ""),
                    extra=extra,
                )
            )
        else:
            message = ParsedMessage(role=role, content=_body(content), extra=extra)
            if role == "user" and CHECKPOINT_NOTE.match(text):
                message.meta = "checkpoint"
                session.skip("checkpoint note to the model (kept as a meta row)")
            elif role == "user" and not session.title:
                session.title = clip_title(text)
            session.messages.append(message)

    def _assistant(self, record: dict, parts, content, number: int, extra: dict) -> None:
        thoughts = [p["think"] for p in parts or () if p.get("type") == "think" and p.get("think")]
        calls = record.get("tool_calls") or None
        if calls is not None:
            if not isinstance(calls, list):
                raise ImportProblem(self.file, number, "tool_calls is not a list")
            for index, tool_call in enumerate(calls, 1):
                function = tool_call.get("function") if isinstance(tool_call, dict) else None
                if not isinstance(function, dict) or not isinstance(tool_call.get("id"), str):
                    raise ImportProblem(
                        self.file, number, f"tool call {index} has no id or no function"
                    )
                self.names[tool_call["id"]] = str(function.get("name") or "")
        self.session.messages.append(
            ParsedMessage(
                role="assistant",
                content=_text(content) or None,
                tool_calls=calls,
                reasoning="\n\n".join(thoughts) or None,
                extra=extra,
            )
        )

    def _usage(self, record: dict, number: int) -> None:
        """Kimi CLI writes one before a step (the prompt as the provider counted it) and one
        after (the context with the reply added): the first goes on the next assistant row
        as ``prompt_tokens``, the second on that row as ``context_tokens``."""
        count = record.get("token_count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ImportProblem(self.file, number, "a _usage record without a token_count")
        self.tokens = count
        if self.waiting is not None:
            self.waiting.tokens_after, self.waiting = count, None
        last = self.session.messages[-1] if self.session.messages else None
        if last is not None and last.role == "assistant" and self.last_was_message:
            last.extra.setdefault("usage", {})["context_tokens"] = count
        else:
            self.prompt_tokens = count
        self.last_was_message = False
        self.session.skip("usage record (kept on its assistant row)")

    def _compaction(self, summary: str, extra: dict) -> None:
        """Kimi CLI's own compaction: the summary at the head of the new context file; what
        it replaced is in the rotated file beside it (context_N.jsonl), not in this one."""
        session = self.session
        compaction = NativeCompaction(
            source=NATIVE,
            summary=summary,
            tokens_before=None,
            marker="" if summary else "context compacted (no summary recorded)",
            extra={**extra, "preceding_context_tokens": self.tokens},
        )
        if not any(not m.meta for m in session.messages):
            self.head_compaction = compaction
        session.native_compactions.append(compaction)
        index = len(session.native_compactions) - 1
        # Rows before it in the same file (a compaction after a revert) are what it replaced.
        for message in session.messages:
            if message.active and not message.meta:
                message.active, message.archived, message.replaced_by = False, True, index
        session.messages.append(summary_row(summary, index, extra))
        self.waiting = compaction
        session.skip("compaction summary (kept as a native compaction)")

    def finish(self) -> ParsedSession:
        session = self.session
        name = PurePath(self.file.replace("\\", "/")).stem
        if self.folder:
            session.public_id = safe_id(self.folder)
        elif name in ("context", "wire") or name.startswith("context_"):
            # A bare context.jsonl names no session (an upload, or a file given by name):
            # the hash of its start is stable as the file grows.
            session.public_id = f"kimi-{self.digest}"
        else:
            session.public_id = safe_id(name)
        info: dict = {"checkpoints": self.checkpoints}
        if self.tokens is not None:
            info["context_tokens"] = self.tokens
        session.extra = {"kimi_cli": info}
        return session


def _session_folder(stream: IO[bytes], file: str) -> str:
    """The session id Kimi CLI names the folder with: ``sessions/<hash>/<id>/context.jsonl``
    (from the file being read; an upload's temporary copy names nothing)."""
    for candidate in (getattr(stream, "name", None), file):
        if isinstance(candidate, str):
            path = PurePath(candidate.replace("\\", "/"))
            if path.name == "context.jsonl" and path.parent.name:
                return path.parent.name
            if ROTATED.match(path.name) and path.parent.name:  # an earlier context of it
                return f"{path.parent.name}.{path.stem}"
    return ""


def _wire_beside(stream: IO[bytes]) -> Path | None:
    """The session's ``wire.jsonl`` beside the context file being read, if there is one."""
    name = getattr(stream, "name", None)
    if not isinstance(name, str) or PurePath(name).name != "context.jsonl":
        return None
    wire = Path(name).with_name("wire.jsonl")
    try:
        return wire if wire.is_file() and wire.stat().st_size <= WIRE_MAX_BYTES else None
    except OSError:
        return None


def _tokens_before(stream: IO[bytes]) -> int | None:
    """The size of the context a compaction at the head of ``context.jsonl`` replaced: the
    last ``_usage`` of the newest rotated file beside it (``context_N.jsonl``, highest N:
    Kimi CLI renames the old context there when it compacts)."""
    name = getattr(stream, "name", None)
    if not isinstance(name, str) or PurePath(name).name != "context.jsonl":
        return None
    folder = Path(name).parent
    try:
        rotated = [p for p in folder.iterdir() if ROTATED.match(p.name) and p.is_file()]
    except OSError:
        return None
    if not rotated:
        return None
    newest = max(rotated, key=lambda p: int(p.stem.split("_", 1)[1]))
    count = None
    try:
        if newest.stat().st_size > WIRE_MAX_BYTES:
            return None
        with open(newest, "rb") as lines:
            for raw in lines:
                if b'"_usage"' not in raw:
                    continue
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("token_count"), int):
                    count = record["token_count"]
    except OSError:
        return None
    return count


def _read_wire(session: ParsedSession, wire: Path) -> None:
    """What the wire log adds to the context: when the session ran (the first and last
    record's ``timestamp``), its protocol version and how many turns and compactions it
    shows. An unreadable line is counted, never a failure: the context is the session."""
    info = session.extra["kimi_cli"]
    kinds: dict[str, int] = {}
    first = last = None
    try:
        with open(wire, "rb") as lines:
            for number, raw in enumerate(lines, 1):
                try:
                    record = json.loads(raw)
                except ValueError:
                    session.skip("wire.jsonl line that is not JSON")
                    continue
                if not isinstance(record, dict):
                    continue
                if number == 1 and record.get("type") == "metadata":
                    info["wire_protocol"] = str(record.get("protocol_version") or "")
                    continue
                when = epoch(record.get("timestamp"))
                first, last = first or when, when or last
                message = record.get("message")
                if isinstance(message, dict) and isinstance(message.get("type"), str):
                    kinds[message["type"]] = kinds.get(message["type"], 0) + 1
    except OSError:
        session.skip("wire.jsonl beside it could not be read")
        return
    session.created_at, session.ended_at = first, last
    info["wire_turns"] = kinds.get("TurnBegin", 0)
    info["wire_compactions"] = kinds.get("CompactionBegin", 0)


def _text(content: Any) -> str:
    """The text of a message: a string, or its ``text`` parts joined (``think`` left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if p.get("type") == "text" and isinstance(p.get("text"), str)
        )
    return ""


def _body(content: Any) -> Any:
    """A user / system message's content: text, or OpenAI parts when an image is in it."""
    if isinstance(content, list) and any(p.get("type") == "image_url" for p in content):
        return [p for p in content if p.get("type") in ("text", "image_url")]
    return _text(content) if content is not None else as_text(content)
