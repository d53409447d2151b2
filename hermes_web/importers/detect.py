"""Format detection: which importer reads a file, from its first bytes and record keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

import ijson

from hermes_web.importers import agent_detect, sqlite_detect, sqlite_file
from hermes_web.importers.base import MAX_LINE_BYTES, ImportProblem, size_text

SQLITE_MAGIC = sqlite_file.MAGIC
_SNIFF_BYTES = 1024 * 1024


# Claude Code writes these before (or between) its first user/assistant record.
CLAUDE_CODE_PREAMBLE = {
    "file-history-snapshot",
    "teleported-from",  # a session moved from Claude Code on the web
    "summary",
    "custom-title",
    "progress",
    "queue-operation",
    "system",
    "last-prompt",
    "attachment",
    "tag",
}
_SNIFF_LINES = 200


def detect_format(path: Path, file: str) -> str:
    """By first bytes and record keys, reading past leading metadata records (the extension
    only breaks ties)."""
    with open(path, "rb") as stream:
        if sqlite_file.is_sqlite(stream.read(len(SQLITE_MAGIC))):
            return sqlite_detect.sqlite_format(path, file)  # by its tables (opencode, Crush…)
        stream.seek(0)
        other_agent = agent_detect.sniff(  # Gemini CLI, Aider, OpenHands, Cline, Continue
            path, stream.read(_SNIFF_BYTES).decode("utf-8", errors="replace").lstrip("\ufeff"), file
        )
        if other_agent:
            return other_agent
        stream.seek(0)
        maybe_claude = False
        for number in range(1, _SNIFF_LINES + 1):
            raw = stream.readline(_SNIFF_BYTES)
            if not raw:
                break
            text = raw.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
            if not text:
                continue
            if number == 1 or not maybe_claude:
                if text.startswith("["):
                    return "openai"
                if number == 1 and _is_specstory(stream, text):
                    return "cursor"
                if not text.startswith("{"):
                    raise ImportProblem(
                        file,
                        number,
                        "not a recognized format: expected JSON, JSONL or a Hermes state.db",
                    )
            try:
                record = json.loads(text)
            except RecursionError:
                raise ImportProblem(file, number, "JSON nested too deeply to read") from None
            except ValueError:
                record = None  # longer than the sniff window, or a pretty-printed document
            if not isinstance(record, dict):
                if maybe_claude:
                    continue
                return _by_text(path, stream, text, file)
            kind = _kind_of(record)
            if kind == "claude-code-preamble":
                maybe_claude = True
                continue
            if kind:
                return kind
            raise ImportProblem(
                file,
                number,
                "not a recognized format: the record is neither a session, a Hermes message, "
                "a Claude Code record, a Codex item nor a list of messages",
            )
    if maybe_claude:
        return "claude-code"
    raise ImportProblem(file, 1, "the file is empty")


def _by_text(path: Path, stream, first: str, file: str) -> str:
    """A first line that is not whole JSON: decide from the keys early in the text."""
    if _line_longer_than_limit(stream):  # no importer would read it: say so, not "format"
        raise ImportProblem(
            file,
            1,
            f"line 1 is longer than {size_text(MAX_LINE_BYTES)}, the most one line may hold",
        )
    document = _top_level(stream)
    if document is not None:  # a pretty-printed document: its own keys decide, not its text
        kind = _kind_of(document)
        if kind and kind != "claude-code-preamble":
            return kind
    stream.seek(0)
    text = stream.read(_SNIFF_BYTES).decode("utf-8", errors="replace")
    if re.match(r'\s*\{\s*"(?:environment|trajectory|history|info|replay_config)"', text) and (
        '"trajectory"' in text or '"history"' in text
    ):  # an SWE-agent .traj, written with indent=2
        return "swe-agent"
    if '"parentUuid"' in text or '"sessionId"' in text:
        return "claude-code"
    if re.match(r'\s*\{\s*"type"\s*:\s*"file-history-snapshot"', text):  # a huge snapshot
        return "claude-code"
    if re.match(r'\s*\{\s*"role"\s*:\s*"session_meta"', text):  # a Hermes transcript
        return "hermes-jsonl"
    if '"session_meta"' in text or '"response_item"' in text:
        return "codex"
    if '"messages"' in text and any(
        key in text for key in ('"started_at"', '"parent_session_id"', '"end_reason"')
    ):
        return "hermes-jsonl"
    if path.suffix.lower() == ".jsonl":
        raise ImportProblem(file, 1, "cannot tell the format from the first line; pass --format")
    return "openai"


def _top_level(stream) -> dict | None:
    """The top-level keys of the JSON object the file starts with, each with its value when
    a scalar and an empty list or dict in place of an array or object (read by ijson, never
    held whole); None when the file does not start with one readable object. Words inside
    its strings (a system prompt quoting ``"sessionId"``) decide nothing."""
    stream.seek(0)
    record: dict = {}
    key = None
    try:
        # use_float: yajl2_c crashes the process (SIGSEGV) on an integer past 4,300 digits
        # unless it reads numbers as floats, where it raises "integer overflow" instead.
        for prefix, event, value in ijson.parse(stream, use_float=True):
            if prefix == "" and event == "map_key":
                key = value
            elif prefix == "" and event == "end_map":
                return record
            elif key is not None and prefix == key:
                if event == "start_array":
                    record[key] = []
                elif event == "start_map":
                    record[key] = {}
                else:
                    record[key] = value
                key = None
            if stream.tell() > _DOCUMENT_BYTES:
                return None
    except (ijson.JSONError, ijson.IncompleteJSONError, ValueError, RecursionError):
        return None
    return None


# How far a document's top-level keys are looked for (its messages may come after a long
# system prompt and tool list).
_DOCUMENT_BYTES = 64 * 1024 * 1024


def _line_longer_than_limit(stream) -> bool:
    stream.seek(0)
    read = 0
    while read <= MAX_LINE_BYTES:
        chunk = stream.readline(_SNIFF_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return False
        read += len(chunk)
    return True


def _kind_of(record: dict) -> str:
    if isinstance(record.get("messages"), list):
        if "id" in record or "started_at" in record or "source" in record:
            return "hermes-jsonl"
        return "openai"
    if record.get("type") in ("session_meta", "response_item", "event_msg", "turn_context") or (
        "instructions" in record and "id" in record
    ):
        return "codex"
    if isinstance(record.get("trajectory"), list) or (
        isinstance(record.get("history"), list) and isinstance(record.get("info"), dict)
    ):
        return "swe-agent"
    kind = record.get("type")
    if kind == "session" and isinstance(record.get("id"), str):
        return "pi"
    if isinstance(kind, str) and isinstance(record.get("data"), dict) and kind in COPILOT_EVENTS:
        return "copilot-cli"
    if "sessionId" in record or "parentUuid" in record or record.get("type") in MESSAGE_KINDS:
        return "claude-code"
    if record.get("type") in CLAUDE_CODE_PREAMBLE:
        return "claude-code-preamble"
    if "role" in record and "type" not in record:  # a Hermes per-session transcript
        return "hermes-jsonl"
    return ""


MESSAGE_KINDS = ("user", "assistant")
# The first events of a Copilot CLI ``events.jsonl`` (``session.start`` is line 1).
COPILOT_EVENTS = {"session.start", "session.resume", "user.message", "assistant.message"}
_SPECSTORY = re.compile(r"_\*\*(?:User|Assistant|Agent)\b[^*]*\*\*_")


def _is_specstory(stream, first: str) -> bool:
    """A SpecStory export of a Cursor chat (``.specstory/history/*.md``): its marker comment,
    or a markdown title followed by ``_**User**_`` / ``_**Assistant**_`` turns."""
    if first.startswith("<!-- Generated by SpecStory"):
        return True
    if not first.startswith("#"):
        return False
    position = stream.tell()
    head = stream.read(64 * 1024).decode("utf-8", errors="replace")
    stream.seek(position)
    return _SPECSTORY.search(head) is not None
