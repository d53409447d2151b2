"""Retry a unit of database work through transient errors (a restart, a dropped connection).

``OperationalError``/``InterfaceError`` are what Django raises when PostgreSQL restarts under
a connection, or when SQLite stays busy past its timeout. A compaction's commit is worth
retrying in place: the engine's result (minutes of summarizer time) is still in memory.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from tenacity import (
    RetryCallState,
    retry,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)

log = logging.getLogger(__name__)

TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)


def _reconnect(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    log.warning(
        "transient database error in %s (attempt %s): %s; retrying",
        getattr(state.fn, "__name__", "?"),
        state.attempt_number,
        error,
    )
    # A broken connection stays broken: drop it so the next attempt opens a fresh one.
    connection.close()


def _retryable(error: BaseException) -> bool:
    # Inside an outer transaction the error already broke it: retrying cannot help.
    return isinstance(error, TRANSIENT_DB_ERRORS) and not connection.in_atomic_block


def db_retry(fn):
    """Decorate ``fn`` (a whole transaction, never a part of one) to retry transient errors.

    Exponential backoff from 0.5 s up to 8 s between attempts, for at most
    ``HERMES_DB_RETRY_SECONDS`` in all; then the last error is raised.
    """

    def _stop(state: RetryCallState) -> bool:
        return stop_after_delay(settings.HERMES_DB_RETRY_SECONDS)(state)

    return retry(
        retry=retry_if_exception(_retryable),
        wait=wait_exponential(multiplier=0.5, min=0.5, max=8),
        stop=_stop,
        before_sleep=_reconnect,
        reraise=True,
    )(fn)
