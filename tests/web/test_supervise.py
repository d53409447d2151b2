"""``make run``'s supervisor (tools/supervise.py): a process that dies is restarted, a SIGKILL
of the supervisor leaves no orphans, and a second copy is refused with a message naming the
first. First on a Procfile of small processes, then (slow) on the real Procfile: gunicorn,
the Celery worker and beat on a free port and a data folder of their own."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.web.procfile_web import free_port, make_run_env
from tools.supervise import read_procfile

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")

ROOT = Path(__file__).resolve().parents[2]


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (by parent links in /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(predicate, timeout: float, what: str, log=None):
    """``predicate()``'s first true value; on timeout, fails with the tail of ``log()`` (the
    supervised processes' output) so that a failure says why."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    tail = "\n".join(log().splitlines()[-60:]) if log else ""
    suffix = f"; their output:\n{tail}" if tail else ""
    raise AssertionError(f"timed out waiting for {what}{suffix}")


class Run:
    """``python -m tools.supervise`` on a Procfile, its output in a file."""

    def __init__(self, tmp_path: Path, procfile: Path, port: int, env: dict | None = None):
        self.log_path = tmp_path / f"supervise-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tools.supervise", "--procfile", str(procfile),
             "--lock", str(tmp_path / "run.lock"), "--port", str(port)],
            cwd=ROOT, env=env if env is not None else dict(os.environ), stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def children(self) -> dict[str, int]:
        """The pid each Procfile line last started with, from the supervisor's output."""
        pids = {}
        for line in self.log().splitlines():
            if " | started with pid " in line:
                name = line.split(" ", 1)[1].split("|")[0].strip()
                pids[name] = int(line.rsplit(" ", 1)[1])
        return pids

    def close(self, left: set[int] = frozenset()) -> None:
        below = left | descendants(self.proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in below:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()


SLEEPERS = """\
# two small processes, one with a child of its own (as gunicorn has workers)
one: python -c "import time; time.sleep(600)"
two: python -c "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
"""


@pytest.fixture
def sleepers(tmp_path):
    procfile = tmp_path / "Procfile"
    procfile.write_text(SLEEPERS)
    run = Run(tmp_path, procfile, free_port())
    pids = wait_for(lambda: len(run.children()) == 2 and run.children(), 30, "both started")
    yield run, pids
    run.close()


def test_the_procfile_is_read_as_name_and_command(tmp_path):
    (tmp_path / "Procfile").write_text(SLEEPERS)
    entries = read_procfile(tmp_path / "Procfile")
    assert list(entries) == ["one", "two"]
    assert entries["one"].startswith("python -c")


def test_a_killed_process_is_restarted_the_others_keep_running(sleepers):
    run, pids = sleepers
    os.kill(pids["one"], signal.SIGKILL)
    restarted = wait_for(
        lambda: run.children()["one"] != pids["one"] and run.children()["one"], 30, "a restart"
    )
    assert alive(restarted)
    assert alive(pids["two"])
    assert run.proc.poll() is None
    assert "one | exited with signal 9" in run.log().replace("  ", " ")


def test_a_process_whose_leader_dies_loses_what_it_left_in_its_group(sleepers):
    run, pids = sleepers
    grandchild = wait_for(lambda: descendants(pids["two"]), 30, "the sleep child")
    os.kill(pids["two"], signal.SIGKILL)
    wait_for(lambda: not any(alive(pid) for pid in grandchild), 30, "the group's leftovers to go")
    wait_for(lambda: run.children()["two"] != pids["two"], 30, "a restart")


def test_a_sigkill_of_the_supervisor_leaves_no_orphans(sleepers):
    run, pids = sleepers
    wait_for(lambda: descendants(pids["two"]), 30, "the grandchild")
    below = descendants(run.proc.pid)
    assert {pids["one"], pids["two"]} < below
    os.kill(run.proc.pid, signal.SIGKILL)
    run.proc.wait(10)
    try:
        wait_for(lambda: not any(alive(pid) for pid in below), 30, "every child to exit")
    finally:
        run.close(below)


def test_a_sigkill_of_the_supervisors_whole_group_leaves_no_orphans(sleepers):
    run, pids = sleepers
    wait_for(lambda: descendants(pids["two"]), 30, "the grandchild")
    below = descendants(run.proc.pid)
    os.killpg(run.proc.pid, signal.SIGKILL)  # the supervisor's group: not the guardian's
    run.proc.wait(10)
    try:
        wait_for(lambda: not any(alive(pid) for pid in below), 30, "every child to exit")
    finally:
        run.close(below)


def test_a_second_copy_is_refused_naming_the_first(sleepers, tmp_path):
    run, _ = sleepers
    second = subprocess.run(
        [sys.executable, "-m", "tools.supervise", "--procfile", str(tmp_path / "Procfile"),
         "--lock", str(tmp_path / "run.lock"), "--port", str(free_port())],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 1
    assert f"hermes-web is already running (pid {run.proc.pid})" in second.stderr
    assert "stop it first" in second.stderr


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = subprocess.run(
            [sys.executable, "-m", "tools.supervise", "--check", "--lock",
             str(tmp_path / "run.lock"), "--port", str(port)],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert refused.returncode == 1
    assert f"Port {port} is already in use" in refused.stderr


def test_a_stopped_supervisor_stops_its_processes(sleepers):
    run, _ = sleepers
    below = descendants(run.proc.pid)
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.proc.wait(30) == 0
    assert not any(alive(pid) for pid in below)


# -- the real Procfile --------------------------------------------------------------------------


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except OSError:
        return 0


@pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="make run is the embedded default (SQLite); the PostgreSQL stage re-runs the web suite",
)
@pytest.mark.slow
def test_make_runs_processes_are_restarted_and_leave_no_orphans(tmp_path):
    port = free_port()
    env = make_run_env(
        tmp_path,
        port,
        HERMES_WORKER_CONCURRENCY="1",
        HERMES_WORKER_LOGLEVEL="info",
        HERMES_WORKER_WARMUP="0",
    )
    run = Run(tmp_path, ROOT / "Procfile", port, env)
    below: set[int] = set()
    try:
        pids = wait_for(lambda: len(run.children()) == 3 and run.children(), 60, "3 processes")
        wait_for(
            lambda: get(f"http://127.0.0.1:{port}/healthz") in (200, 503), 120, "the web", run.log
        )
        # The worker dies: it is restarted, and the web server never stopped.
        os.kill(pids["worker"], signal.SIGKILL)
        wait_for(lambda: run.children()["worker"] != pids["worker"], 60, "the worker's restart")
        assert alive(pids["web"])
        assert alive(pids["beat"])
        assert get(f"http://127.0.0.1:{port}/healthz") in (200, 503)
        # The web server dies: a new one serves on the same port.
        os.kill(pids["web"], signal.SIGKILL)
        wait_for(lambda: run.children()["web"] != pids["web"], 60, "the web's restart")
        wait_for(
            lambda: get(f"http://127.0.0.1:{port}/healthz") in (200, 503), 120, "the web", run.log
        )
        # A second copy is refused while this one runs.
        second = subprocess.run(
            [sys.executable, "-m", "tools.supervise", "--check", "--lock",
             str(tmp_path / "run.lock"), "--port", str(port)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 1
        assert f"already running (pid {run.proc.pid}) on :{port}" in second.stderr
        # SIGKILL of the supervisor: every process below it exits, the port is free again.
        below = descendants(run.proc.pid)
        assert len(below) >= 4  # gunicorn's master and worker, the worker, beat
        os.kill(run.proc.pid, signal.SIGKILL)
        run.proc.wait(10)
        wait_for(lambda: not any(alive(pid) for pid in below), 60, "every process to exit")
        wait_for(lambda: get(f"http://127.0.0.1:{port}/healthz") == 0, 30, "the port to close")
    finally:
        run.close(below)
