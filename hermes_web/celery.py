"""The Celery app. Workers: ``celery -A hermes_web worker -Q default,chat,compaction``."""

import os

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
def _warm_worker(**kwargs: object) -> None:
    # Before the pool starts (forked children inherit it): the first chat turn then costs
    # what later ones do instead of paying litellm's import and the tokenizer load.
    if os.environ.get("HERMES_WORKER_WARMUP", "1") == "0":  # measuring the cold first turn
        return
    from hermes_web.warmup import warm_worker

    warm_worker()
