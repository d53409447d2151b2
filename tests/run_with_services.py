"""Run pytest against a real PostgreSQL (and Redis) started on 127.0.0.1 for the run, then stop them.

    python tests/run_with_services.py [--redis] -- <pytest args>

The servers live in a temporary folder under var/; they are stopped whatever the outcome.
When PostgreSQL (or Redis, with --redis) is not installed, it says so and exits 0 without testing,
unless --require is given.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.localservices import (  # noqa: E402
    Postgres,
    Redis,
    ServiceError,
    free_port,
    postgres_bin_dir,
    redis_server_path,
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--redis", action="store_true", help="also start Redis and use it as the broker"
    )
    parser.add_argument(
        "--require", action="store_true", help="fail instead of skipping when a server is missing"
    )
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    pytest_args = [a for a in args.pytest_args if a != "--"]

    missing = []
    if postgres_bin_dir() is None:
        missing.append("postgresql")
    if args.redis and redis_server_path() is None:
        missing.append("redis-server")
    if missing:
        print(
            f"SKIPPED: {', '.join(missing)} not installed; install with apt-get (make system-deps)"
        )
        return 1 if args.require else 0

    (ROOT / "var").mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="services-", dir=ROOT / "var"))
    postgres = Postgres(workdir / "postgres", free_port())
    redis = Redis(workdir / "redis", free_port()) if args.redis else None
    env = dict(os.environ)
    try:
        env["DATABASE_URL"] = postgres.start(durable=False)
        env["HERMES_TEST_POSTGRES_DATA"] = str(postgres.data_dir)
        env["HERMES_TEST_POSTGRES_PORT"] = str(postgres.port)
        if redis is not None:
            env["CELERY_BROKER_URL"] = redis.start()
            env["HERMES_TEST_REDIS_DATA"] = str(redis.data_dir)
            env["HERMES_TEST_REDIS_PORT"] = str(redis.port)
        env.setdefault("SECRET_KEY", "test-only-secret-key-for-the-postgres-run-0123456789abcdef")
        print(
            f"PostgreSQL at {env['DATABASE_URL']}"
            + (f", Redis at {env['CELERY_BROKER_URL']}" if redis else ""),
            flush=True,
        )
        return subprocess.run(
            [sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT, env=env
        ).returncode
    except ServiceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        for server in (redis, postgres):
            if server is not None:
                try:
                    server.stop()
                except ServiceError as exc:
                    print(f"warning: {exc}", file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
