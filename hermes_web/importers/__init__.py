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
import logging
import queue
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from hermes_web.importers import (
    claude_code,
    codex,
    copilot_cli,
    cursor,
    hermes,
    openai,
    pi,
    swe_agent,
)
from hermes_web.importers.base import ImportProblem, ParsedSession, max_bytes, pair_tool_results
from hermes_web.importers.checks import check_session, count_tokens, fidelity
from hermes_web.importers.detect import detect_format
from hermes_web.importers.links import Links, namespaced
from hermes_web.importers.store import AlreadyImported, EmptySession, store_session
from hermes_web.models import Session

__all__ = [
    "FORMATS",
    "AlreadyImported",
    "ImportProblem",
    "ImportReport",
    "check_session",
    "count_tokens",
    "detect_format",
    "fidelity",
    "import_path",
    "import_upload",
    "namespaced",
    "summary_line",
    "store_session",
]

FORMATS: tuple[str, ...] = ("hermes-jsonl", "hermes-db", "openai", "claude-code", "codex")
FORMATS += ("pi", "copilot-cli", "swe-agent", "cursor")
logger = logging.getLogger(__name__)


@dataclass
class ImportReport:
    file: str
    format: str = ""
    sessions: list[Session] = field(default_factory=list)
    skipped: list[ImportProblem] = field(default_factory=list)  # already there, --skip-existing
    duplicates: list[ImportProblem] = field(default_factory=list)  # already there: a failure
    errors: list[ImportProblem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # imported, but something was not read
    empties: list[ImportProblem] = field(default_factory=list)  # no messages: not stored

    @property
    def ok(self) -> bool:
        return not self.errors and not self.duplicates

    @property
    def refused(self) -> list[ImportProblem]:
        """Everything that was not imported and should have been: errors, then duplicates."""
        return [*self.errors, *self.duplicates]

    @property
    def messages(self) -> int:
        return sum(getattr(s, "message_total", 0) or 0 for s in self.sessions)

    @property
    def summary(self) -> str:
        """One line for the CLI and the page: what this import stored and what it left out."""
        return summary_line(
            len(self.sessions),
            self.messages,
            len(self.empties),
            len(self.skipped) + len(self.duplicates),
            len(self.errors),
        )

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "format": self.format,
            "summary": self.summary,
            "empty_sessions": len(self.empties),
            "imported": [
                {
                    "id": s.public_id,
                    "source_id": (s.extra or {}).get("source_id", ""),
                    "title": s.title,
                    "messages": getattr(s, "message_total", None),
                    "parent": s.parent.public_id if s.parent is not None else None,
                    "fidelity": getattr(s, "fidelity", None),
                }
                for s in self.sessions
            ],
            "skipped": [str(p) for p in self.skipped],
            "duplicates": [p.to_dict() for p in self.duplicates],
            "errors": [e.to_dict() for e in self.errors],
            "warnings": self.warnings,
        }


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def summary_line(sessions: int, messages: int, empties: int, again: int, failed: int) -> str:
    """``2 sessions, 57 messages; 1 empty session left out; 1 already there; 0 failed``."""
    parts = [f"{_count(sessions, 'session')}, {_count(messages, 'message')}"]
    if empties:
        parts.append(f"{_count(empties, 'empty session')} left out")
    if again:
        parts.append(f"{again:,} already there")
    if failed:
        parts.append(f"{failed:,} failed")
    return "; ".join(parts)


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
        **{"pi": pi.parse, "copilot-cli": copilot_cli.parse, "swe-agent": swe_agent.parse},
        **{"cursor": cursor.parse},
    }[fmt]
    with open(path, "rb") as stream:
        try:
            yield from parser(stream, file)
        except ImportProblem as problem:  # whole-file formats: one problem fails the file
            yield problem


_DONE = object()
# Formats whose parser yields sessions with ``stream`` set (Claude Code and Codex replay a
# spool file written by a first pass).
_STREAMED = ("openai", "claude-code", "codex")


def _streamed(fmt: str, path: Path) -> bool:
    """The parser yields sessions with ``stream`` set: an OpenAI, Claude Code or Codex file,
    a Hermes transcript."""
    return fmt in _STREAMED or (fmt == "hermes-jsonl" and hermes.is_transcript(path))


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
    duplicate_hint: str = "use --skip-existing to skip it",
) -> ImportReport:
    """Import every session in a file; problems are collected per session, never raised.

    A session this user imported before is a duplicate (``report.duplicates``, a failure,
    its problem ending with ``duplicate_hint``: how the caller's surface skips them)
    unless ``skip_existing``, which reports it as skipped. A session with no messages is
    not stored (``report.empties``). The file is only ever read."""
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
        links = Links(owner)
        # A streamed session reads the file while it is stored, so it is parsed here: the
        # parsing thread would move on (and close the file) before the store is done.
        items = (
            _parse(report.format, path, file)
            if _streamed(report.format, path)
            else _pipelined(report.format, path, file)
        )
        for item in items:
            if isinstance(item, ImportProblem):
                report.errors.append(item)
                continue
            try:
                report.sessions.append(store_session(item, owner, file, links))
            except EmptySession as empty:
                report.empties.append(empty)
            except AlreadyImported as again:
                again.problem = (
                    "already imported (skipped)"
                    if skip_existing
                    else f"already imported: a duplicate ({duplicate_hint})"
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


def import_upload(
    upload,
    *,
    owner,
    fmt: str = "auto",
    skip_existing: bool = False,
    duplicate_hint: str = "send skip_existing to skip it",
) -> ImportReport:
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
            duplicate_hint=duplicate_hint,
        )
    with tempfile.NamedTemporaryFile(suffix=Path(name).suffix) as copy:
        _copy(upload, copy)
        copy.flush()
        return import_path(
            copy.name,
            owner=owner,
            fmt=fmt,
            name=name,
            skip_existing=skip_existing,
            duplicate_hint=duplicate_hint,
        )


def _copy(upload, target: IO[bytes]) -> None:
    upload.seek(0)
    if hasattr(upload, "chunks"):
        for chunk in upload.chunks():
            target.write(chunk)
    else:
        shutil.copyfileobj(upload, target)
