"""gunicorn server hooks (``gunicorn -c python:hermes_web.gunicorn_hooks``, as the Procfile
starts it).

``post_request`` bounds each worker's memory: a worker whose resident memory is over
``HERMES_WEB_MAX_RSS_MB`` after a request has answered it, then stops taking new ones, and
gunicorn forks a fresh worker from the preloaded master in its place.

``post_worker_init`` runs in each worker after the fork, before it accepts a connection:
with ``HERMES_WEB_PRELOAD_LITELLM`` on (the default) it makes one offline completion, so that
no worker's first ``/v1`` request pays for what litellm builds on its first call (issue #39:
0.9-1.4 s after the import, 4-11 s without the import in the master). It never raises: a
worker that could not warm serves anyway and warms on its first request.
"""

import logging
import os
import time

log = logging.getLogger("hermes_web.warmup")


def post_worker_init(worker) -> None:
    """Warm litellm's first call in this worker (see the module docstring)."""
    from django.conf import settings

    if not settings.HERMES_WEB_PRELOAD_LITELLM:
        return
    started = time.perf_counter()
    try:
        from hermes_web.openai_compat.upstream import warm_calls

        warm_calls()
    except Exception:  # a warm-up must never keep a worker from serving
        log.exception(
            "worker %s: litellm warm-up failed; its first /v1 request warms it", worker.pid
        )
        return
    log.info("worker %s: litellm warmed in %.2f s", worker.pid, time.perf_counter() - started)


def post_request(worker, req, environ, resp) -> None:
    """Retire this worker after its request when its resident memory is over
    ``HERMES_WEB_MAX_RSS_MB`` (see the module docstring)."""
    from django.conf import settings

    limit = settings.HERMES_WEB_MAX_RSS_MB
    if not limit:
        return
    resident = resident_mb()
    if resident is not None and resident > limit:
        log.warning(
            "worker %s: %d MB resident after %s %s, over HERMES_WEB_MAX_RSS_MB=%d: "
            "replaced by a fresh worker",
            worker.pid,
            resident,
            req.method,
            req.path,
            limit,
        )
        worker.alive = False


def resident_mb() -> int | None:
    """This process's resident memory in MB (None where /proc is not there to read)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)
