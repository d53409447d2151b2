"""Small sessions of one import stored a group per transaction.

An import of many small sessions paid a commit and a search-index task for each one: on the
embedded default a task is itself a commit in the broker's SQLite database, so a 20,000
session ``state.db`` took 198 s, ~10 ms of it per session in commits alone. While an import
runs, ``group()`` keeps one ``Group`` open: the sessions stored meanwhile share one
transaction, each inside its own savepoint (``Group.transaction``), so a session that fails
rolls back alone and is never half-stored, while the ones before it stay whole. The group
commits once it holds ``HERMES_IMPORT_GROUP_SESSIONS`` sessions or has held SQLite's writer
lock for ``HERMES_IMPORT_GROUP_MS`` milliseconds, whichever comes first, so other writers
(chat, ``/v1``, another import) wait a fraction of a second for an import, never for the
whole of it. After a group it commits because it is due, the import leaves the lock free for
a tenth of the time it held it (``GAP``): a writer waiting in SQLite's busy handler retries
only every 100 ms or so, and a lock taken again at once would starve it (measured: 1,500
sessions imported in 250 ms groups with no gap, another writer got in only before or after). A search-index task is queued with a group's commit, at most every
``INDEX_SECONDS`` and with the import's last group: the task indexes every row written since
the last one ran, whichever session queued it, and on the embedded default queueing one is
itself a commit in the broker's SQLite database (~40 ms).

The lock is not held while an import reads: a streamed session checks ``pause`` while its
first batch is read and a reader doing long work (a state.db session spilling to disk) calls
it too; the pipeline commits before it waits for its parsing thread (``release``). A session
too long for one transaction (``store._store_streamed``'s batches) commits the group before
its second batch (``release``): what it committed is then really committed, and its undo
deletes it.

Outside an import (no group open), every call here does what a lone session did before:
its own transaction, its own index task.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.transaction import Atomic

from hermes_web.jobs import queue_search_index

_current: ContextVar[Group | None] = ContextVar("import_group", default=None)
# An import queues a search-index task at most this often (and once more at its end).
INDEX_SECONDS = 5.0
# The lock left free after a due group, as a share of the time the group held it, at most
# ``GAP_SECONDS`` (see the module doc).
GAP = 0.1
GAP_SECONDS = 0.05


class Group:
    """The open transaction of one import's sessions, and the sessions stored in it."""

    def __init__(self, sessions: int | None = None, seconds: float | None = None) -> None:
        self.limit = sessions or settings.HERMES_IMPORT_GROUP_SESSIONS
        self.seconds = (seconds or settings.HERMES_IMPORT_GROUP_MS) / 1000
        self.atomic: Atomic | None = None
        self.began = 0.0
        self.members: list[int] = []  # primary keys of the sessions stored in the open group
        self.lost: list[int] = []  # members of a group whose commit failed
        self.commits = 0
        self.unindexed: int | None = None  # a session stored since the last index task
        self.indexed_at = time.monotonic()
        self.depth = 0  # atomic blocks open once the group's own is (tests run inside one)

    def transaction(self) -> Atomic:
        """The transaction of a session's first write: a savepoint in the group's own, which
        is opened now if none is (``transaction_mode`` IMMEDIATE takes the writer lock at
        that moment, so the lock is held from a group's first write, not while it reads)."""
        if self.atomic is None:
            self.atomic = transaction.atomic()
            self.atomic.__enter__()
            self.began = time.monotonic()
            self.depth = len(connection.atomic_blocks)
        return transaction.atomic()

    def stored(self, pk: int) -> None:
        """Session ``pk`` is stored: in the open group (indexed when it commits), or on its
        own (indexed now)."""
        if self.atomic is None:
            queue_search_index(pk)
        else:
            self.members.append(pk)

    def due(self) -> bool:
        """The open group holds its limit of sessions, or has held the lock long enough."""
        return self.atomic is not None and (
            len(self.members) >= self.limit or time.monotonic() - self.began >= self.seconds
        )

    def commit(self, last: bool = False) -> None:
        """Commit the open group (if any), with a search-index task when one is due (or this
        is the ``last`` commit of the import). A commit that fails (the disk full, a
        savepoint that could not roll back) leaves its sessions in ``lost``: the import
        reports them as not stored."""
        if self.atomic is None:
            if last:
                self._index(last)  # not in a transaction: queued now
            return
        atomic, members = self.atomic, self.members
        self.atomic, self.members = None, []
        if members:
            self.unindexed = members[-1]
        self._index(last)  # in the group's transaction: sent once it commits
        broken = connection.needs_rollback  # Atomic.__exit__ then rolls back, silently
        try:
            atomic.__exit__(None, None, None)
        except DatabaseError:
            broken = True
        if broken:
            self.lost.extend(members)
        else:
            self.commits += 1

    def _index(self, last: bool) -> None:
        if self.unindexed is None:
            return
        if last or time.monotonic() - self.indexed_at >= INDEX_SECONDS:
            queue_search_index(self.unindexed)
            self.unindexed, self.indexed_at = None, time.monotonic()

    def rollback(self) -> None:
        """Roll the open group back (the import is refused whole: its budget's undo deletes
        what earlier groups committed)."""
        if self.atomic is None:
            return
        atomic = self.atomic
        self.atomic, self.members = None, []
        transaction.set_rollback(True)
        atomic.__exit__(None, None, None)


def current() -> Group | None:
    """The open import's group (None outside an import)."""
    return _current.get()


@contextlib.contextmanager
def group(sessions: int | None = None, seconds: float | None = None) -> Iterator[Group]:
    """Group the sessions stored inside this block (see the module doc). On leaving it the
    open group commits: every session in it is whole. A ``budget.OverBudget`` refusal (or an
    interrupt) rolls it back instead; nested imports (an archive's files) share the outer
    group."""
    from hermes_web.importers.budget import OverBudget  # budget imports nothing of ours

    if (outer := _current.get()) is not None:
        yield outer
        return
    opened = Group(sessions, seconds)
    token = _current.set(opened)
    try:
        yield opened
    except (OverBudget, KeyboardInterrupt, SystemExit):
        opened.rollback()
        raise
    except BaseException:
        opened.commit(last=True)
        raise
    else:
        opened.commit(last=True)
    finally:
        _current.reset(token)


def session_transaction() -> Atomic:
    """The transaction of a session's first write: in the open group, or its own."""
    opened = _current.get()
    return opened.transaction() if opened is not None else transaction.atomic()


def stored(pk: int) -> None:
    """Session ``pk`` is stored (see ``Group.stored``); outside a group, indexed now."""
    opened = _current.get()
    if opened is not None:
        opened.stored(pk)
    else:
        queue_search_index(pk)


def pause() -> None:
    """Between two writes: commit the open group if it is due (a reader calls this during
    long work, so the lock is not held while it reads)."""
    opened = _current.get()
    if opened is not None and opened.due() and _at_group_level(opened):
        held = time.monotonic() - opened.began
        opened.commit()
        time.sleep(min(held * GAP, GAP_SECONDS))  # a waiting writer's turn


def release() -> None:
    """Commit the open group now: before a wait of unknown length (the parsing thread), or
    before a session's second batch (its first must then be committed for real)."""
    opened = _current.get()
    if opened is not None and _at_group_level(opened):
        opened.commit()


def _at_group_level(opened: Group) -> bool:
    """No savepoint of a session is open inside the group (committing then would end the
    session's transaction under it)."""
    return opened.atomic is not None and len(connection.atomic_blocks) == opened.depth
