"""Claude Code transcripts (``~/.claude/projects/<dir>/<session>.jsonl``), as written by
Claude Code 1.x and 2.x (checked against 2.1.38/2.1.39 files).

Records of ``type`` user/assistant carry ``message`` (Anthropic format: content is a string
or blocks text/thinking/tool_use/tool_result/image) plus uuid/parentUuid/sessionId/timestamp.
Everything else (file-history-snapshot, progress, queue-operation, system, summary, …) is
metadata: counted in the fidelity report, never a turn.

- One API response is split over several assistant records sharing ``message.id``, with
  tool results written between them (parallel calls): the records are merged into one
  assistant message with all its calls, followed by the results in call order.
- Meta records (``isMeta``, the local-command caveat, ``<command-name>`` wrappers of slash
  commands, ``<local-command-stdout>`` with ANSI escapes stripped) are stored as meta rows:
  inactive, marked, never given to the model or the engine, never a title.
- Claude Code's own compactions (a ``system`` record ``compact_boundary`` with
  ``compactMetadata.trigger`` / ``preTokens``, then the ``isCompactSummary`` user record)
  become ``NativeCompaction``s: the rows before the boundary are archived by it, the summary
  becomes a summary row the engine recognises as the previous summary.
- A sub-agent transcript (every record ``isSidechain`` with an ``agentId``; stored in
  ``<session>/subagents/agent-*.jsonl``) carries its parent's ``sessionId``: it becomes its
  own session ``<parent id>.agent-<agentId>`` linked to the parent.
- Thinking blocks become reasoning; their signatures are kept in ``extra``.
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
    strip_ansi,
    text_of,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_CLAUDE_CODE
MESSAGE_TYPES = {"user", "assistant"}
# User texts that Claude Code writes for its own bookkeeping, by opening tag.
WRAPPERS = (
    ("<local-command-caveat>", "caveat"),
    ("Caveat: The messages below were generated", "caveat"),
    ("<command-name>", "command"),
    ("<command-message>", "command"),
    ("<local-command-stdout>", "command_output"),
    ("<local-command-stderr>", "command_output"),
    ("<bash-input>", "command"),
    ("<bash-stdout>", "command_output"),
    ("<bash-stderr>", "command_output"),
)
NO_RESULT = "[no result for this call was recorded in the transcript]"
REMINDER, REMINDER_END = "<system-reminder>", "</system-reminder>"
# How Claude Code's compaction summary opens (the user record after a compact_boundary).
CONTINUED = "This session is being continued from a previous conversation"


def wrapper_kind(text: str) -> str:
    head = text.lstrip()[:64]
    return next((kind for opening, kind in WRAPPERS if head.startswith(opening)), "")


def _image(block: dict) -> dict | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        media = source.get("media_type") if isinstance(source.get("media_type"), str) else ""
        return image_part(f"data:{media or 'image/png'};base64,{source['data']}")
    if isinstance(source.get("url"), str):
        return image_part(source["url"])
    return None


def _parts(blocks: list, file: str, number: int) -> list[dict]:
    """Text and image blocks as OpenAI parts (other block types: their text, if any)."""
    parts: list[dict] = []
    for block in blocks:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
            continue
        if not isinstance(block, dict):
            raise ImportProblem(file, number, "a content block is not an object")
        kind = block.get("type")
        if kind == "image":
            image = _image(block)
            if image is None:
                raise ImportProblem(file, number, "an image block has no readable source")
            parts.append(image)
        elif isinstance(block.get("text"), str):
            parts.append({"type": "text", "text": block["text"]})
        elif block.get("text") is not None:
            raise ImportProblem(file, number, f"a {kind} block's text is not text")
    return parts


def _simplify(parts: list[dict]) -> Any:
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


class _Builder:
    """Collects one transcript's messages, merging split responses and ordering results."""

    def __init__(self, session: ParsedSession, file: str, spool: Spool) -> None:
        self.session, self.file, self.spool = session, file, spool
        self.messages: list[ParsedMessage] = []  # emitted, not yet written to the spool
        self.turn: ParsedMessage | None = None  # the open assistant message
        self.turn_id = ""
        self.results: dict[str, ParsedMessage] = {}
        self.held: list[ParsedMessage] = []  # meta rows met while a turn was open
        self.names: dict[str, str] = {}
        self.closed_calls: set[str] = set()
        self.awaiting_summary = False  # a compact_boundary whose summary has not come yet
        # Results written before their tool_use (Claude Code 2.1.114): paired when the call
        # comes, orphans if the user speaks first (``give_up``).
        self.early: dict[str, ParsedMessage] = {}

    def give_up(self) -> None:
        """Results still waiting for their call answer none in the file."""
        early, self.early = self.early, {}
        for result in early.values():
            self._orphan(result)

    def close(self) -> None:
        """Emit the open assistant message, then its results in call order."""
        if self.turn is None:
            self._flush_held()
            return
        self.closed_calls.update(
            append_turn(self.messages, self.turn, self.results, self.session, stub_text=NO_RESULT)
        )
        for orphan in self.results.values():
            self._orphan(orphan)
        self.turn, self.turn_id, self.results = None, "", {}
        self._flush_held()

    def _flush_held(self) -> None:
        self.messages.extend(self.held)
        self.held = []

    def _orphan(self, result: ParsedMessage) -> None:
        why = "late" if result.tool_call_id in self.closed_calls else "unknown"
        result.meta = f"tool_result_{why}"
        self.session.skip(f"tool result answering an {why} call (kept as a meta row)")
        self.meta(result)

    def meta(self, message: ParsedMessage) -> None:
        (self.held if self.turn is not None else self.messages).append(message)

    def assistant(self, message: dict, record: dict, number: int, extra: dict) -> None:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise ImportProblem(
                self.file, number, "assistant content is neither text nor a list of blocks"
            )
        texts, calls, thinking, signatures = [], [], [], []
        for block in blocks:
            if not isinstance(block, dict):
                raise ImportProblem(self.file, number, "a content block is not an object")
            kind = block.get("type")
            if kind == "text":
                if not isinstance(block.get("text"), str):
                    raise ImportProblem(self.file, number, "a text block's text is not text")
                texts.append(block["text"])
            elif kind == "thinking":
                if not isinstance(block.get("thinking", ""), str):
                    raise ImportProblem(self.file, number, "a thinking block is not text")
                thinking.append(block.get("thinking") or "")
                if block.get("signature"):
                    signatures.append(block["signature"])
            elif kind == "redacted_thinking":
                signatures.append({"redacted": block.get("data")})
            elif kind in ("tool_use", "server_tool_use"):
                call_id, name = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not call_id:
                    raise ImportProblem(self.file, number, "a tool_use block has no string id")
                if not isinstance(name, str):
                    raise ImportProblem(self.file, number, f"tool_use {call_id}: name is not text")
                self.names[call_id] = name
                arguments = block.get("input") if block.get("input") is not None else {}
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": name,
                            "arguments": json.dumps(arguments, ensure_ascii=False),
                        },
                    }
                )
            else:
                self.session.skip(f"assistant block of type {kind!r}")
        raw_id = message.get("id")
        message_id = raw_id if isinstance(raw_id, str) else ""
        if self.turn is not None and message_id and message_id == self.turn_id:
            turn = self.turn
            turn.content = "\n".join(t for t in (turn.content or "", *texts) if t) or None
            if calls:
                turn.tool_calls = (turn.tool_calls or []) + calls
                self._take_early(calls)
            if thinking:
                turn.reasoning = "\n".join(t for t in (turn.reasoning or "", *thinking) if t)
            if signatures:
                turn.extra.setdefault("thinking_signatures", []).extend(signatures)
            turn.extra.setdefault("merged_records", 1)
            turn.extra["merged_records"] += 1
            return
        self.close()
        if signatures:
            extra["thinking_signatures"] = signatures
        if message_id:
            extra["message_id"] = message_id
        self.turn = ParsedMessage(
            role="assistant",
            content="\n".join(t for t in texts if t) or None,
            tool_calls=calls or None,
            reasoning="\n".join(thinking) or None,
            extra=extra,
            created_at=epoch(record.get("timestamp")),
        )
        self.turn_id = message_id
        self._take_early(calls)

    def _take_early(self, calls: list[dict]) -> None:
        """The results of ``calls`` that were written before them join the open turn."""
        for call in calls:
            result = self.early.pop(call["id"], None)
            if result is not None:
                result.tool_name = result.tool_name or call["function"]["name"]
                self.results[call["id"]] = result
                self.session.counts["tool_results_before_their_call"] += 1

    def result(self, block: dict, record: dict, number: int, extra: dict) -> None:
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise ImportProblem(self.file, number, "a tool_result block has no string tool_use_id")
        raw = block.get("content")
        if isinstance(raw, list):
            content = _simplify(_parts(raw, self.file, number))
        elif raw is None or isinstance(raw, str):
            content = raw or ""
        else:
            raise ImportProblem(self.file, number, "a tool_result's content is not text or blocks")
        extra = dict(extra)
        if block.get("is_error"):
            extra["is_error"] = True
        outcome = record.get("toolUseResult")
        if isinstance(outcome, dict) and isinstance(outcome.get("agentId"), str):
            extra["agent_id"] = outcome["agentId"]  # links the sub-agent transcript
        message = ParsedMessage(
            role="tool",
            content=content,
            tool_call_id=call_id,
            tool_name=self.names.get(call_id, ""),
            extra=extra,
            created_at=epoch(record.get("timestamp")),
        )
        open_calls = {c["id"] for c in (self.turn.tool_calls or ())} if self.turn else set()
        if call_id in open_calls and call_id not in self.results:
            self.results[call_id] = message
        elif call_id not in open_calls | self.closed_calls and call_id not in self.early:
            self.early[call_id] = message  # its call may come next
        else:
            self._orphan(message)

    def compact_boundary(self, record: dict, number: int) -> None:
        """Claude Code compacted here (``system`` record ``compact_boundary``): the rows
        before it are replaced; its ``compactMetadata`` says how and at what size. The
        summary record that follows (``isCompactSummary``) is this compaction's summary."""
        self.close()
        self.spool.write(self.messages)
        meta = record.get("compactMetadata")
        meta = meta if isinstance(meta, dict) else {}
        trigger = str(meta["trigger"]) if meta.get("trigger") in ("auto", "manual") else ""
        extra: dict[str, Any] = {"line": number}
        for key in ("uuid", "logicalParentUuid"):
            if isinstance(record.get(key), str):
                extra[key] = record[key]
        # Everything else it recorded (durationMs, preservedSegment, cumulativeDroppedTokens…)
        extra.update(
            (k, v)
            for k, v in meta.items()
            if k not in ("trigger", "preTokens", "postTokens") and v is not None
        )
        self.session.native_compactions.append(
            NativeCompaction(
                source="claude-code",
                trigger=trigger,
                created_at=epoch(record.get("timestamp")),
                tokens_before=_count(meta.get("preTokens")),
                tokens_after=_count(meta.get("postTokens")),
                marker=record["content"] if isinstance(record.get("content"), str) else "",
                extra=extra,
            )
        )
        self.spool.archive_all(len(self.session.native_compactions) - 1)
        self.awaiting_summary = True

    def compact_summary(self, text: str, when, extra: dict) -> None:
        """Claude Code's summary: of the boundary just before it, or (older versions, no
        boundary record) of a compaction of its own; what came before is archived."""
        self.close()
        self.spool.write(self.messages)
        natives = self.session.native_compactions
        if not self.awaiting_summary:
            natives.append(NativeCompaction(source="claude-code", created_at=when, extra={**extra}))
            self.spool.archive_all(len(natives) - 1)
        self.awaiting_summary = False
        natives[-1].summary = text
        self.messages.append(
            ParsedMessage(
                role="user",
                content=text,
                is_summary=True,
                extra={**extra, "claude_code_summary": True},
                created_at=when,
                summary_of=len(natives) - 1,
            )
        )


def _count(value: Any) -> int | None:
    """A token count as recorded, or None when it is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _session_id(records_ids: list[str], file: str) -> str:
    stem = file.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return stem if stem in records_ids else (records_ids[0] if records_ids else "")


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """The whole file is one session: any bad line fails it (a transcript with a hole is wrong).

    Read in two passes so memory does not grow with the file: the messages are built line
    by line into a ``Spool`` (the session id, title and compaction marks are only known at
    the end), then the session is yielded with ``stream`` replaying them to the store."""
    yield spooled_session(_read, stream, file)


def _read(stream: IO[bytes], file: str, spool: Spool) -> ParsedSession:
    session = ParsedSession(source=SOURCE, line=1)
    build = _Builder(session, file, spool)
    session_ids: list[str] = []
    title, summary_title, model = "", "", ""
    first_time = None
    agent_id, sidechain_records, main_records = "", 0, 0
    meta_keys: dict[str, Any] = {}
    uuids: set[str] = set()
    for number, record in json_lines(stream, file, session):
        spool.write(build.messages)
        session.records += 1
        if not isinstance(record, dict):
            raise ImportProblem(
                file, number, f"expected a record object, got a JSON {type(record).__name__}"
            )
        kind = record.get("type")
        if not isinstance(kind, str):
            raise ImportProblem(file, number, "record has no 'type': not a Claude Code transcript")
        uuid = record.get("uuid")
        if isinstance(uuid, str) and uuid:
            if uuid in uuids:  # the same record written twice (a resume, a retried write)
                session.skip("duplicate record (its uuid came earlier in the file; stored once)")
                continue
            uuids.add(uuid)
        if kind == "summary" and isinstance(record.get("summary"), str):
            summary_title = summary_title or record["summary"]
            session.skip("summary record (used as the title)")
            continue
        if kind == "custom-title" and isinstance(record.get("customTitle"), str):
            summary_title = record["customTitle"]
            session.skip("custom-title record (used as the title)")
            continue
        if kind not in MESSAGE_TYPES:
            if kind == "teleported-from" and isinstance(record.get("remoteSessionId"), str):
                meta_keys.setdefault("teleported_from", record["remoteSessionId"])
            if kind == "system" and record.get("subtype") == "compact_boundary":
                build.compact_boundary(record, number)
                session.skip("system:compact_boundary record")  # stored as a compaction, not a row
                continue
            if kind == "system" and record.get("subtype") == "local_command":
                body = record.get("content")
                if isinstance(body, str):
                    build.meta(_meta_row(body, "command", record, number))
                    continue
            label = (
                f"{kind}:{record['subtype']}" if isinstance(record.get("subtype"), str) else kind
            )
            session.skip(f"{label} record")
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            raise ImportProblem(file, number, f"{kind} record has no 'message' object")
        role = message.get("role")
        if role is None and kind == "assistant" and "0" in message:
            message = _from_spread_stream(message)
            session.skip("assistant record holding its raw API stream (its text recovered)")
            role = kind
        if role != kind:
            raise ImportProblem(file, number, f"unknown role {role!r} in a {kind} record")
        sid = record.get("sessionId")
        if isinstance(sid, str) and sid and sid not in session_ids:
            session_ids.append(sid)
        for key, name in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "cli_version")):
            if isinstance(record.get(key), str) and record[key]:
                meta_keys.setdefault(name, record[key])
        if record.get("isSidechain"):
            sidechain_records += 1
            if isinstance(record.get("agentId"), str):
                agent_id = agent_id or record["agentId"]
        else:
            main_records += 1
        when = epoch(record.get("timestamp"))
        first_time = first_time or when
        extra = {"line": number}
        for key in ("uuid", "parentUuid"):
            if isinstance(record.get(key), str):
                extra[key] = record[key]
        content = message.get("content")
        if record.get("isSidechain") and main_records:
            # An older layout wrote sub-agent records inline in the main transcript.
            build.meta(_meta_row(_plain(content), "sidechain", record, number))
            continue
        # Builds that stopped flagging the summary still write it right after the boundary.
        summary_record = bool(record.get("isCompactSummary")) or (
            build.awaiting_summary
            and kind == "user"
            and _plain(content).lstrip().startswith(CONTINUED)
        )
        if not summary_record and not record.get("isMeta"):
            build.awaiting_summary = False  # a boundary with no summary: a marker only
        if kind == "assistant":
            if isinstance(message.get("model"), str) and message["model"] != "<synthetic>":
                model = model or message["model"]
            build.assistant(message, record, number, extra)
            continue
        if summary_record:
            build.compact_summary(_plain(content), when, extra)
            continue
        if record.get("isMeta"):
            build.meta(_meta_row(_plain(content), "meta", record, number))
            continue
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise ImportProblem(file, number, "user content is neither text nor a list of blocks")
        user_blocks = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                build.result(block, record, number, extra)
            else:
                user_blocks.append(block)
        if not user_blocks:
            continue
        parts = _parts(user_blocks, file, number)
        value = _simplify(parts)
        wrapper = wrapper_kind(text_of(value)) if parts else ""
        if wrapper:
            build.meta(_meta_row(text_of(value), wrapper, record, number))
            continue
        if isinstance(value, str) and value.lstrip().startswith(REMINDER) and REMINDER_END in value:
            # A /btw side question: Claude Code's instructions to the side agent, then
            # what the user asked. The instructions are a meta row, the question the turn.
            reminder, _, value = value.partition(REMINDER_END)
            build.meta(_meta_row(reminder + REMINDER_END, "system_reminder", record, number))
            value = value.strip()
            if not value:
                continue
        build.close()
        build.give_up()
        build.messages.append(
            ParsedMessage(role="user", content=value, extra=extra, created_at=when)
        )
        if not title and not text_of(value).lstrip().startswith("<"):
            title = text_of(value)
    build.close()
    build.give_up()
    spool.write(build.messages)
    if not spool.turns and not (session_ids or summary_title or "teleported_from" in meta_keys):
        # else an empty session (left out by the import), e.g. one moved from the web unused
        raise ImportProblem(file, 0, "no user or assistant records: not a Claude Code transcript")
    parent_id = session_ids[0] if session_ids else ""
    if sidechain_records and not main_records:
        label = agent_id or "sidechain"
        session.public_id = safe_id(f"{parent_id}.agent-{label}")
        session.parent_id = parent_id
        session.kind = "sub-agent"
        meta_keys["agent_id"] = agent_id
        meta_keys["parent_session_id"] = parent_id
    else:
        session.public_id = safe_id(_session_id(session_ids, file))
    session.title = " ".join((summary_title or title).split())[:80]
    session.model = model
    session.created_at = first_time
    session.extra = {"claude_code": meta_keys}
    return session


def _plain(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b if isinstance(b, str) else str(b.get("text") or "")
            for b in content
            if isinstance(b, str | dict)
        )
    return ""


def _meta_row(text: str, kind: str, record: dict, number: int) -> ParsedMessage:
    extra = {"line": number}
    if isinstance(record.get("uuid"), str):
        extra["uuid"] = record["uuid"]
    return ParsedMessage(
        role="user",
        content=strip_ansi(text),
        meta=kind,
        extra=extra,
        created_at=epoch(record.get("timestamp")),
    )


def _from_spread_stream(message: dict) -> dict:
    """An assistant message some Agent SDK builds wrote as the raw server-sent event stream
    spread into an object, one character per key ("0": "e", "1": "v", …): the text and
    thinking the stream carried, as the message it would have been."""
    stream = "".join(
        str(message[key]) for key in sorted((k for k in message if k.isdigit()), key=int)
    )
    blocks: dict[int, dict] = {}
    model = ""
    for line in stream.splitlines():
        if not line.startswith("data: "):
            continue
        try:
            event = json.loads(line[len("data: ") :])
        except ValueError:
            continue  # "[DONE]" and anything else that is not an event
        if not isinstance(event, dict):
            continue
        started = event.get("message")
        if event.get("type") == "message_start" and isinstance(started, dict):
            model = str(started.get("model") or "")
        delta, index = event.get("delta"), event.get("index")
        if event.get("type") != "content_block_delta" or not isinstance(delta, dict):
            continue
        block = blocks.setdefault(index if isinstance(index, int) else 0, {})
        if isinstance(delta.get("text"), str):
            block.setdefault("type", "text")
            block["text"] = block.get("text", "") + delta["text"]
        elif isinstance(delta.get("thinking"), str):
            block.setdefault("type", "thinking")
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
    recovered: dict = {"role": "assistant", "content": [blocks[i] for i in sorted(blocks)]}
    if model:
        recovered["model"] = model
    return recovered
