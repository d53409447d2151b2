"""Import conversations from Hermes (JSONL export, state.db), OpenAI JSON, Claude Code and Codex.

    report = import_path(path, owner=user, fmt="auto")
    report.sessions   # stored Session rows
    report.errors     # ImportProblem per failed session (file, line, problem)

Files are parsed as a stream, one session at a time; each session is stored in its own
transaction with bulk inserts, together with its parent links (all or nothing). A tool's
session id becomes the public id ``<id>.<owner pk>``: ids are namespaced per user, so what
one user gets never depends on another user's sessions (the tool's id stays in
``extra["source_id"]``). A session this user imported before is a duplicate (a failure)
unless ``skip_existing`` is set. Every import carries a fidelity report per session
(``session.fidelity``, also kept in ``extra["import_report"]``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import re
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
from hermes_web.importers.base import (
    ImportProblem,
    ParsedSession,
    max_bytes,
    pair_stream,
    pair_tool_results,
    text_of,
)
from hermes_web.importers.validate import Invalid, _walk, check_message, check_parsed
from hermes_web.llm_models import context_length_for
from hermes_web.models import Message, Session
from hermes_web.services.sessions import DEFAULT_TOKEN_MODEL

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
logger = logging.getLogger(__name__)


class AlreadyImported(ImportProblem):
    """This user imported the session before; reported, not a failure."""


@dataclass
class ImportReport:
    file: str
    format: str = ""
    sessions: list[Session] = field(default_factory=list)
    skipped: list[ImportProblem] = field(default_factory=list)  # already there, --skip-existing
    duplicates: list[ImportProblem] = field(default_factory=list)  # already there: a failure
    errors: list[ImportProblem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # imported, but something was not read

    @property
    def ok(self) -> bool:
        return not self.errors and not self.duplicates

    @property
    def refused(self) -> list[ImportProblem]:
        """Everything that was not imported and should have been: errors, then duplicates."""
        return [*self.errors, *self.duplicates]

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "format": self.format,
            "imported": [
                {
                    "id": s.public_id,
                    "source_id": (s.extra or {}).get("source_id", ""),
                    "title": s.title,
                    "messages": getattr(s, "message_total", None),
                    "parent": s.parent.public_id if s.parent_id else None,
                    "fidelity": getattr(s, "fidelity", None),
                }
                for s in self.sessions
            ],
            "skipped": [str(p) for p in self.skipped],
            "duplicates": [p.to_dict() for p in self.duplicates],
            "errors": [e.to_dict() for e in self.errors],
            "warnings": self.warnings,
        }


# --- detection -------------------------------------------------------------------------


# Claude Code writes these before (or between) its first user/assistant record.
CLAUDE_CODE_PREAMBLE = {
    "file-history-snapshot",
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
        head = stream.read(len(SQLITE_MAGIC))
        if head == SQLITE_MAGIC:
            return "hermes-db"
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
    stream.seek(0)
    text = stream.read(_SNIFF_BYTES).decode("utf-8", errors="replace")
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


def _kind_of(record: dict) -> str:
    if isinstance(record.get("messages"), list):
        if "id" in record or "started_at" in record or "source" in record:
            return "hermes-jsonl"
        return "openai"
    if record.get("type") in ("session_meta", "response_item", "event_msg", "turn_context") or (
        "instructions" in record and "id" in record
    ):
        return "codex"
    if "sessionId" in record or "parentUuid" in record or record.get("type") in MESSAGE_KINDS:
        return "claude-code"
    if record.get("type") in CLAUDE_CODE_PREAMBLE:
        return "claude-code-preamble"
    if "role" in record and "type" not in record:  # a Hermes per-session transcript
        return "hermes-jsonl"
    return ""


MESSAGE_KINDS = ("user", "assistant")


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
        if message.is_summary and message.active and not message.meta:
            body = text_of(message.content)
            body = body.split(SUMMARY_PREFIX, 1)[-1].split(END_MARKER, 1)[0]
            return body.strip()
    return ""


def namespaced(tool_id: str, owner) -> str:
    """The public id of an imported session: the tool's id in this user's namespace.

    Always suffixed with the owner, so the id a user gets never depends on what other users
    imported (a collision would reveal that someone holds that id)."""
    return f"{tool_id}.{owner.pk}"


def check_session(parsed: ParsedSession, file: str) -> None:
    """Refuse what no provider would accept or no page could show: an invalid role, content
    part, tool call or text (validate.check_parsed), a tool result answering no earlier call
    or without an id, a message larger than HERMES_MAX_MESSAGE_BYTES."""
    check_parsed(parsed, file)
    checker = _Checker(parsed, file)
    for message in parsed.messages:
        checker.pairing(message)


class _Checker:
    """``check_session`` one message at a time (a streamed session is checked as it is
    stored); keeps only the ids of the calls seen so far."""

    def __init__(self, parsed: ParsedSession, file: str) -> None:
        self.parsed, self.file = parsed, file
        self.number = 0
        self.calls: set[str] = set()
        self.limit = settings.HERMES_MAX_MESSAGE_BYTES

    def check(self, message) -> None:
        """Everything ``check_session`` checks, for the next message of the session."""
        try:
            check_message(message)
        except Invalid as error:
            line = message.extra.get("line") if isinstance(message.extra, dict) else None
            raise ImportProblem(
                self.file,
                line if isinstance(line, int) else self.parsed.line,
                f"message {self.number + 1}: {error}",
                self.parsed.public_id,
            ) from None
        self.pairing(message)

    def pairing(self, message) -> None:
        """Size and tool-result checks of the next message (numbered from 1)."""
        self.number += 1
        number, parsed, file = self.number, self.parsed, self.file
        content = message.content
        size = (
            len(content) if isinstance(content, str) else len(json.dumps(content)) if content else 0
        )
        if size > self.limit:
            raise ImportProblem(
                file,
                parsed.line,
                f"message {number} is {size // 2**20} MB; the limit per message "
                f"is {self.limit // 2**20} MB",
                parsed.public_id,
            )
        for call in message.tool_calls or ():
            self.calls.add(call["id"])
        if message.role == "tool" and message.active and not message.meta:
            if not message.tool_call_id:
                raise ImportProblem(
                    file,
                    parsed.line,
                    f"message {number}: a tool result without a tool_call_id",
                    parsed.public_id,
                )
            if message.tool_call_id not in self.calls:
                raise ImportProblem(
                    file,
                    parsed.line,
                    f"message {number}: tool result {message.tool_call_id!r} "
                    "answers no earlier tool call",
                    parsed.public_id,
                )


def fidelity(parsed: ParsedSession) -> dict:
    """What the import kept and what it did not, for one session (CLI, page, API)."""
    tally = _Tally()
    for message in parsed.messages:
        tally.add(message)
    return tally.report(parsed)


_IMAGE_PARTS = ("image_url", "image", "input_image")


class _Tally:
    """The counts of ``fidelity``, added one message at a time. Tool-call pairing needs the
    call ids and the answered ids (small strings), never the messages."""

    def __init__(self) -> None:
        self.total = self.active = self.meta = self.archived = self.summaries = 0
        self.stubs = self.images = self.reasoning = 0
        self.calls: list[str] = []
        self.results: set[str] = set()
        self.last_summary = None  # the newest active summary row (previous_summary)

    def add(self, m) -> None:
        self.total += 1
        if m.meta:
            self.meta += 1
        else:
            if m.active:
                self.active += 1
                self.reasoning += bool(m.reasoning)
            else:
                self.archived += 1
            self.calls.extend(c["id"] for c in m.tool_calls or ())
            if m.role == "tool":
                self.results.add(m.tool_call_id)
                self.stubs += bool(m.extra.get("synthetic"))
        self.summaries += bool(m.is_summary)
        if isinstance(m.content, list):
            self.images += sum(
                1 for p in m.content if isinstance(p, dict) and p.get("type") in _IMAGE_PARTS
            )
        if m.is_summary and m.active and not m.meta:
            self.last_summary = m

    def report(self, parsed: ParsedSession) -> dict:
        return {
            "records": parsed.records or self.total,
            "messages": self.active,
            "meta_rows": self.meta,
            "archived": self.archived,
            "summaries": self.summaries,
            "tool_calls": len(self.calls),
            "tool_results_paired": sum(1 for c in self.calls if c in self.results),
            "stub_results": self.stubs,
            "images": self.images,
            "reasoning": self.reasoning,
            "metadata": sorted(k for v in parsed.extra.values() if isinstance(v, dict) for k in v),
            "skipped": dict(sorted(parsed.skipped.items())),
            "kind": parsed.kind or "session",
        }


class _Links:
    """Parent links of one import: each is made inside its session's own transaction.

    Children whose parent is not stored yet wait (by the tool's parent id) and are attached
    when it arrives, in this file or a later one. Which tree a session belongs to is tracked
    in memory (a union-find over tree tops), so a 3,000-deep chain in any order needs no
    recursion and no walk per link; a link that would close a cycle is refused, naming the
    ids, and its session is not stored. Trees that gained a waiting subtree get their
    ``root`` and depth rewritten level by level when the file is done (``finish``)."""

    def __init__(self, owner) -> None:
        self.owner = owner
        self.waiting: dict[str, list[int]] = {}
        for pk, extra in (
            Session.objects.filter(owner=owner, parent__isnull=True, source__startswith="import:")
            .filter(extra__has_key="hermes_parent_id")
            .values_list("pk", "extra")
        ):
            self.waiting.setdefault(str(extra["hermes_parent_id"]), []).append(pk)
        self.up: dict[int, int] = {}  # union-find: tree top -> the top it was attached under
        self.parent_of: dict[int, int] = {}  # sessions linked in this import
        self.names: dict[int, str] = {}
        self.dirty: set[int] = set()

    def _top(self, pk: int) -> int:
        path = []
        while self.up.get(pk, pk) != pk:
            path.append(pk)
            pk = self.up[pk]
        for node in path:
            self.up[node] = pk
        return pk

    def link(self, session: Session, parsed: ParsedSession) -> None:
        """Inside the session's transaction: attach to its parent, then its waiting children."""
        session.root_id, session.compression_count = session.pk, 0
        self.names[session.pk] = parsed.public_id
        if parsed.parent_id:
            parent = (
                Session.objects.filter(
                    Q(public_id=namespaced(parsed.parent_id, self.owner))
                    | Q(public_id=parsed.parent_id, owner=self.owner)  # imported before namespaces
                )
                .only("pk", "root_id", "compression_count")
                .first()
            )
            if parent is not None:
                session.parent_id = parent.pk
                session.root_id = parent.root_id or parent.pk
                session.compression_count = parent.compression_count + 1
                if parent.pk not in self.parent_of and session.root_id != parent.pk:
                    self.up.setdefault(parent.pk, session.root_id)
                if parsed.kind == "sub-agent":
                    _link_task_call(session.pk, parent.pk)
        Session.objects.filter(pk=session.pk).update(
            parent_id=session.parent_id,
            root_id=session.root_id,
            compression_count=session.compression_count,
        )
        top = self._top(session.parent_id) if session.parent_id else session.pk
        for child_pk in self.waiting.get(parsed.public_id, ()):
            if self._top(child_pk) == top:
                raise ImportProblem(
                    "",
                    parsed.line,
                    f"parent cycle: {' → '.join(self._cycle(session, child_pk))}: refused",
                    parsed.public_id,
                )
        self.up[session.pk] = top
        if session.parent_id:
            self.parent_of[session.pk] = session.parent_id
        for child_pk in self.waiting.get(parsed.public_id, ()):
            Session.objects.filter(pk=child_pk).update(parent_id=session.pk)
            _link_task_call(child_pk, session.pk)
            self.up[child_pk] = top
            self.parent_of[child_pk] = session.pk
            self.dirty.add(top)

    def stored(self, session: Session, parsed: ParsedSession) -> None:
        """After the commit: the session's children are attached; it may wait for a parent."""
        self.waiting.pop(parsed.public_id, None)
        if parsed.parent_id and session.parent_id is None:
            self.waiting.setdefault(parsed.parent_id, []).append(session.pk)

    def rolled_back(self, session_pk: int | None) -> None:
        """The session's transaction failed: forget what ``link`` noted about it."""
        if session_pk is None:
            return
        for mapping in (self.up, self.parent_of, self.names):
            mapping.pop(session_pk, None)

    def finish(self) -> None:
        """Rewrite root and depth of every tree that gained a waiting subtree, top down."""
        for top in {self._top(t) for t in self.dirty}:
            level, depth, seen = [top], 0, {top}
            with transaction.atomic():
                while level:
                    for start in range(0, len(level), _BATCH):
                        Session.objects.filter(pk__in=level[start : start + _BATCH]).update(
                            root_id=top, compression_count=depth
                        )
                    children = []
                    for start in range(0, len(level), _BATCH):
                        children += Session.objects.filter(
                            parent_id__in=level[start : start + _BATCH]
                        ).values_list("pk", flat=True)
                    level = [pk for pk in children if pk not in seen]  # stored data may loop
                    seen.update(level)
                    depth += 1
        self.dirty.clear()

    def _cycle(self, session: Session, child_pk: int) -> list[str]:
        """The tool ids around the cycle: this session, its ancestors up to ``child_pk``, it."""
        names = [self.names.get(session.pk, session.public_id)]
        current, seen = session.parent_id, {session.pk}
        while current and current not in seen:
            seen.add(current)
            if current not in self.names:
                row = Session.objects.filter(pk=current).values("parent_id", "extra").first()
                if row is None:
                    break
                self.names[current] = (row["extra"] or {}).get("source_id", str(current))
                if row["parent_id"]:
                    self.parent_of.setdefault(current, row["parent_id"])
            names.append(self.names[current])
            if current == child_pk:
                break
            current = self.parent_of.get(current)
        names.append(names[0])
        return names


def store_session(parsed: ParsedSession, owner, file: str, links: _Links | None = None) -> Session:
    """One session, one transaction: the session row, all its messages and its parent links,
    or nothing."""
    if parsed.stream is not None:
        return _store_streamed(parsed, owner, file, links)
    if parsed.token_counts is None:  # not yet paired and checked by the parsing thread
        pair_tool_results(parsed)
        check_session(parsed, file)
    public_id = namespaced(parsed.public_id, owner) if parsed.public_id else ""
    if (
        public_id
        and Session.objects.filter(
            Q(public_id=public_id) | Q(public_id=parsed.public_id, owner=owner)  # or before ids had
        ).exists()
    ):  # a namespace
        raise AlreadyImported(file, parsed.line, "already imported", parsed.public_id)
    model = parsed.model
    counts = parsed.token_counts or count_tokens(parsed.messages, model)
    now = timezone.now()
    extra = dict(parsed.extra)
    report = fidelity(parsed)
    extra["import_report"] = report
    if parsed.public_id:
        extra["source_id"] = parsed.public_id
        if parsed.source == Session.Source.IMPORT_HERMES:
            extra["hermes_id"] = parsed.public_id
    if parsed.parent_id:
        extra["hermes_parent_id"] = parsed.parent_id
    fields = {"public_id": public_id} if public_id else {}
    own_links = links is None
    links = links or _Links(owner)
    session = None
    try:
        with transaction.atomic():
            session = Session.objects.create(
                owner=owner,
                title=parsed.title[:200],
                source=parsed.source,
                model=model[:200],
                context_length=context_length_for(model),
                created_at=parsed.created_at or now,
                ended_at=parsed.ended_at,
                end_reason=parsed.end_reason,
                previous_summary=_previous_summary(parsed),
                extra=extra,
                **fields,
            )
            _insert_messages(session, parsed, counts)
            links.link(session, parsed)
    except ImportProblem as problem:
        links.rolled_back(session.pk if session else None)
        problem.file = problem.file or file
        raise
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
    links.stored(session, parsed)
    if own_links:
        links.finish()
    session.message_total = report["messages"]
    session.fidelity = report
    return session


_STREAM_BATCH = 2000


def _store_streamed(parsed: ParsedSession, owner, file: str, links: _Links | None) -> Session:
    """A session whose messages arrive from ``parsed.stream``: paired, checked, counted and
    inserted in batches inside one transaction, so memory is bounded by the batch, not the
    file; a bad message anywhere (or a broken file) rolls the whole session back."""
    own_links = links is None
    links = links or _Links(owner)
    session = None
    tally = _Tally()
    try:
        with transaction.atomic():
            session = Session.objects.create(
                owner=owner,
                title="",
                source=parsed.source,
                model=parsed.model[:200],
                context_length=context_length_for(parsed.model),
                created_at=parsed.created_at or timezone.now(),
                extra=dict(parsed.extra),
            )
            checker = _Checker(parsed, file)
            batch: list = []
            stored = 0
            for message in pair_stream(parsed.stream, parsed):
                checker.check(message)
                tally.add(message)
                batch.append(message)
                if len(batch) >= _STREAM_BATCH:
                    _insert_rows(session, batch, count_tokens(batch, parsed.model), stored)
                    stored += len(batch)
                    batch = []
            if batch:
                _insert_rows(session, batch, count_tokens(batch, parsed.model), stored)
            try:
                _walk(parsed.title, "title")
            except Invalid as error:
                raise ImportProblem(file, parsed.line, str(error)) from None
            report = tally.report(parsed)
            summary = tally.last_summary
            previous = ""
            if summary is not None:
                body = text_of(summary.content).split(SUMMARY_PREFIX, 1)[-1]
                previous = body.split(END_MARKER, 1)[0].strip()
            session.title = parsed.title.strip()[:200]
            session.model = parsed.model[:200]
            session.context_length = context_length_for(parsed.model)
            session.previous_summary = previous
            session.extra = {**parsed.extra, "import_report": report}
            session.save(
                update_fields=["title", "model", "context_length", "previous_summary", "extra"]
            )
            links.link(session, parsed)
    except ImportProblem as problem:
        links.rolled_back(session.pk if session else None)
        problem.file = problem.file or file
        raise
    except DataError as error:  # e.g. \u0000 in text, which PostgreSQL cannot store
        detail = " ".join(str(error).split())
        raise ImportProblem(
            file, parsed.line, f"the database refused the text: {detail}", parsed.public_id
        ) from None
    except UnicodeEncodeError as error:
        raise ImportProblem(
            file,
            parsed.line,
            f"text that is not valid Unicode ({error.reason}: "
            f"{error.object[error.start : error.end]!r})",
            parsed.public_id,
        ) from None
    links.stored(session, parsed)
    if own_links:
        links.finish()
    session.message_total = report["messages"]
    session.fidelity = report
    return session


def _link_task_call(child_pk: int, parent_pk: int) -> None:
    """A sub-agent session names the parent's Task call that spawned it, when it is found
    (Claude Code records the agent id on the Task call's result)."""
    extra = Session.objects.filter(pk=child_pk).values_list("extra", flat=True).first() or {}
    agent_id = (extra.get("claude_code") or {}).get("agent_id")
    if not agent_id:
        return
    call_id = (
        Message.objects.filter(session_id=parent_pk, extra__agent_id=agent_id)
        .values_list("tool_call_id", flat=True)
        .first()
    )
    if call_id:
        Session.objects.filter(pk=child_pk).update(extra={**extra, "spawned_by_call": call_id})


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
    """Every message of ``parsed`` (see ``_insert_rows``)."""
    _insert_rows(session, parsed.messages, counts, 0)


def _insert_rows(session: Session, messages: list, counts: list[int], start: int) -> None:
    """A plain ``executemany`` INSERT: bulk_create's per-row model instances and SQL
    compilation cost more than the database on a 50 MB import. Values still go through
    each field's ``get_db_prep_save``, so JSON and datetimes are stored exactly as the ORM
    stores them, on SQLite and PostgreSQL alike.

    Meta rows are stored inactive and not archived, marked ``extra["meta"]``: every reader
    of the active conversation (chat, engine, exports) takes ``active=True`` rows only."""
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
        for i, m in enumerate(messages):
            extra = {**m.extra, "meta": m.meta} if m.meta else m.extra
            row = [
                session.pk,
                start + i,
                m.role,
                m.content,
                m.tool_calls,
                m.tool_call_id[:200],
                m.tool_name[:200],
                m.reasoning,
                counts[i],
                m.active and not m.meta,
                m.archived and not m.meta,
                m.is_summary,
                extra,
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


_DONE = object()
_STREAMED = ("openai",)  # formats whose parser yields sessions with ``stream`` set


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
                        pair_tool_results(item)
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
    path: str | Path,
    *,
    owner,
    fmt: str = "auto",
    name: str | None = None,
    skip_existing: bool = False,
) -> ImportReport:
    """Import every session in a file; problems are collected per session, never raised.

    A session this user imported before is a duplicate (``report.duplicates``, a failure)
    unless ``skip_existing``, which reports it as skipped. The file is only ever read."""
    path = Path(path)
    file = name or path.name
    report = ImportReport(file=file)
    links = None
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
        if report.format == "hermes-db":
            wal = path.with_name(path.name + "-wal")
            if wal.is_file() and wal.stat().st_size > 0:
                report.warnings.append(
                    f"{wal.name} holds changes not yet written into {path.name}; the database "
                    "is read as immutable, so they are not imported (quit Hermes, or copy the "
                    "database with `sqlite3 state.db .backup copy.db`, and import again)"
                )
        links = _Links(owner)
        # A streamed session reads the file while it is stored, so it is parsed here: the
        # parsing thread would move on (and close the file) before the store is done.
        items = (
            _parse(report.format, path, file)
            if report.format in _STREAMED
            else _pipelined(report.format, path, file)
        )
        for item in items:
            if isinstance(item, ImportProblem):
                report.errors.append(item)
                continue
            try:
                report.sessions.append(store_session(item, owner, file, links))
            except AlreadyImported as again:
                again.problem = (
                    "already imported (skipped)"
                    if skip_existing
                    else "already imported: a duplicate (use --skip-existing to skip it)"
                )
                (report.skipped if skip_existing else report.duplicates).append(again)
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
    except Exception as error:  # a reader bug on data nobody foresaw: a 4xx, never a 500
        logger.exception("import of %s failed", file)
        report.errors.append(
            ImportProblem(file, 0, f"cannot import this file ({type(error).__name__}: {error})")
        )
    if links is not None:
        links.finish()
    for session in report.sessions:
        fresh = Session.objects.filter(pk=session.pk).values("parent_id", "root_id").first()
        if fresh:
            session.parent_id, session.root_id = fresh["parent_id"], fresh["root_id"]
    return report


def import_upload(upload, *, owner, fmt: str = "auto", skip_existing: bool = False) -> ImportReport:
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
        return import_path(
            upload.temporary_file_path(),
            owner=owner,
            fmt=fmt,
            name=name,
            skip_existing=skip_existing,
        )
    with tempfile.NamedTemporaryFile(suffix=Path(name).suffix) as copy:
        _copy(upload, copy)
        copy.flush()
        return import_path(copy.name, owner=owner, fmt=fmt, name=name, skip_existing=skip_existing)


def _copy(upload, target: IO[bytes]) -> None:
    upload.seek(0)
    if hasattr(upload, "chunks"):
        for chunk in upload.chunks():
            target.write(chunk)
    else:
        shutil.copyfileobj(upload, target)
