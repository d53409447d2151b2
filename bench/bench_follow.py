"""Following 1,000 active agent files: the follower's CPU while nothing changes, and the time
from a line appended to a file to its row being stored.

1,000 Codex-shaped rollout files (a session each, spread over 50 day folders as Codex lays
them out) are imported once (``manage.py follow --once``), then ``manage.py follow`` runs as
its own process on a temporary SQLite database. Idle: its CPU time (user + system, from
/proc) over 20 s with the files present and unchanged, as a share of one core; target < 5 %.
Appended: a user turn is appended to 10 files, one at a time, and the time until the row is
in the database is measured (polled every 10 ms); target < 2 s each. Both with the kernel's
file events (the default) and with ``--poll``.

    python bench/bench_follow.py [--files 1000] [--idle-seconds 20]
"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_IDLE_CPU = 5.0  # percent of one core
TARGET_APPEND_SECONDS = 2.0
APPENDS = 10


def record(kind: str, payload: dict, second: int) -> bytes:
    stamp = f"2026-03-01T10:{second // 60 % 60:02d}:{second % 60:02d}.000Z"
    return (json.dumps({"timestamp": stamp, "type": kind, "payload": payload}) + "\n").encode()


def message(role: str, text: str, second: int) -> bytes:
    part = "output_text" if role == "assistant" else "input_text"
    payload = {"type": "message", "role": role, "content": [{"type": part, "text": text}]}
    return record("response_item", payload, second)


def write_files(home: Path, count: int) -> list[Path]:
    files = []
    for n in range(count):
        day = home / "2026" / "03" / f"{n % 50 + 1:02d}"
        day.mkdir(parents=True, exist_ok=True)
        sid = f"019c8a4c-0000-7000-8000-{n:012d}"
        path = day / f"rollout-2026-03-01T10-00-00-{sid}.jsonl"
        meta = {"id": sid, "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/home/dev/shop"}
        path.write_bytes(
            record("session_meta", meta, 0)
            + message("user", f"Why is total {n} wrong?", 1)
            + message("assistant", "Reading checkout.py.", 2)
        )
        files.append(path)
    return files


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rows_of(db: Path, source_id: str) -> int:
    with sqlite3.connect(db, timeout=30) as conn:
        found = conn.execute(
            "SELECT COUNT(*) FROM hermes_web_message m JOIN hermes_web_session s "
            "ON m.session_id = s.id WHERE s.public_id LIKE ?",
            (f"{source_id}.%",),
        ).fetchone()
    return found[0]


def run(env: dict, home: Path, db: Path, files: list[Path], idle: float, poll: bool) -> dict:
    args = [sys.executable, "manage.py", "follow", str(home), "--user", "bench"]
    if poll:
        args.append("--poll")
    follower = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        line = follower.stdout.readline()  # type: ignore[union-attr]
        if not line.startswith("following"):
            raise SystemExit(f"follow did not start: {line}")
        time.sleep(2)  # settle: its start-up scan of the unchanged files
        before = cpu_seconds(follower.pid)
        time.sleep(idle)
        idle_cpu = (cpu_seconds(follower.pid) - before) / idle * 100
        latencies = []
        for n, path in enumerate(files[:: max(1, len(files) // APPENDS)][:APPENDS]):
            sid = path.stem.split("-", 6)[-1]
            had = rows_of(db, sid)
            started = time.perf_counter()
            with path.open("ab") as stream:
                stream.write(message("user", f"And the tax, {n}{'.' * poll}?", 3 + n))
            while rows_of(db, sid) <= had:
                if time.perf_counter() - started > 30:
                    raise SystemExit(f"{path.name}: the appended line was not imported in 30 s")
                time.sleep(0.01)
            latencies.append(time.perf_counter() - started)
    finally:
        follower.terminate()
        follower.wait(timeout=30)
    return {"idle_cpu": idle_cpu, "latencies": latencies}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    options = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_follow_"))
    db = tmp / "bench.sqlite3"
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db}",
        "SECRET_KEY": "bench",
        "CELERY_BROKER_URL": "memory://",
        "HERMES_DATA_DIR": str(tmp),
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
    }
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [*manage, "shell", "-c", "from django.contrib.auth.models import User; "
         "User.objects.create_user('bench')"],
        cwd=ROOT, env=env, check=True,
    )  # fmt: skip
    home = tmp / "codex-sessions"
    files = write_files(home, options.files)
    started = time.perf_counter()
    subprocess.run(
        [*manage, "follow", str(home), "--user", "bench", "--once"],
        cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    first = time.perf_counter() - started
    print(f"follow: {options.files:,} files imported at start in {first:.1f} s")
    failed = False
    for poll in (False, True):
        how = "--poll" if poll else "file events"
        result = run(env, home, db, files, options.idle_seconds, poll)
        worst = max(result["latencies"])
        print(
            f"follow ({how}), {options.files:,} files idle for {options.idle_seconds:g} s: "
            f"{result['idle_cpu']:.2f} % of one core (target < {TARGET_IDLE_CPU:g} %)"
        )
        print(
            f"follow ({how}), appended line to stored row: median "
            f"{statistics.median(result['latencies']):.2f} s, max {worst:.2f} s over "
            f"{len(result['latencies'])} files (target < {TARGET_APPEND_SECONDS:g} s); each: "
            + ", ".join(f"{s:.2f}" for s in result["latencies"])
        )
        failed |= result["idle_cpu"] >= TARGET_IDLE_CPU or worst >= TARGET_APPEND_SECONDS
    # The embedded default: the worker's beat scans the followed folder every 5 s.
    scan = subprocess.run(
        [*manage, "shell", "-c", SCAN.format(home=str(home))],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    per_scan = float(scan.stdout.strip().splitlines()[-1])
    share = per_scan / 5.0 * 100
    print(
        f"follow (beat scan every 5 s), {options.files:,} unchanged files: {per_scan * 1000:.0f} ms "
        f"CPU per scan, {share:.2f} % of one core (target < {TARGET_IDLE_CPU:g} %)"
    )
    failed |= share >= TARGET_IDLE_CPU
    return 1 if failed else 0


SCAN = """
import time
from django.contrib.auth.models import User
from hermes_web.importers.follow import scan_followed_folders
from hermes_web.models import FollowedFolder
FollowedFolder.objects.create(owner=User.objects.get(username="bench"), path="{home}")
scan_followed_folders()
started = time.process_time()
for _ in range(5):
    scan_followed_folders()
print((time.process_time() - started) / 5)
"""


if __name__ == "__main__":
    sys.exit(main())
