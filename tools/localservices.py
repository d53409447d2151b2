"""Start and stop a local PostgreSQL and Redis on 127.0.0.1, with their data under a folder of ours.

Used by ``make run-scaled``, ``make check-scale`` and the tests that need the real servers. Both
come from Debian's packages (``postgresql``, ``redis-server``); nothing is downloaded.

    python -m tools.localservices start --data var/services   # prints DATABASE_URL / CELERY_BROKER_URL
    python -m tools.localservices stop --data var/services

PostgreSQL refuses to run as root, so when we are root its commands run as the ``postgres`` user
and the data folder is handed to that user.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PG_USER = "hermes"
PG_DATABASE = "hermes"


class ServiceError(RuntimeError):
    """A local server could not be found, started or stopped; the message says which and why."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_bin_dir() -> Path | None:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    return candidates[0].parent if candidates else None


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def _as_postgres_user(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


def _run(cmd: list[str], what: str, timeout: float = 120) -> str:
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServiceError(f"{what}: {exc}") from exc
    if result.returncode != 0:
        raise ServiceError(
            f"{what} failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
        )
    return result.stdout


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise ServiceError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@dataclass(frozen=True)
class Postgres:
    """A PostgreSQL cluster in ``data_dir`` listening on 127.0.0.1:``port`` only."""

    data_dir: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgres://{PG_USER}@127.0.0.1:{self.port}/{PG_DATABASE}"

    def _bin(self, name: str) -> str:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise ServiceError("PostgreSQL is not installed (Debian package `postgresql`)")
        return str(bin_dir / name)

    def _prepare_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.data_dir, "postgres", "postgres")
            # The postgres user must be able to reach the folder through our (root-owned) parents.
            for parent in self.data_dir.resolve().parents:
                if parent == Path("/"):
                    break
                mode = parent.stat().st_mode
                if not mode & 0o001:
                    parent.chmod(mode | 0o001)

    def start(self, *, durable: bool = True) -> str:
        """Initialise the cluster if needed, start it, create the database; returns its URL."""
        self._prepare_dir()
        if not (self.data_dir / "PG_VERSION").exists():
            _run(
                _as_postgres_user(
                    [
                        self._bin("initdb"),
                        "-D",
                        str(self.data_dir),
                        "-U",
                        PG_USER,
                        "--auth=trust",
                        "-E",
                        "UTF8",
                    ]
                ),
                "initdb",
            )
        options = f"-p {self.port} -k {self.data_dir} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not durable:
            # Throwaway test clusters: skip fsync; crash-safety of the disk is not under test.
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        _run(
            _as_postgres_user(
                [
                    self._bin("pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-o",
                    options,
                    "-l",
                    str(self.data_dir / "server.log"),
                    "-w",
                    "-t",
                    "60",
                    "start",
                ]
            ),
            "pg_ctl start",
        )
        _wait_port(self.port, 30)
        exists = _run(
            [
                self._bin("psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                PG_USER,
                "-d",
                "postgres",
                "-tAc",
                f"SELECT 1 FROM pg_database WHERE datname='{PG_DATABASE}'",
            ],
            "psql",
        )
        if exists.strip() != "1":
            _run(
                [
                    self._bin("createdb"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-U",
                    PG_USER,
                    PG_DATABASE,
                ],
                "createdb",
            )
        return self.url

    def stop(self, mode: str = "fast") -> None:
        if not (self.data_dir / "postmaster.pid").exists():
            return
        _run(
            _as_postgres_user(
                [
                    self._bin("pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-m",
                    mode,
                    "-w",
                    "-t",
                    "60",
                    "stop",
                ]
            ),
            "pg_ctl stop",
        )

    def restart(self) -> None:
        self.stop()
        self.start()


@dataclass(frozen=True)
class Redis:
    """A redis-server in ``data_dir`` on 127.0.0.1:``port``, with an append-only file so a restart keeps queued jobs."""

    data_dir: Path
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pidfile(self) -> Path:
        return self.data_dir / "redis.pid"

    def start(self) -> str:
        server = redis_server_path()
        if server is None:
            raise ServiceError("Redis is not installed (Debian package `redis-server`)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _run(
            [
                server,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--daemonize",
                "yes",
                "--dir",
                str(self.data_dir),
                "--pidfile",
                str(self.pidfile),
                "--logfile",
                str(self.data_dir / "redis.log"),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--protected-mode",
                "yes",
            ],
            "redis-server",
        )
        _wait_port(self.port, 20)
        return self.url

    def stop(self) -> None:
        if not self.pidfile.exists():
            return
        try:
            pid = int(self.pidfile.read_text().strip())
        except ValueError:
            return
        cli = shutil.which("redis-cli")
        if cli:
            subprocess.run([cli, "-p", str(self.port), "shutdown"], capture_output=True, timeout=20)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _pid_alive(pid):
            time.sleep(0.1)
        if _pid_alive(pid):
            os.kill(pid, 9)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ports_file(data: Path) -> Path:
    return data / "ports"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.localservices", description=__doc__.splitlines()[0]
    )
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument(
        "--data", type=Path, default=Path("var/services"), help="folder for both servers' data"
    )
    parser.add_argument("--pg-port", type=int, default=5433)
    parser.add_argument("--redis-port", type=int, default=6380)
    args = parser.parse_args(argv)
    data = args.data.resolve()
    postgres = Postgres(data / "postgres", args.pg_port)
    redis = Redis(data / "redis", args.redis_port)
    try:
        if args.action == "start":
            database_url = postgres.start()
            broker_url = redis.start()
            print(f"DATABASE_URL={database_url}")
            print(f"CELERY_BROKER_URL={broker_url}")
        else:
            redis.stop()
            postgres.stop()
            print("stopped")
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
