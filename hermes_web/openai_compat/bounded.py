"""The per-process memory of the /v1 caches: the newest entries, bounded twice.

``RecentHistories`` (matching), ``Translations`` and ``StoredContexts`` each keep what the
newest conversations' previous requests computed. Each holds at most ``size`` entries and
``max_chars`` characters of content in all (the memory it may hold); the entry put longest
ago goes first, and an entry larger than the whole budget is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """At most ``size`` values and ``max_chars`` characters of them, the oldest put evicted
    first; safe to share between threads."""

    def __init__(self, size: int, max_chars: int) -> None:
        self.size = size
        self.max_chars = max_chars
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.chars = 0  # of the values kept
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept under ``key``, if any (reading it does not make it newer)."""
        with self._lock:
            entry = self._entries.get(key)
        return entry[0] if entry is not None else None

    def put(self, key: K, value: V, chars: int) -> None:
        """Keep ``value`` (``chars`` characters) under ``key`` as the newest entry, evicting
        the oldest while over either bound."""
        with self._lock:
            old = self._entries.pop(key, None)
            self.chars -= old[1] if old else 0
            if chars > self.max_chars:
                return
            self._entries[key] = (value, chars)
            self.chars += chars
            while len(self._entries) > self.size or self.chars > self.max_chars:
                self.chars -= self._entries.popitem(last=False)[1][1]

    def update(self, key: K, change: Callable[[V], V | None]) -> None:
        """Replace the value under ``key`` by ``change(value)`` in place (same size, same
        age), atomically; nothing when there is none or ``change`` returns None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            value = change(entry[0])
            if value is not None:
                self._entries[key] = (value, entry[1])
