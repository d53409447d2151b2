"""``make run``'s web processes are gevent workers (a streamed ``/v1`` reply waits on the model
without holding a process): the gunicorn config module patches the standard library in the
master, before ``--preload`` imports the app, and only when the command line asks for gevent."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from hermes_web.gunicorn_hooks import gevent_workers
from tests.web.procfile_web import start_web


@pytest.mark.parametrize(
    ("argv", "cmd_args", "expected"),
    [
        (["/venv/bin/gunicorn", "app", "--worker-class", "gevent"], "", True),
        (["gunicorn", "app", "--worker-class=gevent"], "", True),
        (["gunicorn", "app", "-k", "gunicorn.workers.ggevent.GeventWorker"], "", True),
        (["gunicorn", "app", "-kgevent"], "", True),
        (["gunicorn", "app"], "--workers 2 -k gevent", True),
        (["gunicorn", "app", "--worker-class", "sync", "--keep-alive", "0"], "", False),
        (["gunicorn", "app", "-k", "gevent", "-k", "sync"], "", False),  # the last one counts
        (["gunicorn", "app", "--worker-class"], "", False),
        (["/venv/lib/gunicorn/__main__.py", "app", "-k", "gevent"], "", True),  # -m gunicorn
        # Not gunicorn: importing the hooks in a test run (pytest -k gevent) patches nothing.
        (["/venv/bin/pytest", "-k", "gevent"], "--worker-class gevent", False),
    ],
)
def test_gevent_workers_are_read_from_gunicorns_command_line(argv, cmd_args, expected):
    assert gevent_workers(argv, {"GUNICORN_CMD_ARGS": cmd_args}) is expected


@pytest.mark.slow
@pytest.mark.parametrize("worker_class", ["", "sync"], ids=["procfile-default", "sync"])
def test_make_runs_web_answers_with_litellm_preloaded_and_warmed(tmp_path, worker_class):
    # With litellm imported by the --preload master (the default) and gevent's patching left
    # to the worker after the fork, the worker's warm-up call hung on a lock the master had
    # made before patching: the worker never took a connection.
    log = tmp_path / "gunicorn.log"
    web, port = start_web(tmp_path, stderr=log.open("wb"), HERMES_RUN_WEB_WORKER_CLASS=worker_class)
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=60)
        assert answer.status_code in (200, 503)  # 503: no Celery worker runs in this test
        assert answer.json()["status"]
    finally:
        os.killpg(web.pid, 15)
        web.wait(30)
    text = Path(log).read_text(errors="replace")
    assert f"Using worker: {worker_class or 'gevent'}" in text, text[-3000:]
    assert "litellm warmed in" in text, text[-3000:]
    assert "MonkeyPatchWarning" not in text, text[-3000:]
