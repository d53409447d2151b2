import ast
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from hermes_web import settings as hermes_settings
from hermes_web.models import WorkerPing
from tests.conftest import ROOT, point_app_at_broker, wait_for


@pytest.mark.django_db
def test_healthz_checks_the_real_database_and_broker(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == {**body["database"], "ok": True, "vendor": connection.vendor}
    assert body["broker"]["ok"] is True
    assert body["broker"]["transport"] in ("sqla+sqlite", "redis", "memory")


@pytest.mark.django_db
def test_healthz_is_degraded_when_the_broker_is_unreachable(client):
    from hermes_web.celery import app

    original = app.conf.broker_url
    point_app_at_broker("redis://127.0.0.1:1/0")
    try:
        response = client.get("/healthz")
    finally:
        point_app_at_broker(original)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded"
    assert body["broker"]["ok"] is False
    assert body["broker"]["error"]


@pytest.mark.django_db
def test_sqlite_runs_in_wal_mode():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"


@pytest.mark.parametrize(
    ("raw", "expected"), [("true", True), ("1", True), ("False", False), ("off", False), ("", True)]
)
def test_env_bool_reads_common_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("HERMES_X", raw)
    assert hermes_settings.env_bool("HERMES_X", True) is expected


def test_env_bool_rejects_nonsense(monkeypatch):
    monkeypatch.setenv("HERMES_X", "maybe")
    with pytest.raises(ImproperlyConfigured, match="HERMES_X"):
        hermes_settings.env_bool("HERMES_X", False)


def test_env_int_names_the_variable(monkeypatch):
    monkeypatch.setenv("HERMES_N", "12k")
    with pytest.raises(ImproperlyConfigured, match="HERMES_N"):
        hermes_settings.env_int("HERMES_N", 1)


def test_env_secret_reads_a_file(monkeypatch, tmp_path):
    (tmp_path / "key").write_text("s3cret\n")
    monkeypatch.delenv("HERMES_K", raising=False)
    monkeypatch.setenv("HERMES_K_FILE", str(tmp_path / "key"))
    assert hermes_settings.env_secret("HERMES_K") == "s3cret"


def test_database_url_postgres():
    db = hermes_settings.database_from_url("postgres://hermes:p%40ss@127.0.0.1:5433/hermes")
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "hermes",
        "hermes",
        "p@ss",
        "127.0.0.1",
        "5433",
    )


def test_database_url_sqlite_absolute_and_relative():
    absolute = hermes_settings.database_from_url("sqlite:////tmp/x/db.sqlite3")
    assert absolute["NAME"] == "/tmp/x/db.sqlite3"
    assert "journal_mode=WAL" in absolute["OPTIONS"]["init_command"]
    relative = hermes_settings.database_from_url("sqlite:///var/db.sqlite3")
    assert relative["NAME"] == str(ROOT / "var" / "db.sqlite3")


def test_database_url_rejects_unknown_scheme():
    with pytest.raises(ImproperlyConfigured, match="mysql"):
        hermes_settings.database_from_url("mysql://x@y/z")


def test_secret_key_is_required_when_debug_is_off_in_a_deployment(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "DEBUG": "false",
        "DATABASE_URL": "postgres://x@127.0.0.1/x",
        "HERMES_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
    }
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_secret_key_is_generated_and_persisted_for_local_use(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "HERMES_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
    }
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    first = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    second = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert len(first.stdout.strip()) >= 50
    assert first.stdout == second.stdout
    assert (tmp_path / "secret_key").read_text().strip() == first.stdout.strip()


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_compaction_package_imports_nothing_from_django():
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name
            for name in _imported_modules(path)
            if name.split(".")[0] in ("django", "hermes_web", "ninja", "celery")
        )
        for path in (ROOT / "compaction").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_ruff_bans_django_imports_inside_compaction(tmp_path):
    """The lint rule itself works: a Django import inside compaction/ is flagged, elsewhere not."""
    bad = ROOT / "compaction" / "_ruff_probe_tmp.py"
    bad.write_text("import django\n")
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "check",
                "--select",
                "TID251",
                str(bad),
                "hermes_web/settings.py",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    finally:
        bad.unlink()
    assert result.returncode == 1
    assert "_ruff_probe_tmp.py" in result.stdout
    assert "framework-free" in result.stdout
    assert "settings.py" not in result.stdout


@pytest.mark.slow
def test_celery_round_trip_through_a_real_worker(celery_worker_process):
    from hermes_web.tasks import ping_worker

    ping = WorkerPing.objects.create()
    ping_worker.delay(ping.pk)

    def processed():
        ping.refresh_from_db()
        return ping.processed_at

    wait_for(
        processed,
        timeout=60,
        worker=celery_worker_process,
        message=lambda: f"the worker to process the ping; log:\n{celery_worker_process.log()}",
    )
    assert ping.worker


def test_the_wsgi_module_starts_warm(tmp_path):
    # gunicorn --preload imports hermes_web.wsgi once in its master: by then every view is
    # imported, every template compiled and the token encoding loaded, for the workers to share.
    env = {
        "PATH": "/usr/bin:/bin",
        "HERMES_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
    }
    code = (
        "import sys\n"
        "import hermes_web.wsgi\n"
        "from django.template import engines\n"
        "loader = engines['django'].engine.template_loaders[0]\n"
        "while not hasattr(loader, 'get_template_cache'):\n"
        "    loader = loader.loaders[0]  # template_partials wraps the cached loader\n"
        "print(sorted(m for m in sys.modules if m.startswith('hermes_web.views.')))\n"
        "print(sorted(name for name in loader.get_template_cache))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    views, templates = result.stdout.splitlines()
    for module in ("inspector", "conversations", "chat", "imports", "accounts"):
        assert f"hermes_web.views.{module}" in views
    for name in ("base.html", "hermes_web/compaction_detail.html", "hermes_web/chat.html"):
        assert name in templates
    assert "warm-up failed" not in result.stderr
