"""Gemini CLI chats, in the three shapes its versions wrote:

- the chat recording ``~/.gemini/tmp/<project hash>/chats/session-*.json`` (0.5–0.2x): one
  object ``{sessionId, projectHash, startTime, lastUpdated, messages, summary?}`` whose
  messages have ``type`` user / gemini / info / error / warning, ``content`` (text or Gemini
  parts), and on gemini messages ``thoughts`` (→ reasoning), ``tokens``, ``model`` and
  ``toolCalls`` ``{id, name, args, result, status, resultDisplay}`` (→ an assistant call and
  its tool result);
- the newer ``session-*.jsonl``: the same session as a metadata line, message records
  (a record with a known ``id`` replaces it), ``{"$set": {...}}`` updates and
  ``{"$rewindTo": id}`` (the rewound messages are dropped, as the CLI does); a
  ``$set`` of ``messages`` that drops earlier messages is the CLI's compression rewriting
  the history;
- the older ``logs.json`` (a list of ``{sessionId, messageId, type, message, timestamp}``,
  the user's prompts only, several sessions per file) and ``/chat save`` checkpoints
  (``checkpoint-<tag>.json``: the model history, ``{role: user|model, parts}``).

Gemini CLI's own compression becomes a ``NativeCompaction`` (source ``gemini-cli``): a
"Context compressed from 68% to 3%." (or "... from N to M tokens") info message is its
marker, the rows before it are archived; a ``<state_snapshot>`` user text (the compressed
history the CLI sends in place of the old turns) is its summary row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import IO, Any

import ijson

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
    MAX_LINE_BYTES,
    UTF8_BOM,
    ImportProblem,
    LineDamage,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    Spool,
    epoch,
    image_part,
    json_line,
    safe_id,
    size_text,
)
from hermes_web.importers.formats.openai import (
    _SCALARS as SCALARS,
)
from hermes_web.importers.formats.openai import (
    _bounded,
    _broken,
    _first_byte,
    _Lines,
    _LoneSurrogate,
    _TooDeep,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_GEMINI_CLI
NATIVE = "gemini-cli"
NOTE_TYPES = ("info", "error", "warning")
COMPRESSED = re.compile(
    r"(?:context|chat history)\s+(?:was\s+)?compressed\s+from\s+([\d,.]+)\s*(%|tokens)?\s+"
    r"to\s+([\d,.]+)\s*(%|tokens)?",
    re.IGNORECASE,
)
SNAPSHOT = "<state_snapshot>"
# The working directory, file tree and loaded GEMINI.md files the CLI (2026, and its A2A
# server) records as the first user message of a session.
SESSION_CONTEXT = "<session_context>"
# The A2A server (Cloud Shell's agent mode) writes this one sessionId in every session file.
A2A_SESSION = "a2a-server"
# The first turn of a checkpoint's history: the working directory and file tree the CLI sends
# before the user's first prompt ("Okay, …" in June 2025, "This is the Gemini CLI. …" later).
CONTEXT_OPENINGS = (
    "This is the Gemini CLI. We are setting up the context for our chat.",
    "Okay, just setting up the context for our chat.",
)
CHUNK = 64 * 1024
NOT_A_CHAT = (
    "not a Gemini CLI chat: expected an object with 'messages', a list of log entries or a "
    "checkpoint history"
)
REWRITTEN = "history rewritten by the CLI's compression ($set of messages)"
# Slash commands the CLI records as user text: bookkeeping, not a turn.
COMMANDS = re.compile(
    r"^/(?:about|auth|bug|chat|clear|compress|copy|corgi|directory|dir|docs|editor|"
    r"extensions|help|ide|init|mcp|memory|model|privacy|quit|exit|restore|resume|settings|"
    r"stats|theme|tools|vim|setup-github|terminal-setup|permissions|policies|agents)\b"
)


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """Every session in a Gemini CLI file (one, or several in an old ``logs.json``)."""
    head = stream.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    stream.seek(0)
    if head.startswith(b"{") and _is_jsonl(stream):
        yield _jsonl(stream, file)
        return
    if head.startswith(b"{"):
        yield _object(stream, file)
        return
    document = load_json(stream, file)
    if document == [] and file.replace("\\", "/").rsplit("/", 1)[-1] == "logs.json":
        return  # the CLI writes an empty list for a project where nothing was typed yet
    if isinstance(document, dict) and isinstance(document.get("history"), list):
        yield _checkpoint(document["history"], file)
    elif isinstance(document, list) and document and _is_log_entry(document[0]):
        yield from _logs(document, file)
    elif (
        isinstance(document, list)
        and document
        and isinstance(document[0], dict)
        and ("parts" in document[0])
    ):
        yield _checkpoint(document, file)
    else:
        raise ImportProblem(file, 0, NOT_A_CHAT)


def _is_jsonl(stream: IO[bytes]) -> bool:
    """More than one line, the first a JSON object (a file of one line is one document, read
    as a stream like a pretty-printed recording). Read in chunks: never the whole file."""
    newline = -1
    while chunk := stream.read(CHUNK):
        if (at := chunk.find(b"\n")) >= 0:
            newline = stream.tell() - len(chunk) + at
            break
    more = False
    if newline >= 0:
        stream.seek(newline + 1)
        while chunk := stream.read(CHUNK):
            if chunk.strip():
                more = True
                break
    stream.seek(0)
    if not more:
        return False
    first = stream.read(newline + 1)
    stream.seek(0)
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


def _is_log_entry(item: Any) -> bool:
    return isinstance(item, dict) and "messageId" in item and "sessionId" in item


# --- the chat recording ----------------------------------------------------------------


def _object(stream: IO[bytes], file: str) -> ParsedSession:
    """A JSON object: a chat recording, read one message at a time into a ``Spool`` (a
    100 MB chat never sits in memory whole), or a checkpoint ``{"history": [...]}``."""
    spool = Spool()
    try:
        return _walk(stream, file, spool)
    except BaseException:
        spool.close()
        raise


def _walk(stream: IO[bytes], file: str, spool: Spool) -> ParsedSession:
    _first_byte(stream)  # past a BOM
    reader = _Lines(stream)
    meta: dict = {}
    recorder: _Recorder | None = None
    builder, key, in_messages = ijson.ObjectBuilder(), "", False
    try:
        for prefix, event, value in ijson.parse(_bounded(reader)):
            if in_messages and recorder is not None:  # each item built, handed over, dropped
                if prefix == "messages" and event == "end_array":
                    in_messages = False
                    continue
                builder.event(event, value)
                if prefix == "messages.item" and event in ("end_map", "end_array", *SCALARS):
                    recorder.add(builder.value, recorder.number + 1)
                    builder = ijson.ObjectBuilder()
            elif prefix == "messages" and event == "start_array":
                in_messages, builder = True, ijson.ObjectBuilder()
                recorder = _Recorder(file, spool)
            elif prefix == "" and event == "map_key":
                key, builder = value, ijson.ObjectBuilder()
            elif prefix:  # a top-level value other than the messages list
                builder.event(event, value)
                if prefix == key and event in ("end_map", "end_array", *SCALARS):
                    meta[key] = builder.value
    except _TooDeep:
        raise ImportProblem(file, reader.lines, "JSON nested too deeply to read") from None
    except _LoneSurrogate as lone:
        raise ImportProblem(
            file, reader.lines, f"text that is not valid Unicode (a lone surrogate \\{lone})"
        ) from None
    except ijson.JSONError as error:
        raise _broken(stream, reader, error, file) from None
    except UnicodeDecodeError as error:
        raise ImportProblem(file, reader.lines, f"not valid UTF-8 (byte {error.start})") from None
    if recorder is not None:
        session = recorder.finish(meta)
        session.stream = spool.replay()
        return session
    spool.close()
    if isinstance(meta.get("history"), list):
        return _checkpoint(meta["history"], file)
    if isinstance(meta.get("sessionId"), str) and "projectHash" in meta:
        return _Recorder(file).finish(meta)  # a session started and left: only its metadata
    raise ImportProblem(file, 0, NOT_A_CHAT)


class _Recorder:
    """Builds the session of a chat recording message by message: into the session's list,
    or (``spool`` given) written to the spool after each message, the compressions
    recorded as spool marks. The metadata (id, times, summary) is applied by ``finish``:
    it may follow the messages in the file."""

    def __init__(self, file: str, spool: Spool | None = None) -> None:
        self.file, self.spool = file, spool
        self.session = ParsedSession(source=SOURCE, line=1)
        self.title = ""
        self.number = 0

    def add(self, record: Any, number: int) -> None:
        self.number = number
        _record(self, record, number)
        if self.spool is not None:
            self.spool.write(self.session.messages)

    def compact(self, compaction: NativeCompaction) -> int:
        """Record ``compaction``; every active conversation row so far is archived by it."""
        if self.spool is None:
            return compact(self.session, self.session.messages, compaction)
        self.spool.write(self.session.messages)
        self.session.native_compactions.append(compaction)
        index = len(self.session.native_compactions) - 1
        self.spool.archive_all(index)
        return index

    def finish(self, meta: dict) -> ParsedSession:
        session = self.session
        session_id = meta.get("sessionId")
        if session_id == A2A_SESSION:  # the same for every session of the A2A server
            session_id = f"{A2A_SESSION}.{meta.get('startTime') or self.file}"
        session.public_id = safe_id(session_id if isinstance(session_id, str) else "")
        session.created_at = epoch(meta.get("startTime"))
        session.ended_at = epoch(meta.get("lastUpdated"))
        info = {k: meta[k] for k in ("projectHash", "kind", "directories") if meta.get(k)}
        session.extra = {"gemini_cli": info}
        summary = meta.get("summary")
        session.title = clip_title(summary if isinstance(summary, str) and summary else self.title)
        # No user or gemini message (a session opened and left, or only the CLI's context):
        # an empty session, left out by the import like every other format's, not an error.
        return session


def _record(recorder: _Recorder, record: Any, number: int) -> None:
    """One message of the recording (its ``number``-th) onto the recorder's session."""
    session, file = recorder.session, recorder.file
    where = f"message {number}"
    record = expect(record, dict, file, where)
    session.records += 1
    kind = record.get("type")
    when = epoch(record.get("timestamp"))
    extra: dict = {"gemini_id": record["id"]} if isinstance(record.get("id"), str) else {}
    if isinstance(record.get("_line"), int):
        extra["line"] = record["_line"]
    if record.get("_rewrite"):
        recorder.compact(NativeCompaction(source=NATIVE, marker=REWRITTEN, extra=extra))
        session.skip("history rewrite (kept as a native compaction)")
        return
    if kind == "user":
        text = _text(record.get("content"), file, where)
        content = _content(record.get("content"), file, where)
        if text.lstrip().startswith(SNAPSHOT):
            _snapshot(session, text, extra, when, recorder.compact)
            return
        message = ParsedMessage(role="user", content=content, extra=extra, created_at=when)
        if text.lstrip().startswith(SESSION_CONTEXT):
            message.meta = "context"
            session.skip("the CLI's session context (kept as a meta row)")
        elif COMMANDS.match(text.strip()):
            message.meta = "command"
            session.skip("slash command (kept as a meta row)")
        elif not recorder.title:
            recorder.title = text
        session.messages.append(message)
    elif kind == "gemini":
        _gemini(session, record, file, where, extra, when)
    elif kind in NOTE_TYPES:
        text = _text(record.get("content"), file, where)
        found = COMPRESSED.search(text)
        if found:
            _marker(text, found, extra, when, recorder.compact)
            session.skip("compression marker (kept as a native compaction)")
            return
        session.messages.append(
            ParsedMessage(role="user", content=text, meta=kind, extra=extra, created_at=when)
        )
        session.skip(f"{kind} message (kept as a meta row)")
    else:
        raise ImportProblem(
            file, 0, f"{where}: unknown type {kind!r} (expected user, gemini, info or error)"
        )


def _gemini(session, record: dict, file: str, where: str, extra: dict, when) -> None:
    if isinstance(record.get("model"), str) and not session.model:
        session.model = record["model"]
    if isinstance(record.get("tokens"), dict):
        extra["tokens"] = record["tokens"]
    thoughts = record.get("thoughts") or []
    expect(thoughts, list, file, f"{where}: thoughts")
    reasoning = "\n\n".join(_thought(t) for t in thoughts if isinstance(t, dict)) or None
    calls, results = [], []
    for index, tool in enumerate(expect(record.get("toolCalls") or [], list, file, where), 1):
        tool = expect(tool, dict, file, f"{where}: tool call {index}")
        call_id, name = tool.get("id"), tool.get("name")
        if not isinstance(call_id, str) or not call_id:
            raise ImportProblem(file, 0, f"{where}: tool call {index} has no string id")
        if not isinstance(name, str):
            raise ImportProblem(file, 0, f"{where}: tool call {call_id}: name is not text")
        calls.append(call(call_id, name, tool.get("args")))
        output = _tool_output(tool.get("result"), tool.get("resultDisplay"))
        if output is None:
            continue  # never answered (cancelled mid-run): a marked stub result is added
        result_extra: dict = {}
        if isinstance(tool.get("status"), str):
            result_extra["status"] = tool["status"]
        results.append(
            ParsedMessage(
                role="tool",
                content=output,
                tool_call_id=call_id,
                tool_name=name,
                extra=result_extra,
                created_at=epoch(tool.get("timestamp")) or when,
            )
        )
    content = _content(record.get("content"), file, where)
    session.messages.append(
        ParsedMessage(
            role="assistant",
            content=content or None,
            tool_calls=calls or None,
            reasoning=reasoning,
            extra=extra,
            created_at=when,
        )
    )
    session.messages.extend(results)


def _thought(thought: dict) -> str:
    subject, description = thought.get("subject"), thought.get("description")
    parts = [f"**{subject}**" if isinstance(subject, str) and subject else ""]
    parts.append(description if isinstance(description, str) else "")
    return "\n".join(p for p in parts if p)


def _tool_output(result: Any, display: Any) -> str | None:
    """What the tool returned to the model (its functionResponse), else what was shown."""
    if isinstance(result, list):
        texts = []
        for part in result:
            if not isinstance(part, dict):
                continue
            response = part.get("functionResponse")
            if isinstance(response, dict):
                body = response.get("response")
                if isinstance(body, dict) and set(body) <= {"output", "error"}:
                    body = body.get("output", body.get("error"))
                texts.append(as_text(body))
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
        if texts:
            return "\n".join(texts)
    if isinstance(display, str):
        return display
    if isinstance(display, dict):  # a file diff or a todo list, as the CLI showed it
        diff = display.get("fileDiff")
        return diff if isinstance(diff, str) else as_text(display)
    return None if result is None else as_text(result)


def _content(value: Any, file: str, where: str) -> Any:
    """Gemini content (text, a part or a list of parts) → text, or OpenAI parts with images."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, dict):
        value = [value]
    expect(value, list, file, f"{where}: content")
    parts: list[dict] = []
    for part in value:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
            continue
        expect(part, dict, file, f"{where}: a content part")
        if isinstance(part.get("text"), str) and not part.get("thought"):
            parts.append({"type": "text", "text": part["text"]})
        elif isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            if isinstance(data.get("data"), str) and str(data.get("mimeType", "")).startswith(
                "image/"
            ):
                parts.append(image_part(f"data:{data['mimeType']};base64,{data['data']}"))
            else:
                parts.append({"type": "text", "text": f"[inline {data.get('mimeType')} data]"})
        elif isinstance(part.get("fileData"), dict):
            parts.append({"type": "text", "text": f"[file {part['fileData'].get('fileUri')}]"})
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _text(value: Any, file: str, where: str) -> str:
    content = _content(value, file, where)
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p.get("type") == "text")


# --- native compression ----------------------------------------------------------------


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _marker(
    text: str, found: re.Match, extra: dict, when, compact_here: Callable[[NativeCompaction], int]
) -> None:
    """ "Context compressed from 68% to 3%.": the CLI compressed what came before."""
    before, unit_before, after, unit_after = found.groups()
    unit = unit_before or unit_after or ""
    compaction = NativeCompaction(source=NATIVE, created_at=when, marker=text.strip(), extra=extra)
    if unit == "%":
        compaction.extra = {
            **extra,
            "percent_before": _number(before),
            "percent_after": _number(after),
        }
    else:
        compaction.tokens_before, compaction.tokens_after = (
            int(_number(before)),
            int(_number(after)),
        )
    compact_here(compaction)


def _snapshot(
    session: ParsedSession,
    text: str,
    extra: dict,
    when,
    compact_here: Callable[[NativeCompaction], int] | None = None,
) -> None:
    """A ``<state_snapshot>`` user text is the CLI's compressed history: the summary of
    the compaction just recorded, or of one only this snapshot shows (recorded by
    ``compact_here``, by default archiving every row of ``session.messages``)."""
    last = session.native_compactions[-1] if session.native_compactions else None
    if last is None or last.summary:
        last = NativeCompaction(source=NATIVE, created_at=when, extra=dict(extra))
        if compact_here is None:
            compact(session, session.messages, last)
        else:
            compact_here(last)
    last.summary = text  # byte for byte: the row shown is the text the CLI sent
    index = session.native_compactions.index(last)
    session.messages.append(summary_row(text, index, {**extra, "gemini_snapshot": True}, when))


# --- the newer JSONL recording ---------------------------------------------------------


def _jsonl(stream: IO[bytes], file: str) -> ParsedSession:
    """Replay the log as the CLI loads it: records by id, ``$set`` and ``$rewindTo``.

    Read twice, one line at a time, so a long log never sits in memory whole: the first
    pass applies the updates to an index of where each message is (its line's offset, and
    its place in a ``$set`` history), the second reads the messages left, in order, into a
    ``Spool`` like the JSON recording."""
    spool = Spool()
    try:
        damage = ParsedSession(source=SOURCE)  # the lines that could not be read
        meta, records, order = _jsonl_index(stream, file, damage)
        recorder = _Recorder(file, spool)
        for number, record in enumerate(_jsonl_records(stream, file, order), 1):
            recorder.add(record, number)
        session = recorder.finish(meta)
        session.records = records
        session.unreadable, session.torn_line = damage.unreadable, damage.torn_line
        session.stream = spool.replay()
        return session
    except BaseException:
        spool.close()
        raise


# Where a message of the JSONL log is: (offset of its line, its index in that line's
# ``$set`` history or one-line recording, or -1 for a message record; its line number).
_Place = tuple[int, int, int]
_REWRITE = (-1, -1, 0)  # in ``order``: the history rewrite that archived what precedes


def _jsonl_lines(
    stream: IO[bytes], file: str, damage: LineDamage
) -> Iterator[tuple[int, int, dict]]:
    """(offset, line number, record) of every readable non-blank line (the others are
    ``damage``: see ``base.json_lines``)."""
    stream.seek(0)
    number = 0
    while True:
        offset = stream.tell()
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            damage.end(file)
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            raise ImportProblem(file, number, f"line longer than {size_text(MAX_LINE_BYTES)}")
        if number == 1 and raw.startswith(UTF8_BOM):
            raw, offset = raw[len(UTF8_BOM) :], offset + len(UTF8_BOM)
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
            value = json_line(text, file, number)
        except UnicodeDecodeError as error:
            damage.bad(ImportProblem(file, number, f"not valid UTF-8 (byte {error.start})"))
            continue
        except ImportProblem as problem:
            damage.bad(problem)
            continue
        damage.good()
        yield offset, number, expect(value, dict, file, "the record", number)


def _jsonl_index(
    stream: IO[bytes], file: str, damage: ParsedSession
) -> tuple[dict, int, list[_Place]]:
    """The session metadata, the records read, and where the messages to import are: what
    history rewrites dropped (each followed by ``_REWRITE``), then the current messages."""
    meta: dict = {}
    current: dict[str, _Place] = {}  # id -> place, in the order the CLI shows them
    dropped: list[_Place] = []
    records = 0
    for offset, number, record in _jsonl_lines(stream, file, LineDamage(damage)):
        records += 1
        if isinstance(record.get("$rewindTo"), str):
            ids = list(current)
            cut = ids.index(record["$rewindTo"]) if record["$rewindTo"] in ids else 0
            for key in ids[cut:]:
                del current[key]
        elif isinstance(record.get("$set"), dict):
            update = dict(record["$set"])
            history = update.pop("messages", None)
            if isinstance(history, list):
                kept = {m.get("id") for m in history if isinstance(m, dict)}
                gone = [place for key, place in current.items() if key not in kept]
                if gone:
                    dropped.extend([*gone, (_REWRITE[0], _REWRITE[1], number)])
                current = {
                    m["id"]: (offset, index, number)
                    for index, m in enumerate(history)
                    if isinstance(m, dict) and isinstance(m.get("id"), str)
                }
            meta.update(update)
        elif isinstance(record.get("id"), str):
            current[record["id"]] = (offset, -1, number)  # a known id: replaced in place
        elif "sessionId" in record:
            history = record.pop("messages", None)  # a one-line chat recording
            for index, message in enumerate(history if isinstance(history, list) else ()):
                found = message.get("id") if isinstance(message, dict) else None
                current[found if isinstance(found, str) else f"#{index}"] = (
                    offset,
                    index,
                    number,
                )
            meta.update(record)
        else:
            raise ImportProblem(file, number, "record is neither session metadata nor a message")
    if not meta.get("sessionId"):
        raise ImportProblem(file, 1, "no session metadata line with a sessionId")
    return meta, records, dropped + list(current.values())


def _jsonl_records(stream: IO[bytes], file: str, order: list[_Place]) -> Iterator[Any]:
    """The messages at ``order``'s places, read again from the file (the line last read is
    kept, as a ``$set`` history names many messages of one line)."""
    cached: tuple[int, dict] | None = None
    for offset, index, number in order:
        if offset < 0:
            yield {"_line": number, "_rewrite": True}
            continue
        if cached is None or cached[0] != offset:
            stream.seek(offset)
            text = stream.readline(MAX_LINE_BYTES + 1).decode("utf-8")
            cached = (offset, json_line(text, file, number))
        record: Any = cached[1]
        if index >= 0:  # a message of a ``$set`` history or of a one-line recording
            holder = record["$set"] if isinstance(record.get("$set"), dict) else record
            record = holder["messages"][index]
        yield {**record, "_line": number} if isinstance(record, dict) else record


# --- logs.json and checkpoints ---------------------------------------------------------


def _logs(entries: list, file: str) -> Iterator[ParsedSession]:
    """``logs.json``: the prompts the user typed, grouped by session."""
    sessions: dict[str, ParsedSession] = {}
    for number, entry in enumerate(entries, 1):
        entry = expect(entry, dict, file, f"log entry {number}")
        sid, text = entry.get("sessionId"), entry.get("message")
        if not isinstance(sid, str) or not isinstance(text, str):
            raise ImportProblem(file, 0, f"log entry {number}: no string sessionId and message")
        session = sessions.get(sid)
        if session is None:
            session = sessions[sid] = ParsedSession(
                source=SOURCE, public_id=safe_id(sid), line=number, kind="prompt log"
            )
            session.created_at = epoch(entry.get("timestamp"))
            session.extra = {"gemini_cli": {"logs_json": True}}
            # Its prompts are also in the session's chat recording (beside it in chats/):
            # already imported from there, it is skipped, never a duplicate to fail on.
            session.skip_if_imported = True
        session.records += 1
        role = "user" if entry.get("type", "user") == "user" else "assistant"
        message = ParsedMessage(role=role, content=text, created_at=epoch(entry.get("timestamp")))
        if role == "user" and COMMANDS.match(text.strip()):
            message.meta = "command"
            session.skip("slash command (kept as a meta row)")
        elif role == "user" and not session.title:
            session.title = clip_title(text)
        session.messages.append(message)
    yield from sessions.values()


def _checkpoint(history: list, file: str) -> ParsedSession:
    """A ``/chat save`` checkpoint: the model history (user / model turns of parts)."""
    session = ParsedSession(source=SOURCE, line=1, kind="checkpoint")
    stem = file.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    session.public_id = safe_id(stem)
    session.extra = {"gemini_cli": {"checkpoint": stem}}
    pending: dict[str, str] = {}  # call id -> tool name, for the calls not answered yet
    counter = 0
    context_reply = False  # the model's "Got it" to the CLI's context turn is bookkeeping too
    for number, turn in enumerate(history, 1):
        where = f"history item {number}"
        turn = expect(turn, dict, file, where)
        session.records += 1
        role = turn.get("role")
        parts = expect(turn.get("parts") or [], list, file, f"{where}: parts")
        if role not in ("user", "model"):
            raise ImportProblem(file, 0, f"{where}: unknown role {role!r} (expected user or model)")
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[dict] = []
        results: list[tuple[str, str, str]] = []
        for part in parts:
            part = expect(part, dict, file, f"{where}: a part")
            if isinstance(part.get("functionCall"), dict):
                fc = part["functionCall"]
                counter += 1
                call_id = fc.get("id") if isinstance(fc.get("id"), str) else f"call_{counter}"
                pending[call_id] = str(fc.get("name") or "")
                calls.append(call(call_id, pending[call_id], fc.get("args")))
            elif isinstance(part.get("functionResponse"), dict):
                fr = part["functionResponse"]
                call_id = fr.get("id") if isinstance(fr.get("id"), str) else ""
                if call_id not in pending:
                    # No id, or (Gemini CLI 0.1.x) an id the call itself did not carry
                    # ("run_shell_command-1751899028178-…"): answered by name, in order.
                    call_id = next(
                        (k for k, n in pending.items() if n == fr.get("name")),
                        call_id or f"call_{counter}",
                    )
                pending.pop(call_id, None)
                body = fr.get("response")
                if isinstance(body, dict) and set(body) <= {"output", "error"}:
                    body = body.get("output", body.get("error"))
                results.append((call_id, str(fr.get("name") or ""), as_text(body)))
            elif isinstance(part.get("text"), str):
                (thoughts if part.get("thought") else texts).append(part["text"])
        text = "\n".join(texts)
        if role == "user":
            for call_id, name, body in results:
                session.messages.append(
                    ParsedMessage(role="tool", content=body, tool_call_id=call_id, tool_name=name)
                )
            if text.lstrip().startswith(SNAPSHOT):
                _snapshot(session, text, {"history_item": number}, None)
            elif number == 1 and text.lstrip().startswith(CONTEXT_OPENINGS):
                session.messages.append(ParsedMessage(role="user", content=text, meta="context"))
                session.skip("the CLI's context turn (kept as a meta row)")
                context_reply = True
            elif text:
                session.messages.append(ParsedMessage(role="user", content=text))
                session.title = session.title or clip_title(text)
        else:
            message = ParsedMessage(
                role="assistant",
                content=text or None,
                tool_calls=calls or None,
                reasoning="\n".join(thoughts) or None,
            )
            if context_reply and not calls:
                message.meta = "context"
                session.skip("the model's answer to the context turn (kept as a meta row)")
            context_reply = False
            session.messages.append(message)
    if not any(not m.meta for m in session.messages):
        raise ImportProblem(file, 0, "the checkpoint holds no messages")
    return session
