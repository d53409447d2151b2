"""Cline and Roo Code tasks (``…/globalStorage/<extension>/tasks/<task id>/``), checked
against Cline 3.x and Roo Code 3.x task folders.

- ``api_conversation_history.json`` is the conversation as the model saw it: Anthropic
  messages ``{role, content}`` whose blocks are text, image, tool_use and tool_result
  (native tool calling), or text only (the XML tool style, whose results come back as
  user text). A user text ``<task>…</task>`` is the task (unwrapped); ``<environment_details>``
  blocks and ``[TASK RESUMPTION]`` notes are meta rows. Roo Code's condensing writes a summary
  message (``isSummary``) and marks what it replaced (``condenseParent``): a
  ``NativeCompaction`` (source ``roo-code``).
- ``ui_messages.json`` is what the panel showed (``say`` / ``ask`` records). It is read
  only when it is all there is (no ``api_conversation_history.json`` beside it): the task
  and ``user_feedback`` are user turns, ``text`` / ``completion_result`` / ``followup`` /
  ``plan_mode_respond`` assistant turns, ``reasoning`` their reasoning, ``tool`` /
  ``command`` / MCP requests tool calls with what the panel recorded as their result
  (``command_output``, ``mcp_server_response``, the tool's ``content`` or ``diff``); API
  request records, checkpoints and retries are bookkeeping. Roo Code's
  ``condense_context`` record (``contextCondense``: tokens before / after, summary) is a
  native compaction.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from hermes_web.importers.agent_common import (
    as_text,
    call,
    clip_title,
    compact,
    expect,
    load_json,
    summary_row,
)
from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    epoch,
    image_part,
    safe_id,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_CLINE
API_HISTORY = "api_conversation_history.json"
TASK_FILES = ("task_metadata.json", "ui_messages.json")  # beside the history in a task folder
TASK = re.compile(r"\A\s*<task>\s*(.*?)\s*</task>\s*\Z", re.DOTALL)
FEEDBACK = re.compile(r"\A\s*<(?:feedback|answer|user_message)>\s*(.*?)\s*</\w+>\s*\Z", re.DOTALL)
META_OPENINGS = (
    ("<environment_details>", "environment_details"),
    ("[TASK RESUMPTION]", "task_resumption"),
    ("<explicit_instructions", "explicit_instructions"),
)


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    where = Path(stream.name) if isinstance(getattr(stream, "name", None), str) else Path(file)
    document = load_json(stream, file)
    if isinstance(document, dict) and where.name in TASK_FILES and _beside_history(where):
        return  # the task folder's bookkeeping: the conversation is in its history file
    expect(document, list, file, "the file")
    task_id = _task_id(where) or _content_id(document)
    if document and isinstance(document[0], dict) and document[0].get("type") in ("say", "ask"):
        if (where.parent / API_HISTORY).is_file():
            return  # the conversation is read from api_conversation_history.json beside it
        yield _ui(document, file, task_id)
        return
    yield _api(document, file, task_id)


def _beside_history(where: Path) -> bool:
    return (where.parent / API_HISTORY).is_file() or (where.parent / "ui_messages.json").is_file()


def _task_id(where: Path) -> str:
    """The task folder's name (a timestamp or a uuid), when the file is in one."""
    folder = where.parent.name
    return folder if re.fullmatch(r"\d{10,}|[0-9a-f]{8}-[0-9a-f-]{27}", folder) else ""


def _content_id(document: list) -> str:
    """A file out of its task folder: an id from its first records (stable on re-import)."""
    head = json.dumps(document[:3], sort_keys=True, ensure_ascii=False).encode()
    return f"cline-{hashlib.sha256(head).hexdigest()[:16]}"


# --- api_conversation_history.json -----------------------------------------------------


def _meta_kind(text: str) -> str:
    head = text.lstrip()[:64]
    return next((kind for opening, kind in META_OPENINGS if head.startswith(opening)), "")


def _image(block: dict) -> dict | None:
    source = block.get("source")
    if isinstance(source, dict) and isinstance(source.get("data"), str):
        media = source.get("media_type") or "image/png"
        return image_part(f"data:{media};base64,{source['data']}")
    if isinstance(source, dict) and isinstance(source.get("url"), str):
        return image_part(source["url"])
    return None


def _api(entries: list, file: str, task_id: str) -> ParsedSession:
    session = ParsedSession(source=SOURCE, public_id=safe_id(task_id), line=1)
    session.extra = {"cline": {"file": API_HISTORY}}
    names: dict[str, str] = {}
    condense: dict[str, list[ParsedMessage]] = {}  # Roo Code condenseParent -> rows
    for number, entry in enumerate(entries, 1):
        where = f"message {number}"
        entry = expect(entry, dict, file, where)
        session.records += 1
        role = entry.get("role")
        if role not in ("user", "assistant"):
            raise ImportProblem(
                file, 0, f"{where}: unknown role {role!r} (expected user or assistant)"
            )
        when = epoch(entry["ts"] / 1000) if isinstance(entry.get("ts"), int | float) else None
        content = entry.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        expect(blocks, list, file, f"{where}: content")
        rows = (
            _assistant(session, blocks, file, where, names, when)
            if role == "assistant"
            else _user(session, blocks, file, where, names, when)
        )
        if isinstance(entry.get("condenseParent"), str):
            condense.setdefault(entry["condenseParent"], []).extend(rows)
        if entry.get("isSummary"):
            _roo_summary(session, rows, entry, condense, when)
            continue
        session.messages.extend(rows)
    if not any(not m.meta for m in session.messages):
        raise ImportProblem(file, 0, "no messages: nothing to import")
    return session


def _assistant(session, blocks, file, where, names, when) -> list[ParsedMessage]:
    texts, calls, thinking = [], [], []
    for block in blocks:
        block = expect(block, dict, file, f"{where}: a content block")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind in ("thinking", "reasoning") and isinstance(
            block.get("thinking", block.get("text")), str
        ):
            thinking.append(block.get("thinking", block.get("text")))
        elif kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
                raise ImportProblem(file, 0, f"{where}: a tool_use block has no string id and name")
            names[call_id] = name
            calls.append(call(call_id, name, block.get("input")))
        else:
            session.skip(f"assistant block of type {kind!r}")
    message = ParsedMessage(
        role="assistant",
        content="\n".join(texts) or None,
        tool_calls=calls or None,
        reasoning="\n".join(thinking) or None,
        created_at=when,
    )
    return [message]


def _user(session, blocks, file, where, names, when) -> list[ParsedMessage]:
    rows: list[ParsedMessage] = []
    parts: list[dict] = []
    for block in blocks:
        block = expect(block, dict, file, f"{where}: a content block")
        kind = block.get("type")
        if kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise ImportProblem(file, 0, f"{where}: a tool_result has no string tool_use_id")
            raw = block.get("content")
            if isinstance(raw, list):
                body = "\n".join(
                    b.get("text", "")
                    for b in raw
                    if isinstance(b, dict) and b.get("type") == "text"
                )
            else:
                body = as_text(raw)
            extra = {"is_error": True} if block.get("is_error") else {}
            rows.append(
                ParsedMessage(
                    role="tool",
                    content=body,
                    tool_call_id=call_id,
                    tool_name=names.get(call_id, ""),
                    extra=extra,
                    created_at=when,
                )
            )
        elif kind == "text" and isinstance(block.get("text"), str):
            text = block["text"]
            meta = _meta_kind(text)
            if meta:
                rows.append(ParsedMessage(role="user", content=text, meta=meta, created_at=when))
                session.skip(f"{meta} block (kept as a meta row)")
                continue
            found = TASK.match(text) or FEEDBACK.match(text)
            text = found.group(1) if found else text
            if found and TASK.match(block["text"]) and not session.title:
                session.title = clip_title(text)
            parts.append({"type": "text", "text": text})
        elif kind == "image":
            image = _image(block)
            if image is None:
                raise ImportProblem(file, 0, f"{where}: an image block has no readable source")
            parts.append(image)
        else:
            raise ImportProblem(file, 0, f"{where}: unknown user block type {kind!r}")
    if parts:
        content: Any = (
            "\n\n".join(p["text"] for p in parts)
            if all(p["type"] == "text" for p in parts)
            else parts
        )
        rows.insert(
            sum(1 for r in rows if r.role == "tool"),
            ParsedMessage(role="user", content=content, created_at=when),
        )
        if not session.title:
            session.title = clip_title(next((p["text"] for p in parts if p["type"] == "text"), ""))
    return rows


def _roo_summary(session, rows, entry, condense, when) -> None:
    """Roo Code condensed: ``rows`` hold its summary; ``condenseParent`` marks what it
    replaced (older versions mark nothing: everything before it was replaced)."""
    summary = "\n".join(r.content for r in rows if isinstance(r.content, str))
    condense_id = entry.get("condenseId")
    replaced = condense.get(condense_id) if isinstance(condense_id, str) else None
    compaction = NativeCompaction(
        source="roo-code",
        created_at=when,
        summary=summary,
        extra={"condense_id": condense_id} if condense_id else {},
    )
    index = compact(session, session.messages, compaction, replaced)
    session.messages.append(summary_row(summary, index, {}, when))
    session.skip("Roo Code condense summary (kept as a native compaction)")


# --- ui_messages.json alone ------------------------------------------------------------

BOOKKEEPING = {
    "api_req_started",
    "api_req_finished",
    "api_req_retried",
    "api_req_deleted",
    "deleted_api_reqs",
    "checkpoint_created",
    "error_retry",
    "resume_task",
    "resume_completed_task",
    "completion_result_ask",
    "load_mcp_documentation",
    "mcp_server_request_started",
    "task_progress",
    "shell_integration_warning",
    "auto_approval_max_req_reached",
    "browser_action_launch",
}


def _json_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


class _Ui:
    def __init__(self, session: ParsedSession) -> None:
        self.session = session
        self.reasoning: list[str] = []
        self.open_call: ParsedMessage | None = None  # its result is still being recorded
        self.result: ParsedMessage | None = None
        self.calls = 0
        self.started = False  # an API request was made: a say:text is the model's

    def say(self, role: str, text: str, when, extra: dict | None = None) -> None:
        self.close()
        message = ParsedMessage(role=role, content=text, extra=extra or {}, created_at=when)
        if role == "assistant" and self.reasoning:
            message.reasoning, self.reasoning = "\n".join(self.reasoning), []
        elif role == "user" and not self.session.title:
            self.session.title = clip_title(text)
        self.session.messages.append(message)

    def tool(self, name: str, arguments: Any, when, result: str | None = None) -> None:
        self.close()
        self.calls += 1
        call_id = f"cline-ui-{self.calls}"
        message = ParsedMessage(
            role="assistant",
            content=None,
            tool_calls=[call(call_id, name, arguments)],
            created_at=when,
        )
        if self.reasoning:
            message.reasoning, self.reasoning = "\n".join(self.reasoning), []
        self.session.messages.append(message)
        self.open_call = message
        self.result = ParsedMessage(
            role="tool",
            content=result or "",
            tool_call_id=call_id,
            tool_name=name,
            extra={"from_ui": True},
            created_at=when,
        )
        if result is not None:
            self.close()

    def output(self, text: str) -> None:
        if self.result is not None:
            joined = "\n".join(t for t in (self.result.content, text) if t)
            self.result.content = joined

    def close(self) -> None:
        if self.result is not None:
            if not self.result.content:
                self.result.content = "[the panel recorded no output for this call]"
            self.session.messages.append(self.result)
        self.open_call, self.result = None, None


def _ui(records: list, file: str, task_id: str) -> ParsedSession:
    session = ParsedSession(source=SOURCE, public_id=safe_id(task_id), line=1, kind="ui messages")
    session.extra = {"cline": {"file": "ui_messages.json"}}
    ui = _Ui(session)
    for number, record in enumerate(records, 1):
        where = f"record {number}"
        record = expect(record, dict, file, where)
        session.records += 1
        kind = record.get("type")
        if kind not in ("say", "ask"):
            raise ImportProblem(file, 0, f"{where}: type {kind!r} is neither say nor ask")
        what = record.get(kind)
        text = record.get("text") or ""
        if not isinstance(text, str):
            raise ImportProblem(file, 0, f"{where}: text is a JSON {type(text).__name__}")
        when = epoch(record["ts"] / 1000) if isinstance(record.get("ts"), int | float) else None
        model = record.get("modelInfo")
        if isinstance(model, dict) and isinstance(model.get("modelId"), str):
            session.model = session.model or model["modelId"]
        if what == "api_req_started":
            ui.started = True
        if what in BOOKKEEPING or (kind == "ask" and what == "completion_result"):
            session.skip(f"{kind}:{what} record")
            continue
        if what == "task" or (what == "text" and not ui.started) or what == "user_feedback":
            ui.say("user", text, when)
        elif what == "reasoning":
            ui.reasoning.append(text)
        elif what in ("text", "completion_result"):
            if text.strip():
                ui.say("assistant", text, when)
        elif what in ("followup", "plan_mode_respond"):
            data = _json_text(text)
            if isinstance(data, dict):
                body = data.get("question") or data.get("response") or ""
                options = data.get("options")
                if isinstance(options, list) and options:
                    body += "\n" + "\n".join(f"- {o}" for o in options)
                text = str(body)
            ui.say("assistant", text, when)
        elif what == "tool":
            data = _json_text(text)
            data = data if isinstance(data, dict) else {"tool": "tool", "content": text}
            shown = data.get("diff") or data.get("content")
            arguments = {k: v for k, v in data.items() if k not in ("tool", "content", "diff")}
            ui.tool(str(data.get("tool") or "tool"), arguments, when, as_text(shown))
        elif what == "command":
            ui.tool("execute_command", {"command": text}, when)
        elif what == "command_output":
            ui.output(text)
        elif what == "use_mcp_server":
            data = _json_text(text)
            data = data if isinstance(data, dict) else {}
            name = str(data.get("toolName") or data.get("uri") or "use_mcp_server")
            ui.tool(name, data, when)
        elif what == "mcp_server_response":
            ui.output(text)
            ui.close()
        elif what == "condense_context":
            _ui_condense(session, ui, record, when)
        elif what in ("error", "api_req_failed", "mistake_limit_reached", "diff_error"):
            ui.close()
            session.messages.append(
                ParsedMessage(role="user", content=text, meta=f"{kind}_{what}", created_at=when)
            )
            session.skip(f"{kind}:{what} record (kept as a meta row)")
        else:
            session.skip(f"{kind}:{what} record")
    ui.close()
    if not any(not m.meta for m in session.messages):
        raise ImportProblem(file, 0, "no messages: nothing to import")
    return session


def _ui_condense(session: ParsedSession, ui: _Ui, record: dict, when) -> None:
    ui.close()
    data = record.get("contextCondense")
    data = data if isinstance(data, dict) else {}
    summary = data["summary"] if isinstance(data.get("summary"), str) else ""
    before, after = data.get("prevContextTokens"), data.get("newContextTokens")
    compaction = NativeCompaction(
        source="roo-code",
        created_at=when,
        summary=summary,
        marker="" if summary else "context condensed",
        tokens_before=before if isinstance(before, int) else None,
        tokens_after=after if isinstance(after, int) else None,
        extra={"cost": data["cost"]} if "cost" in data else {},
    )
    index = compact(session, session.messages, compaction)
    if summary:
        session.messages.append(summary_row(summary, index, {}, when))
