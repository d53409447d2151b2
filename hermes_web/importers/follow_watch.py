"""Watching followed folders with watchdog (inotify where the kernel has it, a polling
observer otherwise or when asked): file events are collected by the observer's thread and
imported by the caller's (which owns the database connection), once a file has been quiet
for ``debounce`` seconds, or at the latest ``max_wait`` seconds after its first event, so a
burst of writes is one import. ``manage.py follow`` runs it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

from hermes_web.importers.follow import FollowOutcome, follow_file, followed_candidates, wants

__all__ = ["Follower"]

logger = logging.getLogger(__name__)


def _warm() -> None:
    """Load the token encodings now: the first import of a change would wait for them
    (about half a second), which is the latency a follower is there to avoid."""
    from compaction.tokens import get_encoding

    for name in ("o200k_base", "cl100k_base"):
        get_encoding(name)


class _Events(FileSystemEventHandler):
    """Notes the paths that changed (observer thread) and wakes the follower."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("deleted", "opened", "closed_no_write"):
            return
        target = getattr(event, "dest_path", "") or event.src_path
        path = Path(target if isinstance(target, str) else target.decode())
        if wants(path):
            self.follower.note(path)


class Follower:
    """Follows ``roots`` for ``owner``: ``start()`` imports what is there and starts the
    observer, ``step()`` imports the files whose writes have settled, ``run()`` loops."""

    def __init__(
        self,
        roots: Iterable[Path],
        owner,
        *,
        poll: bool = False,
        poll_seconds: float = 1.0,
        debounce: float = 0.3,
        max_wait: float = 2.0,
        report: Callable[[FollowOutcome], None] | None = None,
    ) -> None:
        self.roots = [Path(root).absolute() for root in roots]
        self.owner = owner
        self.poll, self.poll_seconds = poll, poll_seconds
        self.debounce, self.max_wait = debounce, max_wait
        self.report = report or (lambda outcome: None)
        self.pending: dict[Path, tuple[float, float]] = {}  # path -> (first, last event)
        self.not_before: dict[Path, float] = {}  # path -> no import before (monotonic)
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.observer: BaseObserver | None = None
        self.polling = poll

    def note(self, path: Path) -> None:
        """A write to ``path`` was seen (any thread)."""
        now = time.monotonic()
        with self.lock:
            first, _ = self.pending.get(path, (now, now))
            self.pending[path] = (first, now)
        self.wake.set()

    def start(self) -> None:
        """Import every followed file as it is now, then watch for changes."""
        _warm()
        try:
            self.observer = self._watching(self.poll)
        except OSError as error:  # no inotify, or out of watches: poll instead
            logger.warning(
                "file events unavailable (%s): polling every %ss", error, self.poll_seconds
            )
            self.observer = self._watching(True)
            self.polling = True
        for root in self.roots:
            for path, _ in followed_candidates(root):
                self._follow(path)

    def _watching(self, poll: bool) -> BaseObserver:
        """An observer of every root, started."""
        observer: BaseObserver = PollingObserver(timeout=self.poll_seconds) if poll else Observer()
        handler = _Events(self)
        for root in self.roots:
            observer.schedule(handler, str(root), recursive=True)
        observer.start()
        return observer

    def _follow(self, path: Path) -> None:
        started = time.monotonic()
        try:
            outcome = follow_file(path, owner=self.owner)
        except Exception:  # one file's bug never stops the follower
            logger.exception("following %s failed", path)
            return
        finally:
            # A file is imported whole again at each change: one whose import takes long
            # (megabytes) waits twice that before the next, so an agent writing without pause
            # costs the follower at most a third of a core.
            ended = time.monotonic()
            self.not_before[path] = ended + 2 * (ended - started)
        if outcome is not None:
            self.report(outcome)

    def step(self, now: float | None = None) -> float | None:
        """Import the files whose writes settled; the seconds until the next one may have
        (None: nothing is pending)."""
        now = time.monotonic() if now is None else now
        due: list[Path] = []
        waits: list[float] = []
        with self.lock:
            for path, (first, last) in list(self.pending.items()):
                ready_at = max(
                    min(last + self.debounce, first + self.max_wait),
                    self.not_before.get(path, 0.0),
                )
                if ready_at <= now:
                    due.append(path)
                    del self.pending[path]
                else:
                    waits.append(ready_at - now)
        for path in due:
            self._follow(path)
        return min(waits, default=None)

    def run(self, stop: threading.Event) -> None:
        """Follow until ``stop`` is set: asleep until an event (no timer while idle)."""
        wait: float | None = None
        while not stop.is_set():
            self.wake.wait(timeout=wait if wait is not None else 1.0)
            self.wake.clear()
            wait = self.step()

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            self.observer.join(timeout=5)
