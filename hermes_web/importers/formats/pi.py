"""Pi session files (``~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl``), as written by
@mariozechner/pi-coding-agent (session format versions 1–3).

Line 1 is the header ``{"type": "session", "id", "timestamp", "cwd", "version"}``; every
other line is an entry of a tree (``id`` / ``parentId``; version 1 files have neither and
are a plain chain, as Pi's own migration reads them). ``message`` entries hold a pi-ai
message: ``user`` (text or text/image blocks), ``assistant`` (text, ``thinking`` and
``toolCall`` blocks), ``toolResult`` (``toolCallId``, ``toolName``, ``isError``) and
``bashExecution`` (a command the user ran: a meta row).

- The conversation is the path from the root to the last entry, as Pi resumes it. Every
  other leaf is a branch the user left (``/tree``, ``/fork``): its own entries become a
  session linked to the session it branched from (``kind`` "branch").
- ``{"type": "compaction", "summary", "firstKeptEntryId", "tokensBefore"}`` is Pi's own
  compaction: a ``NativeCompaction`` (source "pi"); the rows before the first kept entry
  are archived and marked replaced, the kept rows follow the summary row, as Pi rebuilds
  its context.
- ``model_change``, ``thinking_level_change``, ``label``, ``custom`` entries are metadata;
  ``session_info`` names the session; ``custom_message`` and ``branch_summary`` are
  context Pi adds (meta rows).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    epoch,
    image_part,
    json_lines,
    keep_damage,
    pair_stream,
    records_of,
    safe_id,
    text_of,
)
from hermes_web.importers.graph import Cycle, walk_up
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_PI
METADATA_ENTRIES = {"model_change", "thinking_level_change", "label", "custom"}


@dataclass
class _Entry:
    record: dict
    line: int
    id: str
    parent: str | None
    children: list[str] = field(default_factory=list)


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """The main conversation, then one session per branch (a bad line fails the file)."""
    damage = ParsedSession(source=SOURCE)  # the lines that could not be read
    header, entries, order = _read(stream, file, damage)
    session_id = header.get("id") if isinstance(header.get("id"), str) else ""
    if not session_id:
        session_id = file.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    with records_of(file, 1):  # the header's id: a problem in it is line 1's
        base = safe_id(session_id)
    if not order:
        raise ImportProblem(file, 1, "a Pi session header with no entries: nothing to import")
    name = ""
    for entry in entries.values():
        if entry.record.get("type") == "session_info" and isinstance(entry.record.get("name"), str):
            name = entry.record["name"]  # the newest name wins, as in Pi's session list
    owner: dict[str, str] = {}
    segments: list[tuple[str, list[str], str]] = []  # (public id, entry ids, parent id)
    leaves = [order[-1]] + [i for i in order[:-1] if not entries[i].children]
    for leaf in leaves:
        try:
            path, current = walk_up(
                leaf, lambda at: entries[at].parent, stop=lambda at: at in owner
            )
        except Cycle as cycle:
            entry = entries[str(cycle.node)]
            raise ImportProblem(
                file, entry.line, f"entry {entry.id!r} is its own ancestor (parent cycle)"
            ) from None
        path.reverse()
        if not path:
            continue
        if not segments:
            public_id, parent = base, ""
        else:
            public_id = safe_id(f"{session_id}.branch-{path[0]}")
            parent = owner.get(current, base) if current is not None else base
        for entry_id in path:
            owner[entry_id] = public_id
        segments.append((public_id, path, parent))
    sessions = [
        _session(public_id, parent, [entries[i] for i in path], header, name, file)
        for public_id, path, parent in segments
    ]
    main, branches = sessions[0], sessions[1:]
    keep_damage(main, damage)
    for branch in branches:
        if not any(not m.meta for m in branch.messages):  # a label or a model change only
            main.skip("branch without messages (not imported)")
    yield main
    yield from (b for b in branches if any(not m.meta for m in b.messages))


def _read(
    stream: IO[bytes], file: str, damage: ParsedSession
) -> tuple[dict, dict[str, _Entry], list[str]]:
    header: dict = {}
    entries: dict[str, _Entry] = {}
    order: list[str] = []
    previous: str | None = None
    for number, record in json_lines(stream, file, damage):
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise ImportProblem(file, number, "expected an entry object with a 'type'")
        if record["type"] == "session":
            if header:
                raise ImportProblem(file, number, "a second session header")
            header = record
            continue
        if not header:
            raise ImportProblem(file, number, "no session header before the first entry")
        raw_id = record.get("id")
        entry_id = raw_id if isinstance(raw_id, str) and raw_id else f"line-{number}"
        if entry_id in entries:
            raise ImportProblem(file, number, f"entry id {entry_id!r} appears twice")
        if "parentId" in record:  # version 2+: the tree; null is a root
            parent = record["parentId"] if isinstance(record["parentId"], str) else None
        else:  # version 1: each entry follows the one before it
            parent = previous
        entries[entry_id] = _Entry(record, number, entry_id, parent)
        order.append(entry_id)
        previous = entry_id
    for entry_id in order:
        record = entries[entry_id].record
        at = record.get("firstKeptEntryIndex")  # version 1: an index into the file's entries
        if record["type"] == "compaction" and isinstance(at, int) and 0 < at <= len(order):
            record.setdefault("firstKeptEntryId", order[at - 1])  # index 0 is the header
        parent = entries[entry_id].parent
        if parent is not None and parent in entries:
            entries[parent].children.append(entry_id)
        elif parent is not None and damage.unreadable:
            # Its parent was most likely on a line that could not be read: Pi appends, so
            # the entry written before it stands in, rather than a root that would split
            # the conversation into a branch.
            at = order.index(entry_id)
            entries[entry_id].parent = order[at - 1] if at else None
            if at:
                entries[order[at - 1]].children.append(entry_id)
            damage.counts["entries_reattached_over_unreadable_lines"] += 1
        elif parent is not None:  # a parent that is not in the file: a root, as Pi treats it
            entries[entry_id].parent = None
    if not header:
        raise ImportProblem(file, 1, "no Pi session header")
    return header, entries, order


def _when(entry: _Entry, message: dict | None = None):
    when = epoch(entry.record.get("timestamp"))
    if when is None and message is not None and isinstance(message.get("timestamp"), int | float):
        when = epoch(message["timestamp"] / 1000)  # pi-ai stamps messages in milliseconds
    return when


def _blocks(content: Any, file: str, number: int) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if content is None:
        return []
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise ImportProblem(file, number, "message content is neither text nor a list of blocks")
    return content


def _parts(blocks: list[dict], file: str, number: int) -> Any:
    """Text and image blocks → text, or OpenAI parts when an image is among them."""
    parts: list[dict] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise ImportProblem(file, number, "a text block's text is not text")
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            data, mime = block.get("data"), block.get("mimeType")
            if not isinstance(data, str):
                raise ImportProblem(file, number, "an image block has no data")
            parts.append(image_part(f"data:{mime or 'image/png'};base64,{data}"))
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


class _Builder:
    def __init__(self, session: ParsedSession, file: str) -> None:
        self.session, self.file = session, file
        self.rows: list[ParsedMessage] = []
        self.row_of: dict[str, int] = {}  # entry id -> index of its first row
        self.names: dict[str, str] = {}
        self.title = ""

    def meta(self, entry: _Entry, text: str, kind: str) -> None:
        self._add(
            entry,
            ParsedMessage(
                role="user",
                content=text,
                meta=kind,
                extra=self._extra(entry),
                created_at=_when(entry),
            ),
        )

    def _extra(self, entry: _Entry) -> dict:
        return {"line": entry.line, "pi_entry": entry.id}

    def _add(self, entry: _Entry, message: ParsedMessage) -> None:
        self.row_of.setdefault(entry.id, len(self.rows))
        self.rows.append(message)

    def message(self, entry: _Entry) -> None:
        file, number = self.file, entry.line
        message = entry.record.get("message")
        if not isinstance(message, dict):
            raise ImportProblem(file, number, "a message entry has no 'message' object")
        role = message.get("role")
        extra = self._extra(entry)
        when = _when(entry, message)
        if role == "user":
            content = _parts(_blocks(message.get("content"), file, number), file, number)
            self._add(
                entry, ParsedMessage(role="user", content=content, extra=extra, created_at=when)
            )
            if not self.title:
                self.title = text_of(content)
        elif role == "assistant":
            self._assistant(entry, message, extra, when)
        elif role == "toolResult":
            call_id = message.get("toolCallId")
            if not isinstance(call_id, str) or not call_id:
                raise ImportProblem(file, number, "a toolResult has no string toolCallId")
            if message.get("isError"):
                extra["is_error"] = True
            name = message.get("toolName")
            self._add(
                entry,
                ParsedMessage(
                    role="tool",
                    content=_parts(_blocks(message.get("content"), file, number), file, number),
                    tool_call_id=call_id,
                    tool_name=name if isinstance(name, str) else self.names.get(call_id, ""),
                    extra=extra,
                    created_at=when,
                ),
            )
        elif role == "bashExecution":
            command, output = message.get("command"), message.get("output")
            text = f"$ {command if isinstance(command, str) else ''}\n"
            text += output if isinstance(output, str) else ""
            self.meta(entry, text, "command")
        else:  # custom / hookMessage / branchSummary / compactionSummary: context Pi added
            content = message.get("content", message.get("summary"))
            text = text_of(content) if not isinstance(content, str) else content
            self.meta(entry, text, f"pi_{role}" if isinstance(role, str) else "pi_message")

    def _assistant(self, entry: _Entry, message: dict, extra: dict, when) -> None:
        file, number = self.file, entry.line
        texts, thinking, calls, signatures = [], [], [], []
        for block in _blocks(message.get("content"), file, number):
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "thinking":
                if isinstance(block.get("thinking"), str):
                    thinking.append(block["thinking"])
                if block.get("thinkingSignature"):
                    signatures.append(block["thinkingSignature"])
            elif kind == "toolCall":
                call_id, name = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not call_id:
                    raise ImportProblem(file, number, "a toolCall block has no string id")
                if not isinstance(name, str) or not name:
                    raise ImportProblem(file, number, f"toolCall {call_id}: no name")
                arguments = block.get("arguments")
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments if arguments is not None else {})
                self.names[call_id] = name
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                )
            else:
                self.session.skip(f"assistant block of type {kind!r}")
        if signatures:
            extra["thinking_signatures"] = signatures
        for key in ("stopReason", "usage", "provider", "errorMessage"):
            if message.get(key) not in (None, ""):
                extra[f"pi_{key}"] = message[key]
        model = message.get("model")
        if isinstance(model, str) and model and not self.session.model:
            self.session.model = model
        self._add(
            entry,
            ParsedMessage(
                role="assistant",
                content="\n".join(texts) or None,
                tool_calls=calls or None,
                reasoning="\n".join(thinking) or None,
                extra=extra,
                created_at=when,
            ),
        )

    def compaction(self, entry: _Entry) -> None:
        """Pi compacted here: rows before the first kept entry are replaced; the summary
        row goes before the kept rows, which Pi sends after it."""
        record = entry.record
        index = len(self.session.native_compactions)
        # paired while still active (pairing leaves archived rows as they are)
        self.rows[:] = list(pair_stream(self.rows, self.session))
        self.row_of = {}
        for at, row in enumerate(self.rows):
            if isinstance(row.extra.get("pi_entry"), str):
                self.row_of.setdefault(row.extra["pi_entry"], at)
        first_kept = record.get("firstKeptEntryId")
        kept_at = self.row_of.get(first_kept, len(self.rows)) if isinstance(first_kept, str) else 0
        for row in self.rows[:kept_at]:
            if row.active and not row.meta:
                row.active, row.archived, row.replaced_by = False, True, index
        for row in self.rows[kept_at:]:
            if row.active and not row.meta and row.kept_by is None:
                row.kept_by = index
        raw = record.get("summary")
        summary = raw if isinstance(raw, str) else ""
        tokens = record.get("tokensBefore")
        when = _when(entry)
        self.session.native_compactions.append(
            NativeCompaction(
                source="pi",
                trigger="",  # Pi does not record whether it was /compact or automatic
                created_at=when,
                tokens_before=tokens if isinstance(tokens, int) else None,
                summary=summary,
                marker="" if summary else "Pi compacted here; no summary was recorded",
                extra={
                    k: v
                    for k, v in {
                        "line": entry.line,
                        "entry_id": entry.id,
                        "first_kept_entry_id": first_kept,
                        "details": record.get("details"),
                        "from_hook": record.get("fromHook"),
                    }.items()
                    if v is not None
                },
            )
        )
        if summary.strip():
            row = ParsedMessage(
                role="user",
                content=summary,
                is_summary=True,
                summary_of=index,
                extra={**self._extra(entry), "pi_compaction": True},
                created_at=when,
            )
            self.rows.insert(kept_at, row)
            for key, at in self.row_of.items():
                if at >= kept_at:
                    self.row_of[key] = at + 1
            self.row_of.setdefault(entry.id, kept_at)


def _session(
    public_id: str, parent: str, path: list[_Entry], header: dict, name: str, file: str
) -> ParsedSession:
    session = ParsedSession(source=SOURCE, public_id=public_id, line=path[0].line)
    build = _Builder(session, file)
    for entry in path:
        session.records += 1
        kind = entry.record["type"]
        if kind == "message":
            build.message(entry)
        elif kind == "compaction":
            build.compaction(entry)
        elif kind in ("custom_message", "branch_summary"):
            content = entry.record.get("content", entry.record.get("summary"))
            text = content if isinstance(content, str) else text_of(content)
            build.meta(entry, text, kind)
        elif kind == "model_change" and not session.model:
            model = entry.record.get("modelId")
            session.model = model if isinstance(model, str) else ""
            session.skip("model_change entry")
        elif kind == "session_info":
            session.skip("session_info entry (its name is the title)")
        else:
            session.skip(f"{kind} entry" if kind in METADATA_ENTRIES else f"entry of type {kind!r}")
    session.messages = build.rows
    session.title = " ".join(((name if not parent else "") or build.title).split())[:80]
    if parent:
        session.parent_id = parent
        session.kind = "branch"
    session.created_at = _when(path[0]) or epoch(header.get("timestamp"))
    if not session.model and isinstance(header.get("modelId"), str):  # version 1 headers
        session.model = header["modelId"]
    meta = {
        key: header[key]
        for key in ("cwd", "version", "parentSession", "branchedFrom", "provider")
        if header.get(key) not in (None, "")
    }
    if parent:
        meta["branched_from_entry"] = path[0].parent or ""
    session.extra = {"pi": meta}
    return session
