"""The web process as ``make run`` starts it (the Procfile's ``web:`` line under gunicorn),
on a free port of 127.0.0.1 with its own data folder, for tests that need the real server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_run_env(tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    """This process's environment as ``make run`` sets it: the embedded default (no
    PostgreSQL, broker or cache URL), one web process unless ``extra`` says otherwise, data
    under ``tmp_path``, migrated."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "HERMES_CACHE_URL")
    }
    env.update(
        HERMES_DATA_DIR=str(tmp_path),
        HERMES_PORT=str(port),
        HERMES_RUN_WEB_PROCESSES="1",
        DJANGO_SETTINGS_MODULE="hermes_web.settings",
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    env.update(extra)  # may set HERMES_RUN_WEB_PROCESSES="" for the Procfile's default
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT, env=env, check=True, timeout=300,
    )  # fmt: skip
    return env


def start_web(
    tmp_path: Path, *, stderr: IO[bytes] | int = subprocess.DEVNULL, **extra: str
) -> tuple[subprocess.Popen[bytes], int]:
    """The Procfile's web process (its own process group: stop it with ``os.killpg``), once
    its port accepts connections."""
    port = free_port()
    env = make_run_env(tmp_path, port, **extra)
    line = next(x for x in (ROOT / "Procfile").read_text().splitlines() if x.startswith("web:"))
    web = subprocess.Popen(
        ["/bin/sh", "-c", "exec " + line.split(":", 1)[1].strip()], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return web, port
        except OSError:
            if web.poll() is not None or time.monotonic() > deadline:
                os.killpg(web.pid, 15)
                raise AssertionError("gunicorn did not start") from None
            time.sleep(0.3)
