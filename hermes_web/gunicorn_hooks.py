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
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

log = logging.getLogger("hermes_web.warmup")


def gevent_workers(argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether ``argv`` is gunicorn's and it (or ``GUNICORN_CMD_ARGS``) asks for gevent workers
    (``-k gevent``, ``--worker-class=gevent``, ``gunicorn.workers.ggevent.GeventWorker``…)."""
    # Only gunicorn's own command line: a test run that imports this module (pytest -k gevent)
    # must not patch itself.
    program = Path(argv[0]) if argv else Path()
    if "gunicorn" not in (program.name, program.parent.name):  # .../gunicorn/__main__.py: -m
        return False
    # gunicorn reads GUNICORN_CMD_ARGS first and lets its command line override it.
    words = [*shlex.split(environ.get("GUNICORN_CMD_ARGS", "")), *argv[1:]]
    chosen = ""
    for index, word in enumerate(words):
        if word in ("-k", "--worker-class") and index + 1 < len(words):
            chosen = words[index + 1]
        elif word.startswith("--worker-class="):
            chosen = word.partition("=")[2]
        elif word.startswith("-k") and not word.startswith("--") and len(word) > 2:
            chosen = word[2:]
    return "gevent" in chosen.lower()


# gunicorn imports this module in the master before --preload imports the app (Django, and
# litellm with its httpx): patch there, so that the sockets, locks and threads the app
# creates are gevent's from the start. gunicorn's gevent worker patches again after the fork
# (a no-op then). Patching only in the worker (gunicorn's own way) hung each worker's litellm
# warm-up on something the master had made before the patch: no worker took a connection.
if gevent_workers(sys.argv, os.environ):  # pragma: no cover - runs in gunicorn's master
    from gevent import monkey

    monkey.patch_all()


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
