"""Scale-out proofs: only meaningful on real PostgreSQL + Redis (run via `make check-scale`).

`tests/run_with_services.py --redis` starts both servers for the run and exports their URLs
plus HERMES_TEST_POSTGRES_DATA/PORT and HERMES_TEST_REDIS_DATA/PORT, so a proof can stop and
restart them. Each test gets an empty Redis database and stops every process it started.
"""

import os
from pathlib import Path

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


@pytest.fixture
def redis_server():
    from tools.localservices import Redis

    return Redis(
        Path(os.environ["HERMES_TEST_REDIS_DATA"]), int(os.environ["HERMES_TEST_REDIS_PORT"])
    )


@pytest.fixture
def postgres_server():
    from tools.localservices import Postgres

    return Postgres(
        Path(os.environ["HERMES_TEST_POSTGRES_DATA"]), int(os.environ["HERMES_TEST_POSTGRES_PORT"])
    )


@pytest.fixture
def broker(redis_server, settings):
    """An empty Redis broker that this test process publishes to."""
    import redis

    url = os.environ["CELERY_BROKER_URL"]
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    client.flushdb()
    client.close()
    settings.CELERY_TASK_ALWAYS_EAGER = False
    from hermes_web.celery import app

    assert app.conf.broker_url == url
    app.conf.task_always_eager = False
    return url


@pytest.fixture
def log_dir(tmp_path):
    path = tmp_path / "logs"
    path.mkdir()
    return path


@pytest.fixture
def spawn(transactional_db, broker, log_dir):
    """Start real processes for this test; every one is stopped before the database is flushed.

    ``spawn.workers(n, **kw)`` starts n Celery workers (see harness.ScaleWorker) and waits until
    they consume; ``spawn.web(port, **kw)`` starts gunicorn and waits for /healthz.
    """
    from tests.scale import harness

    started: list = []

    class Spawner:
        dir = log_dir

        def workers(self, count: int, **kwargs):
            workers = []
            try:
                for _ in range(count):
                    worker = harness.ScaleWorker(log_dir, **kwargs)
                    started.append(worker)
                    workers.append(worker)
                for worker in workers:
                    harness.wait_until(
                        worker.ready, 90, f"worker {worker.name} ready", workers=[worker]
                    )
            except AssertionError:
                raise
            return workers

        def web(self, port: int, **kwargs):
            server = harness.WebServer(log_dir, port, **kwargs)
            started.append(server)
            server.wait_ready()
            return server

    yield Spawner()
    for process in reversed(started):
        process.stop()


@pytest.fixture
def owner(django_user_model, transactional_db):
    return django_user_model.objects.create_user("scale-owner", password="scale-pass-123")


@pytest.fixture
def slow_llm():
    """A fake OpenAI server whose every reply takes ~3 s, and the worker env pointing litellm at it."""
    from tests.fake_openai import FakeOpenAIServer

    server = FakeOpenAIServer(
        default_reply={
            "sleep": 3,
            "content": "## Active Task\nScale proof.\n\n## Goal\nSummarize the scale run.\n\n## Progress\nSlow fake summary.",
        }
    ).start()
    server.worker_env = {
        "HERMES_SUMMARY_MODEL": "openai/fake-aux",
        "HERMES_SUMMARY_API_BASE": server.base_url,
        "HERMES_SUMMARY_API_KEY": "x",
        "HERMES_LLM_TIMEOUT": "60",
    }
    yield server
    server.stop()
