"""One import's budget: the time it may take, and what it may store relative to what it read.

Every import (a file, a Claude Code session folder, an archive with everything in it) runs
under one ``Budget``, found through a context variable so that the store and the readers
that open more files reach it without every function in between passing it on; an
archive's files and a folder's transcripts share their import's (the outermost owns it). It
is per thread: a web worker's concurrent imports never share one.

- **Time.** An upload is imported inside a web request: its budget
  (``HERMES_IMPORT_UPLOAD_SECONDS``, 90 s by default) is well below the web server's own
  timeout (gunicorn ``--timeout 120`` in the Procfile), so the importer stops first, removes
  what it stored and says so, instead of the worker being killed half-way (the probe's 500
  with 10,916 of 20,000 sessions stored). The command line has a longer one
  (``HERMES_IMPORT_CLI_SECONDS``).
- **Amplification.** The bytes of the distinct files it read, and the characters its
  sessions store (every stored field, as ``checks.Checker`` counts them), summed over all
  its sessions. Storing more than ``HERMES_IMPORT_AMPLIFICATION`` times what was read (or
  ``HERMES_IMPORT_AMPLIFICATION_FLOOR``, whichever is more) refuses the import. A 23 KB zip
  whose 30 stubs all named one 9 MiB tool-results file stored 3.09 GB before this.

Either way the session being stored rolls back, the sessions stored before it are deleted
(a few thousand rows per transaction, ``discard.discard``), and the refusal says why.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from hermes_web.importers.base import ImportProblem

_current: ContextVar[Budget | None] = ContextVar("import_budget", default=None)


class OverBudget(ImportProblem):
    """The import ran past its time or would store past its amplification limit: nothing
    of it is kept."""


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


@dataclass
class Budget:
    """One import's deadline, the bytes it read and stored, and the sessions it stored
    (their primary keys, deleted on refusal)."""

    seconds: float = field(default_factory=lambda: float(settings.HERMES_IMPORT_CLI_SECONDS))
    deadline: float = 0.0
    ratio: int = field(default_factory=lambda: settings.HERMES_IMPORT_AMPLIFICATION)
    floor: int = field(default_factory=lambda: settings.HERMES_IMPORT_AMPLIFICATION_FLOOR)
    read: int = 0
    stored: int = 0
    files: set[str] = field(default_factory=set)
    sessions: list[int] = field(default_factory=list)
    refusal: OverBudget | None = None

    def __post_init__(self) -> None:
        if not self.deadline:
            self.deadline = time.monotonic() + self.seconds

    # -- time

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    def check(self, file: str) -> None:
        """Raise ``OverBudget`` once the deadline has passed."""
        if self.refusal is None and self.expired():
            self.refusal = OverBudget(
                file,
                0,
                f"import stopped after {self.seconds:.0f} s, the limit for one import here: "
                f"{len(self.sessions):,} session(s) had been read; nothing stored "
                "(the command line, manage.py import_sessions, allows longer)",
            )
        if self.refusal is not None:
            raise self.refusal

    # -- amplification

    @property
    def limit(self) -> int:
        return max(self.ratio * self.read, self.floor)

    def note_read(self, path: str | Path, size: int | None = None) -> None:
        """``path`` was read (counted once however often it is opened)."""
        key = os.fspath(path)
        if key in self.files:
            return
        self.files.add(key)
        self.read += os.stat(key).st_size if size is None else size

    def spend(self, n: int, file: str, line: int = 0, session: str = "") -> None:
        """``n`` more characters are about to be stored; OverBudget past the limit (and on
        every call after the first refusal, so an import stops at once)."""
        self.stored += n
        if self.refusal is None and self.stored > self.limit:
            self.refusal = OverBudget(
                file,
                line,
                f"would store over {_mb(self.stored)} from {_mb(self.read)} read: over the "
                f"{self.ratio}× limit (HERMES_IMPORT_AMPLIFICATION; at least "
                f"{_mb(self.floor)} is always allowed); nothing was stored",
                session,
            )
        if self.refusal is not None:
            raise self.refusal

    # -- refusal

    def undo(self) -> None:
        """Delete every session this import stored (their messages go with them); children of
        earlier imports it had adopted get their own tree back."""
        if not self.sessions:
            return
        from hermes_web.importers.discard import discard
        from hermes_web.importers.links import Links  # links imports the models
        from hermes_web.models import Session

        owner = Session.objects.filter(pk__in=self.sessions).values_list("owner", flat=True)
        owner_id = owner.first()
        orphans = list(
            Session.objects.filter(parent_id__in=self.sessions)
            .exclude(pk__in=self.sessions)
            .values_list("pk", flat=True)
        )
        for pk in orphans:  # a top again: finish() rewrites its subtree's root and depth
            Session.objects.filter(pk=pk).touch(parent_id=None, root_id=pk, compression_count=0)
        discard(self.sessions)
        self.sessions.clear()
        if orphans and owner_id is not None:
            from django.contrib.auth import get_user_model

            links = Links(get_user_model().objects.get(pk=owner_id))
            links.dirty.update(orphans)
            links.finish()


def current() -> Budget | None:
    """The budget of the import under way in this thread, if any."""
    return _current.get()


@contextlib.contextmanager
def import_budget(seconds: float | None = None) -> Iterator[tuple[Budget, bool]]:
    """``(budget, owned)``: a new budget of ``seconds`` (the command line's by default) for
    this import, or the one of the import it is part of (a file of an archive); ``owned``
    says whether this call opened it, and so reports and undoes its refusal."""
    outer = _current.get()
    if outer is not None:
        yield outer, False
        return
    budget = Budget() if seconds is None else Budget(seconds=seconds)
    token = _current.set(budget)
    try:
        yield budget, True
    finally:
        _current.reset(token)


def spend(n: int, file: str, line: int = 0, session: str = "") -> None:
    """``Budget.spend`` on the current import's budget (nothing outside an import)."""
    budget = _current.get()
    if budget is not None:
        budget.spend(n, file, line, session)


def note_read(path: str | Path, size: int | None = None) -> None:
    """``Budget.note_read`` on the current import's budget (nothing outside an import)."""
    budget = _current.get()
    if budget is not None:
        budget.note_read(path, size)


def note_stored(pk: int) -> None:
    """The session ``pk`` was committed by the current import (undone if it is refused)."""
    budget = _current.get()
    if budget is not None:
        budget.sessions.append(pk)
