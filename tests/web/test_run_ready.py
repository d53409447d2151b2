"""``make run`` as a newcomer meets it: "ready at URL" is printed only once that URL answers 200,
Ctrl-C (SIGINT to the supervisor) stops everything with exit status 0, and two instances on two
ports run side by side, each on a data folder of its own, sharing no file."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.web.test_supervise import ROOT, alive, descendants, free_port, wait_for
from tools.supervise import http_status, read_procfile

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")

# A web line that listens at once but answers 503 for its first 3 s, then 200; before it sends
# its first 200 it creates the file named by $FIRST_200, so a ready line seen before that file
# exists was printed on something other than a 200.
SLOW_WEB = """\
web: python -c "import http.server, os, pathlib, sys, time; start = time.monotonic(); H = type('H', (http.server.BaseHTTPRequestHandler,), {'log_message': lambda *a: None, 'do_GET': lambda self: (self.send_response(200 if (ok := time.monotonic() - start > 3) else 503), ok and pathlib.Path(os.environ['FIRST_200']).touch(), self.end_headers())}); http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()" ${HERMES_PORT}
other: python -c "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
"""

READY = "hermes-web is ready at"


class Instance:
    """``python -m tools.supervise --ready-url`` on a Procfile, its output in a file."""

    def __init__(self, folder: Path, procfile: Path, port: int, env: dict[str, str]):
        self.url = f"http://127.0.0.1:{port}/"
        self.log_path = folder / "supervise.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tools.supervise", "--procfile", str(procfile),
             "--lock", str(folder / "run.lock"), "--port", str(port), "--ready-url", self.url],
            cwd=ROOT, env={**env, "HERMES_PORT": str(port)}, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.below: set[int] = set()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        for pid in self.below | descendants(self.proc.pid) | {self.proc.pid}:
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()


@pytest.fixture
def slow_web(tmp_path):
    procfile = tmp_path / "Procfile"
    procfile.write_text(SLOW_WEB)
    first_200 = tmp_path / "first-200"
    instance = Instance(
        tmp_path, procfile, free_port(), {**os.environ, "FIRST_200": str(first_200)}
    )
    yield instance, first_200
    instance.close()


def test_ready_is_printed_only_after_the_url_answers_200(slow_web):
    instance, first_200 = slow_web
    wait_for(lambda: get_status(instance.url) == 503, 30, "a 503")
    assert READY not in instance.log()  # listening, but not answering 200 yet
    wait_for(lambda: READY in instance.log(), 30, "the ready line")
    assert first_200.exists()
    assert f"{READY} {instance.url}" in instance.log()
    assert instance.log().count(READY) == 1


def test_sigint_stops_everything_and_exits_0(slow_web):
    instance, _ = slow_web
    wait_for(lambda: READY in instance.log(), 60, "the ready line")
    instance.below = descendants(instance.proc.pid)
    assert len(instance.below) >= 3  # the web, the other line and its sleep child (+ guardian)
    os.kill(instance.proc.pid, signal.SIGINT)
    assert instance.proc.wait(30) == 0
    wait_for(lambda: not any(alive(pid) for pid in instance.below), 30, "every process to exit")
    assert get_status(instance.url) == 0


def get_status(url: str) -> int:
    """The status ``url`` answers with (a 503 included), 0 when nothing answers."""
    return http_status(url)


def make_variable(name: str, **env: str) -> str:
    """``name``'s value in the Makefile for this environment (a target of the test's own,
    added with ``--eval``, echoes it)."""
    clean = {k: v for k, v in os.environ.items() if k != name and not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", f"print-it: ; @echo $({name})",
         "print-it"], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True,
        timeout=60, check=True,
    ).stdout.strip()  # fmt: skip


def test_the_data_folder_follows_the_port_unless_given():
    assert make_variable("HERMES_DATA_DIR", HERMES_PORT="8000") == f"{ROOT}/var"
    assert make_variable("HERMES_DATA_DIR", HERMES_PORT="8001") == f"{ROOT}/var/port-8001"
    assert make_variable("HERMES_DATA_DIR", HERMES_PORT="8001", HERMES_DATA_DIR="/x") == "/x"


@pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="make run is the embedded default (SQLite); the PostgreSQL stage re-runs the web suite",
)
@pytest.mark.slow
def test_two_instances_on_two_ports_run_side_by_side_sharing_no_file(tmp_path):
    """The real web line (gunicorn) twice, one HOME for both (gunicorn's control socket used to
    be one fixed file under it), each with its own data folder."""
    home = tmp_path / "home"
    home.mkdir()
    procfile = tmp_path / "Procfile"
    procfile.write_text(f"web: {read_procfile(ROOT / 'Procfile')['web']}\n")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "HERMES_CACHE_URL")
    }
    env.update(
        HOME=str(home),
        HERMES_RUN_WEB_PROCESSES="1",
        DJANGO_SETTINGS_MODULE="hermes_web.settings",
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    instances = []
    try:
        for name in ("a", "b"):
            folder = tmp_path / name
            folder.mkdir()
            data = {**env, "HERMES_DATA_DIR": str(folder)}
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                cwd=ROOT, env=data, check=True, timeout=300,
            )  # fmt: skip
            instances.append(Instance(folder, procfile, free_port(), data))
        for instance in instances:
            wait_for(
                lambda i=instance: READY in i.log(), 120, f"{instance.url} ready", instance.log
            )
        assert [get_status(i.url) for i in instances] == [200, 200]
        assert not any(home.rglob("*")), sorted(home.rglob("*"))  # nothing shared under HOME
        for name in ("a", "b"):
            assert (tmp_path / name / "hermes.sqlite3").exists()
            assert (tmp_path / name / "run.lock").exists()
        for instance in instances:
            instance.below = descendants(instance.proc.pid)
            os.kill(instance.proc.pid, signal.SIGINT)
        assert [i.proc.wait(30) for i in instances] == [0, 0]
        every = set().union(*(i.below for i in instances))
        wait_for(lambda: not any(alive(pid) for pid in every), 30, "every process to exit")
    finally:
        for instance in instances:
            instance.close()


def test_ctrl_c_in_a_terminal_ends_make_with_status_0(tmp_path):
    """make on a terminal of its own (a pty), Ctrl-C typed once the ready line shows: make
    exits 0 without "Interrupt" or "Error" (make used to receive the SIGINT too)."""
    port = free_port()
    (tmp_path / "Procfile").write_text(SLOW_WEB)
    (tmp_path / "Makefile").write_text(
        f"run:\n\t@{sys.executable} -m tools.supervise --procfile {tmp_path / 'Procfile'}"
        f" --lock {tmp_path / 'run.lock'} --port {port} --ready-url http://127.0.0.1:{port}/\n"
    )
    primary, secondary = pty.openpty()

    def own_terminal() -> None:  # a new session whose controlling terminal is the pty
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = {**os.environ, "HERMES_PORT": str(port), "FIRST_200": str(tmp_path / "first-200")}
    env = {k: v for k, v in env.items() if not k.startswith("MAKE")}
    make = subprocess.Popen(
        ["make", "--no-print-directory", "-f", str(tmp_path / "Makefile"), "run"], cwd=ROOT,
        env=env, stdin=secondary, stdout=secondary, stderr=secondary, start_new_session=True,
        preexec_fn=own_terminal,
    )  # fmt: skip
    os.close(secondary)
    output = b""

    def read_for(seconds: float) -> None:
        nonlocal output
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if select.select([primary], [], [], 0.2)[0]:
                try:
                    output += os.read(primary, 65536)
                except OSError:  # the pty closed: every process on it exited
                    return
            if make.poll() is not None and not select.select([primary], [], [], 0)[0]:
                return

    below: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while READY.encode() not in output and time.monotonic() < deadline:
            read_for(0.5)
        assert READY.encode() in output, output.decode(errors="replace")
        below = descendants(make.pid)
        os.write(primary, b"\x03")  # Ctrl-C, as typed
        status = make.wait(30)
        read_for(1)
        text = output.decode(errors="replace")
        assert status == 0, text
        assert "Interrupt" not in text, text
        assert "Error" not in text, text
        wait_for(lambda: not any(alive(pid) for pid in below), 30, "every process to exit")
    finally:
        for pid in below | {make.pid}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        make.wait(10)
        os.close(primary)
