"""Hermes Agent sessions: the JSONL export (one session object per line), a session JSON
document (one pretty-printed session object, or a list of them, as export scripts write it),
the per-session transcript ``sessions/<id>.jsonl`` (a ``session_meta`` line, then one message
per line) and ``state.db`` (schema v30, opened read-only and immutable through
``sqlite_file``, its real tables only; its messages read in one ordered scan shared by the
sessions' streams, so neither a missing index nor a 1M-row session costs more than a pass).

See reference §13: message flags ``active``/``compacted``/``_compressed_summary``, content
stored as ``"\\x00json:"`` / ``"\\x01json:"`` + JSON for lists and dicts, ``tool_calls`` as
JSON text (``""`` or NULL when absent), rotation chains through ``parent_session_id``, rows
of role ``session_meta`` holding session metadata (kept on the session, not as messages);
summary rows after compacted rows, or opening a rotation child, are Hermes's own compactions.

Over 450 lines on purpose: the four layouts share the row decoding (content prefixes,
flags, summary rows, ids), which split across modules would be read in two places.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from django.conf import settings

from compaction import PREFIX_OPENING
from hermes_web.importers import budget, groups, sqlite_file
from hermes_web.importers.base import (
    MAX_LINE_BYTES,
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    Spool,
    broken_json,
    check_role,
    epoch,
    iter_lines,
    json_line,
    json_lines,
    max_bytes,
    safe_id,
    text_of,
)
from hermes_web.importers.links import SUB_AGENT
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_HERMES
JSON_PREFIXES = ("\x00json:", "\x01json:")
SUMMARY_OPENINGS = ("[CONTEXT COMPACTION", PREFIX_OPENING, "[CONTEXT SUMMARY]:")
# Message keys that become Message fields; everything else is kept in Message.extra.
_FIELDS = {
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "reasoning",
    "active",
    "compacted",
    "_compressed_summary",
    "id",
    "session_id",
    "timestamp",
}


def decode_content(value: Any) -> Any:
    """Prefixed JSON → list/dict; anything unreadable stays the plain text it is."""
    if isinstance(value, str):
        for prefix in JSON_PREFIXES:
            if value.startswith(prefix):
                try:
                    return json.loads(value[len(prefix) :])
                except json.JSONDecodeError:
                    return value
    return value


def _json_field(value: Any) -> Any:
    if value == "":
        return None  # export scripts write NULL columns as ""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def is_summary_row(row: dict, content: Any) -> bool:
    if row.get("_compressed_summary"):
        return True
    text = text_of(content).lstrip()
    return text.startswith(SUMMARY_OPENINGS)


def _flag(value: Any, default: bool) -> bool:
    if value is None or value == "":
        return default
    if isinstance(value, str):
        try:
            return bool(int(float(value)))
        except (ValueError, OverflowError):
            return value.strip().lower() in ("true", "yes")
    return bool(value) if isinstance(value, int | float | bool) else default


META_ROLE = "session_meta"


def _meta(row: dict) -> dict:
    """A session_meta row without its bulk: the tool list becomes the tool names."""
    kept = {k: v for k, v in row.items() if k not in ("role", "tools") and v not in (None, "")}
    tools = row.get("tools")
    if isinstance(tools, list):
        kept["tool_names"] = [
            t["function"].get("name")
            for t in tools
            if isinstance(t, dict) and isinstance(t.get("function"), dict)
        ]
    return kept


def parse_message(row: dict, file: str, line: int, session_id: str) -> ParsedMessage:
    if not isinstance(row, dict):
        raise ImportProblem(
            file, line, f"a message is {type(row).__name__}, not an object", session_id
        )
    role = check_role(row.get("role"), file, line, session_id)
    content = decode_content(row.get("content"))
    tool_calls = _json_field(row.get("tool_calls"))
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise ImportProblem(
            file, line, f"tool_calls is {type(tool_calls).__name__}, not a list", session_id
        )
    active = _flag(row.get("active"), True)
    compacted = _flag(row.get("compacted"), False)
    extra = {k: _json_field(v) for k, v in row.items() if k not in _FIELDS and v not in (None, "")}
    if not active and not compacted:
        extra["superseded"] = True  # a carried-forward duplicate or a rewound row
    reasoning = row.get("reasoning") or row.get("reasoning_content") or None
    for name in ("tool_call_id", "tool_name", "name"):
        if row.get(name) is not None and not isinstance(row[name], str):
            raise ImportProblem(file, line, f"{name} is not text", session_id)
    return ParsedMessage(
        role=role,
        content=content,
        tool_calls=tool_calls or None,
        tool_call_id=row.get("tool_call_id") or "",
        tool_name=row.get("tool_name") or row.get("name") or "",
        reasoning=reasoning,
        active=active,
        archived=not active,
        is_summary=is_summary_row(row, content),
        extra=extra,
        created_at=epoch(row.get("timestamp")),
    )


def _session(obj: dict, file: str, line: int) -> ParsedSession:
    session_id = obj.get("id")
    if not isinstance(session_id, str) or not session_id.strip():
        raise ImportProblem(file, line, "session object has no string 'id'")
    messages = obj.get("messages")
    if not isinstance(messages, list):
        raise ImportProblem(file, line, "session object has no 'messages' list", session_id)
    messages = _in_id_order(messages)
    metas = [m for m in messages if isinstance(m, dict) and m.get("role") == META_ROLE]
    rows = [m for m in messages if not (isinstance(m, dict) and m.get("role") == META_ROLE)]
    parent = obj.get("parent_session_id")
    if parent not in (None, "") and not isinstance(parent, str):
        raise ImportProblem(file, line, "parent_session_id is not text", session_id)
    keep = (
        "cwd",
        "git_branch",
        "profile_name",
        "model_config",
        "input_tokens",
        "output_tokens",
        "message_count",
    )
    hermes_meta = {k: obj[k] for k in keep if obj.get(k) not in (None, "")}
    if metas:
        hermes_meta["session_meta"] = [_meta(m) for m in metas]
    parsed = ParsedSession(
        source=SOURCE,
        public_id=safe_id(session_id.strip()),
        title=_scalar_str(obj.get("title") or obj.get("display_name"))[:200],
        model=_scalar_str(obj.get("model")),
        messages=[parse_message(m, file, line, session_id) for m in rows],
        created_at=epoch(obj.get("started_at")),
        ended_at=epoch(obj.get("ended_at")),
        end_reason=_scalar_str(obj.get("end_reason"))[:32],
        parent_id=safe_id(parent.strip()) if parent else "",
        extra={"hermes": hermes_meta, "hermes_source": obj.get("source")},
        line=line,
    )
    if isinstance(obj.get("sub_agent"), dict) and parsed.parent_id:
        # hermes-web's export of a sub-agent (a Claude Code Task agent): its parent's child
        parsed.kind = SUB_AGENT
        parsed.extra["sub_agent"] = obj["sub_agent"]
    parsed.records = len(messages) + 1
    if metas:
        parsed.skip("session_meta row (kept as session metadata)", len(metas))
    _native_compactions(parsed)
    return parsed


def _native_compactions(parsed: ParsedSession) -> None:
    """Hermes's own compactions, as ``NativeCompaction``s: a summary row after compacted
    (archived) rows of the same session compacted them in place; the summary row that opens
    a child of a rotation chain is the rotation that ended its parent (the store moves it to
    the parent once both are stored)."""
    pending: list[ParsedMessage] = []
    opened = False  # a turn other than the system prompt was seen in this session
    for message in parsed.messages:
        if message.archived and not message.extra.get("superseded"):
            pending.append(message)
            continue
        if message.is_summary and message.active and (pending or (parsed.parent_id and not opened)):
            native = NativeCompaction(
                source="hermes", created_at=message.created_at, summary=text_of(message.content)
            )
            if not pending:
                native.extra = {"rotation": True, "parent_id": parsed.parent_id}
            parsed.native_compactions.append(native)
            index = len(parsed.native_compactions) - 1
            for row in pending:
                row.replaced_by = index
            message.summary_of = index
            pending = []
        opened = opened or message.role != "system"


def _in_id_order(messages: list) -> list:
    """Hermes replays rows by their integer id; export scripts do not always write them in
    that order. Sorted only when every row has an integer id (stable otherwise)."""
    keys = []
    for m in messages:
        value = m.get("id") if isinstance(m, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | str):
            return messages
        try:
            keys.append(int(value))
        except (ValueError, OverflowError):
            return messages
    if keys == sorted(keys):
        return messages
    return [m for _, m in sorted(zip(keys, messages, strict=True), key=lambda pair: pair[0])]


def _scalar_str(value: Any) -> str:
    """A metadata value (title, model, end reason) as text; not message content (see
    compaction.messages.content_text for that)."""
    return value if isinstance(value, str) else "" if value is None else str(value)


def parse_jsonl(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """One session per line; a bad line is one failed session, the others still import.

    A file whose first line is a message (``session_meta`` or a role) is a per-session
    transcript; one whose first line is not whole JSON is a pretty-printed session document.
    """
    head = stream.readline(MAX_LINE_BYTES + 1)
    stream.seek(0)
    first = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    try:
        record = json.loads(first) if first else None
    except ValueError:
        record = None
    if first.startswith(("{", "[")) and record is None:
        yield from _document(stream, file)
        return
    if isinstance(record, dict) and "role" in record and "messages" not in record:
        yield _transcript(stream, file)
        return
    for number, text in iter_lines(stream, file):
        if isinstance(text, ImportProblem):
            yield text
            continue
        try:
            obj = json_line(text, file, number)
            if not isinstance(obj, dict):
                raise ImportProblem(
                    file, number, f"expected a session object, got a JSON {type(obj).__name__}"
                )
            yield _session(obj, file, number)
        except ImportProblem as problem:
            yield problem


def _document(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """One JSON document: a session object, or a list of them (bounded by the upload limit)."""
    raw = stream.read(max_bytes() + 1)
    if len(raw) > max_bytes():
        yield ImportProblem(file, 0, f"file larger than {max_bytes() // 2**20} MB")
        return
    try:
        doc = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        yield ImportProblem(file, line, f"not valid UTF-8 (byte {error.start})")
        return
    except json.JSONDecodeError as error:
        yield ImportProblem(file, error.lineno, broken_json(error))
        return
    except ValueError as error:
        yield ImportProblem(file, 0, f"unreadable number: {error}")
        return
    except RecursionError:
        yield ImportProblem(file, 1, "JSON nested too deeply to read")
        return
    sessions = doc if isinstance(doc, list) else [doc]
    for number, obj in enumerate(sessions, 1):
        try:
            if not isinstance(obj, dict):
                raise ImportProblem(
                    file, 1, f"session {number} is a JSON {type(obj).__name__}, not an object"
                )
            yield _session(obj, file, 1)
        except ImportProblem as problem:
            yield problem


def is_transcript(path: Path) -> bool:
    """The file is a per-session transcript (its first line a message, not a session)."""
    with open(path, "rb") as stream:
        head = stream.readline(MAX_LINE_BYTES + 1)
    first = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    try:
        record = json.loads(first) if first else None
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and "role" in record and "messages" not in record


def _transcript(stream: IO[bytes], file: str) -> ParsedSession:
    """``sessions/<id>.jsonl``: the id is the file name; session_meta lines are metadata.

    Streamed: the session's ``stream`` reads one line per message while the store takes
    them, filling title, model, start time and metadata as they appear."""
    stem = file.replace("\\", "/").rsplit("/", 1)[-1]
    session_id = stem[: -len(".jsonl")] if stem.endswith(".jsonl") else stem.rsplit(".", 1)[0]
    parsed = ParsedSession(
        source=SOURCE,
        public_id=safe_id(session_id),
        extra={"hermes": {"session_meta": []}, "hermes_source": None},
        line=1,
    )
    parsed.stream = _transcript_rows(stream, file, session_id, parsed)
    return parsed


def _transcript_rows(
    stream: IO[bytes], file: str, session_id: str, parsed: ParsedSession
) -> Iterator[ParsedMessage]:
    metas: list[dict] = parsed.extra["hermes"]["session_meta"]
    count = 0
    for number, row in json_lines(stream, file, parsed):
        parsed.records += 1
        if isinstance(row, dict) and row.get("role") == META_ROLE:
            metas.append(_meta(row))
            parsed.skip("session_meta row (kept as session metadata)")
            if len(metas) == 1:
                parsed.model = _scalar_str(metas[0].get("model"))
                parsed.created_at = epoch(metas[0].get("timestamp")) or parsed.created_at
                parsed.extra["hermes_source"] = metas[0].get("platform")
            continue
        message = parse_message(row, file, number, session_id)
        message.extra["line"] = number
        if not count and parsed.created_at is None:
            parsed.created_at = message.created_at
        if not parsed.title and message.role == "user":
            parsed.title = " ".join(text_of(message.content).split())[:80]
        count += 1
        yield message
    if not count:
        raise ImportProblem(file, 0, "the transcript holds no messages", session_id)


# --- state.db --------------------------------------------------------------------------

_REQUIRED = {
    "sessions": {"id", "parent_session_id", "started_at"},
    "messages": {"id", "session_id", "role", "content"},
}
# The columns of schema v30 (reference §13.1). Only these are read, named one by one: a
# database we did not write may add any column, even a generated one that computes 40 MB
# per row. Other columns are named in each session's fidelity report, never read.
SESSION_SCHEMA = frozenset(
    (
        *("id", "source", "created_source", "user_id", "session_key", "chat_id", "chat_type"),
        *("thread_id", "display_name", "origin_json", "expiry_finalized", "model"),
        *("model_config", "system_prompt", "system_prompt_hash", "parent_session_id"),
        *("started_at", "ended_at", "end_reason", "message_count", "tool_call_count"),
        *("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"),
        *("reasoning_tokens", "api_call_count", "billing_provider", "billing_base_url"),
        *("billing_mode", "estimated_cost_usd", "actual_cost_usd", "cost_status"),
        *("cost_source", "pricing_version", "cwd", "git_branch", "git_repo_root"),
        *("git_metadata_generation", "title", "title_source", "last_activity_at"),
        *("last_activity_description", "last_activity_provenance", "archived", "pinned"),
        *("hidden", "last_read_at", "tool_names", "profile_name", "transport_profile"),
        *("rewind_count", "handoff_state", "handoff_platform", "handoff_error"),
        *("compression_failure_cooldown_until", "compression_failure_error"),
        *("compression_fallback_streak", "compression_ineffective_count"),
        *("compression_recovery_deadline", "compression_overload_streak"),
    )
)
# What a session keeps of its row (``_session``): the rest of the schema is not read.
SESSION_READ = (
    *("id", "source", "title", "display_name", "model", "started_at", "ended_at"),
    *("end_reason", "parent_session_id", "cwd", "git_branch", "profile_name"),
    *("model_config", "input_tokens", "output_tokens", "message_count"),
)
MESSAGE_SCHEMA = frozenset(
    (
        *("id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name"),
        *("effect_disposition", "timestamp", "token_count", "finish_reason", "reasoning"),
        *("reasoning_content", "reasoning_details", "codex_reasoning_items"),
        *("codex_message_items", "platform_message_id", "observed", "_compressed_summary"),
        *("active", "compacted", "api_content", "display_kind", "display_metadata"),
        *("display_identity", "display_order"),
    )
)
# A BLOB (an identity key) that no page shows and JSON cannot hold.
_MESSAGE_UNREAD = ("display_identity",)
# A file we did not write decides how much work each SELECT is: reading is bounded by time
# (the progress handler interrupts the query), and only plain tables are read.
# The import's budget (importers.budget) bounds it sooner; this is the ceiling for any read.
READ_SECONDS = 3600.0
_PROGRESS_STEPS = 10_000


def _columns(db: sqlite3.Connection, table: str, *, generated: bool = False) -> set[str]:
    """The table's stored columns, or (``generated``) its generated ones: table_xinfo lists
    both (``hidden`` 2 or 3 for a generated column), table_info hides the generated."""
    rows = db.execute(f"PRAGMA table_xinfo({table})")  # noqa: S608 - fixed names
    return {row[1] for row in rows if (row[6] in (2, 3)) == generated}


class _PrivateCopy(sqlite3.Connection):
    """A connection to a private copy of a live database; closing it removes the copy."""

    directory = ""

    def close(self) -> None:
        super().close()
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = ""


COPY_ATTEMPTS = 3


def _state(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_size, info.st_mtime_ns


def _private_copy(path: Path, wal: Path, file: str) -> str:
    """A new temporary directory holding a copy of the database and its -wal, taken while
    neither changed (a running Hermes may write between the two copies); the user's files
    are only read."""
    mode = os.stat(wal).st_mode
    if not stat.S_ISREG(mode):
        raise ImportProblem(file, 0, f"{wal.name} is not a regular file: refused")
    total = os.stat(path).st_size + os.stat(wal).st_size
    if total > max_bytes():
        raise ImportProblem(
            file,
            0,
            f"the database and its {wal.name} are {total // 2**20} MB together; "
            f"the limit is {max_bytes() // 2**20} MB",
        )
    directory = tempfile.mkdtemp(prefix="hermes-state-db-")
    try:
        for _ in range(COPY_ATTEMPTS):
            before = (_state(path), _state(wal))
            shutil.copyfile(path, os.path.join(directory, "state.db"))
            shutil.copyfile(wal, os.path.join(directory, "state.db-wal"))
            if (_state(path), _state(wal)) == before:
                return directory
        raise ImportProblem(
            file,
            0,
            f"the database kept changing while it was copied ({COPY_ATTEMPTS} tries): "
            "something is writing to it; import it again in a moment",
        )
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def open_live(path: Path, file: str) -> _PrivateCopy:
    """Any agent's SQLite file opened through ``sqlite_file``: read-only and immutable, or,
    when a non-empty ``-wal`` lies beside it (a running agent's newest rows are only there),
    a private copy of the two opened normally so SQLite applies the WAL there; closing the
    connection removes the copy. Nothing is ever written beside the user's file."""
    wal = Path(path).with_name(Path(path).name + "-wal")
    directory = ""
    try:
        if os.path.lexists(wal) and (not wal.is_file() or wal.stat().st_size > 0):
            directory = _private_copy(Path(path), wal, file)
        target = Path(directory, "state.db") if directory else Path(path)
        db = cast(
            _PrivateCopy,
            sqlite_file.connect(target, file, writable_copy=bool(directory), factory=_PrivateCopy),
        )
    except ImportProblem:
        if directory:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    except OSError as error:
        if directory:
            shutil.rmtree(directory, ignore_errors=True)
        raise ImportProblem(
            file, 0, f"cannot copy the live database: {error.strerror or error}"
        ) from None
    db.directory = directory
    return db


def open_state_db(path: Path, file: str) -> tuple[sqlite3.Connection, dict[str, set[str]]]:
    """Open read-only and immutable (never writes, never creates a -wal or -shm beside the
    file) and check it is Hermes's schema, made of plain tables.

    A live database (a non-empty ``-wal`` beside it: Hermes's newest rows are only there)
    is copied with its -wal into a private temporary directory and the copy opened normally,
    so SQLite applies the WAL there; the copy is removed when the connection closes."""
    db = open_live(path, file)
    try:
        db.row_factory = sqlite3.Row
        tables = sqlite_file.require_tables(db, file, tuple(_REQUIRED))
        columns = {table: _columns(db, table) if table in tables else set() for table in _REQUIRED}
        for table, needed in _REQUIRED.items():
            if not columns[table]:
                raise ImportProblem(file, 0, f"not a Hermes state.db: it has no '{table}' table")
            if missing := needed - columns[table]:
                raise ImportProblem(
                    file,
                    0,
                    f"not a Hermes state.db: table '{table}' lacks {', '.join(sorted(missing))}",
                )
    except sqlite3.DatabaseError as error:
        db.close()
        raise ImportProblem(file, 0, f"not a readable SQLite database: {error}") from None
    except ImportProblem:
        db.close()
        raise
    deadline = time.monotonic() + READ_SECONDS
    if spent := budget.current():  # the import's own budget, when it ends sooner
        deadline = min(deadline, spent.deadline)
    db.set_progress_handler(lambda: int(time.monotonic() > deadline), _PROGRESS_STEPS)
    return db, columns


def _why(error: sqlite3.DatabaseError) -> str:
    text = str(error)
    return f"reading took longer than {READ_SECONDS:.0f} s" if text == "interrupted" else text


def _select(names: list[str]) -> str:
    """The SELECT list naming ``names`` (quoted)."""
    return ", ".join('"' + name.replace('"', '""') + '"' for name in names)


class _Columns:
    """What is read of a state.db: the schema's stored columns it has; the others (and any
    generated column, whatever its name: reading it would run its expression) by name."""

    def __init__(self, db: sqlite3.Connection, columns: dict[str, set[str]]) -> None:
        have_sessions, have_messages = columns["sessions"], columns["messages"]
        self.sessions = _select([c for c in SESSION_READ if c in have_sessions])
        self.limit = settings.HERMES_MAX_MESSAGE_BYTES
        self.messages = _select(sorted(have_messages & MESSAGE_SCHEMA - set(_MESSAGE_UNREAD)))
        self.unread: list[tuple[str, str, str]] = [  # (table, column, why)
            *(
                (t, c, "a column not in Hermes's schema")
                for t in _REQUIRED
                for c in sorted(
                    columns[t] - (SESSION_SCHEMA if t == "sessions" else MESSAGE_SCHEMA)
                )
            ),
            *(
                (t, c, "a generated column")
                for t in _REQUIRED
                for c in sorted(_columns(db, t, generated=True))
            ),
        ]

    def note_unread(self, parsed: ParsedSession, rows: int) -> None:
        """Name the columns that were not read in the session's fidelity report."""
        for table, name, why in self.unread:
            count = rows if table == "messages" else 1
            parsed.skip(f"{table}.{name}: {why} (not read)", count)

    def check_row(self, row: dict, number: int, file: str, line: int, session_id: str) -> None:
        """A stored value over the per-message limit refuses the session, naming the column."""
        for name, value in row.items():
            if isinstance(value, str | bytes) and len(value) > self.limit:
                raise ImportProblem(
                    file,
                    line,
                    f"message {number}: column {name} is over the limit per message "
                    f"({self.limit // 2**20} MB)",
                    session_id,
                )


def _session_rows(db: sqlite3.Connection, file: str, select: str) -> Iterator[dict | ImportProblem]:
    """Every sessions row, oldest first. When the table scan fails (a damaged page), the ids
    are read through the primary-key index and each row on its own, so one bad page costs
    the sessions on it, not the whole file."""
    try:
        rows = [
            dict(r)
            for r in db.execute(f"SELECT {select} FROM sessions ORDER BY started_at, id")  # noqa: S608 - names from the schema
        ]
    except sqlite3.DatabaseError as error:
        if _why(error) != str(error):
            raise
        damaged = _why(error)
    else:
        yield from rows
        return
    index = db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'sessions' "
        "AND name LIKE 'sqlite_autoindex_sessions_%'"
    ).fetchone()
    try:
        hint = f" INDEXED BY {index[0]}" if index else ""
        ids = [r[0] for r in db.execute(f"SELECT id FROM sessions{hint}")]  # noqa: S608
    except sqlite3.DatabaseError as error:
        yield ImportProblem(file, 0, f"cannot read sessions: {_why(error)}")
        return
    yield ImportProblem(
        file, 0, f"the sessions table is damaged ({damaged}); reading it row by row"
    )
    found = []
    for session_id in ids:
        try:
            row = db.execute(
                f"SELECT {select} FROM sessions WHERE id = ?",  # noqa: S608 - names from the schema
                (session_id,),
            ).fetchone()
        except sqlite3.DatabaseError as error:
            yield ImportProblem(file, 0, f"cannot read session {session_id}: {_why(error)}")
            continue
        if row is not None:
            found.append(dict(row))
    found.sort(key=lambda r: (r.get("started_at") or 0, str(r.get("id"))))
    yield from found


def _order(value: Any) -> tuple[int, Any]:
    """A session id's place in ``ORDER BY ... COLLATE BINARY``: NULL, numbers, text, blobs,
    each class in its own order (Python orders text by code point, as SQLite's memcmp
    orders UTF-8)."""
    if value is None:
        return (0, 0)
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, bytes(value))


class _Scan:
    """Every message row, read once in session order (``ORDER BY session_id, id``: Hermes's
    index on ``(session_id, id)`` when the file has it, one sort otherwise), shared by the
    sessions' streams in that same order. A per-session ``WHERE session_id = ?`` without the
    index is a full scan each: 20,000 sessions took minutes.

    The scan starts when the first stream is read (a file whose sessions are all duplicates
    is never scanned); a session nobody reads is passed over. If the scan breaks (a damaged
    page), the sessions after it are read one by one."""

    _FETCH = 256

    def __init__(self, db: sqlite3.Connection, select: str, file: str) -> None:
        self.db, self.select, self.file = db, select, file
        self.cursor: sqlite3.Cursor | None = None
        self.buffer: list[sqlite3.Row] = []
        self.broken = False

    def _peek(self) -> sqlite3.Row | None:
        if not self.buffer:
            if self.cursor is None:
                self.cursor = self.db.execute(
                    f"SELECT {self.select} FROM messages "  # noqa: S608 - names from the schema
                    "ORDER BY session_id COLLATE BINARY, id"
                )
            self.buffer = self.cursor.fetchmany(self._FETCH)
            self.buffer.reverse()
        return self.buffer[-1] if self.buffer else None

    def rows(self, session_id: Any, where: str) -> Iterator[dict]:
        """The rows of ``session_id`` in id order (``where`` names it in a problem)."""
        if self.broken:
            yield from self._one_by_one(session_id, where)
            return
        key = _order(session_id)
        try:
            while (row := self._peek()) is not None:
                here = _order(row["session_id"])
                if here > key:
                    return
                self.buffer.pop()
                if here == key:
                    yield dict(row)
        except sqlite3.DatabaseError as error:
            if _why(error) != str(error):
                raise ImportProblem(self.file, 0, f"cannot read {where}: {_why(error)}") from None
            self.broken = True
            raise ImportProblem(self.file, 0, f"cannot read {where}: {error}") from None

    def _one_by_one(self, session_id: Any, where: str) -> Iterator[dict]:
        try:
            cursor = self.db.execute(
                f"SELECT {self.select} FROM messages WHERE session_id = ? ORDER BY id",  # noqa: S608 - names from the schema
                (session_id,),
            )
            while batch := cursor.fetchmany(self._FETCH):
                yield from (dict(row) for row in batch)
        except sqlite3.DatabaseError as error:
            raise ImportProblem(self.file, 0, f"cannot read {where}: {_why(error)}") from None


class _Natives:
    """``_native_compactions`` one row at a time: a summary row that closes compacted rows
    (or opens a rotation child) is a native compaction; the compacted rows before it get
    its index when they are replayed (``replaced_by``), from the positions kept here."""

    def __init__(self, parsed: ParsedSession) -> None:
        self.parsed = parsed
        self.pending = 0
        self.opened = False
        self.marks: list[tuple[int, int]] = []  # (summary row position, compaction index)

    def add(self, message: ParsedMessage, position: int) -> None:
        parsed = self.parsed
        if message.archived and not message.extra.get("superseded"):
            self.pending += 1
            return
        if (
            message.is_summary
            and message.active
            and (self.pending or (parsed.parent_id and not self.opened))
        ):
            native = NativeCompaction(
                source="hermes", created_at=message.created_at, summary=text_of(message.content)
            )
            if not self.pending:
                native.extra = {"rotation": True, "parent_id": parsed.parent_id}
            parsed.native_compactions.append(native)
            index = len(parsed.native_compactions) - 1
            message.summary_of = index
            if self.pending:
                self.marks.append((position, index))
            self.pending = 0
        self.opened = self.opened or message.role != "system"

    def replayed(self, messages: Iterator[ParsedMessage]) -> Iterator[ParsedMessage]:
        """``messages`` with each compacted row's ``replaced_by`` set."""
        mark = 0
        for position, message in enumerate(messages):
            if message.archived and not message.extra.get("superseded"):
                while mark < len(self.marks) and self.marks[mark][0] <= position:
                    mark += 1
                if mark < len(self.marks):
                    message.replaced_by = self.marks[mark][1]
            yield message


# Rows of one session held in memory before the rest go to a spool file on disk.
_IN_MEMORY_ROWS = 500


class _DbStream:
    """One state.db session's messages for the streamed store: a first pass reads its rows
    from the scan (metadata rows kept on the session, sizes checked, native compactions
    found), keeping the messages in memory up to ``_IN_MEMORY_ROWS`` and in a spool file
    past that; then they are handed out one at a time, so a 1M-row session is never held
    whole."""

    def __init__(
        self, parsed: ParsedSession, obj: dict, scan: _Scan, read: _Columns, file: str
    ) -> None:
        self.parsed, self.obj, self.scan, self.read, self.file = parsed, obj, scan, read, file
        self.spool: Spool | None = None
        self.out: Iterator[ParsedMessage] | None = None

    def __iter__(self) -> _DbStream:
        return self

    def __next__(self) -> ParsedMessage:
        if self.out is None:
            self.out = self._first_pass()
        return next(self.out)

    def _first_pass(self) -> Iterator[ParsedMessage]:
        parsed, file, line = self.parsed, self.file, self.parsed.line
        session_id = str(self.obj["id"])
        natives = _Natives(parsed)
        held: list[ParsedMessage] = []
        metas: list[dict] = []
        rows = count = 0
        for row in self.scan.rows(self.obj["id"], f"session {session_id}"):
            rows += 1
            self.read.check_row(row, rows, file, line, session_id)
            if row.get("role") == META_ROLE:
                metas.append(_meta(row))
                continue
            message = parse_message(row, file, line, session_id)
            natives.add(message, count)
            count += 1
            held.append(message)
            if len(held) >= _IN_MEMORY_ROWS:
                if self.spool is None:
                    self.spool = Spool()
                self.spool.write(held)  # empties ``held``
                groups.pause()  # a long read: the import's open group may commit first
        parsed.records = rows + 1
        if metas:
            parsed.extra["hermes"]["session_meta"] = metas
            parsed.skip("session_meta row (kept as session metadata)", len(metas))
        self.read.note_unread(parsed, rows)
        if self.spool is not None:
            self.spool.write(held)
            return natives.replayed(self.spool.replay())
        return natives.replayed(iter(held))

    def close(self) -> None:
        """Remove the spool file (also when the session was refused unread)."""
        if self.spool is not None:
            self.spool.close()


def parse_db(path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    """Every session of a state.db, in session-id order, each with a ``stream`` of its
    messages read from one shared ordered scan (``_Scan``). The sessions rows are read
    first (a duplicate is refused by its id before any message of it is read)."""
    db, columns = open_state_db(path, file)
    try:
        read = _Columns(db, columns)
        sessions: dict[tuple[int, Any], dict] = {}
        for number, obj in enumerate(_session_rows(db, file, read.sessions), start=1):
            if isinstance(obj, ImportProblem):
                yield obj
                continue
            key = _order(obj.get("id"))
            if key in sessions:
                yield ImportProblem(
                    file, number, "the sessions table holds this id twice: refused", str(obj["id"])
                )
                continue
            obj["line"] = number
            sessions[key] = obj
        scan = _Scan(db, read.messages, file)
        for key in sorted(sessions):
            obj = sessions.pop(key)
            try:
                parsed = _session({**obj, "messages": []}, file, obj["line"])
            except ImportProblem as problem:
                yield problem
                continue
            parsed.records = 1
            parsed.stream = _DbStream(parsed, obj, scan, read, file)
            yield parsed
    except sqlite3.DatabaseError as error:
        yield ImportProblem(file, 0, f"cannot read sessions: {_why(error)}")
    finally:
        db.close()
