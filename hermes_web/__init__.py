"""hermes-web: the Django project and app around the compaction engine."""

from hermes_web.celery import app as celery_app

__all__ = ["celery_app"]
