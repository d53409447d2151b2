"""Attempt counters shared by every process (the "limits" cache: Redis, or the database when
there is none): sign-ups per address and hour, and failed log-ins per address across every
username.

django-axes locks a username *and* address pair after its failures; an attacker who tries many
usernames from one address never reaches any pair's limit. The address's own count here does,
and a successful log-in does not reset it (the attacker's own account must not clear it).
Another address is not affected: a user's own log-in from elsewhere still works.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from hermes_web.caching import SIGNUP_WINDOW_SECONDS, signup_key


def bump(key: str, window: int) -> int:
    """Count one attempt under ``key`` (kept ``window`` seconds); the count so far."""
    limits = caches["limits"]
    # The database cache's incr is a read then a write: one transaction (SQLite takes its write
    # lock at BEGIN) keeps two processes from both reading the same count.
    with transaction.atomic():
        limits.add(key, 0, window)
        try:
            attempts = limits.incr(key)
        except ValueError:  # evicted between add and incr
            limits.set(key, 1, window)
            attempts = 1
        # The database cache's incr writes the entry again with the cache's default timeout
        # (5 minutes): an attacker pausing that long would start from zero.
        limits.touch(key, window)
    return attempts


def signup_throttled(address: str) -> bool:
    """Count a sign-up attempt from ``address``; True once its hourly allowance is used up."""
    attempts = bump(signup_key(address, timezone.now()), SIGNUP_WINDOW_SECONDS)
    return attempts > settings.HERMES_SIGNUP_PER_HOUR


def login_window() -> int:
    """Seconds failed log-ins from one address are counted for (axes' cool-off)."""
    return max(60, int(settings.AXES_COOLOFF_TIME * 3600))


def login_failures_key(address: str) -> str:
    """Failed log-ins from ``address`` in the current window, whatever the usernames."""
    window = login_window()
    return f"login-failures:{address}:{int(timezone.now().timestamp()) // window}"


def address_locked(address: str) -> bool:
    """Whether ``address`` used up its failed log-ins (HERMES_LOGIN_ADDRESS_FAILURE_LIMIT)."""
    failures = caches["limits"].get(login_failures_key(address), 0)
    return failures >= settings.HERMES_LOGIN_ADDRESS_FAILURE_LIMIT


def count_login_failure(
    sender: Any, credentials: dict, request: HttpRequest | None = None, **kwargs: Any
) -> None:
    """Count a failed log-in against its address (connected to ``user_login_failed``)."""
    if request is None:
        return  # a management command or a test's authenticate(): no address
    bump(login_failures_key(client_ip(request) or "unknown"), login_window())


def client_ip(request: HttpRequest) -> str | None:
    """The caller's address: REMOTE_ADDR, or the address the one trusted proxy saw
    (HERMES_BEHIND_PROXY) — the last X-Forwarded-For hop, the only one a client cannot forge."""
    if settings.HERMES_BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
        if hops and _is_ip(hops[-1]):
            return hops[-1]
    # None when unknown (axes stores it in an IP column: PostgreSQL refuses any other text).
    return request.META.get("REMOTE_ADDR") or None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
