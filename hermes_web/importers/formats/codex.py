"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``), as written by
Codex CLI 0.2x–0.104 (wrapped lines) and the older bare-item form.

Current files wrap each line as ``{"timestamp", "type", "payload"}`` with types
session_meta, response_item, event_msg, turn_context and compacted; older files put the
session meta on the first line and response items bare. Response items map onto OpenAI
messages: message (user/assistant/developer→system), function_call / custom_tool_call /
local_shell_call → an assistant tool call, *_output → a tool message with the same call_id
(results follow their assistant message in call order; a call left without output gets a
marked stub), reasoning summaries → the next assistant message's reasoning, input_image →
an image part. ``<environment_context>``, ``<user_instructions>``, AGENTS.md and IDE
context blocks are metadata (meta rows, and cwd / git / CLI version / model on the session),
never user turns. ``compacted`` is Codex's own compaction (a ``NativeCompaction``): what came
before is archived by it, its summary kept, its ``replacement_history`` replayed as the rows it
kept; the last ``token_count`` event before it gives the tokens before, as Codex counted them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    Spool,
    append_turn,
    epoch,
    image_part,
    json_lines,
    safe_id,
    spooled_session,
    text_of,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_CODEX
ROLE_MAP = {"user": "user", "assistant": "assistant", "developer": "system", "system": "system"}
METADATA_TYPES = {"event_msg", "turn_context", "state"}
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
CONTEXT_BLOCKS = (
    ("<environment_context>", "environment_context"),
    ("<user_instructions>", "user_instructions"),
    ("# AGENTS.md instructions", "user_instructions"),
    ("<INSTRUCTIONS>", "user_instructions"),
    ("# Context from my IDE setup", "ide_context"),
    ("<ide_context>", "ide_context"),
    ("<user_shell_command>", "shell_command"),
    ("<turn_aborted>", "turn_aborted"),
)
NO_RESULT = "[no output for this call was recorded in the rollout]"


def context_kind(text: str) -> str:
    head = text.lstrip()[:64]
    return next((kind for opening, kind in CONTEXT_BLOCKS if head.startswith(opening)), "")


def _content(value: Any, file: str, number: int) -> Any:
    """Codex content parts → text, or OpenAI parts when an image is among them."""
    if value is None or isinstance(value, str):
        return value or ""
    if not isinstance(value, list):
        raise ImportProblem(file, number, "message content is neither text nor a list of parts")
    parts = []
    for part in value:
        if not isinstance(part, dict):
            raise ImportProblem(file, number, "a content part is not an object")
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text", "summary_text"):
            if not isinstance(part.get("text"), str):
                raise ImportProblem(
                    file, number, f"a {kind} part's 'text' is {type(part.get('text')).__name__}"
                )
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str):
                raise ImportProblem(file, number, "an input_image part has no string image_url")
            parts.append(image_part(url))
        else:
            raise ImportProblem(file, number, f"unknown content part type {kind!r}")
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _output(value: Any, file: str, number: int) -> Any:
    if isinstance(value, dict):  # {"output": "...", "metadata": {...}} in some versions
        value = value.get("output", value.get("content"))
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _content(value, file, number)
    raise ImportProblem(file, number, f"a call output is a {type(value).__name__}, not text")


class _Builder:
    def __init__(self, session: ParsedSession, file: str, spool: Spool) -> None:
        self.session, self.file, self.spool = session, file, spool
        self.messages: list[ParsedMessage] = []  # emitted, not yet written to the spool
        self.turn: ParsedMessage | None = None
        self.outputs_seen = False  # an output arrived since the open turn's last call
        self.results: dict[str, ParsedMessage] = {}
        self.held: list[ParsedMessage] = []
        self.names: dict[str, str] = {}
        self.reasoning: list[str] = []
        self.reasoning_items: list[dict] = []
        self.kept_by: int | None = None  # replaying a compaction's replacement history
        self.last_usage: dict | None = None
        self.context_window: int | None = None
        self.auto_compact_limit: int | None = None

    def close(self) -> None:
        if self.turn is not None:
            append_turn(
                self.messages,
                self.turn,
                self.results,
                self.session,
                stub_text=NO_RESULT,
                recorded="output",
            )
            for orphan in self.results.values():
                orphan.meta = "tool_result_unknown"
                self.session.skip("call output answering no call (kept as a meta row)")
                self.messages.append(orphan)
        self.turn, self.results, self.outputs_seen = None, {}, False
        self.messages.extend(self.held)
        self.held = []

    def add(self, message: ParsedMessage) -> None:
        """A non-tool message: it ends the open turn unless it is a meta row or system text."""
        if message.meta or message.role == "system":
            (self.held if self.turn is not None else self.messages).append(message)
            return
        self.close()
        if message.role == "assistant":
            self._take_reasoning(message)
            self.turn = message  # calls that follow attach to it
            return
        self.messages.append(message)

    def _take_reasoning(self, message: ParsedMessage) -> None:
        if self.reasoning:
            message.reasoning = "\n".join(self.reasoning)
        if self.reasoning_items:
            message.extra["codex_reasoning_items"] = self.reasoning_items
        self.reasoning, self.reasoning_items = [], []

    def call(self, call: dict, when, extra: dict) -> None:
        if self.turn is None or self.outputs_seen:
            self.close()
            self.turn = ParsedMessage(
                role="assistant",
                content=None,
                tool_calls=[],
                extra=extra,
                created_at=when,
                kept_by=self.kept_by,
            )
            self._take_reasoning(self.turn)
        elif self.reasoning:  # reasoning between two calls of one turn
            self._take_reasoning(self.turn)
        self.turn.tool_calls = (self.turn.tool_calls or []) + [call]

    def output(self, message: ParsedMessage) -> None:
        open_calls = {c["id"] for c in (self.turn.tool_calls or ())} if self.turn else set()
        if message.tool_call_id in open_calls and message.tool_call_id not in self.results:
            self.results[message.tool_call_id] = message
            self.outputs_seen = len(self.results) == len(open_calls)
            return
        message.meta = "tool_result_unknown"
        self.session.skip("call output answering no open call (kept as a meta row)")
        (self.held if self.turn is not None else self.messages).append(message)

    def compacted(self, payload: dict, when, number: int) -> None:
        """Codex compacted here: what came before is archived by a ``NativeCompaction``; its
        summary (``message``, often empty: newer versions keep it encrypted in a
        ``compaction`` item) becomes a summary row, and the ``replacement_history`` it
        rebuilt the context from is replayed as rows it kept (``kept_by``)."""
        self.close()
        self.spool.write(self.messages)
        message = payload.get("message")
        summary = message if isinstance(message, str) else ""
        history = payload.get("replacement_history")
        history = history if isinstance(history, list) else []
        sealed = sum(
            1
            for entry in history
            if isinstance(entry, dict)
            and entry.get("type") in ("compaction", "compaction_summary")
            and entry.get("encrypted_content")
        )
        extra: dict[str, Any] = {"line": number, "replacement_history": len(history)}
        if isinstance(payload.get("window_id"), str):
            extra["window_id"] = payload["window_id"]
        if self.last_usage is not None:
            extra["tokens_before_from"] = "the last token_count event before it"
            extra["last_token_usage"] = self.last_usage
        if self.context_window is not None:
            extra["model_context_window"] = self.context_window
        if self.auto_compact_limit is not None:
            extra["model_auto_compact_token_limit"] = self.auto_compact_limit
        marker = ""
        if not summary.strip():
            marker = (
                "Codex kept its summary encrypted (readable by OpenAI only)"
                if sealed
                else "Codex recorded this compaction without a summary"
            )
        total = (self.last_usage or {}).get("total_tokens")
        self.session.native_compactions.append(
            NativeCompaction(
                source="codex",
                created_at=when,
                tokens_before=total if isinstance(total, int) and total >= 0 else None,
                summary=summary,
                marker=marker,
                extra=extra,
            )
        )
        index = len(self.session.native_compactions) - 1
        self.spool.archive_all(index)
        self.last_usage = None
        if summary.strip():
            self.messages.append(
                ParsedMessage(
                    role="user",
                    content=summary,
                    is_summary=True,
                    extra={"line": number, "codex_compacted": True},
                    created_at=when,
                    summary_of=index,
                )
            )
        self.kept_by = index
        for entry in history:
            if isinstance(entry, dict) and "type" not in entry and "role" in entry:
                entry = {**entry, "type": "message"}  # older replacement items: bare messages
            _item(self, entry, when, number, self.file, replayed=True)
        self.kept_by = None

    def usage(self, item: dict) -> None:
        """A ``token_count`` event: the newest recorded context size (tokens before the next
        compaction, as Codex counted them)."""
        info = item.get("info")
        if not isinstance(info, dict):
            return
        last = info.get("last_token_usage")
        if isinstance(last, dict):
            self.last_usage = {k: v for k, v in last.items() if isinstance(v, int)}
        if isinstance(info.get("model_context_window"), int):
            self.context_window = info["model_context_window"]

    def limits(self, context: dict) -> None:
        """A ``turn_context`` record: the auto-compact limit Codex ran with, when the record
        carries it (``model_auto_compact_token_limit``, as in its config)."""
        limit = context.get("model_auto_compact_token_limit")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            self.auto_compact_limit = limit


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """The whole rollout is one session, read in two passes as Claude Code's is (see
    ``claude_code.parse``): built line by line into a ``Spool``, then replayed to the store."""
    yield spooled_session(_read, stream, file)


def _read(stream: IO[bytes], file: str, spool: Spool) -> ParsedSession:
    session = ParsedSession(source=SOURCE, line=1)
    build = _Builder(session, file, spool)
    session_id, model, created, title = "", "", None, ""
    meta: dict[str, Any] = {}
    for number, record in json_lines(stream, file, session):
        spool.write(build.messages)
        session.records += 1
        if not isinstance(record, dict):
            raise ImportProblem(
                file, number, f"expected a record object, got a JSON {type(record).__name__}"
            )
        kind, item = record.get("type"), record.get("payload")
        if kind == "session_meta" or (
            number == 1 and "payload" not in record and "instructions" in record
        ):
            data = item if isinstance(item, dict) else record
            if not session_id and isinstance(data.get("id"), str):
                session_id = data["id"]
                created = epoch(data.get("timestamp"))
            for key in ("cwd", "cli_version", "originator", "source", "model_provider", "git"):
                if data.get(key) not in (None, "", {}):
                    meta.setdefault(key, data[key])
            if isinstance(data.get("model"), str):
                model = model or data["model"]
            session.skip("session_meta record (kept as session metadata)")
            continue
        if kind in METADATA_TYPES or record.get("record_type") == "state":
            if kind == "event_msg" and isinstance(item, dict) and item.get("type") == "token_count":
                build.usage(item)
            if kind == "turn_context" and isinstance(item, dict):
                if isinstance(item.get("model"), str):
                    model = model or item["model"]
                if isinstance(item.get("cwd"), str):
                    meta.setdefault("cwd", item["cwd"])
                build.limits(item)
            label = item.get("type") if isinstance(item, dict) else None
            session.skip(f"{kind}:{label} record" if isinstance(label, str) else f"{kind} record")
            continue
        when = epoch(record.get("timestamp"))
        if kind == "compacted":
            build.compacted(item if isinstance(item, dict) else {}, when, number)
            continue
        if kind != "response_item":
            item = record  # the older, unwrapped form
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise ImportProblem(file, number, "record has no item 'type': not a Codex rollout")
        first_user = _item(build, item, when, number, file)
        if first_user and not title:
            title = first_user
    build.close()
    spool.write(build.messages)
    if not spool.turns and not session_id:  # with its session_meta: an empty session
        raise ImportProblem(file, 0, "no response items: not a Codex rollout")
    session.public_id = safe_id(session_id)
    session.title = " ".join(title.split())[:80]
    session.model = model
    session.created_at = created
    session.extra = {"codex": meta}
    return session


def _item(build: _Builder, item: Any, when, number: int, file: str, replayed: bool = False) -> str:
    """One response item into the builder; returns the text of a plain user message."""
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        raise ImportProblem(file, number, "a response item has no 'type'")
    extra: dict = {"line": number}
    if replayed:
        extra["replayed"] = True
    itype = item["type"]
    if itype == "message":
        role = ROLE_MAP.get(str(item.get("role")))
        if role is None:
            raise ImportProblem(file, number, f"unknown role {item.get('role')!r}")
        body = _content(item.get("content"), file, number)
        if role == "user":
            body = _split_ide_request(build, body, when, number)
        message = ParsedMessage(
            role=role, content=body, extra=extra, created_at=when, kept_by=build.kept_by
        )
        kind = context_kind(text_of(body)) if role == "user" else ""
        if kind:
            message.meta = kind
            build.session.skip(f"{kind} block (kept as a meta row)")
        build.add(message)
        return text_of(body) if role == "user" and not kind and not replayed else ""
    if itype in CALLS:
        call_id = item.get("call_id") or item.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ImportProblem(file, number, f"a {itype} has no string call_id")
        name = item.get("name") or ("shell" if itype == "local_shell_call" else "")
        if not isinstance(name, str):
            raise ImportProblem(file, number, f"{itype} {call_id}: name is not text")
        arguments = item.get("arguments", item.get("input", item.get("action", "")))
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        build.names[call_id] = name
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        build.call(call, when, extra)
        return ""
    if itype in OUTPUTS:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ImportProblem(file, number, f"a {itype} has no string call_id")
        build.output(
            ParsedMessage(
                role="tool",
                content=_output(item.get("output"), file, number),
                tool_call_id=call_id,
                tool_name=build.names.get(call_id, ""),
                extra=extra,
                created_at=when,
                kept_by=build.kept_by,
            )
        )
        return ""
    if itype == "reasoning":
        summary = item.get("summary") or []
        if not isinstance(summary, list):
            raise ImportProblem(file, number, "reasoning summary is not a list")
        for part in summary:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                build.reasoning.append(part["text"])
            elif part is not None:
                raise ImportProblem(file, number, "a reasoning summary part has no text")
        if item.get("encrypted_content"):
            build.reasoning_items.append({"encrypted_content": item["encrypted_content"]})
        return ""
    build.session.skip(f"response item of type {itype!r}")
    return ""


IDE_REQUEST = "## My request for Codex:"


def _split_ide_request(build: _Builder, body: Any, when, number: int) -> Any:
    """The IDE extension sends ``# Context from my IDE setup: … ## My request for Codex:
    <request>``: the context becomes a meta row, the request stays the user's turn."""
    text = text_of(body)
    if not text.lstrip().startswith("# Context from my IDE setup") or IDE_REQUEST not in text:
        return body
    context, _, request = text.partition(IDE_REQUEST)
    build.add(
        ParsedMessage(
            role="user",
            content=context.strip(),
            meta="ide_context",
            extra={"line": number},
            created_at=when,
        )
    )
    build.session.skip("ide_context block (kept as a meta row)")
    if isinstance(body, list):
        return [{"type": "text", "text": request.strip()}] + [
            p for p in body if p.get("type") != "text"
        ]
    return request.strip()
