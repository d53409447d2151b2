"""Shared fixtures: personas, logged-in clients, and a real Celery worker process."""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in the test thread; Django's ORM guard would
# refuse every query from live_server tests without this.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

ROOT = Path(__file__).resolve().parent.parent
OUTPUT_DIR = ROOT / "test-output"


# The fixtures through which a test reaches the database; a test whose fixture closure holds
# none of them (and with no django_db mark) is refused every query by pytest-django.
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_setup",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
    }
)


def pytest_addoption(parser):
    parser.addoption(
        "--database-tests-only",
        action="store_true",
        help="deselect the tests that use no database (the PostgreSQL stage of make test: "
        "they already ran, identically, on SQLite)",
    )


def uses_database(item) -> bool:
    """Whether a test can reach the database: a django_db mark or a database fixture."""
    if item.get_closest_marker("django_db") is not None:
        return True
    return bool(DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config, items):
    """With --database-tests-only, leave out the tests that cannot touch the database.

    `make test` runs tests/web twice, on SQLite then on PostgreSQL; a test with no database
    fixture is refused every query, so its second run proves nothing new. A test whose
    subprocess uses the database requests ``db`` or ``transactional_db`` anyway: only they
    create the test database the subprocess is pointed at (``database_url_for``).
    """
    if not config.getoption("database_tests_only"):
        return
    kept = [item for item in items if uses_database(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not uses_database(item)])
        items[:] = kept


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-pass-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-pass-123")


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(django_user_model, bob):
    from django.test import Client

    other = Client()
    other.force_login(bob)
    return other


def database_url_for(settings_dict: dict) -> str:
    """A DATABASE_URL that points a subprocess at the database this test process uses."""
    engine = settings_dict["ENGINE"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{Path(settings_dict['NAME']).resolve()}"
    if engine.endswith("postgresql"):
        user = settings_dict.get("USER") or ""
        password = settings_dict.get("PASSWORD") or ""
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        return f"postgres://{auth}{settings_dict.get('HOST') or '127.0.0.1'}:{settings_dict.get('PORT') or 5432}/{settings_dict['NAME']}"
    raise RuntimeError(f"no DATABASE_URL for engine {engine}")


class WorkerProcess:
    """A `celery worker` subprocess on its own broker, sharing this test's database."""

    def __init__(
        self,
        broker_url: str,
        log_path: Path,
        extra_env: dict | None = None,
        queues: str = "default,chat,compaction",
    ):
        from django.conf import settings
        from django.db import connection

        self.broker_url = broker_url
        self.log_path = log_path
        env = {
            **os.environ,
            "DATABASE_URL": database_url_for(connection.settings_dict),
            "SECRET_KEY": settings.SECRET_KEY,
            "CELERY_BROKER_URL": broker_url,
            "HERMES_BROKER_POLL_SECONDS": "0.05",
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "HERMES_WORKSPACES_DIR": str(settings.HERMES_WORKSPACES_DIR),
            **(extra_env or {}),
        }
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "hermes_web",
                "worker",
                "--pool=threads",
                "--concurrency=2",
                "-Q",
                queues,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"test-{uuid.uuid4().hex[:8]}@%h",
                "-l",
                "info",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def point_app_at_broker(broker_url: str) -> None:
    """Make this process publish to broker_url (drops any cached connection pool)."""
    from hermes_web.celery import app

    app.conf.broker_url = broker_url
    # The app caches a connection pool and a producer pool, and kombu keeps a global registry
    # of both by connection: reset all of them, or a later publish gets a stale or closed pool.
    import kombu.pools

    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None
    from kombu.transport.sqlalchemy import Transport

    Transport.polling_interval = 0.05


def wait_for(
    predicate, timeout: float = 30.0, interval: float = 0.1, message="condition", worker=None
):
    """Poll predicate until truthy; message may be a callable, evaluated only on failure.

    With worker given, fail at once (with its log) if that worker process has died.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker is not None and not worker.alive():
            raise AssertionError(
                f"worker exited with {worker.proc.returncode}; log:\n{worker.log()}"
            )
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {message() if callable(message) else message}"
    )


@pytest.fixture
def celery_worker_process(transactional_db, tmp_path, settings):
    """A real worker on a fresh embedded (SQLite) broker; tasks sent in the test reach it."""
    from hermes_web.celery import app

    original = app.conf.broker_url
    broker_url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    point_app_at_broker(broker_url)
    worker = WorkerProcess(broker_url, tmp_path / "worker.log")
    try:
        yield worker
    finally:
        worker.stop()
        point_app_at_broker(original)


@pytest.fixture(autouse=True)
def _own_workspaces_dir(settings, tmp_path_factory):
    """Per-user agent workspaces go to a fresh folder per test, never to var/."""
    settings.HERMES_WORKSPACES_DIR = tmp_path_factory.mktemp("workspaces")


@pytest.fixture(autouse=True)
def _empty_search_index_around_a_transactional_test(request, django_db_blocker):
    """Django empties the model tables after a transactional test; the search index and its
    pending marks are not models, so they are emptied here too, before and after the test.
    Otherwise the marks a flush left (one per deleted row) make a later test's search index
    thousands of stale rows before reaching its own (a search indexes at most 10,000 pending
    rows first)."""
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in request.fixturenames or bool(
        marker and marker.kwargs.get("transaction")
    )
    if transactional:
        request.getfixturevalue("django_db_setup")  # the test database, never another
        _empty_search_index(django_db_blocker)
    yield
    if transactional:
        _empty_search_index(django_db_blocker)


def _empty_search_index(django_db_blocker) -> None:
    from django.db import connection

    from hermes_web.services.search_index import PENDING, TABLE

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {PENDING}")
        cursor.execute(f"DELETE FROM {TABLE}")
