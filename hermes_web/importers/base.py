"""What every importer shares: problems, parsed sessions, line reading and storing.

Importers parse a file into ``ParsedSession`` objects one at a time (streaming); each is
stored in its own transaction, so a bad session never leaves half its rows behind and the
good sessions of the same file still import.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import pickle
import re
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import IO, Any

from django.conf import settings

from hermes_web.models import Message

ROLES = frozenset(Message.Role.values)
# One line of a JSONL file may hold a whole session; past this it is refused, not buffered.
MAX_LINE_BYTES = 64 * 1024 * 1024
UTF8_BOM = b"\xef\xbb\xbf"
logger = logging.getLogger(__name__)


class _Reading(threading.local):
    """Where this thread's importer is: the line of the record it read last (``iter_lines``
    and ``json_line`` set it, a spool's replay sets the line of the message it hands out)."""

    line = 0


reading = _Reading()
# What an importer's own code raises on data of a shape nobody foresaw (a list where text
# was, a lone surrogate, a missing key, nesting past Python's stack): said in plain words by
# ``records_of``, never in Python's.
DATA_ERRORS = (
    TypeError,
    ValueError,  # UnicodeError and json.JSONDecodeError included
    LookupError,  # KeyError, IndexError
    AttributeError,
    ArithmeticError,
    RecursionError,
)


def unreadable(error: BaseException, file: str, line: int | None = None) -> ImportProblem:
    """``error``, raised by an importer while reading ``file``, as the problem a person reads:
    where (the record being read) and what kind of thing is wrong, without Python's words,
    the exception's text or a server path."""
    line = reading.line if line is None else line
    return ImportProblem(file, line, f"{plain_words(error)}: not imported")


def plain_words(error: BaseException) -> str:
    """What kind of thing in the data made an importer raise ``error``."""
    if isinstance(error, UnicodeError):
        what = "text that is not valid Unicode (a lone surrogate such as \\ud800 in a string)"
    elif isinstance(error, RecursionError):
        what = "a record nested too deeply to read"
    elif isinstance(error, LookupError):
        what = "a record without a field this format needs, or with it in the wrong place"
    else:
        what = (
            "a record of an unexpected shape (a value of the wrong type: a list or a number "
            "where text or an object belongs)"
        )
    return what


@contextlib.contextmanager
def records_of(file: str, line: int = 0) -> Iterator[None]:
    """The boundary around an importer reading ``file``: a data error it raises inside
    (``DATA_ERRORS``) comes out as the ``ImportProblem`` of the record it was reading."""
    reading.line = line
    try:
        yield
    except DATA_ERRORS as error:
        logger.info("importer error reading %s, line %s", file, reading.line, exc_info=True)
        raise unreadable(error, file) from None


class ImportProblem(Exception):
    """Bad input, named by file, line and problem (line 0: the file as a whole)."""

    def __init__(self, file: str, line: int, problem: str, session: str = "") -> None:
        self.file, self.line, self.problem, self.session = file, line, problem, session
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.file}, line {self.line}" if self.line else self.file
        return f"{where}: {self.problem}" + (f" (session {self.session})" if self.session else "")

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "problem": self.problem,
            "session": self.session,
            "message": str(self),
        }


@dataclass
class ParsedMessage:
    role: str
    content: Any
    tool_calls: list | None = None
    tool_call_id: str = ""
    tool_name: str = ""
    reasoning: Any = None
    active: bool = True
    archived: bool = False
    is_summary: bool = False
    extra: dict = field(default_factory=dict)
    created_at: dt.datetime | None = None
    # Set on rows that are not conversation turns (a tool's notes, command wrappers, hidden
    # context): stored inactive, marked ``extra["meta"]``, never given to the model or engine.
    meta: str = ""
    # The agent's own compactions (``ParsedSession.native_compactions``, by index): the one
    # that replaced this row (it is archived), the one whose summary this row is, the one
    # that kept this row in the context it rebuilt (Codex's replacement history).
    replaced_by: int | None = None
    summary_of: int | None = None
    kept_by: int | None = None

    def as_openai(self) -> dict:
        message: dict = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            message["tool_call_id"] = self.tool_call_id
        return message


@dataclass
class NativeCompaction:
    """A compaction the agent made itself, as its transcript recorded it.

    The rows it replaced carry ``replaced_by`` (its index in the session's
    ``native_compactions``) and are archived; its summary row, when the agent kept one,
    carries ``summary_of``. Where only a marker was kept (Gemini CLI's "Context compressed
    from 68% to 3%."), ``summary`` is empty and ``marker`` holds what was written.
    """

    source: str  # the agent: "claude-code", "codex", "gemini-cli", "openhands", "pi", ...
    trigger: str = ""  # "auto" | "manual" | "" (not recorded)
    created_at: dt.datetime | None = None
    tokens_before: int | None = None  # as the agent recorded it (preTokens, tokensBefore, ...)
    tokens_after: int | None = None
    summary: str = ""  # the agent's summary, verbatim
    marker: str = ""  # what the transcript says when it holds no summary
    extra: dict = field(default_factory=dict)  # anything else recorded (line, ids, metadata)
    # The summarizer's own transcript where the agent kept one (Claude Code's
    # subagents/agent-acompact-*.jsonl): OpenAI-format messages in, and its reply.
    summarizer_input: list[dict] | None = None
    summarizer_output: str = ""


@dataclass
class ParsedSession:
    source: str
    public_id: str = ""
    title: str = ""
    model: str = ""
    messages: list[ParsedMessage] = field(default_factory=list)
    created_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    end_reason: str = ""
    parent_id: str = ""  # the tool's id of the parent session (Hermes rotation chains)
    extra: dict = field(default_factory=dict)
    line: int = 0  # where it started, for problems found while storing
    token_counts: list[int] | None = None  # filled by the parsing thread
    records: int = 0  # records (lines, rows) read for this session
    skipped: Counter = field(default_factory=Counter)  # "why" -> how many records
    kind: str = ""  # e.g. "sub-agent": shown in the fidelity report
    # Set by a streaming parser (OpenAI JSON): the messages, read as they are stored, in
    # place of ``messages``; title and model may be filled in while it is read.
    stream: Iterator[ParsedMessage] | None = None
    # The agent's own compactions found in the transcript, in order (see NativeCompaction).
    native_compactions: list[NativeCompaction] = field(default_factory=list)
    # What a reader joined or could not find, by name (e.g. "tool_result_files_joined"):
    # each is a key of the fidelity report.
    counts: Counter = field(default_factory=Counter)
    # NUL characters shown as U+2400 (see ``visible_controls``), for the fidelity report.
    controls_replaced: int = 0
    # A partial copy of a session another file holds whole (Gemini CLI's logs.json: the
    # prompts only): when the session is already there it is skipped, not a duplicate.
    skip_if_imported: bool = False
    # Characters the session stores (``checks.Checker``), once checked: what the import's
    # amplification budget is charged (budget.py).
    stored_chars: int = 0
    # Lines of a JSONL file that could not be read and were left out, (line, what was
    # wrong), and the last line when it was cut short (a running agent's file): the rest of
    # the session is imported and its pages and the API show them (``json_lines``).
    unreadable: list[tuple[int, str]] = field(default_factory=list)
    torn_line: int = 0

    def skip(self, why: str, n: int = 1) -> None:
        """Count records not stored as messages, by reason (the fidelity report lists them)."""
        self.skipped[why] += n


# Every field, so a field added to ParsedMessage is never dropped on the way through a spool.
_SPOOLED = tuple(f.name for f in fields(ParsedMessage))


class Spool:
    """Parsed messages kept in an anonymous temporary file instead of a list, for parsers
    that must read the whole file before the session can be stored (its id, title or
    archive marks come late): the first pass writes each message as it is built, then
    ``replay`` hands them back one at a time to the streamed store.

    "Archive everything so far" (a compaction in the file) is recorded as a position, not
    applied to earlier rows: ``replay`` archives the active, non-meta messages before the
    last such position, which is what marking them at the time did. Messages must not be
    changed once written.
    """

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by replay or close
        self.count = 0
        self.turns = 0  # messages that are not meta rows
        self.archive_before = 0
        # (position, compaction index or None) per "archive everything so far"
        self.marks: list[tuple[int, int | None]] = []
        self.mark = 0  # the first mark the next replayed message lies before
        self.index = 0  # of the next message replayed

    def write(self, messages: list[ParsedMessage]) -> None:
        """Append ``messages`` to the file and empty the list."""
        for message in messages:
            row = tuple(getattr(message, name) for name in _SPOOLED)
            pickle.dump(row, self.file, pickle.HIGHEST_PROTOCOL)
            self.count += 1
            self.turns += not message.meta
        messages.clear()

    def archive_all(self, compaction: int | None = None) -> None:
        """Every active, non-meta message written so far is archived (on replay), marked
        ``replaced_by=compaction`` when an agent's own compaction (its index in
        ``ParsedSession.native_compactions``) replaced it."""
        self.archive_before = self.count
        self.marks.append((self.count, compaction))

    def replay(self) -> Spool:
        """The messages written, in order, with the archive marks applied (this spool as an
        iterator; the file is closed when it is exhausted, or by ``close``)."""
        self.file.seek(0)
        self.index = 0
        self.mark = 0
        return self

    def __iter__(self) -> Spool:
        return self

    def __next__(self) -> ParsedMessage:
        if self.index >= self.count:
            self.close()
            raise StopIteration
        row = pickle.load(self.file)  # our own file, written by ``write``
        message = ParsedMessage(**dict(zip(_SPOOLED, row, strict=True)))
        line = message.extra.get("line") if isinstance(message.extra, dict) else None
        if isinstance(line, int):  # problems found while it is stored name its record
            reading.line = line
        if self.index < self.archive_before and message.active and not message.meta:
            message.active, message.archived = False, True
            # the first compaction after this row is the one that replaced it
            while self.marks[self.mark][0] <= self.index:
                self.mark += 1
            if message.replaced_by is None:
                message.replaced_by = self.marks[self.mark][1]
        self.index += 1
        return message

    def close(self) -> None:
        self.file.close()


def spooled_session(
    read: Callable[[IO[bytes], str, Spool], ParsedSession], stream: IO[bytes], file: str
) -> ParsedSession:
    """The session ``read`` builds into a fresh ``Spool`` (its first pass), set to replay
    the spooled messages to the store; the spool is closed if reading fails."""
    spool = Spool()
    try:
        session = read(stream, file, spool)
    except BaseException:
        spool.close()
        raise
    session.stream = spool.replay()
    return session


def check_role(role: Any, file: str, line: int, session: str = "") -> str:
    if not isinstance(role, str) or role not in ROLES:  # a list is not even hashable
        raise ImportProblem(
            file, line, f"unknown role {role!r} (expected system, user, assistant or tool)", session
        )
    return role


def epoch(value: Any) -> dt.datetime | None:
    """Epoch seconds (int/float/str) or ISO-8601 text → aware datetime; None if unreadable."""
    if value in (None, ""):
        return None
    try:
        return dt.datetime.fromtimestamp(float(value), tz=dt.UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        pass
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def iter_lines(stream: IO[bytes], file: str) -> Iterator[tuple[int, str | ImportProblem]]:
    """(line number, decoded text) for each non-blank line, read one line at a time.

    A line that is not UTF-8 or is too long yields an ImportProblem in place of its text,
    so the caller decides whether it sinks one session or the whole file.
    """
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if number == 1 and raw.startswith(UTF8_BOM):  # Windows editors start files with one
            raw = raw[len(UTF8_BOM) :]
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of the oversized line
                raw = stream.readline(MAX_LINE_BYTES)
            yield (
                number,
                ImportProblem(file, number, f"line longer than {size_text(MAX_LINE_BYTES)}"),
            )
            continue
        if not raw.strip():
            continue
        reading.line = number
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError as error:
            yield number, ImportProblem(file, number, f"not valid UTF-8 (byte {error.start})")


def size_text(n: int) -> str:
    return f"{n // 2**20} MB" if n >= 2**20 else f"{n} bytes"


# Python's own words name its setting (sys.set_int_max_str_digits); this is what is wrong.
UNREADABLE_NUMBER = "unreadable number: an integer of more than 4300 digits"


def broken_json(error: json.JSONDecodeError) -> str:
    """``broken JSON: Expecting ',' delimiter at column 5``; json's own "… starting at" is
    not followed by a second "at"."""
    where = "" if error.msg.endswith(" at") else " at"
    return f"broken JSON: {error.msg}{where} column {error.colno}"


def json_line(text: str, file: str, line: int) -> Any:
    reading.line = line
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ImportProblem(file, line, broken_json(error)) from None
    except ValueError:  # an integer over Python's 4,300-digit conversion limit
        raise ImportProblem(file, line, UNREADABLE_NUMBER) from None
    except RecursionError:
        raise ImportProblem(file, line, "JSON nested too deeply to read") from None


TORN_LINE = "last line incomplete (still being written?)"
# Line numbers of unreadable lines a fidelity report lists (the count is always whole).
MAX_LISTED_LINES = 1000


def json_lines(stream: IO[bytes], file: str, parsed: ParsedSession) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of each readable line of a JSONL file.

    A line that cannot be read (broken JSON, not UTF-8, a number too long, nested too
    deeply) is damage, not a reason to lose the session: it is left out and recorded on
    ``parsed`` (``unreadable``), or, when it is the file's last line, recorded as
    ``torn_line``: what an agent still writing its file leaves. A file in which no line at
    all could be read is refused with its first problem. A line over ``MAX_LINE_BYTES`` is
    a limit, not damage: raised as it is.
    """
    damage = LineDamage(parsed)
    for number, text in iter_lines(stream, file):
        if isinstance(text, ImportProblem):
            if text.problem.startswith("line longer than"):
                raise text
            damage.bad(text)
            continue
        try:
            value = json_line(text, file, number)
        except ImportProblem as problem:
            damage.bad(problem)
            continue
        damage.good()
        yield number, value
    damage.end(file)


def keep_damage(session: ParsedSession, damage: ParsedSession) -> None:
    """Give ``session`` what ``json_lines`` recorded on ``damage`` (the scratch session a
    reader passes it while the real one is still being built): its unreadable lines, its torn
    last line and their counts."""
    session.unreadable, session.torn_line = damage.unreadable, damage.torn_line
    if damage.counts:
        session.counts.update(damage.counts)


class LineDamage:
    """The unreadable lines of one pass over a JSONL file, told line by line (``bad`` or
    ``good``), recorded on ``parsed``: the newest bad line is held until the next line
    shows it was not the last (``end``: the file ended on it, a torn last line)."""

    def __init__(self, parsed: ParsedSession) -> None:
        self.parsed = parsed
        self.pending: ImportProblem | None = None
        self.readable = False

    def bad(self, problem: ImportProblem) -> None:
        self._settle()
        self.pending = problem

    def good(self) -> None:
        self._settle()
        self.readable = True

    def _settle(self) -> None:
        if self.pending is not None:
            self.parsed.unreadable.append((self.pending.line, self.pending.problem))
            self.pending = None

    def end(self, file: str) -> None:
        """The file is read: a held bad line was its last; a file with no readable line
        is refused with its first problem."""
        if self.readable:
            if self.pending is not None:
                self.parsed.torn_line = self.pending.line
            return
        if self.parsed.unreadable:
            line, problem = self.parsed.unreadable[0]
            raise ImportProblem(file, line, f"{problem} (no line of the file could be read)")
        if self.pending is not None:
            self.pending.problem = f"{self.pending.problem} ({TORN_LINE})"
            raise self.pending


def damage_report(parsed: ParsedSession) -> dict:
    """The fidelity report's keys for the lines ``json_lines`` could not read (none when
    every line was read)."""
    report: dict[str, Any] = {}
    if parsed.unreadable:
        report["unreadable_lines"] = [line for line, _ in parsed.unreadable[:MAX_LISTED_LINES]]
        report["unreadable_count"] = len(parsed.unreadable)
        report["unreadable"] = [
            f"line {line}: {problem}" for line, problem in parsed.unreadable[:20]
        ]
    if parsed.torn_line:
        report["last_line_incomplete"] = parsed.torn_line
    return report


def damage_lines(report: dict | None) -> list[str]:
    """What a session's fidelity report (``damage_report``) says of its file's damaged
    lines, as sentences for its pages and the CLI; empty when every line was read."""
    if not isinstance(report, dict):
        return []
    said: list[str] = []
    lines = report.get("unreadable_lines")
    if isinstance(lines, list) and lines:
        count = report.get("unreadable_count", len(lines))
        listed = ", ".join(str(n) for n in lines[:50])
        more = f" and {count - min(len(lines), 50)} more" if count > min(len(lines), 50) else ""
        what = "line" if count == 1 else "lines"
        said.append(
            f"{count} {what} could not be read and {'was' if count == 1 else 'were'} left out: {what} {listed}{more}"
        )
    torn = report.get("last_line_incomplete")
    if isinstance(torn, int) and torn:
        said.append(f"line {torn}: {TORN_LINE}; everything before it was imported")
    return said


def max_bytes() -> int:
    return settings.HERMES_MAX_UPLOAD_BYTES


def text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            p.get("text", "")
            for p in value
            if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


ANSI_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    """Terminal colour and cursor escapes removed (local command output is stored for display)."""
    return ANSI_ESCAPE.sub("", text) if "\x1b" in text else text


# Session ids become URL path segments: anything outside this set is escaped as ~XX, so a
# hostile id (``a/b``, ``..``, spaces, control characters) can never break a route.
_SAFE_ID = re.compile(r"[^A-Za-z0-9._:@+-]")
MAX_ID_CHARS = 100


def safe_id(value: str) -> str:
    """A tool's session id made safe for URLs; stable, so re-imports find the same id."""
    text = _SAFE_ID.sub(lambda m: "".join(f"~{b:02x}" for b in m.group().encode()), value)
    if text.strip(".") == "":  # "." and ".." are path segments, not ids
        text = text.replace(".", "~2e")
    if len(text) <= MAX_ID_CHARS:
        return text
    # Cut, two different long ids would share a prefix and collide ("already imported"): the
    # cut one ends with a hash of the whole id. "~~" never occurs in an escaped id.
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[: MAX_ID_CHARS - 18]}~~{digest}"


# PostgreSQL's text and jsonb cannot hold U+0000 (and the validator refuses it everywhere so
# SQLite and PostgreSQL agree). In an imported transcript it is data the agent really saw (a
# binary file cat'ed into a tool output), so it is kept visibly as the Control Pictures
# symbol, never a reason to refuse the session. The other C0 controls are storable and are
# part of what the tool printed (tabs, form feeds, colour escapes): they stay as they are.
NUL, NUL_SYMBOL = "\x00", "\u2400"


def visible_controls(value: Any) -> tuple[Any, int]:
    """``value`` (text, or lists/dicts of it, keys too) with every NUL shown as ``␀``, and how
    many were replaced; a value without NUL comes back as it is (no copy)."""
    if isinstance(value, str):
        if NUL not in value:
            return value, 0
        return value.replace(NUL, NUL_SYMBOL), value.count(NUL)
    if isinstance(value, list):
        total, items = 0, []
        for item in value:
            item, n = visible_controls(item)
            items.append(item)
            total += n
        return (items if total else value), total
    if isinstance(value, dict):
        total, pairs = 0, {}
        for key, item in value.items():
            key, a = visible_controls(key)
            item, b = visible_controls(item)
            pairs[key] = item
            total += a + b
        return (pairs if total else value), total
    return value, 0


_MESSAGE_TEXT = ("content", "tool_calls", "tool_call_id", "tool_name", "reasoning", "extra")


def keep_controls_visible(message: ParsedMessage) -> int:
    """Every NUL in one message's text fields shown as ``␀``; returns how many."""
    total = 0
    for name in _MESSAGE_TEXT:
        value, n = visible_controls(getattr(message, name))
        if n:
            setattr(message, name, value)
            total += n
    return total


def keep_session_controls_visible(parsed: ParsedSession) -> None:
    """``keep_controls_visible`` on the session's own text (title, metadata) and, when they
    are held in a list, its messages; the count goes to the fidelity report (not the
    title's, which repeats a message's text)."""
    parsed.title = visible_controls(parsed.title)[0]
    parsed.extra, n = visible_controls(parsed.extra)
    parsed.controls_replaced += n
    for message in parsed.messages:
        parsed.controls_replaced += keep_controls_visible(message)


# A title is what a person would call the conversation: never the reasoning a model wrote
# first (``<think>``) nor a wrapper a tool put around the first user turn.
_LEADING_TAG = re.compile(r"\s*<(?P<tag>[A-Za-z][\w:-]*)(?:\s[^<>]*)?>")
_TITLE_CHARS = 80


def clean_title(text: str) -> str:
    """``text`` without the tagged blocks it starts with (``<think>…</think>``,
    ``<command-name>…``, ``<environment_context>…``, ``<user_instructions>…``, or any
    other leading element), whitespace folded, at most 80 characters; "" when nothing is
    left (a block cut short by an earlier truncation included)."""
    rest = text
    while (match := _LEADING_TAG.match(rest)) is not None:
        closing = f"</{match.group('tag')}>"
        end = rest.find(closing, match.end())
        rest = rest[end + len(closing) :] if end >= 0 else ""
    return " ".join(rest.split())[:_TITLE_CHARS]


def image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


NO_RESULT = "[no result for this call was recorded in the imported file]"


def append_turn(
    out: list[ParsedMessage],
    turn: ParsedMessage,
    results: dict[str, ParsedMessage],
    parsed: ParsedSession,
    *,
    stub_text: str,
    recorded: str = "result",
) -> list[str]:
    """Append an assistant ``turn``, then each of its calls' result in call order.

    Results are popped from ``results`` (what is left answered no call of this turn); a call
    with no recorded ``recorded`` gets a marked stub (``extra["synthetic"]``, counted in the
    fidelity report). Returns the ids of the calls answered.
    """
    out.append(turn)
    answered: list[str] = []
    for call in turn.tool_calls or ():
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str):
            continue
        result = results.pop(call_id, None)
        if result is None:
            function = call.get("function")
            name = function.get("name") if isinstance(function, dict) else ""
            result = ParsedMessage(
                role="tool",
                content=stub_text,
                tool_call_id=call_id,
                tool_name=name if isinstance(name, str) else "",
                extra={"synthetic": f"no {recorded} recorded"},
                created_at=turn.created_at,
            )
            parsed.skip(f"tool call without a recorded {recorded} (stub result added)")
        out.append(result)
        answered.append(call_id)
    return answered


def pair_tool_results(parsed: ParsedSession) -> None:
    """Every active assistant tool call followed by its result, in call order.

    Providers refuse a conversation where a call has no result right after its message.
    Results written later (after a user note, in another order) are moved up; a call with
    no result at all gets a marked stub result (``extra["synthetic"]``, counted in the
    fidelity report); a second result for a call already answered is kept as a meta row.
    A result answering a call that is not in the file is kept as a meta row too (exports
    that start mid-conversation), except in an OpenAI list, where check_session refuses it.
    Idempotent: an already paired list comes out unchanged.
    """
    parsed.messages[:] = list(pair_stream(parsed.messages, parsed))


def pair_stream(messages, parsed: ParsedSession) -> Iterator[ParsedMessage]:
    """``pair_tool_results`` one message at a time: holds only the open tool turn (and the
    ids of answered calls), so a streamed session is paired without being held whole."""
    out: list[ParsedMessage] = []  # ready to hand out, drained after every message
    turn: ParsedMessage | None = None
    results: dict[str, ParsedMessage] = {}
    held: list[ParsedMessage] = []
    answered: set[str] = set()
    # Results whose call has not come yet (Claude Code 2.1.114 wrote some before their
    # tool_use): paired when the call comes; still unanswered at the next user turn (or the
    # end), they answer no call in the file.
    early: dict[str, ParsedMessage] = {}

    def give_up() -> None:
        for message in early.values():
            message.meta = "tool_result_unknown"
            parsed.skip("tool result answering no call in the file (kept as a meta row)")
            (held if turn is not None else out).append(message)
        early.clear()

    def close() -> None:
        nonlocal turn, results, held
        if turn is not None:
            answered.update(append_turn(out, turn, results, parsed, stub_text=NO_RESULT))
        out.extend(held)
        turn, results, held = None, {}, []

    for message in messages:
        yield from out
        out.clear()
        if message.role == "user" and not message.meta:
            give_up()
        if not message.active or message.meta:
            (held if turn is not None else out).append(message)
            continue
        if message.role == "tool":
            open_ids = (
                {c.get("id") for c in (turn.tool_calls or ()) if isinstance(c, dict)}
                if turn is not None
                else set()
            )
            if message.tool_call_id in open_ids and message.tool_call_id not in results:
                results[message.tool_call_id] = message
            elif message.tool_call_id in answered or message.tool_call_id in results:
                message.meta = "tool_result_duplicate"
                parsed.skip("second result for an answered call (kept as a meta row)")
                (held if turn is not None else out).append(message)
            elif parsed.source != "import:openai":  # a hand-made OpenAI list is refused
                # its call may come later; else (an export that starts after the call) it
                # is kept, but never sent alone
                if message.tool_call_id in early:
                    message.meta = "tool_result_duplicate"
                    parsed.skip("second result for an answered call (kept as a meta row)")
                    (held if turn is not None else out).append(message)
                else:
                    early[message.tool_call_id] = message
            else:
                (held if turn is not None else out).append(message)
            continue
        if message.role == "assistant":
            close()
            if message.tool_calls:
                turn = message
                for call in message.tool_calls:
                    call_id = call.get("id") if isinstance(call, dict) else None
                    if call_id in early:
                        results[call_id] = early.pop(call_id)
                        parsed.counts["tool_results_before_their_call"] += 1
            else:
                out.append(message)
            continue
        (held if turn is not None else out).append(message)
    close()
    give_up()
    yield from out
