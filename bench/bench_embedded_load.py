"""The embedded default under load (issue #39, item 3): ``make run``'s processes exactly as the
README starts them (tools.supervise on the Procfile: gunicorn, a Celery worker and beat, SQLite
and the SQLite broker, a data folder of their own), the demo data, and 50 signed-in clients
(threads, one keep-alive connection each, each waiting for its answer before the next
request) over the signed-in pages for 60 s.

Printed: p50 / p95 / p99 per page and overall, requests per second, errors, the load average
before and after (the target holds "on a quiet box"), and PASS/MISS against the targets:
p95 <= 300 ms, p99 <= 1 s, 0 errors. ``--clients`` and ``--seconds`` change the run.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
P95_TARGET_MS = 300
P99_TARGET_MS = 1_000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


def prepare(env: dict[str, str]) -> tuple[str, dict[str, str]]:
    """Migrate, load the demo data, and sign the demo user in: the session cookie and one URL
    of each signed-in page (from the demo data), read in a child process on the same data."""
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
                   env=env, check=True)  # fmt: skip
    subprocess.run([sys.executable, "manage.py", "load_demo"], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    script = """
import django; django.setup()
from django.contrib.auth.models import User
from django.test import Client
from hermes_web.management.commands.load_demo import DEMO_USERNAME
from hermes_web.models import Compaction, Session
user = User.objects.get(username=DEMO_USERNAME)
client = Client(); client.force_login(user)
print(client.cookies["sessionid"].value)
run = Compaction.objects.filter(session__owner=user, status="committed").first()
session = Session.objects.filter(owner=user).order_by("-pk").first()
print("overview /")
print("conversations /conversations/")
print(f"conversation /conversations/{session.public_id}/")
print(f"timeline /conversations/{session.public_id}/timeline/")
print(f"inspector /compactions/{run.public_id}/")
print("hurt /hurt/")
print("search /search/?q=ingest")
print("chat /chat/")
"""
    lines = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, check=True,
                           capture_output=True, text=True).stdout.split("\n")  # fmt: skip
    pages = dict(line.split(" ", 1) for line in lines[1:] if line.strip())
    return lines[0].strip(), pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()

    data = Path(tempfile.mkdtemp(prefix="hermes-bench-embedded-"))
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "HERMES_CACHE_URL")
    }
    env.update(
        HERMES_DATA_DIR=str(data),
        HERMES_PORT=str(port),
        HERMES_WORKER_CONCURRENCY=env.get("HERMES_WORKER_CONCURRENCY", "4"),
        HERMES_WORKER_LOGLEVEL="warning",
        DJANGO_SETTINGS_MODULE="hermes_web.settings",
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    cookie, pages = prepare(env)
    log = (data / "run.log").open("wb")
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "tools.supervise", "--procfile", "Procfile", "--lock",
         str(data / "run.lock"), "--port", str(port), "--ready-url", f"http://127.0.0.1:{port}/"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while "is ready at" not in (data / "run.log").read_text(errors="replace"):
            if time.monotonic() > deadline or supervisor.poll() is not None:
                print((data / "run.log").read_text(errors="replace")[-3000:])
                print("MISS: make run's processes did not become ready")
                return 1
            time.sleep(0.5)
        headers = {"Cookie": f"sessionid={cookie}"}
        for name, path in pages.items():  # every page answers before the clock starts
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            connection.request("GET", path, headers=headers)
            status = connection.getresponse().status
            connection.close()
            if status != 200:
                print(f"MISS: {name} {path} answered {status} before the load")
                return 1
        load_before = os.getloadavg()[0]
        timings: dict[str, list[float]] = {name: [] for name in pages}
        errors: list[str] = []
        lock = threading.Lock()
        stop_at = time.monotonic() + args.seconds
        order = list(pages.items())

        def client(index: int) -> None:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            turn = index
            while time.monotonic() < stop_at:
                name, path = order[turn % len(order)]
                turn += 1
                started = time.perf_counter()
                try:
                    connection.request("GET", path, headers=headers)
                    response = connection.getresponse()
                    response.read()
                    status = response.status
                except (OSError, http.client.HTTPException) as error:
                    status = 0
                    connection.close()
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                    with lock:
                        errors.append(f"{name}: {type(error).__name__}")
                    continue
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    if status != 200:
                        errors.append(f"{name}: {status}")
                    else:
                        timings[name].append(elapsed)
            connection.close()

        threads = [threading.Thread(target=client, args=(n,)) for n in range(args.clients)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
        load_after = os.getloadavg()[0]
    finally:
        os.killpg(supervisor.pid, signal.SIGINT)
        try:
            supervisor.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(supervisor.pid, signal.SIGKILL)
        log.close()

    every = [t for values in timings.values() for t in values]
    print(f"make run's processes, SQLite, {args.clients} clients x {args.seconds:.0f} s, "
          f"load average {load_before:.1f} before, {load_after:.1f} after")  # fmt: skip
    print(f"{'page':<16}{'n':>7}{'p50':>9}{'p95':>9}{'p99':>9}  (ms)")
    for name, values in [*timings.items(), ("all", every)]:
        print(f"{name:<16}{len(values):>7}{percentile(values, 50):>9.0f}"
              f"{percentile(values, 95):>9.0f}{percentile(values, 99):>9.0f}")  # fmt: skip
    print(f"{len(every) / wall:.1f} req/s, {len(errors)} errors {sorted(set(errors))[:5]}")
    p95, p99 = percentile(every, 95), percentile(every, 99)
    verdicts = [
        ("p95", p95 <= P95_TARGET_MS, f"{p95:.0f} ms (target <= {P95_TARGET_MS})"),
        ("p99", p99 <= P99_TARGET_MS, f"{p99:.0f} ms (target <= {P99_TARGET_MS})"),
        ("errors", not errors, f"{len(errors)} (target 0)"),
    ]
    for name, ok, figure in verdicts:
        print(f"{'PASS' if ok else 'MISS'} {name}: {figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
