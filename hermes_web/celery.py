"""The Celery app. Workers: ``celery -A hermes_web worker -Q default,chat,compaction``."""

import os

from celery import Celery

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
