"""OpenAI chat format: a JSON list of messages, or an object with ``messages``.

Parsed incrementally with ijson: the session is yielded at once with ``stream`` set, and
its messages are built one at a time while the store reads them, so memory stays bounded
whatever the file size (a list goes through ijson's C ``items``; an object's events are
walked to pick up ``title`` and ``model`` wherever they sit). Its id is the digest of its
bytes, computed as they are read, so a second import of the same file is a duplicate. A broken file raises an
ImportProblem from inside the stream, which rolls back the session's transaction.

Nesting is bounded before ijson builds anything: its ``parse`` keeps a dotted path
(``item.item.item…``) per event, so a 100,000-deep ``[[[…]]]`` costs quadratic time there
(minutes for a 200 kB upload). ``basic_parse`` has no path; ``_bounded`` counts the depth
of its events and refuses the file at MAX_NESTING levels, then ``parse``/``items`` run on
those events with paths never longer than the limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from typing import IO, Any

import ijson

from hermes_web.importers.base import (
    UNREADABLE_NUMBER,
    ImportProblem,
    ParsedMessage,
    ParsedSession,
    broken_json,
    check_role,
    text_of,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_OPENAI
_FIELDS = {
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "reasoning",
    "reasoning_content",
}
_SCALARS = ("string", "number", "boolean", "null")
# Deeper than anything a message may hold (validate.MAX_DEPTH: 64 levels inside a content
# part or tool call) plus the document's own levels (list, object, parts).
MAX_NESTING = 100
_SHAPE = "expected a list of messages or an object with a 'messages' list"
# A broken file up to this size is parsed again with the stdlib to name the exact line;
# past it the problem names the line the reader had reached.
_EXACT_ERRORS_BYTES = 16 * 1024 * 1024


def parse_message(item: Any, index: int, file: str) -> ParsedMessage:
    where = f"message {index + 1}"
    if not isinstance(item, dict):
        raise ImportProblem(file, 0, f"{where} is a JSON {type(item).__name__}, not an object")
    try:
        role = check_role(item.get("role"), file, 0)
    except ImportProblem as problem:
        raise ImportProblem(file, 0, f"{where}: {problem.problem}") from None
    calls = item.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise ImportProblem(file, 0, f"{where}: tool_calls is not a list")
    return ParsedMessage(
        role=role,
        content=item.get("content"),
        tool_calls=calls or None,
        tool_call_id=str(item.get("tool_call_id") or ""),
        tool_name=str(item.get("name") or "") if role == "tool" else "",
        reasoning=item.get("reasoning") or item.get("reasoning_content") or None,
        extra={k: v for k, v in item.items() if k not in _FIELDS},
    )


# A surrogate escape that is not half of a pair (after an even run of backslashes, so it is
# an escape): yajl turns a lone high one into "?" where the stdlib keeps the lone surrogate
# that validation refuses, so both halves are checked in the bytes.
_HIGH, _LOW = rb"\\u[dD][89abAB][0-9a-fA-F]{2}", rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_LONE = re.compile(
    rb"(?<!\\)(?:\\\\)*(?:" + _HIGH + rb"(?!" + _LOW + rb")|(?<!" + _HIGH + rb")" + _LOW + rb")"
)
_KEEP = 32  # bytes carried to the next read: an escape and its pair may straddle two reads


class _LoneSurrogate(Exception):
    """A JSON escape of half a surrogate pair."""


class _Lines:
    """A read-only file wrapper counting the newlines handed to the parser (for problems)
    and refusing lone surrogate escapes (``_LONE``)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.lines = stream, 1
        self.tail = b""
        self.digest = hashlib.sha256()  # of every byte handed out: the session's id

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.digest.update(data)
        self.lines += data.count(b"\n")
        if b"\\u" in data or b"\\u" in self.tail:
            window = self.tail + data
            # A match ending in the last 6 bytes may be half of a pair completed by the next
            # read: decided then (or at EOF); the tail's older matches were decided before.
            decided = len(self.tail) - 6 if self.tail else 0
            limit = len(window) - 6 if data else len(window)
            for match in _LONE.finditer(window):
                if decided < match.end() <= limit:
                    raise _LoneSurrogate(match.group()[-5:].decode("ascii"))
            self.tail = window[-_KEEP:]
        else:
            self.tail = data[-_KEEP:]
        return data


class _TooDeep(Exception):
    """The document nests deeper than MAX_NESTING (the caller names the message)."""


def _bounded(reader: _Lines) -> Iterator[tuple[str, Any]]:
    """``ijson.basic_parse`` events, refused past MAX_NESTING levels of lists and objects."""
    depth = 0
    for event, value in ijson.basic_parse(reader, use_float=True):
        if event == "start_map" or event == "start_array":
            depth += 1
            if depth > MAX_NESTING:
                raise _TooDeep
        elif event == "end_map" or event == "end_array":
            depth -= 1
        yield event, value


def _first_byte(stream: IO[bytes]) -> bytes:
    """The first byte that is not a BOM or whitespace; the stream is left just before it."""
    head = stream.read(3)
    if head != b"\xef\xbb\xbf":
        stream.seek(0)
    start = stream.tell()
    while True:
        byte = stream.read(1)
        if byte not in (b" ", b"\t", b"\r", b"\n"):
            stream.seek(start)
            return byte
        start += 1


def _broken(stream: IO[bytes], reader: _Lines, error: Exception, file: str) -> ImportProblem:
    """The problem for a file ijson could not read: exact (stdlib) for a small file."""
    try:
        size = os.fstat(stream.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        size = None
    if size is not None and size <= _EXACT_ERRORS_BYTES:
        stream.seek(0)
        try:
            json.loads(stream.read().decode("utf-8-sig"))
        except UnicodeDecodeError as decode:
            return ImportProblem(file, 0, f"not valid UTF-8 (byte {decode.start})")
        except json.JSONDecodeError as exact:
            return ImportProblem(file, exact.lineno, broken_json(exact))
        except ValueError:  # an integer over Python's 4,300-digit conversion limit
            return ImportProblem(file, 0, UNREADABLE_NUMBER)
        except RecursionError:
            return ImportProblem(file, 1, "JSON nested too deeply to read")
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return ImportProblem(file, reader.lines, f"broken JSON: {first}")


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """One session whose ``stream`` yields its messages as they are read from the file."""
    first = _first_byte(stream)
    if first not in (b"[", b"{"):
        stream.seek(0)
        raise _broken(stream, _Lines(stream), ValueError("not a JSON list or object"), file)
    parsed = ParsedSession(source=SOURCE, line=1)
    reader = _Lines(stream)
    parsed.stream = _messages(stream, reader, first == b"[", parsed, file)
    yield parsed


def _messages(
    stream: IO[bytes], reader: _Lines, is_list: bool, parsed: ParsedSession, file: str
) -> Iterator[ParsedMessage]:
    count = 0
    try:
        items = (
            ijson.items(ijson.parse(_bounded(reader)), "item")
            if is_list
            else _object_items(reader, parsed, file)
        )
        for item in items:
            message = parse_message(item, count, file)
            count += 1
            if not parsed.title and message.role == "user":
                parsed.title = text_of(message.content)[:80].strip()
            yield message
    except _LoneSurrogate as lone:
        raise ImportProblem(
            file,
            reader.lines,
            f"text that is not valid Unicode (a lone surrogate \\{lone}); refused",
        ) from None
    except _TooDeep:
        raise ImportProblem(
            file,
            reader.lines,
            f"JSON nested more than {MAX_NESTING} levels deep "
            f"({count} messages read before it); refused",
        ) from None
    except ijson.JSONError as error:
        raise _broken(stream, reader, error, file) from None
    except UnicodeDecodeError as error:
        raise ImportProblem(file, reader.lines, f"not valid UTF-8 (byte {error.start})") from None
    if not count:
        raise ImportProblem(file, 1, "the conversation has no messages")
    while reader.read(1024 * 1024):  # whatever follows the document, for the digest
        pass
    # An OpenAI list names no session: its id is its content's digest, known once read, so
    # importing the same file again (under any name) is a duplicate as for other formats.
    parsed.public_id = f"openai-{reader.digest.hexdigest()[:24]}"


def _object_items(reader: _Lines, parsed: ParsedSession, file: str) -> Iterator[Any]:
    """The items of the top-level ``messages`` list; ``title``/``model`` noted on the way."""
    found = False
    builder = None
    title = ""
    for prefix, event, value in ijson.parse(_bounded(reader)):
        if builder is not None:
            if prefix == "messages" and event == "end_array":
                builder = None
                continue
            builder.event(event, value)
            if prefix == "messages.item" and event in ("end_map", "end_array"):
                yield builder.value
                builder = ijson.ObjectBuilder()
            elif prefix == "messages.item" and event in _SCALARS:
                yield builder.value  # a scalar item: refused by parse_message
                builder = ijson.ObjectBuilder()
            continue
        if prefix == "messages" and event != "map_key":
            if event != "start_array":
                raise ImportProblem(file, 1, _SHAPE)
            found, builder = True, ijson.ObjectBuilder()
        elif prefix in ("title", "model") and event in ("string", "number"):
            if prefix == "title":
                title = str(value or "")
            else:
                parsed.model = str(value or "")
    if not found:
        raise ImportProblem(file, 1, _SHAPE)
    if title:
        parsed.title = title.strip()
