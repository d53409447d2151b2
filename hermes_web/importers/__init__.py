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

from hermes_web.importers import claude_code, codex, hermes, openai
from hermes_web.importers.base import ImportProblem, ParsedSession, max_bytes, pair_tool_results
from hermes_web.importers.checks import check_session, count_tokens, fidelity
from hermes_web.importers.detect import detect_format
from hermes_web.importers.links import Links, namespaced
from hermes_web.importers.sizes import ProblemList
from hermes_web.importers.store import AlreadyImported, store_session
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
    "store_session",
]

FORMATS = ("hermes-jsonl", "hermes-db", "openai", "claude-code", "codex")
logger = logging.getLogger(__name__)


@dataclass
class ImportReport:
    file: str
    format: str = ""
    sessions: list[Session] = field(default_factory=list)
    # Each keeps its first 100 problems and counts the rest (sizes.ProblemList).
    skipped: ProblemList = field(default_factory=ProblemList)  # already there, --skip-existing
    duplicates: ProblemList = field(default_factory=ProblemList)  # already there: a failure
    errors: ProblemList = field(default_factory=ProblemList)
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
                    "parent": s.parent.public_id if s.parent is not None else None,
                    "fidelity": getattr(s, "fidelity", None),
                }
                for s in self.sessions
            ],
            "skipped": [str(p) for p in self.skipped],
            "duplicates": [p.to_dict() for p in self.duplicates],
            "errors": [e.to_dict() for e in self.errors],
            # How many more of each there were than listed above.
            "left_off": {
                "skipped": self.skipped.left_off,
                "duplicates": self.duplicates.left_off,
                "errors": self.errors.left_off,
            },
            "warnings": self.warnings,
        }


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
        # Problems travel in batches: one queue hand-off per broken line cost 0.1 ms of
        # thread switching, 22 s for a file of 200,000 broken lines.
        problems: list[ImportProblem] = []
        try:
            for item in _parse(fmt, path, file):
                if stop.is_set():
                    return
                if isinstance(item, ImportProblem):
                    problems.append(item)
                    if len(problems) >= 1000:
                        items.put(problems)
                        problems = []
                    continue
                if problems:
                    items.put(problems)
                    problems = []
                if isinstance(item, ParsedSession):
                    try:  # before counting tokens: a giant message costs seconds of tokenizing
                        pair_tool_results(item)
                        check_session(item, file)
                    except ImportProblem as problem:
                        item = problem
                    else:
                        item.token_counts = count_tokens(item.messages, item.model)
                items.put(item)
            if problems:
                items.put(problems)
        except BaseException as error:  # handed to the consumer, which re-raises it
            if problems:
                items.put(problems)
            items.put(error)
        finally:
            items.put(_DONE)

    worker = threading.Thread(target=produce, name="import-parser", daemon=True)
    worker.start()
    try:
        while (item := items.get()) is not _DONE:
            if isinstance(item, BaseException) and not isinstance(item, ImportProblem):
                raise item
            if isinstance(item, list):
                yield from item
            else:
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
