"""The Celery app. Workers: ``celery -A hermes_web worker -Q default,chat,compaction``."""

import logging
import os
import signal
import sys

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

app = Celery("hermes_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _tune_embedded_broker(sender: Celery, **kwargs: object) -> None:
    # The SQLAlchemy transport hands every broker_transport_options key to
    # create_engine(), so its 1 s default poll can only be lowered on the class.
    from django.conf import settings

    if str(settings.CELERY_BROKER_URL).startswith("sqla+"):
        from kombu.transport.sqlalchemy import Transport

        Transport.polling_interval = settings.HERMES_BROKER_POLL_SECONDS


@signals.worker_init.connect
def _warm_worker(sender: object = None, **kwargs: object) -> None:
    from hermes_web.tempdirs import start_process

    # Imports run here too: their temporary folders in one a sweep can clear after a kill.
    start_process()
    _discard_abandoned_imports()
    # Before the pool starts (forked children inherit it): the first chat turn then costs
    # what later ones do instead of paying litellm's import and the tokenizer load.
    if os.environ.get("HERMES_WORKER_WARMUP", "1") == "0":  # measuring the cold first turn
        return
    from hermes_web.warmup import warm_worker

    warm_worker(calls_models=worker_calls_models(consumed_queues(sender)))


def _discard_abandoned_imports() -> None:
    # A worker killed mid-import left a session marked pending: deleted once it is past every
    # import's time budget (also every few minutes by beat). A start never fails on it.
    from django.db import DatabaseError

    from hermes_web.importers.discard import discard_abandoned

    try:
        discard_abandoned()
    except DatabaseError as error:
        logging.getLogger(__name__).warning("could not discard abandoned imports: %s", error)


def consumed_queues(worker: object) -> set[str]:
    """The queues a starting worker consumes (``-Q``), every declared one without ``-Q``."""
    queues = getattr(getattr(getattr(worker, "app", None), "amqp", None), "queues", None)
    if queues is None:
        return set()
    return set(queues.consume_from or queues)


def worker_calls_models(queues: set[str]) -> bool:
    """Whether a worker on ``queues`` may call a model: chat turns always do (the demo model
    too goes through litellm); compactions only with an LLM summarizer. Unknown queues: yes."""
    from hermes_web.llm_models import summarizes_with_llm

    if not queues or "chat" in queues:
        return True
    if queues <= {"compaction", "default"}:
        return "compaction" in queues and summarizes_with_llm()
    return True


@signals.beat_embedded_init.connect
def _die_with_the_worker(**kwargs: object) -> None:
    # `celery worker -B` runs beat as a child process; a SIGKILL of the worker left it running,
    # re-parented to PID 1, still sending the recovery task every minute (three beats after two
    # kills). The kernel now sends it SIGTERM when its parent dies. `make run` runs beat as a
    # process of its own (Procfile); this covers `-B` wherever else it is used.
    die_with_parent(signal.SIGTERM)


def die_with_parent(sig: int) -> None:
    """Ask Linux to send ``sig`` to this process when its parent exits (no-op elsewhere)."""
    if sys.platform != "linux":
        return
    import ctypes

    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the parent's group kill still applies
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os.kill(os.getpid(), sig)
