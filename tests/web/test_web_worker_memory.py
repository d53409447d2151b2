"""A web worker's memory is bounded (issue #39): over ``HERMES_WEB_MAX_RSS_MB`` after a
request, it answers that request and gunicorn replaces it with a fresh worker."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from hermes_web import gunicorn_hooks
from tests.web.procfile_web import start_web


def _serve(tmp_path: Path, **env_extra: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    """gunicorn as the Procfile starts it, one worker; its error log in a file."""
    log = tmp_path / "gunicorn.log"
    web, port = start_web(
        tmp_path, stderr=log.open("wb"), HERMES_WEB_PRELOAD_LITELLM="0", **env_extra
    )
    return web, port, log


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
