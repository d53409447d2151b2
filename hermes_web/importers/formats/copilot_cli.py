"""GitHub Copilot CLI session logs (``~/.copilot/session-state/<session>/events.jsonl``), as
written by Copilot CLI 0.0.3xx–1.0.x (event schema version 1).

Every line is an event ``{"type", "data", "id", "parentId", "timestamp"}`` (plus ``agentId``
on a sub-agent's events, ``ephemeral`` on streaming deltas). ``session.start`` names the
session, model and working directory; ``user.message`` and ``assistant.message`` (with its
``toolRequests``) are the turns; ``tool.execution_start`` / ``tool.execution_complete`` carry
each call's arguments and result (a call no assistant message listed gets one made for it);
``assistant.reasoning`` is the next answer's reasoning; ``system.message`` is kept as a meta
row. Events with an ``agentId`` belong to a sub-agent: they become its own session, linked
to this one (the id is the ``task`` call that started it).

``session.compaction_start`` / ``session.compaction_complete`` are Copilot's own
compaction: a ``NativeCompaction`` (source "copilot-cli") with the token figures recorded at
the start (``systemTokens``, ``conversationTokens``, ``toolDefinitionsTokens``) and the end
(``preCompactionTokens``, ``postCompactionTokens``, ``trigger``, ``compactionTokensUsed``,
``summaryContent``; only a ``success`` one compacted anything); what came before is
archived and the summary row follows. Everything else (hooks, permissions, usage, deltas)
is counted in the fidelity report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import PurePath
from typing import IO, Any

from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    epoch,
    json_lines,
    pair_stream,
    safe_id,
    text_of,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_COPILOT_CLI
TRIGGERS = {"threshold": "auto", "auto": "auto", "automatic": "auto", "manual": "manual"}
TRIGGERS["user"] = "manual"
START_TOKENS = ("systemTokens", "conversationTokens", "toolDefinitionsTokens")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):  # a tool result: {"content", "detailedContent"}
        for key in ("content", "detailedContent", "message"):
            if isinstance(value.get(key), str):
                return value[key]
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return text_of(value)
    return "" if value is None else json.dumps(value)


class _Thread:
    """The messages of the main conversation or of one sub-agent, in event order."""

    def __init__(self, session: ParsedSession) -> None:
        self.session = session
        self.rows: list[ParsedMessage] = []
        self.calls: dict[str, ParsedMessage] = {}  # call id -> the assistant row holding it
        self.names: dict[str, str] = {}
        self.reasoning: list[str] = []

    def add(self, message: ParsedMessage) -> None:
        self.rows.append(message)

    def assistant(self, data: dict, extra: dict, when) -> None:
        calls = []
        for request in data.get("toolRequests") or ():
            if not isinstance(request, dict):
                continue
            call = _call(request.get("toolCallId"), request.get("name"), request.get("arguments"))
            if call is not None:
                calls.append(call)
        reasoning = data.get("reasoningText") if isinstance(data.get("reasoningText"), str) else ""
        reasoning = "\n".join(t for t in (*self.reasoning, reasoning) if t)
        self.reasoning = []
        for key in ("messageId", "outputTokens", "model"):
            if data.get(key) not in (None, ""):
                extra[f"copilot_{key}"] = data[key]
        content = data.get("content")
        turn = next((row for row in reversed(self.rows) if not row.meta), None)
        if (
            calls
            and not _text(content)
            and turn is not None
            and turn.role == "assistant"
            and turn.tool_calls
        ):
            # The old flat session-state/<id>.jsonl writes one event per call of a parallel
            # response: the calls join the turn they continue, so their results follow it
            # (else each event's calls would get stub results, the real ones left over).
            turn.tool_calls = turn.tool_calls + calls
            if reasoning:
                turn.reasoning = "\n".join(t for t in (turn.reasoning or "", reasoning) if t)
            turn.extra.setdefault("merged_events", 1)
            turn.extra["merged_events"] += 1
            self.session.counts["assistant_events_merged"] += 1
            for call in calls:
                self.calls[call["id"]] = turn
                self.names[call["id"]] = call["function"]["name"]
            return
        message = ParsedMessage(
            role="assistant",
            content=_text(content) or None,
            tool_calls=calls or None,
            reasoning=reasoning or None,
            extra=extra,
            created_at=when,
        )
        for call in calls:
            self.calls[call["id"]] = message
            self.names[call["id"]] = call["function"]["name"]
        self.add(message)

    def start(self, data: dict, extra: dict, when) -> None:
        """A call starts: its arguments complete the call its assistant message listed, or
        (older logs) a call nobody listed joins the open assistant turn or starts one."""
        call = _call(data.get("toolCallId"), data.get("toolName"), data.get("arguments"))
        if call is None:
            self.session.skip("tool.execution_start without a call id or tool name")
            return
        self.names[call["id"]] = call["function"]["name"]
        holder = self.calls.get(call["id"])
        if holder is not None:
            for listed in holder.tool_calls or ():
                if listed["id"] == call["id"] and listed["function"]["arguments"] in ("", "{}"):
                    listed["function"]["arguments"] = call["function"]["arguments"]
            return
        turn = self._open_turn()
        if turn is None:
            turn = ParsedMessage(role="assistant", content=None, extra=extra, created_at=when)
            self.add(turn)
        turn.tool_calls = (turn.tool_calls or []) + [call]
        self.calls[call["id"]] = turn

    def _open_turn(self) -> ParsedMessage | None:
        """The open turn: the newest assistant row, if only its results (or meta rows) came
        after it."""
        for row in reversed(self.rows):
            if row.meta or row.role == "tool":
                continue
            return row if row.role == "assistant" else None
        return None

    def complete(self, data: dict, extra: dict, when) -> None:
        call_id = data.get("toolCallId")
        if not isinstance(call_id, str) or not call_id:
            self.session.skip("tool.execution_complete without a call id")
            return
        if data.get("success") is False:
            extra["is_error"] = True
        result = data.get("result")
        error = data.get("error")
        text = _text(result) if result not in (None, "") else _text(error)
        self.add(
            ParsedMessage(
                role="tool",
                content=text,
                tool_call_id=call_id,
                tool_name=self.names.get(call_id, str(data.get("toolName") or "")),
                extra=extra,
                created_at=when,
            )
        )


REQUEST = re.compile(r"<userRequest>\s*(.*?)\s*</userRequest>", re.DOTALL)


def _user_request(text: str) -> tuple[str, str]:
    """The user's words and the IDE context around them. Sessions VS Code's Copilot agent
    writes (``producer: copilot-agent``) append ``<reminder>``, ``<attachments>`` and the
    request again in ``<userRequest>`` to what was typed: the request is the turn, the
    rest a meta row. Anything else is the turn as it is, with no context."""
    found = REQUEST.search(text)
    if found is None or not found.group(1).strip():
        return text, ""
    request = found.group(1)
    context = text[: found.start()] + text[found.end() :]
    if context.lstrip().startswith(request):  # the typed text, before the appended context
        context = context.lstrip()[len(request) :]
    return request, context.strip()


def _call(call_id: Any, name: Any, arguments: Any) -> dict | None:
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        return None
    if not isinstance(arguments, str):  # an object, except apply_patch's patch text
        arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """The main session, then one session per sub-agent (any bad line fails the file)."""
    main = ParsedSession(source=SOURCE, line=1)
    thread = _Thread(main)
    agents: dict[str, _Thread] = {}
    session_id, title, meta = "", "", {}
    compaction_start: dict = {}
    compacting: list[ParsedMessage] | None = None
    seen_start = False
    for number, event in json_lines(stream, file, main):
        main.records += 1
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ImportProblem(file, number, "expected an event object with a 'type'")
        kind, data = event["type"], event.get("data")
        if not isinstance(data, dict):
            data = {}
        when = epoch(event.get("timestamp"))
        extra = {"line": number}
        if isinstance(event.get("id"), str):
            extra["event_id"] = event["id"]
        agent = event.get("agentId")
        target = thread
        if isinstance(agent, str) and agent:
            if agent not in agents:
                child = ParsedSession(source=SOURCE, line=number, kind="sub-agent")
                child.extra = {"copilot_cli": {"agent_id": agent}}
                agents[agent] = _Thread(child)
            target = agents[agent]
            target.session.records += 1
        if event.get("ephemeral"):
            main.skip(f"{kind} event (ephemeral)")
            continue
        if kind == "session.start":
            seen_start = True
            session_id = session_id or str(data.get("sessionId") or "")
            main.created_at = epoch(data.get("startTime")) or when
            if isinstance(data.get("selectedModel"), str):
                main.model = data["selectedModel"]
            found = data.get("context")
            context: dict = found if isinstance(found, dict) else {}
            for key in ("cwd", "repository", "branch", "gitRoot", "headCommit"):
                if context.get(key) not in (None, ""):
                    meta[key] = context[key]
            for key in ("copilotVersion", "producer", "version"):
                if data.get(key) not in (None, ""):
                    meta[key] = data[key]
            main.skip("session.start event (kept as session metadata)")
        elif kind == "user.message":
            content, ide_context = _user_request(_text(data.get("content")))
            for key in ("attachments", "source"):
                if data.get(key):
                    extra[key] = data[key]
            if ide_context:
                target.add(
                    ParsedMessage(
                        role="user",
                        content=ide_context,
                        meta="ide_context",
                        extra={"line": number},
                        created_at=when,
                    )
                )
                main.skip("IDE context of a request (kept as a meta row)")
            target.add(ParsedMessage(role="user", content=content, extra=extra, created_at=when))
            if target is thread and not title:
                title = content
        elif kind == "assistant.message":
            target.assistant(data, extra, when)
        elif kind == "assistant.reasoning" and isinstance(data.get("content"), str):
            target.reasoning.append(data["content"])
        elif kind == "tool.execution_start":
            target.start(data, extra, when)
        elif kind == "tool.execution_complete":
            target.complete(data, extra, when)
        elif kind == "system.message":
            target.add(
                ParsedMessage(
                    role="system",
                    content=_text(data.get("content")),
                    meta="system_message",
                    extra=extra,
                    created_at=when,
                )
            )
            main.skip("system.message event (kept as a meta row)")
        elif kind == "session.error":
            # Why a turn has no answer (quota, rate limit, network): shown, never sent again.
            text = _text(data.get("message")) or str(data.get("errorType") or "error")
            target.add(
                ParsedMessage(
                    role="assistant",
                    content=f"[{data.get('errorType') or 'error'}] {text}",
                    meta="session_error",
                    extra=extra,
                    created_at=when,
                )
            )
            main.skip("session.error event (kept as a meta row)")
        elif kind == "session.compaction_start":
            compaction_start = dict(data, line=number)
            compacting = list(thread.rows)  # what the compaction summarizes (see _compaction)
        elif kind == "session.compaction_complete":
            if compaction_start:
                main.skip("session.compaction_start event (kept with the compaction)")
            _compaction(thread, compaction_start, data, number, when, compacting)
            compaction_start, compacting = {}, None
        elif kind == "session.model_change" and isinstance(data.get("newModel"), str):
            main.model = main.model or data["newModel"]
            main.skip("session.model_change event")
        elif kind == "session.title_changed" and isinstance(data.get("title"), str):
            title = data["title"] or title
            main.skip("session.title_changed event (used as the title)")
        elif kind == "session.shutdown":
            main.ended_at = when
            for key in ("modelMetrics", "codeChanges", "currentTokens", "shutdownType"):
                if data.get(key) not in (None, "", {}):
                    meta[key] = data[key]
            main.skip("session.shutdown event (kept as session metadata)")
        else:
            main.skip(f"{kind} event")
    if compaction_start:  # still running when the log ends (the session shut down first)
        main.skip("session.compaction_start with no completion in the log (nothing compacted)")
    if not seen_start and not thread.rows:
        raise ImportProblem(file, 1, "no session.start event: not a Copilot CLI events.jsonl")
    if not session_id:  # the session's folder: session-state/<id>/events.jsonl
        path = PurePath(file)
        session_id = path.parent.name if path.name == "events.jsonl" else path.stem
        session_id = session_id or path.stem
    main.public_id = safe_id(session_id)
    main.title = " ".join(title.split())[:80]
    main.messages = thread.rows
    main.extra = {"copilot_cli": meta}
    yield main
    for agent, agent_thread in agents.items():
        if not agent_thread.rows:
            continue
        session = agent_thread.session
        session.public_id = safe_id(f"{session_id}.agent-{agent}")
        session.parent_id = main.public_id
        session.model = main.model
        session.created_at = agent_thread.rows[0].created_at
        first = next((text_of(r.content) for r in agent_thread.rows if r.role == "user"), "")
        session.title = " ".join(first.split())[:80]
        session.messages = agent_thread.rows
        session.extra["copilot_cli"]["parent_session_id"] = session_id
        yield session


def _compaction(
    thread: _Thread,
    start: dict,
    data: dict,
    number: int,
    when,
    compacting: list[ParsedMessage] | None = None,
) -> None:
    """A completed compaction. Copilot compacts in the background: it summarizes the
    conversation as it was at ``session.compaction_start`` (``compacting``, its
    ``preCompactionMessagesLength`` messages) while the agent goes on; the turns taken
    meanwhile are kept after the summary. Without a start event, everything so far."""
    session = thread.session
    if data.get("success") is False:
        session.skip("session.compaction_complete that failed (nothing was compacted)")
        return
    index = len(session.native_compactions)
    raw = data.get("summaryContent")
    summary = raw if isinstance(raw, str) else ""
    before = data.get("preCompactionTokens")
    if not isinstance(before, int):
        parts = [start.get(key) for key in START_TOKENS]
        counts = [p for p in parts if isinstance(p, int)]
        before = sum(counts) if len(counts) == len(parts) else start.get("currentTokens")
    after = data.get("postCompactionTokens")
    recorded = {k: v for k, v in data.items() if k != "summaryContent"}
    session.native_compactions.append(
        NativeCompaction(
            source="copilot-cli",
            trigger=TRIGGERS.get(str(data.get("trigger") or start.get("trigger") or ""), ""),
            created_at=when,
            tokens_before=before if isinstance(before, int) else None,
            tokens_after=after if isinstance(after, int) else None,
            summary=summary,
            marker="" if summary else "Copilot CLI compacted here; no summary was recorded",
            extra={"line": number, "start": start, "complete": recorded},
        )
    )
    # paired while still active (pairing leaves archived rows as they are), so the rows a
    # replay of this compaction reads are in call order
    thread.rows[:] = list(pair_stream(thread.rows, session))
    cut = len(thread.rows)
    if compacting is not None:
        present = {id(row) for row in compacting}
        cut = next(
            (
                at
                for at, row in enumerate(thread.rows)
                # a result goes with its call (a stub added by pairing too)
                if row.active and not row.meta and row.role != "tool" and id(row) not in present
            ),
            cut,
        )
    for row in thread.rows[:cut]:
        if row.active and not row.meta:
            row.active, row.archived = False, True
            if row.replaced_by is None:
                row.replaced_by = index
    if summary.strip():
        thread.rows.insert(
            cut,
            ParsedMessage(
                role="user",
                content=summary,
                is_summary=True,
                summary_of=index,
                extra={"line": number, "copilot_compaction": True},
                created_at=when,
            ),
        )
