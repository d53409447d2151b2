"""The process supervisor of ``make run``: starts every line of a Procfile, restarts a line whose
process dies, and takes its processes with it when it goes.

honcho stopped everything when one process died (a killed Celery worker took the web server and
beat down, and the site stayed down), and a SIGKILL of honcho left its eight processes running
(the next ``make run`` then failed with "Address already in use", and two beats ran together).
Here:

- a process that exits is restarted, after 1 s, doubling to 30 s while it keeps dying within a
  minute of its start; what was left of its process group (gunicorn's workers) is killed first,
  so the new one finds its port free;
- every child runs in a process group of its own, which Ctrl-C or a SIGTERM of the supervisor
  stops (SIGTERM, then SIGKILL after a grace period). A SIGKILL of the supervisor leaves no
  orphans: each child asks Linux for a SIGTERM when the supervisor dies (``PR_SET_PDEATHSIG``,
  set between fork and exec), and a guardian process forked first (``Guardian``) sees the
  supervisor's end of a pipe close and stops every group, grandchildren included;
- a lock file (``fcntl.flock``, held for the supervisor's life, released by the kernel when it
  dies) and a check of the port refuse a second copy with a message that says which pid runs;
- with ``--ready-url``, "ready at URL" is printed once that URL answers 200 (the URL printed
  before the server listened sent newcomers to a refused connection);
- Ctrl-C exits 0, and ``make run`` with it: run from a terminal, the supervisor makes its own
  process group the terminal's foreground group (``take_terminal``), so the SIGINT of Ctrl-C
  reaches it and not make, which would otherwise end with "make: *** [run] Interrupt" and
  status 130 however cleanly everything stopped.

Usage: ``python -m tools.supervise [--check] --procfile Procfile --lock var/run.lock --port 8000
[--ready-url http://127.0.0.1:8000/]`` (``--check``: only say whether a copy runs, exit 1 if one
does).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

FIRST_DELAY = 1.0
MAX_DELAY = 30.0
# A process that ran this long is healthy again: its next restart waits FIRST_DELAY.
STABLE_SECONDS = 60.0
STOP_GRACE_SECONDS = 15.0
PR_SET_PDEATHSIG = 1


def take_terminal() -> Callable[[], None] | None:
    """Put this process in a process group of its own and make that group the foreground group
    of the controlling terminal (when there is one and ours is in the foreground); return what
    gives the terminal back to the group that had it, or None when nothing was changed."""
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        previous = os.tcgetpgrp(tty)
        if previous != os.getpgrp():  # started in the background: leave the terminal alone
            raise OSError
        os.setpgid(0, 0)
        _set_foreground(tty, os.getpgrp())
    except OSError:
        os.close(tty)
        return None

    def give_back() -> None:
        with contextlib.suppress(OSError):
            _set_foreground(tty, previous)
        os.close(tty)

    return give_back


def _set_foreground(tty: int, group: int) -> None:
    # A process outside the foreground group that calls tcsetpgrp gets SIGTTOU (which stops it)
    # unless it ignores that signal for the call.
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(tty, group)
    finally:
        signal.signal(signal.SIGTTOU, old)


class AlreadyRunning(SystemExit):
    """Another copy holds the lock or the port (exit status 1 with the message)."""


def read_procfile(path: Path) -> dict[str, str]:
    """``name: command`` lines (blank lines and ``#`` comments skipped), in order."""
    entries: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, command = line.partition(":")
        if not sep or not name.strip() or not command.strip():
            raise SystemExit(f"{path}:{number}: expected 'name: command', got {line!r}")
        entries[name.strip()] = command.strip()
    return entries


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; the setting survives exec.
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        return probe.connect_ex((host, port)) == 0


class Lock:
    """An exclusive ``flock`` on ``path`` holding the owner's pid and port."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def holder(self) -> str:
        with contextlib.suppress(OSError):
            return self.path.read_text().strip()
        return ""

    def acquire(self, port: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(already_running(self.holder(), port)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {port}\n".encode())
        self.fd = fd

    def held_by_another(self) -> bool:
        """Whether a live process holds the lock (without taking it for long)."""
        if not self.path.exists():
            return False
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # also releases a shared lock taken here
        return False


def already_running(holder: str, port: int) -> str:
    pid, _, held_port = holder.partition(" ")
    return (
        f"hermes-web is already running (pid {pid or '?'}) on :{held_port or port}; "
        "stop it first (Ctrl-C in its terminal, or kill that pid)."
    )


def check_free(lock: Lock, port: int) -> None:
    """AlreadyRunning when a copy holds the lock or something listens on the port."""
    if lock.held_by_another():
        raise AlreadyRunning(already_running(lock.holder(), port))
    if port and port_in_use(port):
        raise AlreadyRunning(
            f"Port {port} is already in use (another program, or a copy of hermes-web that is "
            "still stopping); stop it first or choose another port with HERMES_PORT=…."
        )


class Guardian:
    """A process forked before any child that outlives a SIGKILL of the supervisor just long
    enough to stop its process groups: it reads their ids from a pipe, and the kernel closes
    the supervisor's end when the supervisor dies, however it dies."""

    def __init__(self) -> None:
        read_end, self.write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the guardian
            os.close(self.write_end)
            try:
                self._guard(read_end)
            finally:
                os._exit(0)
        os.close(read_end)

    @staticmethod
    def _guard(read_end: int) -> None:
        # A session of its own: a signal to the supervisor's whole group (Ctrl-C, a closed
        # terminal's SIGHUP, kill -9 -<group>) does not take the guardian with it.
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        groups: set[int] = set()
        data = b""
        while chunk := os.read(read_end, 4096):
            data += chunk
            *lines, data = data.split(b"\n")
            groups.update(int(line) for line in lines if line.strip())
        for sig in (signal.SIGTERM, signal.SIGKILL):
            deadline = time.monotonic() + (STOP_GRACE_SECONDS if sig == signal.SIGTERM else 0)
            for group in list(groups):
                try:
                    os.killpg(group, sig)
                except (ProcessLookupError, PermissionError):
                    groups.discard(group)
            while groups and time.monotonic() < deadline:
                time.sleep(0.2)
                for group in list(groups):
                    try:
                        os.killpg(group, 0)
                    except (ProcessLookupError, PermissionError):
                        groups.discard(group)

    def watch(self, group: int) -> None:
        """Stop ``group`` too if the supervisor dies."""
        os.write(self.write_end, f"{group}\n".encode())

    def release(self) -> None:
        """The supervisor stopped its groups itself: let the guardian end."""
        os.close(self.write_end)
        os.waitpid(self.pid, 0)


def http_status(url: str) -> int:
    """The status ``url`` answers with, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (our own URL)
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


class ReadyProbe:
    """Polls ``url`` in a thread of its own (a slow answer must not hold up the supervisor's
    loop, which drains the children's output) until it answers 200."""

    def __init__(self, url: str, interval: float = 0.5) -> None:
        self.url = url
        self.interval = interval
        self.ready = threading.Event()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._poll, name="ready-probe", daemon=True)

    def _poll(self) -> None:
        while not self.stopped.is_set():
            if http_status(self.url) == 200:
                self.ready.set()
                return
            self.stopped.wait(self.interval)


@dataclass
class Child:
    """One Procfile line and its current process."""

    name: str
    command: str
    proc: subprocess.Popen | None = None
    started: float = 0.0
    delay: float = FIRST_DELAY
    restart_at: float | None = None
    restarts: int = 0
    buffer: bytes = field(default=b"", repr=False)


class Supervisor:
    """Runs the children of a Procfile until told to stop (see the module docstring)."""

    def __init__(self, entries: dict[str, str], out=None, ready_url: str | None = None) -> None:
        self.probe = ReadyProbe(ready_url) if ready_url else None
        self.announced = False
        self.children = [Child(name, command) for name, command in entries.items()]
        self.width = max((len(name) for name in entries), default=0)
        self.out = out or sys.stdout.buffer
        self.selector = selectors.DefaultSelector()
        self.stopping = False
        self.guardian: Guardian | None = None

    def say(self, name: str, text: str) -> None:
        self.write(name, text.encode() + b"\n")

    def write(self, name: str, data: bytes) -> None:
        stamp = time.strftime("%H:%M:%S")
        prefix = f"{stamp} {name.ljust(self.width)} | ".encode()
        for line in data.splitlines(keepends=True):
            self.out.write(prefix + line)
        self.out.flush()

    def start(self, child: Child) -> None:
        # exec: the shell expands the line's variables (${HERMES_PORT}…) and is then replaced
        # by the program, which is the group leader and gets the parent-death signal.
        child.proc = subprocess.Popen(
            ["/bin/sh", "-c", f"exec {child.command}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        if self.guardian is not None:
            self.guardian.watch(child.proc.pid)
        child.started = time.monotonic()
        child.restart_at = None
        assert child.proc.stdout is not None
        os.set_blocking(child.proc.stdout.fileno(), False)
        self.selector.register(child.proc.stdout, selectors.EVENT_READ, child)
        self.say(child.name, f"started with pid {child.proc.pid}")

    def _drain(self, child: Child, final: bool = False) -> None:
        proc = child.proc
        if proc is None or proc.stdout is None:
            return
        while True:
            try:
                data = proc.stdout.read(65536)
            except (BlockingIOError, ValueError):
                data = None
            if not data:
                break
            child.buffer += data
            *lines, child.buffer = child.buffer.split(b"\n")
            for line in lines:
                self.write(child.name, line + b"\n")
        if final:
            if child.buffer:
                self.write(child.name, child.buffer + b"\n")
                child.buffer = b""
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(proc.stdout)
            proc.stdout.close()

    def _reaped(self, child: Child) -> None:
        """``child``'s process exited: clear its group, schedule its restart."""
        assert child.proc is not None
        status = child.proc.returncode
        # Whatever the leader left in its group (gunicorn's workers hold the port).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.proc.pid, signal.SIGKILL)
        self._drain(child, final=True)
        if self.stopping:
            return
        ran = time.monotonic() - child.started
        child.delay = FIRST_DELAY if ran >= STABLE_SECONDS else child.delay
        child.restart_at = time.monotonic() + child.delay
        how = f"signal {-status}" if status < 0 else f"status {status}"
        self.say(
            child.name, f"exited with {how} after {ran:.0f} s; restarting in {child.delay:g} s"
        )
        child.delay = min(child.delay * 2, MAX_DELAY)
        child.restarts += 1
        child.proc = None

    def step(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            self._drain(key.data)
        now = time.monotonic()
        for child in self.children:
            if child.proc is not None and child.proc.poll() is not None:
                self._reaped(child)
            elif child.proc is None and child.restart_at is not None and now >= child.restart_at:
                self.start(child)

    def run(self) -> None:
        self.guardian = Guardian()
        for child in self.children:
            self.start(child)
        if self.probe is not None:
            self.probe.thread.start()
        while not self.stopping:
            self.step(0.5)
            self.announce_ready()
        if self.probe is not None:
            self.probe.stopped.set()
        self.stop()
        self.guardian.release()

    def announce_ready(self) -> None:
        """Print "ready at URL" once, after the probe saw a 200."""
        if self.probe is None or self.announced or not self.probe.ready.is_set():
            return
        self.announced = True
        self.out.write(
            f"\n  hermes-web is ready at {self.probe.url}  (Ctrl-C stops it)\n\n".encode()
        )
        self.out.flush()

    def stop(self) -> None:
        """SIGTERM every child's group, SIGKILL what is left after the grace period."""
        self.stopping = True
        running = [c for c in self.children if c.proc is not None and c.proc.poll() is None]
        for child in running:
            assert child.proc is not None
            self.say(child.name, "stopping")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while time.monotonic() < deadline and any(c.proc.poll() is None for c in running):  # type: ignore[union-attr]
            self.step(0.2)
        for child in self.children:
            if child.proc is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.proc.pid, signal.SIGKILL)
                child.proc.wait()
                self._drain(child, final=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procfile", type=Path, default=Path("Procfile"))
    parser.add_argument("--lock", type=Path, default=Path("var/run.lock"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("HERMES_PORT", "8000")))
    parser.add_argument("--check", action="store_true", help="only refuse if a copy runs")
    parser.add_argument("--ready-url", help='print "ready at URL" once this URL answers 200')
    args = parser.parse_args(argv)
    lock = Lock(args.lock)
    try:
        check_free(lock, args.port)
        if args.check:
            return 0
        lock.acquire(args.port)
    except AlreadyRunning as refusal:
        print(refusal.code, file=sys.stderr)
        return 1
    supervisor = Supervisor(read_procfile(args.procfile), ready_url=args.ready_url)

    def stop(signum: int, frame: object) -> None:
        supervisor.stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    give_back = take_terminal()
    try:
        supervisor.run()
    finally:
        if give_back is not None:
            give_back()
    return 0


if __name__ == "__main__":
    sys.exit(main())
