"""Scale-out proofs: only meaningful on real PostgreSQL + Redis (run via `make check-scale`)."""

import os

import pytest


def pytest_collection_modifyitems(config, items):
    url = os.environ.get("DATABASE_URL", "")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if url.startswith("postgres") and broker.startswith("redis"):
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL + Redis: run `make check-scale`")
    for item in items:
        if "tests/scale" in str(item.fspath):
            item.add_marker(skip)
