"""Following an agent's files while it writes them: new files are imported, a file that grew
appends its new rows to the session it became, a file rewritten otherwise becomes a new
version of that session. Agent-agnostic: the file is imported again with ``import_path``
(the one pipeline every import goes through), and what it now holds is grafted onto the
rows stored before when those are still the start of it.

    outcome = follow_file(path, owner=user)   # None when the file did not change

Why a whole re-parse and not a parse of the new bytes: an agent's records are not
independent lines (Claude Code splits one reply over several records, a tool result pairs
with a call written earlier, a compaction archives rows before it), so only the importer
reading the whole file knows what the rows are. The cost is bounded by the debounce of the
callers and by the size check: an unchanged file is never opened.

The rows stored before must be a prefix of the new parse, except their unsettled end (the
last row, which may still gain split records, and stub results the importer wrote for calls
whose result was not written yet): any other difference, or a file that shrank or was
replaced, is stored as a new version (``<id>-v2`` …), never merged. The source file is only
ever read.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from hermes_web.importers import ImportReport, import_path
from hermes_web.importers.base import damage_lines
from hermes_web.importers.directory import read_with_another
from hermes_web.importers.links import namespaced
from hermes_web.models import Compaction, FollowedFile, FollowedFolder, Message, Session

__all__ = [
    "AGENT_HOMES",
    "FolderRefused",
    "FollowOutcome",
    "add_folder",
    "agent_homes",
    "follow_file",
    "followed_candidates",
    "followed_session_ids",
    "scan_followed_folders",
    "scan_folder",
    "wants",
]

# Where the agents the importers know keep their sessions, under the home folder.
AGENT_HOMES = (
    ".claude/projects",
    ".codex/sessions",
    ".gemini/tmp",
    ".qwen/projects",
    ".kimi/sessions",
    ".pi/agent/sessions",
    ".copilot/session-state",
    ".hermes/sessions",
    ".local/share/opencode",
    ".local/share/goose/sessions",
    ".crush",
)

# Files the follower imports: agents write JSONL (most), a JSON document rewritten whole, or
# a SQLite database (opencode, Crush, Goose, Hermes) whose writes land in its -wal first.
SUFFIXES = (".jsonl", ".json")
DATABASES = (".db", ".sqlite", ".sqlite3")
_SIDECARS = ("-wal", "-shm", "-journal")
# Folders an agent keeps beside its sessions that are not sessions (Claude Code's spilled
# tool outputs, editors' caches): never imported on their own.
SKIPPED_DIRS = frozenset({"tool-results", "node_modules", ".git", "__pycache__"})
_HASH_CHUNK = 1 << 20
logger = logging.getLogger(__name__)
_AWAY = "~following"  # the stored session's id while its file is imported again


@dataclass
class FollowOutcome:
    """What following one file did: sessions created, appended to, or versioned."""

    path: str
    created: list[str] = field(default_factory=list)  # public ids
    appended: dict[str, int] = field(default_factory=dict)  # public id -> rows added
    versions: list[str] = field(default_factory=list)  # public ids of new versions
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One line for the command's output and the page's "last import"."""
        parts = [f"new session {pid}" for pid in self.created]
        parts += [f"{pid} +{n} rows" for pid, n in self.appended.items()]
        parts += [f"new version {pid}" for pid in self.versions]
        parts += self.warnings
        parts += [f"not imported: {p}" for p in self.problems]
        return "; ".join(parts) or "nothing new"


def agent_homes(home: Path | None = None) -> list[Path]:
    """The agent homes (``AGENT_HOMES``) that exist under ``home`` (the user's by default)."""
    home = home or Path.home()
    return [home / where for where in AGENT_HOMES if (home / where).is_dir()]


def followed_path(path: Path) -> Path | None:
    """The file the follower imports when ``path`` changed (a database for its -wal), or
    None: not a session file, or one read with another (``directory``'s rules: opencode's
    message and part files, Kimi's wire log, Copilot's and OpenHands' side files)."""
    for sidecar in _SIDECARS:
        if path.name.endswith(sidecar):
            path = path.with_name(path.name[: -len(sidecar)])
    if path.suffix not in SUFFIXES + DATABASES:
        return None
    if any(part in SKIPPED_DIRS for part in path.parts):
        return None
    try:
        if read_with_another(path):
            return None
    except OSError:
        return None
    return path


def wants(path: Path) -> bool:
    """A change to ``path`` concerns a file the follower imports (``followed_path``)."""
    return followed_path(path) is not None


def _signature(path: Path, info: os.stat_result) -> tuple[int, int, int]:
    """What says a file changed: its size, mtime and inode; a database's counts its -wal,
    where SQLite writes first."""
    size, mtime = info.st_size, info.st_mtime_ns
    if path.suffix in DATABASES:
        with contextlib.suppress(OSError):
            wal = os.stat(f"{path}-wal")
            size, mtime = size + wal.st_size, max(mtime, wal.st_mtime_ns)
    return size, mtime, info.st_ino


def followed_candidates(root: Path) -> Iterator[tuple[Path, tuple[int, int, int]]]:
    """Every file under ``root`` the follower imports, with its signature (``_signature``;
    symbolic links and special files are passed over, never opened)."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir():
                    if entry.name not in SKIPPED_DIRS:
                        stack.append(Path(entry.path))
                elif entry.is_file() and entry.name.endswith(SUFFIXES + DATABASES):
                    path = Path(entry.path)
                    if followed_path(path) == path:
                        yield path, _signature(path, entry.stat())
            except OSError:  # gone between the listing and the look
                continue


def scan_folder(folder: FollowedFolder) -> list[FollowOutcome]:
    """One pass over a followed folder: every changed file imported (by size and mtime,
    from one query of what is known: cheap when nothing changed)."""
    known = {
        path: (size, mtime, inode)
        for path, size, mtime, inode in FollowedFile.objects.filter(owner=folder.owner).values_list(
            "path", "size", "mtime_ns", "inode"
        )
    }
    outcomes = []
    for path, signature in followed_candidates(Path(folder.path)):
        if known.get(str(path)) == signature:
            continue
        try:
            outcome = follow_file(path, owner=folder.owner, folder=folder)
        except Exception:  # one file's bug never stops the scan of the others
            logger.exception("following %s failed", path)
            continue
        if outcome is not None:
            outcomes.append(outcome)
    FollowedFolder.objects.filter(pk=folder.pk).update(last_scan=timezone.now())
    return outcomes


def _prefix_hash(path: Path, size: int) -> str:
    """sha256 of the first ``size`` bytes of the file."""
    digest = hashlib.sha256()
    left = size
    with open(path, "rb") as stream:
        while left > 0:
            chunk = stream.read(min(_HASH_CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest.hexdigest()


def follow_file(path: str | Path, *, owner, folder: FollowedFolder | None = None):
    """Import what changed in ``path`` for ``owner`` (see the module doc); None when the
    file is as it was last imported (or not a regular file)."""
    path = Path(path).absolute()
    try:
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return None
    signature = _signature(path, info)
    followed = FollowedFile.objects.filter(owner=owner, path=str(path)).first()
    if followed is not None and (followed.size, followed.mtime_ns, followed.inode) == signature:
        return None
    if followed is None:
        followed = FollowedFile(owner=owner, path=str(path), folder=folder)
    database = path.suffix in DATABASES
    try:  # a database's bytes are not a prefix of anything: its rows are compared
        full_hash = "" if database else _prefix_hash(path, info.st_size)
    except OSError as error:
        outcome = FollowOutcome(str(path), problems=[f"cannot read: {error.strerror or error}"])
        return _remember(followed, signature, "", outcome)
    # A file that shrank is never appended to. One that grew, or was rewritten whole (Gemini
    # CLI's chat JSON is, by a rename: a new inode), or a database, is appended to when its
    # stored rows are still the start of what it holds: the row check in ``_graft`` decides.
    may_append = followed.pk is None or database or signature[0] >= followed.size
    olds = list(Session.objects.filter(owner=owner, pk__in=followed.sessions or []))
    outcome, sessions, fmt = _import_again(path, owner, olds, may_append=may_append)
    if outcome.problems and not sessions and not outcome.created and not outcome.appended:
        # Remembered as read: retried when the file changes again, not on every scan.
        return _remember(followed, signature, full_hash, outcome)
    followed.format = fmt or followed.format
    followed.sessions = sessions
    return _remember(followed, signature, full_hash, outcome)


def _remember(
    followed: FollowedFile, signature: tuple[int, int, int], digest: str, outcome: FollowOutcome
) -> FollowOutcome:
    followed.size, followed.mtime_ns, followed.inode = signature
    followed.prefix_hash = digest or followed.prefix_hash
    followed.last_import = timezone.now()
    followed.last_status = outcome.line()[:2000]
    try:
        with transaction.atomic():
            followed.save()
    except IntegrityError:  # another follower (the beat, a terminal) stored it meanwhile
        fields = ("size", "mtime_ns", "inode", "prefix_hash", "last_import", "last_status")
        FollowedFile.objects.filter(owner=followed.owner, path=followed.path).update(
            **{name: getattr(followed, name) for name in fields}
        )
    return outcome


class _Undo(Exception):
    """Raised inside the import's transaction to leave the stored sessions as they were."""

    def __init__(self, report: ImportReport) -> None:
        self.report = report


def _import_again(
    path: Path, owner, olds: list[Session], *, may_append: bool
) -> tuple[FollowOutcome, list[int], str]:
    """Import ``path`` again in one transaction and graft each session it holds onto the
    stored one of the same id (``olds``: the latest version of each). A session of the same
    id stored otherwise is looked up from the import's duplicates and the import run once
    more: imported by hand (``import_sessions``) before the file was followed, it is
    adopted and appended to like the file's own; an earlier version stays as it is."""
    outcome = FollowOutcome(str(path))
    try:
        report, kept = _import_and_graft(path, owner, olds, [], outcome, may_append)
    except _Undo as undo:
        report = undo.report
        ids = [p.session for p in report.duplicates if getattr(p, "session", "")]
        found = list(
            Session.objects.filter(
                Q(public_id__in=[namespaced(pid, owner) for pid in ids]), owner=owner
            ).exclude(pk__in=[o.pk for o in olds])
        )
        if not found:
            outcome.problems += [str(p) for p in report.refused]
            return outcome, [o.pk for o in olds], report.format
        adopted, earlier = (found, []) if not olds else ([], found)
        outcome = FollowOutcome(str(path))
        try:
            report, kept = _import_and_graft(
                path, owner, olds + adopted, earlier, outcome, may_append
            )
        except _Undo as again:
            outcome.problems += [str(p) for p in again.report.refused]
            return outcome, [o.pk for o in olds], again.report.format
    outcome.warnings += report.warnings
    outcome.problems += [str(p) for p in report.errors]
    return outcome, kept, report.format


def _canonical(session: Session, public_id: str) -> str:
    """The id the file gives the session: a version's is the one it is a version of."""
    follow = (session.extra or {}).get("follow")
    return follow.get("version_of", public_id) if isinstance(follow, dict) else public_id


def _import_and_graft(
    path: Path,
    owner,
    olds: list[Session],
    earlier: list[Session],
    outcome: FollowOutcome,
    may_append: bool,
) -> tuple[ImportReport, list[int]]:
    """One attempt of ``_import_again`` (``earlier``: older versions holding a file's id,
    moved aside for the import and never appended to); raises ``_Undo`` to roll back."""
    with transaction.atomic():
        # Read afresh: a rolled-back attempt leaves its renames on the Python objects.
        olds = list(Session.objects.filter(pk__in=[old.pk for old in olds]))
        aside = list(Session.objects.filter(pk__in=[s.pk for s in earlier]))
        originals = {s.pk: s.public_id for s in (*olds, *aside)}
        for moved in (*olds, *aside):  # the import stores the file's sessions under their ids
            Session.objects.filter(pk=moved.pk).update(public_id=f"{moved.public_id}{_AWAY}"[:128])
        report = import_path(path, owner=owner, name=str(path))
        if report.duplicates or (report.errors and not report.sessions):
            raise _Undo(report)
        by_id = {_canonical(old, originals[old.pk]): old for old in olds}
        taken = {originals[s.pk] for s in aside}
        kept: list[int] = []
        for new in report.sessions:
            outcome.warnings += damage_lines(getattr(new, "fidelity", None))
            old = by_id.pop(new.public_id, None)
            if old is None and new.public_id not in taken:
                outcome.created.append(new.public_id)
                kept.append(new.pk)
                continue
            added = _graft(old, new) if old is not None and may_append else None
            if added is None:  # not a continuation: the new parse is a version of its own
                version = _version_id(new.public_id)
                Session.objects.filter(pk=new.pk).update(
                    public_id=version,
                    extra={**(new.extra or {}), "follow": {"version_of": new.public_id}},
                )
                outcome.versions.append(version)
                kept.append(new.pk)
            if old is not None:  # its id back, now that the new parse holds it no more
                Session.objects.filter(pk=old.pk).update(public_id=originals[old.pk])
                old.public_id = originals[old.pk]
            if added is not None:
                if added:
                    outcome.appended[old.public_id] = added  # type: ignore[union-attr]
                kept.append(old.pk)  # type: ignore[union-attr]
        for moved in (*by_id.values(), *aside):  # left as they were
            Session.objects.filter(pk=moved.pk).update(public_id=originals[moved.pk])
        for gone in by_id.values():  # e.g. read as a sub-agent from the file's first line
            outcome.warnings.append(
                f"{originals[gone.pk]} is no longer in the file: kept, no longer followed"
            )
        return report, kept


def _version_id(public_id: str) -> str:
    n = 2
    while Session.objects.filter(public_id=f"{public_id}-v{n}").exists():
        n += 1
    return f"{public_id}-v{n}"


# --- grafting a new parse onto the stored session ---------------------------------------

_ROW_FIELDS = (
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "reasoning",
    "token_count",
    "provider_prompt_tokens",
    "active",
    "archived",
    "is_summary",
    "extra",
    "created_at",
)
_IDENTITY = ("position", "role", "content", "tool_calls", "tool_call_id", "tool_name", "reasoning")
_RUN_FIELDS = (
    "source",
    "mode",
    "trigger",
    "status",
    "summarizer",
    "tokens_before",
    "tokens_after",
    "native_summary",
    "native_marker",
    "native_record",
    "summarizer_transcript",
    "report",
    "snapshot_position",
    "queued_at",
    "started_at",
    "finished_at",
)
_SESSION_FIELDS = (
    "title",
    "source",
    "model",
    "context_length",
    "ended_at",
    "end_reason",
    "previous_summary",
    "extra",
    "created_at",
    "compression_count",
)


def _identity(row: Message) -> tuple:
    return tuple(getattr(row, name) for name in _IDENTITY)


def _settled(rows: list[Message]) -> int:
    """How many of the stored rows must reappear unchanged: all before the last turn. The
    last turn is the last reply and the tool results after it (a reply the agent writes in
    several records, Claude Code's parallel calls, may still gain calls past its results),
    or the last row; and stub results the importer wrote for calls whose result was not
    written yet are never settled."""
    end = len(rows)
    for index, row in enumerate(rows):
        if (row.extra or {}).get("synthetic"):
            end = index
            break
    start = end
    while start > 0 and rows[start - 1].role == Message.Role.TOOL:
        start -= 1
    if start > 0 and rows[start - 1].role == Message.Role.ASSISTANT:
        return start - 1
    return max(min(start, end - 1), 0)


def _natives(session: Session) -> list[Compaction]:
    return list(
        Compaction.objects.filter(session=session, replay_of__isnull=True)
        .exclude(source=Compaction.Source.OURS)
        .order_by("pk")
    )


def _graft(old: Session, new: Session) -> int | None:
    """Make ``old`` hold what ``new`` holds, keeping ``old``'s rows, compactions and ids;
    the rows added, or None when ``old`` is not the start of ``new`` (nothing changed)."""
    old_rows = list(Message.objects.filter(session=old).order_by("position"))
    new_rows = list(Message.objects.filter(session=new).order_by("position"))
    settled = _settled(old_rows)
    if len(new_rows) < settled or any(
        _identity(a) != _identity(b) for a, b in zip(old_rows[:settled], new_rows, strict=False)
    ):
        return None
    old_runs, new_runs = _natives(old), _natives(new)
    # A compaction is matched by its place and agent, not its summary: the marker record
    # comes first, the summary record after it (not written yet at the last import).
    if len(new_runs) < len(old_runs) or any(
        a.source != b.source for a, b in zip(old_runs, new_runs, strict=False)
    ):
        return None
    run_pk = {b.pk: a.pk for a, b in zip(old_runs, new_runs, strict=False)}
    run_id = {b.public_id: a.public_id for a, b in zip(old_runs, new_runs, strict=False)}
    for a, b in zip(old_runs, new_runs, strict=False):
        changed = [name for name in _RUN_FIELDS if getattr(a, name) != getattr(b, name)]
        for name in changed:
            setattr(a, name, getattr(b, name))
        if changed:
            a.save(update_fields=changed)
    for b in new_runs[len(old_runs) :]:
        b.session_id = b.result_session_id = old.pk
        b.save(update_fields=["session", "result_session"])
        run_pk[b.pk] = b.pk

    def mapped(row: Message) -> None:
        if row.archived_by_id is not None:
            row.archived_by_id = run_pk.get(row.archived_by_id, row.archived_by_id)
        named = (row.extra or {}).get("native_compaction")
        if named in run_id:
            row.extra = {**row.extra, "native_compaction": run_id[named]}

    changed_rows = []
    for stored, parsed in zip(old_rows, new_rows, strict=False):
        mapped(parsed)
        if any(getattr(stored, n) != getattr(parsed, n) for n in _ROW_FIELDS) or (
            stored.archived_by_id != parsed.archived_by_id
        ):
            for name in _ROW_FIELDS:
                setattr(stored, name, getattr(parsed, name))
            stored.archived_by_id = parsed.archived_by_id
            changed_rows.append(stored)
    if changed_rows:
        Message.objects.bulk_update(changed_rows, [*_ROW_FIELDS, "archived_by"], batch_size=500)
    if len(old_rows) > len(new_rows):  # unsettled rows the new parse no longer has
        Message.objects.filter(pk__in=[r.pk for r in old_rows[len(new_rows) :]]).delete()
    added = new_rows[len(old_rows) :]
    for row in added:
        mapped(row)
        row.session_id = old.pk
    if added:
        Message.objects.bulk_update(added, ["session", "archived_by", "extra"], batch_size=500)
    follow = (old.extra or {}).get("follow")
    for name in _SESSION_FIELDS:
        setattr(old, name, getattr(new, name))
    if follow is not None:  # a version stays one
        old.extra = {**(old.extra or {}), "follow": follow}
    old.save(update_fields=list(_SESSION_FIELDS))
    Session.objects.filter(parent=new).update(parent=old)
    Session.objects.filter(root=new).exclude(pk=new.pk).update(root=old)
    Compaction.objects.filter(result_session=new).update(result_session=old)
    Session.objects.filter(pk=new.pk).delete()
    return len(added)


# --- followed folders of the settings page (the worker's beat scans them) ---------------


class FolderRefused(ValueError):
    """A folder that cannot be followed; the message says why (never a server path beyond
    the one the user typed)."""


def follow_roots() -> list[Path]:
    """Where followed folders may be (``HERMES_FOLLOW_ROOTS``): the server reads them for
    whoever adds them, so a shared server names none or a few."""
    from django.conf import settings

    return [Path(root).expanduser().resolve() for root in settings.HERMES_FOLLOW_ROOTS]


def add_folder(owner, raw: str) -> FollowedFolder:
    """Follow the folder ``raw`` for ``owner`` (its files are imported by the next scan)."""
    text = (raw or "").strip()
    if not text or "\x00" in text or len(text) > 1000:
        raise FolderRefused("Give the path of a folder.")
    folder = Path(text).expanduser()
    if not folder.is_absolute():
        raise FolderRefused("Give the folder's full path (starting with / or ~).")
    try:
        resolved = folder.resolve(strict=True)
    except (OSError, RuntimeError):
        raise FolderRefused(f"{text}: no such folder.") from None
    if not resolved.is_dir():
        raise FolderRefused(f"{text}: not a folder.")
    roots = follow_roots()
    if not any(resolved == root or root in resolved.parents for root in roots):
        raise FolderRefused(
            f"{text}: outside the folders this server may follow (HERMES_FOLLOW_ROOTS)."
            if roots
            else "Following folders is turned off on this server (HERMES_FOLLOW_ROOTS)."
        )
    found, _ = FollowedFolder.objects.get_or_create(owner=owner, path=str(resolved))
    return found


def scan_followed_folders() -> int:
    """One scan of every followed folder (the beat task); the files imported."""
    done = 0
    for folder in FollowedFolder.objects.select_related("owner"):
        if not Path(folder.path).is_dir():
            continue
        done += len(scan_folder(folder))
    return done


def followed_session_ids(owner) -> set[int]:
    """Pks of the sessions ``owner``'s followed files became (a page polls those)."""
    ids: set[int] = set()
    for sessions in FollowedFile.objects.filter(owner=owner).values_list("sessions", flat=True):
        ids.update(pk for pk in sessions or [] if isinstance(pk, int))
    return ids
