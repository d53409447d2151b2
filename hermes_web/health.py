"""Liveness of the database and the broker, for /healthz."""

import time

from django.db import connection

from hermes_web.celery import app as celery_app


def check_database() -> dict:
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "down"; the message says which
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "ok": True,
        "vendor": connection.vendor,
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }


def check_broker() -> dict:
    started = time.perf_counter()
    url = celery_app.conf.broker_url or ""
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)
    except Exception as exc:  # kombu raises transport-specific errors
        return {
            "ok": False,
            "transport": url.split(":", 1)[0],
            "error": f"{type(exc).__name__}: {exc}",
        }
    return {
        "ok": True,
        "transport": url.split(":", 1)[0],
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }
