"""A web worker's memory is bounded (issue #39): over ``HERMES_WEB_MAX_RSS_MB`` after a
request, it answers that request and gunicorn replaces it with a fresh worker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hermes_web import gunicorn_hooks

ROOT = Path(__file__).resolve().parents[2]


def _serve(tmp_path: Path, **env_extra: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    """gunicorn as the Procfile starts it, one worker; its error log in a file."""
    line = next(x for x in (ROOT / "Procfile").read_text().splitlines() if x.startswith("web:"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        HERMES_PORT=str(port),
        HERMES_RUN_WEB_PROCESSES="1",
        HERMES_DATA_DIR=str(tmp_path),
        HERMES_WEB_PRELOAD_LITELLM="0",
        DJANGO_SETTINGS_MODULE="hermes_web.settings",
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        **env_extra,
    )
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT, env=env, check=True, timeout=300,
    )  # fmt: skip
    log = tmp_path / "gunicorn.log"
    web = subprocess.Popen(
        ["/bin/sh", "-c", "exec " + line.split(":", 1)[1].strip()], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return web, port, log
        except OSError:
            assert web.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "gunicorn did not start"
            time.sleep(0.3)


def _booted(log: Path) -> int:
    return log.read_text(errors="replace").count("Booting worker with pid")


def _wait_for_boots(log: Path, count: int) -> int:
    deadline = time.monotonic() + 60
    while _booted(log) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return _booted(log)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("limit", "replaced"), [("1", True), ("", False)], ids=["over-the-limit", "default"]
)
def test_a_worker_over_its_memory_limit_answers_then_is_replaced(tmp_path, limit, replaced):
    extra = {"HERMES_WEB_MAX_RSS_MB": limit} if limit else {}
    web, port, log = _serve(tmp_path, **extra)
    try:
        assert _wait_for_boots(log, 1) == 1
        for attempt in range(3):
            # Every request is answered, also the one after which its worker retires.
            deadline = time.monotonic() + 60
            while True:
                try:
                    answer = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=30)
                    break
                except httpx.TransportError:  # the fresh worker is still starting
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            assert answer.status_code == 401, answer.text[:300]  # no key: a JSON answer
            assert answer.json()["error"]["type"]
            if replaced:
                assert _wait_for_boots(log, attempt + 2) == attempt + 2, log.read_text()[-3000:]
        text = log.read_text(errors="replace")
        if replaced:
            assert "over HERMES_WEB_MAX_RSS_MB=1: replaced by a fresh worker" in text
        else:
            time.sleep(1)
            assert _booted(log) == 1, text[-3000:]
            assert "HERMES_WEB_MAX_RSS_MB" not in text
    finally:
        os.killpg(web.pid, 15)
        web.wait(30)


def test_resident_memory_is_read_from_proc() -> None:
    resident = gunicorn_hooks.resident_mb()
    assert resident is not None
    assert 20 < resident < 8_000
