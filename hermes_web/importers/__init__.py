"""Import conversations from Hermes (JSONL export, state.db), OpenAI JSON, Claude Code and Codex.

    report = import_path(path, owner=user, fmt="auto")
    report.sessions   # stored Session rows
    report.errors     # ImportProblem per failed session (file, line, problem)

Files are parsed as a stream, one session at a time; each session is stored in its own
transaction with bulk inserts. Hermes session ids are kept as public ids. When another
user's session already holds an id, the import gets ``<id>.<owner pk>`` (the original stays
in ``extra["hermes_id"]`` and chains still link); a session this user already imported is
reported as skipped, so importing the same file twice is harmless.
"""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import DataError, IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from compaction import END_MARKER, SUMMARY_PREFIX, CompactionConfig
from compaction.tokens import get_encoding, message_token_text
from hermes_web.importers import claude_code, codex, hermes, openai
from hermes_web.importers.base import ImportProblem, ParsedSession, max_bytes, text_of
from hermes_web.models import Message, Session
from hermes_web.services.sessions import DEFAULT_TOKEN_MODEL, default_context_length

__all__ = [
    "FORMATS",
    "ImportProblem",
    "ImportReport",
    "detect_format",
    "import_path",
    "import_upload",
]

FORMATS = ("hermes-jsonl", "hermes-db", "openai", "claude-code", "codex")
SQLITE_MAGIC = b"SQLite format 3\x00"
_SNIFF_BYTES = 1024 * 1024


class AlreadyImported(ImportProblem):
    """This user imported the session before; reported, not a failure."""


@dataclass
class ImportReport:
    file: str
    format: str = ""
    sessions: list[Session] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[ImportProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "format": self.format,
            "imported": [
                {"id": s.public_id, "title": s.title, "messages": getattr(s, "message_total", None)}
                for s in self.sessions
            ],
            "skipped": self.skipped,
            "errors": [e.to_dict() for e in self.errors],
        }


# --- detection -------------------------------------------------------------------------


def detect_format(path: Path, file: str) -> str:
    """By first bytes and record keys (the extension only breaks ties)."""
    with open(path, "rb") as stream:
        head = stream.read(len(SQLITE_MAGIC))
        if head == SQLITE_MAGIC:
            return "hermes-db"
        stream.seek(0)
        first = stream.readline(_SNIFF_BYTES)
    text = first.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not text:
        raise ImportProblem(file, 1, "the file is empty")
    if text.startswith("["):
        return "openai"
    if not text.startswith("{"):
        raise ImportProblem(
            file, 1, "not a recognized format: expected JSON, JSONL or a Hermes state.db"
        )
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        record = None  # a line longer than the sniff window, or a pretty-printed JSON document
    except RecursionError:
        raise ImportProblem(file, 1, "JSON nested too deeply to read") from None
    if isinstance(record, dict):
        return _kind_of(record, path, file)
    # Decide from the keys that appear early in the text.
    if '"parentUuid"' in text or '"sessionId"' in text:
        return "claude-code"
    if '"session_meta"' in text or '"response_item"' in text:
        return "codex"
    if '"messages"' in text and ('"started_at"' in text or '"parent_session_id"' in text):
        return "hermes-jsonl"
    if path.suffix.lower() == ".jsonl":
        raise ImportProblem(file, 1, "cannot tell the format from the first line; pass --format")
    return "openai"


def _kind_of(record: dict, path: Path, file: str) -> str:
    if isinstance(record.get("messages"), list):
        if "id" in record or "started_at" in record or "source" in record:
            return "hermes-jsonl"
        return "openai"
    if record.get("type") in ("session_meta", "response_item", "event_msg", "turn_context") or (
        "instructions" in record and "id" in record
    ):
        return "codex"
    if (
        "sessionId" in record
        or "parentUuid" in record
        or record.get("type") in ("summary", "user", "assistant")
    ):
        return "claude-code"
    raise ImportProblem(
        file,
        1,
        "not a recognized format: the first record is neither a session, "
        "a Claude Code record, a Codex item nor a list of messages",
    )


# --- parsing and storing ---------------------------------------------------------------


def _parse(fmt: str, path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    if fmt == "hermes-db":
        yield from hermes.parse_db(path, file)
        return
    parser = {
        "hermes-jsonl": hermes.parse_jsonl,
        "openai": openai.parse,
        "claude-code": claude_code.parse,
        "codex": codex.parse,
    }[fmt]
    with open(path, "rb") as stream:
        try:
            yield from parser(stream, file)
        except ImportProblem as problem:  # whole-file formats: one problem fails the file
            yield problem


_TOKEN_THREADS = 2


def count_tokens(messages: list, model: str) -> list[int]:
    """``count_message_tokens`` for every message, computed in two threads.

    Same formula as the engine (text + tool_calls JSON + tool_call_id, plus overhead and
    image cost), but each thread loops over its half with ``encode_ordinary``, which runs
    without the GIL; ``encode_ordinary_batch`` pays a future per message instead.
    """
    config = CompactionConfig(model=model or DEFAULT_TOKEN_MODEL)
    encoding = get_encoding(config.model)
    pairs = [message_token_text(m.as_openai()) for m in messages]

    def count(chunk):
        return [len(encoding.encode_ordinary(text)) if text else 0 for text, _ in chunk]

    half = (len(pairs) + 1) // 2
    if len(pairs) < 64:
        raw = count(pairs)
    else:
        with ThreadPoolExecutor(_TOKEN_THREADS) as pool:
            first, second = pool.map(count, [pairs[:half], pairs[half:]])
        raw = first + second
    return [
        n + config.per_message_overhead + images * config.image_tokens
        for n, (_, images) in zip(raw, pairs, strict=True)
    ]


def _previous_summary(parsed: ParsedSession) -> str:
    for message in reversed(parsed.messages):
        if message.is_summary and message.active:
            body = text_of(message.content)
            body = body.split(SUMMARY_PREFIX, 1)[-1].split(END_MARKER, 1)[0]
            return body.strip()
    return ""


def _public_id(parsed: ParsedSession, owner, file: str) -> str:
    if not parsed.public_id:
        return ""
    taken = (
        Session.objects.filter(public_id=parsed.public_id)
        .values_list("owner_id", flat=True)
        .first()
    )
    if taken is None:
        return parsed.public_id
    if taken == owner.pk:
        raise AlreadyImported(file, parsed.line, "already imported", parsed.public_id)
    alternative = f"{parsed.public_id}.{owner.pk}"
    if Session.objects.filter(public_id=alternative).exists():
        raise AlreadyImported(file, parsed.line, "already imported", parsed.public_id)
    return alternative


def check_session(parsed: ParsedSession, file: str) -> None:
    """Refuse what no provider would accept: a tool result answering no earlier call, a
    tool result without an id, a message larger than HERMES_MAX_MESSAGE_BYTES."""
    limit = settings.HERMES_MAX_MESSAGE_BYTES
    calls: set[str] = set()
    for number, message in enumerate(parsed.messages, 1):
        content = message.content
        size = (
            len(content) if isinstance(content, str) else len(json.dumps(content)) if content else 0
        )
        if size > limit:
            raise ImportProblem(
                file,
                parsed.line,
                f"message {number} is {size // 2**20} MB; the limit per message "
                f"is {limit // 2**20} MB",
                parsed.public_id,
            )
        for call in message.tool_calls or ():
            if isinstance(call, dict) and call.get("id"):
                calls.add(str(call["id"]))
        if message.role == "tool" and message.active:
            if not message.tool_call_id:
                raise ImportProblem(
                    file,
                    parsed.line,
                    f"message {number}: a tool result without a tool_call_id",
                    parsed.public_id,
                )
            if message.tool_call_id not in calls:
                raise ImportProblem(
                    file,
                    parsed.line,
                    f"message {number}: tool result {message.tool_call_id!r} "
                    "answers no earlier tool call",
                    parsed.public_id,
                )


def store_session(parsed: ParsedSession, owner, file: str) -> Session:
    """One session, one transaction: the session row and all its messages, or nothing."""
    check_session(parsed, file)
    public_id = _public_id(parsed, owner, file)
    model = parsed.model
    counts = parsed.token_counts or count_tokens(parsed.messages, model)
    now = timezone.now()
    extra = dict(parsed.extra)
    if parsed.public_id:
        extra["hermes_id" if parsed.source == Session.Source.IMPORT_HERMES else "source_id"] = (
            parsed.public_id
        )
    if parsed.parent_id:
        extra["hermes_parent_id"] = parsed.parent_id
    fields = {"public_id": public_id} if public_id else {}
    try:
        with transaction.atomic():
            session = Session.objects.create(
                owner=owner,
                title=parsed.title[:200],
                source=parsed.source,
                model=model[:200],
                context_length=default_context_length(model),
                created_at=parsed.created_at or now,
                ended_at=parsed.ended_at,
                end_reason=parsed.end_reason,
                previous_summary=_previous_summary(parsed),
                extra=extra,
                **fields,
            )
            Session.objects.filter(pk=session.pk).update(root=session)
            _insert_messages(session, parsed, counts)
    except IntegrityError as error:  # a concurrent import took the same id
        raise ImportProblem(
            file, parsed.line, f"could not store: {error}", parsed.public_id
        ) from None
    except DataError as error:  # e.g. \u0000 in text, which PostgreSQL cannot store
        detail = " ".join(str(error).split())
        raise ImportProblem(
            file, parsed.line, f"the database refused the text: {detail}", parsed.public_id
        ) from None
    except UnicodeEncodeError as error:  # a lone surrogate such as \ud800: not encodable text
        raise ImportProblem(
            file,
            parsed.line,
            f"text that is not valid Unicode ({error.reason}: "
            f"{error.object[error.start : error.end]!r})",
            parsed.public_id,
        ) from None
    session.root = session
    session.message_total = len(parsed.messages)
    return session


_INSERT_FIELDS = (
    "session",
    "position",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "reasoning",
    "token_count",
    "active",
    "archived",
    "is_summary",
    "extra",
    "created_at",
)
_BATCH = 500


def _insert_messages(session: Session, parsed: ParsedSession, counts: list[int]) -> None:
    """A plain ``executemany`` INSERT: bulk_create's per-row model instances and SQL
    compilation cost more than the database on a 50 MB import. Values still go through
    each field's ``get_db_prep_save``, so JSON and datetimes are stored exactly as the ORM
    stores them, on SQLite and PostgreSQL alike."""
    fields = [Message._meta.get_field(name) for name in _INSERT_FIELDS]
    qn = connection.ops.quote_name
    sql = (
        f"INSERT INTO {qn(Message._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    json_fields = [(i, f) for i, f in enumerate(fields) if f.get_internal_type() == "JSONField"]
    created_field = fields[-1]
    batch: list[list] = []
    with connection.cursor() as cursor:
        for i, m in enumerate(parsed.messages):
            row = [
                session.pk,
                i,
                m.role,
                m.content,
                m.tool_calls,
                m.tool_call_id[:200],
                m.tool_name[:200],
                m.reasoning,
                counts[i],
                m.active,
                m.archived,
                m.is_summary,
                m.extra,
                created_field.get_db_prep_save(m.created_at or session.created_at, connection),
            ]
            for index, field in json_fields:
                row[index] = field.get_db_prep_save(row[index], connection)
            batch.append(row)
            if len(batch) >= _BATCH:
                cursor.executemany(sql, batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)


def link_chains(sessions: list[Session], owner) -> None:
    """Rebuild parent/child links from Hermes parent ids, in this file or imported before."""
    if not sessions:
        return
    ids = [s.extra.get("hermes_id") or s.public_id for s in sessions]
    mine = Session.objects.for_user(owner)
    # Sessions of earlier imports whose parent arrives now are linked too.
    waiting = list(mine.filter(parent__isnull=True, extra__hermes_parent_id__in=ids))
    by_pk = {s.pk: s for s in [*sessions, *waiting]}
    with transaction.atomic():
        for session in by_pk.values():
            parent_id = session.extra.get("hermes_parent_id")
            if not parent_id or session.parent_id:
                continue
            parent = (
                mine.filter(Q(public_id=parent_id) | Q(extra__hermes_id=parent_id))
                .exclude(pk=session.pk)
                .first()
            )
            if parent is not None:
                session.parent = parent
                Session.objects.filter(pk=session.pk).update(parent=parent)
        for session in by_pk.values():
            top, seen = session, {session.pk}
            while top.parent_id and top.parent_id not in seen:
                seen.add(top.parent_id)
                top = Session.objects.get(pk=top.parent_id)
            _set_root(top, top, 0)


def _set_root(node: Session, root: Session, depth: int, guard: int = 0) -> None:
    Session.objects.filter(pk=node.pk).update(root=root, compression_count=depth)
    if guard > 1000:
        return
    for child in Session.objects.filter(parent=node):
        _set_root(child, root, depth + 1, guard + 1)


_DONE = object()


def _pipelined(fmt: str, path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    """Parse and count tokens in a thread while this one stores the previous session.

    Tokenizing and SQLite both release the GIL, so the two overlap; the queue holds at most
    two parsed sessions, which bounds memory on a 50 MB file.
    """
    items: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in _parse(fmt, path, file):
                if stop.is_set():
                    return
                if isinstance(item, ParsedSession):
                    try:  # before counting tokens: a giant message costs seconds of tokenizing
                        check_session(item, file)
                    except ImportProblem as problem:
                        item = problem
                    else:
                        item.token_counts = count_tokens(item.messages, item.model)
                items.put(item)
        except BaseException as error:  # handed to the consumer, which re-raises it
            items.put(error)
        finally:
            items.put(_DONE)

    worker = threading.Thread(target=produce, name="import-parser", daemon=True)
    worker.start()
    try:
        while (item := items.get()) is not _DONE:
            if isinstance(item, BaseException) and not isinstance(item, ImportProblem):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue
            with contextlib.suppress(queue.Empty):
                items.get(timeout=0.1)
        worker.join()


def import_path(
    path: str | Path, *, owner, fmt: str = "auto", name: str | None = None
) -> ImportReport:
    """Import every session in a file; problems are collected per session, never raised."""
    path = Path(path)
    file = name or path.name
    report = ImportReport(file=file)
    try:
        size = path.stat().st_size
        if size > max_bytes():
            raise ImportProblem(
                file, 0, f"file is {size // 2**20} MB; the limit is {max_bytes() // 2**20} MB"
            )
        report.format = detect_format(path, file) if fmt == "auto" else fmt
        if report.format not in FORMATS:
            raise ImportProblem(
                file, 0, f"unknown format {fmt!r} (expected auto, {', '.join(FORMATS)})"
            )
        for item in _pipelined(report.format, path, file):
            if isinstance(item, ImportProblem):
                report.errors.append(item)
                continue
            try:
                report.sessions.append(store_session(item, owner, file))
            except AlreadyImported as skipped:
                report.skipped.append(str(skipped))
            except ImportProblem as problem:
                report.errors.append(problem)
    except ImportProblem as problem:
        report.errors.append(problem)
    except RecursionError:
        report.errors.append(ImportProblem(file, 0, "JSON nested too deeply to read"))
    except OSError as error:
        report.errors.append(
            ImportProblem(file, 0, f"cannot read the file: {error.strerror or error}")
        )
    if report.format in ("hermes-jsonl", "hermes-db"):
        link_chains(report.sessions, owner)
        for session in report.sessions:
            session.refresh_from_db()
    return report


def import_upload(upload, *, owner, fmt: str = "auto") -> ImportReport:
    """An uploaded file (Django UploadedFile): imported from its temp file, or a copy on disk."""
    name = Path(upload.name or "upload").name
    if upload.size is not None and upload.size > max_bytes():
        report = ImportReport(file=name)
        report.errors.append(
            ImportProblem(
                name,
                0,
                f"file is {upload.size // 2**20} MB; the limit is {max_bytes() // 2**20} MB",
            )
        )
        return report
    if hasattr(upload, "temporary_file_path"):
        return import_path(upload.temporary_file_path(), owner=owner, fmt=fmt, name=name)
    with tempfile.NamedTemporaryFile(suffix=Path(name).suffix) as copy:
        _copy(upload, copy)
        copy.flush()
        return import_path(copy.name, owner=owner, fmt=fmt, name=name)


def _copy(upload, target: IO[bytes]) -> None:
    upload.seek(0)
    if hasattr(upload, "chunks"):
        for chunk in upload.chunks():
            target.write(chunk)
    else:
        shutil.copyfileobj(upload, target)
