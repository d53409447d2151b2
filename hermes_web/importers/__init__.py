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
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from django.conf import settings
from django.db import OperationalError, connection

from hermes_web.importers import budget, groups
from hermes_web.importers.archive import archive_kind, unpacked
from hermes_web.importers.base import (
    DATA_ERRORS,
    ImportProblem,
    ParsedSession,
    max_bytes,
    pair_tool_results,
    reading,
    records_of,
    unreadable,
)
from hermes_web.importers.budget import Budget, OverBudget, import_budget
from hermes_web.importers.checks import check_session, count_tokens, fidelity
from hermes_web.importers.detect import detect_format
from hermes_web.importers.directory import file_kind, plan_directory
from hermes_web.importers.formats import FORMATS, READERS
from hermes_web.importers.formats.claude_code_folder import (
    SessionFolder,
    parse_folder,
    unreferenced,
)
from hermes_web.importers.links import Links, namespaced
from hermes_web.importers.sizes import ProblemList
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
    "import_directory",
    "import_folder",
    "import_path",
    "import_upload",
    "namespaced",
    "summary_line",
    "store_session",
]

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
    def archived(self) -> int:
        """Rows stored archived: what the agent's own compactions replaced."""
        return sum((getattr(s, "fidelity", None) or {}).get("archived", 0) for s in self.sessions)

    @property
    def summary(self) -> str:
        """One line for the CLI and the page: what this import stored and what it left out."""
        return summary_line(
            len(self.sessions),
            self.messages,
            len(self.empties),
            self.skipped.total + self.duplicates.total,
            self.errors.total,
            self.archived,
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
            # How many more of each there were than listed above.
            "left_off": {
                "skipped": self.skipped.left_off,
                "duplicates": self.duplicates.left_off,
                "errors": self.errors.left_off,
            },
            "warnings": self.warnings,
        }


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def summary_line(
    sessions: int, messages: int, empties: int, again: int, failed: int, archived: int = 0
) -> str:
    """``2 sessions, 57 messages; 1 empty session left out; 1 already there; 0 failed``.

    ``messages`` are the live ones; rows the agent's own compactions replaced are stored too
    (archived) and said apart, so a long chat does not look like it lost most of itself.
    """
    head = f"{_count(sessions, 'session')}, {_count(messages, 'message')}"
    if archived:
        head += f" (and {archived:,} archived by the agent's compactions)"
    parts = [head]
    if empties:
        parts.append(f"{_count(empties, 'empty session')} left out")
    if again:
        parts.append(f"{again:,} already there")
    if failed:
        parts.append(f"{failed:,} failed")
    return "; ".join(parts)


# --- parsing and storing ---------------------------------------------------------------


def _parse(fmt: str, path: Path, file: str) -> Iterator[ParsedSession | ImportProblem]:
    reader = READERS[fmt]
    try:
        with records_of(file):
            if reader.parse_path is not None:
                yield from reader.parse_path(path, file)
            elif reader.parse is not None:
                with open(path, "rb") as stream:
                    yield from reader.parse(stream, file)
    except ImportProblem as problem:  # whole-file formats: one problem fails the file
        yield problem


_DONE = object()


def _streamed(fmt: str, path: Path) -> bool:
    """The parser yields sessions with ``stream`` set (formats.READERS says which): they are
    parsed on this thread, since the parsing thread would move on (and close the file) before
    the store is done."""
    return READERS[fmt].is_streamed(path)


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
                        with records_of(file, item.line):
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
        while True:
            if items.empty():  # the parser is behind: no writer lock held while it works
                groups.release()
            if (item := items.get()) is _DONE:
                break
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
    duplicate_hint: str = "use --skip-existing to skip it",
    seconds: float | None = None,
) -> ImportReport:
    """Import every session in a file; problems are collected per session, never raised.

    A session this user imported before is a duplicate (``report.duplicates``, a failure,
    its problem ending with ``duplicate_hint``: how the caller's surface skips them)
    unless ``skip_existing``, which reports it as skipped. A session with no messages is
    not stored (``report.empties``). The file is only ever read.

    The whole import runs under one budget (budget.py) of time (``seconds``, the command
    line's by default) and of stored bytes relative to bytes read; an archive's files share
    their archive's. Past it, everything it stored is deleted and the report says why."""
    path = Path(path)
    file = name or path.name
    with import_budget(seconds) as (spent, owned):
        try:
            report = _import_path(path, file, owner, fmt, skip_existing, duplicate_hint)
        except OverBudget as problem:
            if not owned:
                raise
            spent.refusal = spent.refusal or problem
            report = ImportReport(file=file, format=fmt)
        return _within_budget(report, spent, owned)


def _within_budget(report: ImportReport, spent: Budget, owned: bool) -> ImportReport:
    """``report``, or, when this import went over its budget (and this call opened it), the
    refusal alone, with every session it stored deleted. The owner of a budget that stored
    anything checkpoints SQLite's WAL afterwards."""
    if not owned:
        return report
    wrote = bool(spent.sessions)
    if spent.refusal is not None:
        spent.undo()
        report = ImportReport(file=report.file, format=report.format)
        report.errors.append(spent.refusal)
    if wrote:
        checkpoint()
    return report


def checkpoint() -> None:
    """After an import, SQLite's WAL is written back and cut to nothing (``TRUNCATE``), so
    the import's pages do not stay in it; waits at most a second for readers (a busy
    checkpoint is left to SQLite's own, and ``journal_size_limit`` bounds the file)."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        timeout = cursor.fetchone()[0]
        try:
            cursor.execute("PRAGMA busy_timeout = 1000")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except OperationalError as error:  # busy: SQLite's automatic checkpoints go on
            logger.info("WAL checkpoint after an import skipped: %s", error)
        finally:
            cursor.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def _import_path(
    path: Path, file: str, owner, fmt: str, skip_existing: bool, duplicate_hint: str
) -> ImportReport:
    """``import_path`` inside its budget."""
    reading.line = 0  # no record read yet (the thread may have imported before)
    report = ImportReport(file=file)
    spent = budget.current()
    links = group = None
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):  # a FIFO or a device would block or never end
            raise ImportProblem(file, 0, f"{file_kind(mode)}, not a regular file: refused")
        size = path.stat().st_size
        if size > max_bytes():
            raise ImportProblem(
                file, 0, f"file is {size // 2**20} MB; the limit is {max_bytes() // 2**20} MB"
            )
        if fmt == "auto" and (kind := archive_kind(path, file)):
            return _import_archive(path, kind, owner=owner, name=file, skip_existing=skip_existing)
        report.format = detect_format(path, file) if fmt == "auto" else fmt
        if report.format not in FORMATS:
            raise ImportProblem(
                file, 0, f"unknown format {fmt!r} (expected auto, {', '.join(FORMATS)})"
            )
        budget.note_read(path, size)
        links = Links(owner)
        # A streamed session reads the file while it is stored, so it is parsed here: the
        # parsing thread would move on (and close the file) before the store is done.
        items = (
            _parse(report.format, path, file)
            if _streamed(report.format, path)
            else _pipelined(report.format, path, file)
        )
        # Small sessions share a transaction (each in its own savepoint) and a commit.
        with groups.group() as group:
            for item in items:
                if spent is not None:
                    spent.check(file)
                _store(item, report, owner, file, links, skip_existing, duplicate_hint)
                groups.pause()
            if spent is not None:  # the last sessions may have failed for want of time
                spent.check(file)
    except OverBudget:
        raise
    except ImportProblem as problem:
        report.errors.append(problem)
    except RecursionError:
        report.errors.append(ImportProblem(file, reading.line, "JSON nested too deeply to read"))
    except OSError as error:
        report.errors.append(
            ImportProblem(
                file, 0, f"cannot read the file: {error.strerror or 'input/output error'}"
            )
        )
    except DATA_ERRORS as error:  # outside a parser (detection): the record being read
        logger.info("import of %s failed", file, exc_info=True)
        report.errors.append(unreadable(error, file))
    except Exception:  # a bug on data nobody foresaw: a 4xx, never a 500 nor Python's words
        logger.exception("import of %s failed", file)
        report.errors.append(
            ImportProblem(file, reading.line, "cannot import this file (the error was logged)")
        )
    if group is not None and group.lost:
        _not_committed(report, group.lost, file)
    if links is not None:
        links.finish()
    _refresh_links(report)
    return report


def _not_committed(report: ImportReport, lost: list[int], file: str) -> None:
    """Sessions whose group failed to commit (the database refused it): reported as errors,
    not as stored."""
    gone = set(lost)
    for session in report.sessions:
        if session.pk in gone:
            report.errors.append(
                ImportProblem(
                    file,
                    0,
                    "could not store: the database refused the commit",
                    session.extra.get("source_id", ""),
                )
            )
    report.sessions = [s for s in report.sessions if s.pk not in gone]


def _store(
    item: ParsedSession | ImportProblem,
    report: ImportReport,
    owner,
    file: str,
    links: Links,
    skip_existing: bool,
    duplicate_hint: str = "use --skip-existing to skip it",
) -> None:
    """Store one parsed session into ``report``: imported, empty (left out), skipped, a
    duplicate or an error."""
    if isinstance(item, ImportProblem):
        report.errors.append(item)
        return
    try:
        with records_of(file, item.line):
            report.sessions.append(store_session(item, owner, file, links))
    except OverBudget:
        raise  # the whole import is refused: its caller stops reading
    except EmptySession as empty:
        report.empties.append(empty)
    except AlreadyImported as again:
        skip = skip_existing or item.skip_if_imported
        again.problem = (
            "already imported (skipped)"
            if skip_existing
            else "already imported from a fuller file (skipped: this one holds only part of it)"
            if skip
            else f"already imported: a duplicate ({duplicate_hint})"
        )
        (report.skipped if skip else report.duplicates).append(again)
    except ImportProblem as problem:
        report.errors.append(problem)


def _refresh_links(report: ImportReport) -> None:
    """Parent and root as stored: links made after a session was stored (its parent came
    later in the import) are only in the database."""
    for start in range(0, len(report.sessions), 500):  # one query per 500, not per session
        batch = report.sessions[start : start + 500]
        fresh = {
            pk: (parent, root)
            for pk, parent, root in Session.objects.filter(
                pk__in=[s.pk for s in batch]
            ).values_list("pk", "parent_id", "root_id")
        }
        for session in batch:
            if session.pk in fresh:
                session.parent_id, session.root_id = fresh[session.pk]


def import_folder(
    folder: SessionFolder,
    *,
    owner,
    skip_existing: bool = False,
    name: Callable[[Path], str] = str,
) -> ImportReport:
    """A Claude Code session folder as the tool lays it out (see claude_code_folder): its
    sessions, sub-agents linked as children, tool-results files joined to their stubs; all
    of them under one amplification budget (a file many stubs name counts once read)."""
    with import_budget() as (spent, owned):
        report = _import_folder(folder, owner=owner, skip_existing=skip_existing, name=name)
        return _within_budget(report, spent, owned)


def _import_folder(
    folder: SessionFolder, *, owner, skip_existing: bool, name: Callable[[Path], str]
) -> ImportReport:
    report = ImportReport(file=name(folder.main or folder.folder), format="claude-code-folder")
    links = Links(owner)
    try:
        for file, item in parse_folder(folder, name):
            _store(item, report, owner, file, links, skip_existing)
    except ImportProblem as problem:  # over the budget: the folder is refused whole
        report.errors.append(problem)
    except OSError as error:
        report.errors.append(
            ImportProblem(report.file, 0, f"cannot read the folder: {error.strerror or error}")
        )
    finally:
        links.finish()
    if left := unreferenced(folder):
        report.warnings.append(
            f"{len(left)} file(s) in tool-results/ named by no stub: {', '.join(left[:10])}"
        )
    _refresh_links(report)
    return report


def import_directory(
    root: Path, *, owner, fmt: str = "auto", skip_existing: bool = False, name=str
) -> tuple[list[ImportReport], list[tuple[Path, str]]]:
    """Every file and Claude Code session folder under ``root`` (symbolic links and special
    files skipped, never opened): a report each, and what was skipped and why."""
    plan = plan_directory(root)
    reports = []
    for path in plan.files:
        if (spent := budget.current()) is not None and spent.refusal is not None:
            break  # an archive over its budget: the rest is not read
        reports.append(
            import_path(path, owner=owner, fmt=fmt, name=name(path), skip_existing=skip_existing)
        )
    for folder in plan.folders:
        if (spent := budget.current()) is not None and spent.refusal is not None:
            break
        if fmt in ("auto", "claude-code"):
            reports.append(
                import_folder(folder, owner=owner, skip_existing=skip_existing, name=name)
            )
        else:
            plan.skipped.append((folder.folder, f"a Claude Code session folder, not {fmt}"))
    return reports, plan.skipped


def _import_archive(
    path: Path, kind: str, *, owner, name: str, skip_existing: bool
) -> ImportReport:
    """A .zip or .tar.gz of files or session folders (see archive): unpacked privately, then
    imported as a directory would be, in one report, under one budget (the bytes read are
    the unpacked files')."""
    with import_budget() as (spent, owned):
        report = _unpack_and_import(path, kind, owner=owner, name=name, skip_existing=skip_existing)
        return _within_budget(report, spent, owned)


def _unpack_and_import(
    path: Path, kind: str, *, owner, name: str, skip_existing: bool
) -> ImportReport:
    report = ImportReport(file=name, format=f"{kind} archive")
    try:
        with unpacked(path, kind, name) as root:

            def label(inner: Path) -> str:
                return f"{name}/{inner.relative_to(root).as_posix()}"

            reports, skipped = import_directory(
                root, owner=owner, skip_existing=skip_existing, name=label
            )
            report.warnings += [f"{label(where)}: skipped: {why}" for where, why in skipped]
    except OverBudget:
        raise
    except ImportProblem as problem:
        report.errors.append(problem)
        return report
    except OSError as error:
        report.errors.append(
            ImportProblem(name, 0, f"cannot unpack the archive: {error.strerror or error}")
        )
        return report
    for part in reports:
        report.sessions += part.sessions
        report.skipped += part.skipped
        report.duplicates += part.duplicates
        report.empties += part.empties
        report.errors += part.errors
        report.warnings += [f"{part.file}: {warning}" for warning in part.warnings]
    if not reports:
        report.errors.append(ImportProblem(name, 0, "the archive holds no file to import"))
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
            seconds=settings.HERMES_IMPORT_UPLOAD_SECONDS,
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
            seconds=settings.HERMES_IMPORT_UPLOAD_SECONDS,
        )


def _copy(upload, target: IO[bytes]) -> None:
    upload.seek(0)
    if hasattr(upload, "chunks"):
        for chunk in upload.chunks():
            target.write(chunk)
    else:
        shutil.copyfileobj(upload, target)
