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

import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from compaction import END_MARKER, SUMMARY_PREFIX, CompactionConfig, count_messages_tokens
from hermes_web.importers import claude_code, codex, hermes, openai
from hermes_web.importers.base import ImportProblem, ParsedSession, max_bytes, text_of
from hermes_web.models import Message, Session
from hermes_web.services.sessions import DEFAULT_TOKEN_MODEL, default_context_length

__all__ = ["FORMATS", "ImportProblem", "ImportReport", "detect_format", "import_path", "import_upload"]

FORMATS = ("hermes-jsonl", "hermes-db", "openai", "claude-code", "codex")
SQLITE_MAGIC = b"SQLite format 3\x00"
_SNIFF_BYTES = 1024 * 1024
_BATCH = 2000


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
            "imported": [{"id": s.public_id, "title": s.title, "messages": getattr(s, "message_total", None)}
                         for s in self.sessions],
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
        raise ImportProblem(file, 1, "not a recognized format: expected JSON, JSONL or a Hermes state.db")
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        record = None  # a line longer than the sniff window, or a pretty-printed JSON document
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
    if "sessionId" in record or "parentUuid" in record or record.get("type") in ("summary", "user", "assistant"):
        return "claude-code"
    raise ImportProblem(file, 1, "not a recognized format: the first record is neither a session, "
                                 "a Claude Code record, a Codex item nor a list of messages")


# --- parsing and storing ---------------------------------------------------------------

def _parse(fmt: str, path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    if fmt == "hermes-db":
        yield from hermes.parse_db(path, file)
        return
    parser = {"hermes-jsonl": hermes.parse_jsonl, "openai": openai.parse,
              "claude-code": claude_code.parse, "codex": codex.parse}[fmt]
    with open(path, "rb") as stream:
        try:
            yield from parser(stream, file)
        except ImportProblem as problem:  # whole-file formats: one problem fails the file
            yield problem


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
    taken = Session.objects.filter(public_id=parsed.public_id).values_list("owner_id", flat=True).first()
    if taken is None:
        return parsed.public_id
    if taken == owner.pk:
        raise AlreadyImported(file, parsed.line, "already imported", parsed.public_id)
    alternative = f"{parsed.public_id}.{owner.pk}"
    if Session.objects.filter(public_id=alternative).exists():
        raise AlreadyImported(file, parsed.line, "already imported", parsed.public_id)
    return alternative


def store_session(parsed: ParsedSession, owner, file: str) -> Session:
    """One session, one transaction: the session row and all its messages, or nothing."""
    public_id = _public_id(parsed, owner, file)
    model = parsed.model
    config = CompactionConfig(model=model or DEFAULT_TOKEN_MODEL)
    counts = count_messages_tokens([m.as_openai() for m in parsed.messages], config)
    now = timezone.now()
    extra = dict(parsed.extra)
    if parsed.public_id:
        extra["hermes_id" if parsed.source == Session.Source.IMPORT_HERMES else "source_id"] = parsed.public_id
    if parsed.parent_id:
        extra["hermes_parent_id"] = parsed.parent_id
    fields = {"public_id": public_id} if public_id else {}
    try:
        with transaction.atomic():
            session = Session.objects.create(
                owner=owner, title=parsed.title[:200], source=parsed.source, model=model[:200],
                context_length=default_context_length(model), created_at=parsed.created_at or now,
                ended_at=parsed.ended_at, end_reason=parsed.end_reason, previous_summary=_previous_summary(parsed),
                extra=extra, **fields,
            )
            Session.objects.filter(pk=session.pk).update(root=session)
            rows = (
                Message(
                    session_id=session.pk, position=i, role=m.role, content=m.content, tool_calls=m.tool_calls,
                    tool_call_id=m.tool_call_id[:200], tool_name=m.tool_name[:200], reasoning=m.reasoning,
                    token_count=counts[i], active=m.active, archived=m.archived, is_summary=m.is_summary,
                    extra=m.extra, created_at=m.created_at or session.created_at,
                )
                for i, m in enumerate(parsed.messages)
            )
            _bulk_create(rows)
    except IntegrityError as error:  # a concurrent import took the same id
        raise ImportProblem(file, parsed.line, f"could not store: {error}", parsed.public_id) from None
    session.root = session
    session.message_total = len(parsed.messages)
    return session


def _bulk_create(rows: Iterable[Message]) -> None:
    batch: list[Message] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= _BATCH:
            Message.objects.bulk_create(batch)
            batch = []
    if batch:
        Message.objects.bulk_create(batch)


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
            parent = mine.filter(Q(public_id=parent_id) | Q(extra__hermes_id=parent_id)).exclude(
                pk=session.pk).first()
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


def import_path(path: str | Path, *, owner, fmt: str = "auto", name: str | None = None) -> ImportReport:
    """Import every session in a file; problems are collected per session, never raised."""
    path = Path(path)
    file = name or path.name
    report = ImportReport(file=file)
    try:
        size = path.stat().st_size
        if size > max_bytes():
            raise ImportProblem(file, 0, f"file is {size // 2**20} MB; the limit is {max_bytes() // 2**20} MB")
        report.format = detect_format(path, file) if fmt == "auto" else fmt
        if report.format not in FORMATS:
            raise ImportProblem(file, 0, f"unknown format {fmt!r} (expected auto, {', '.join(FORMATS)})")
        for item in _parse(report.format, path, file):
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
    except OSError as error:
        report.errors.append(ImportProblem(file, 0, f"cannot read the file: {error.strerror or error}"))
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
        report.errors.append(ImportProblem(name, 0, f"file is {upload.size // 2**20} MB; "
                                                    f"the limit is {max_bytes() // 2**20} MB"))
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
