"""gunicorn server hooks (``gunicorn -c python:hermes_web.gunicorn_hooks``, as the Procfile
starts it).

``post_worker_init`` runs in each worker after the fork, before it accepts a connection:
with ``HERMES_WEB_PRELOAD_LITELLM`` on (the default) it makes one offline completion, so that
no worker's first ``/v1`` request pays for what litellm builds on its first call (issue #39:
0.9-1.4 s after the import, 4-11 s without the import in the master). It never raises: a
worker that could not warm serves anyway and warms on its first request.
"""

import logging
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
