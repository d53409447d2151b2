"""Every cache key and lifetime of hermes_web, and the Redis backend whose outage makes pages
slower, never broken.

What is cached and when it goes stale:

- Per-session data (the conversation's header numbers, its message chunks and paging links, the
  API's pages of its messages, the conversation list's rows) is keyed by ``Session.updated_at``, which only ``Session.touch()``
  moves: every writer of a session's rows calls it, so a cached value is never older than the
  data. Nothing is deleted by hand.
- A finished compaction's panels, cards and fact audit are keyed by its id, status and
  ``finished_at`` (an undo or redo changes the status): a finished report never changes.
- A run's undo history (a key of its report) is keyed by its status and the ``updated_at`` of
  its session and result session: every undo and redo writes the history and touches both.
- The "where compaction hurt" report of a user (``services.hurt``) is keyed by the newest
  ``updated_at`` of the user's sessions and their count (a deleted session changes the count).
- The signed-in user and API keys are dropped by the model signals (``hermes_web.auth``) and
  expire anyway in case a bulk ``update()`` bypassed them.
- Template fragments (``{% cache %}``) take their lifetime from ``FRAGMENT_SECONDS``, handed
  to the template by the view, and their vary-on values from the same stamps.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# -- lifetimes (seconds) ------------------------------------------------------------------------

USER_SECONDS = 300
API_KEY_SECONDS = 300
SESSION_STATS_SECONDS = 600
MESSAGE_PAGE_SECONDS = 600  # a page of the API's message list, as the JSON it answered
# A bigger page (500 rows of long tool output can be hundreds of MB) is answered uncached: one
# client paging through a huge session must not fill the cache's memory.
MESSAGE_PAGE_MAX_BYTES = 1024 * 1024
PANEL_SECONDS = 600  # a finished compaction's inspector panels and cards
AUDIT_SECONDS = 3600  # a finished compaction's fact-survival audit
UNDO_HISTORY_SECONDS = 600  # the inspector's list of a run's undos and redos
HURT_SECONDS = 600  # a user's "where compaction hurt" report
WORKER_STATUS_SECONDS = 5  # the "no worker is running" banner, checked on every page
SIGNUP_WINDOW_SECONDS = 3600  # sign-up attempts are counted per address and hour
# ``{% cache %}`` fragments, by name (the template reads ``fragment_seconds.<name>``).
FRAGMENT_SECONDS: Mapping[str, int] = {
    "conversation_rows": 60,
    "message_chunk": 600,
    "window_nav": 600,
}


# -- keys ---------------------------------------------------------------------------------------


def _stamp(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def user_key(user_id: Any) -> str:
    """The signed-in user's row."""
    return f"auth-user:{user_id}"


def api_key_key(key_hash: str) -> str:
    """An API key's row, by its hash."""
    return f"api-key:{key_hash}"


def session_stats_key(session: Any) -> str:
    """A conversation's header numbers, until the session is touched."""
    return f"conversation-stats:{session.pk}:{session.updated_at.timestamp()}"


def message_page_key(session: Any, offset: int, limit: int, include_archived: bool) -> str:
    """One page of the API's message list (its JSON), until the session is touched."""
    return (
        f"api-messages:{session.pk}:{session.updated_at.timestamp()}:"
        f"{offset}:{limit}:{int(include_archived)}"
    )


def card_key(compaction: Any) -> str:
    """The what-if and Compare card of a finished compaction."""
    return (
        f"hermes:card:{compaction.public_id}:{compaction.status}:{_stamp(compaction.finished_at)}"
    )


def audit_key(compaction: Any) -> str:
    """The fact-survival audit of a finished compaction."""
    return f"hermes:audit:{compaction.public_id}:{_stamp(compaction.finished_at)}"


def undo_history_key(compaction: Any) -> str:
    """An undoable run's undo history, until an undo or redo (which touch its sessions)."""
    result = compaction.result_session if compaction.result_session_id else None
    return (
        f"undo-history:{compaction.pk}:{compaction.status}:"
        f"{_stamp(compaction.session.updated_at)}:{_stamp(result.updated_at if result else None)}"
    )


def hurt_key(user_id: Any, newest: datetime | None, sessions: int) -> str:
    """A user's "where compaction hurt" report, until one of their sessions changes."""
    return f"hurt:{user_id}:{_stamp(newest)}:{sessions}"


WORKER_STATUS_KEY = "hermes:health:no-worker"


def signup_key(address: str, now: datetime) -> str:
    """Sign-up attempts from one address in the hour of ``now``."""
    return f"signup-attempts:{address}:{now:%Y%m%d%H}"


def panel_seconds(compaction: Any) -> int:
    """How long the inspector may keep a compaction's panels: only a finished run's."""
    return PANEL_SECONDS if compaction.is_finished else 0


# -- lazy values for cached fragments -----------------------------------------------------------


class LazyPanels(Mapping[str, Any]):
    """The values a cached template fragment prints, computed on first read and only then.

    The view hands the template one of these; a fragment served from the cache never reads
    it, so a cache hit costs none of the queries that build the panels. ``build`` returns all
    the values at once; each keyword names one value with its own builder instead (for values
    that separately cached fragments print).
    """

    def __init__(
        self, build: Callable[[], Mapping[str, Any]] | None = None, /, **parts: Callable[[], Any]
    ) -> None:
        self._build = functools.cache(build) if build is not None else None
        self._parts = {name: functools.cache(part) for name, part in parts.items()}

    def __getitem__(self, name: str) -> Any:
        if name in self._parts:
            return self._parts[name]()
        if self._build is None:
            raise KeyError(name)
        return self._build()[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._parts
        if self._build is not None:
            yield from self._build()

    def __len__(self) -> int:
        return sum(1 for _ in self)


class ReusingRedisCacheClient(RedisCacheClient):
    """Django's client builds a new ``redis.Redis`` for every cache operation, filling its
    table of ~170 response callbacks each time; a page reads the cache two or three times.
    One ``redis.Redis`` per connection pool is safe to share (the pool is thread-safe)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class ForgivingRedisCache(RedisCache):
    """Treats a Redis error as a cache miss (on reads) or a no-op (on writes).

    The cache only holds rendered HTML that the database can always rebuild, so Redis
    restarting must not turn page views into errors.
    """

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusingRedisCacheClient

    def get(self, key, default=None, version=None):
        try:
            return super().get(key, default, version)
        except RedisError as error:
            log.warning("cache read failed, rendering without it: %s", error)
            return default

    def set(self, key, value, timeout=None, version=None):
        try:
            super().set(key, value, timeout, version)
        except RedisError as error:
            log.warning("cache write failed: %s", error)

    def delete(self, key, version=None):
        try:
            return super().delete(key, version)
        except RedisError as error:
            log.warning("cache delete failed: %s", error)
            return False
