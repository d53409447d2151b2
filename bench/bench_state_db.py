"""state.db import benchmark (issue #39): 20,000 sessions without Hermes's index on
``messages.session_id`` (the probe's 1.6 MB file that took past 120 s), and one session of
1,000,000 rows (the probe's 30 MB file whose import peaked at 1,019 MB RSS).

Each file is written into a temp dir from our own schema (tests/web/hermes_state_db.py),
then imported by ``import_sessions`` in a fresh process against a throwaway SQLite database;
the figures are that process's wall time and peak RSS (VmHWM), and the sessions stored. A
second import of the same file (every session a duplicate) is timed too.

    .venv/bin/python bench/bench_state_db.py [--sessions 20000] [--rows 1000000] [--keep]

Targets: the 20,000 sessions in under 60 s (the upload budget is 90 s); each import under
300 MB peak RSS. Prints each figure with PASS/MISS.

Measured 2026-12-05 on the 2-core box under load (load average 4–9, other work running):
- 1 session of 200,000 rows (18.6 MB), before (e9aea12, each session read whole) / after:
  34.6 / 36.5 s, peak RSS 485 / 168 MB; refusing it again as a duplicate 16.1 s, 480 MB /
  0.6 s, 84 MB.
- 1 session of 1,000,000 rows (93.7 MB), after: 101.3 s, peak RSS 168 MB (the probe's worker
  peaked at 1,019 MB on 30 MB); as a duplicate 0.5 s, 84 MB.
- 20,000 sessions without the index (4.3 MB), after: 198.5 s, 214 MB (MISS: ~10 ms a
  session of ORM work and one commit each, linear; before, each session was a full scan of
  the messages table, past 120 s for the probe's 1.6 MB file); as duplicates 13.1 s, 103 MB.
- WAL after each: 0.0 MB.
- Small sessions grouped per transaction (issue #39, importers/groups.py), load average
  8.2-8.9 on 2 cores: 20,000 sessions 75.2 s, 243 MB (MISS on that box: 18 s of CPU, ~0.9 ms
  a session, the rest waiting for a core); as duplicates 4.1 s, 103 MB. The code before,
  measured just before at the same load: 5,000 sessions 398.2 s (~80 ms a session: two
  Celery publishes each, a commit each in the embedded broker's SQLite, and its own commit);
  after, 5,000 sessions 18.3 s at the same load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.web.hermes_state_db import SCHEMA  # noqa: E402

PYTHON = sys.executable
TARGET_MB = 300
TARGET_SECONDS = 60


def many_sessions(path: Path, sessions: int) -> Path:
    """``sessions`` sessions of two messages each, and no index on messages.session_id."""
    db = sqlite3.connect(path)
    db.executescript(
        SCHEMA.replace("CREATE INDEX idx_messages_session ON messages(session_id, id);", "")
    )
    db.executemany(
        "INSERT INTO sessions (id, source, model, started_at) VALUES (?, 'cli', 'gpt-4o', ?)",
        ((f"s{i:06d}", float(i)) for i in range(sessions)),
    )
    db.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)",
        (
            (f"s{i // 2:06d}", "user" if i % 2 == 0 else "assistant", f"turn {i}", float(i))
            for i in range(sessions * 2)
        ),
    )
    db.commit()
    db.close()
    return path


def one_long_session(path: Path, rows: int) -> Path:
    """One session of ``rows`` short messages (Hermes's index kept)."""
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.execute(
        "INSERT INTO sessions (id, source, model, started_at) VALUES ('long', 'cli', 'gpt-4o', 1)"
    )
    db.executemany(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('long', ?, ?, ?)",
        (
            ("user" if i % 2 == 0 else "assistant", f"message {i} " + "x" * 16, float(i))
            for i in range(rows)
        ),
    )
    db.commit()
    db.close()
    return path


def run_import(path: Path, data: Path) -> tuple[float, int, str]:
    """(seconds, peak RSS MB, summary line) of ``manage.py import_sessions`` in a fresh process."""
    env = {
        **os.environ,
        "HERMES_DATA_DIR": str(data),
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
        "HERMES_IMPORT_CLI_SECONDS": "3600",
    }
    code = (
        "import os, time, django, resource, sys\n"
        "django.setup()\n"
        "from django.core.management import call_command\n"
        "from django.contrib.auth import get_user_model\n"
        "call_command('migrate', verbosity=0)\n"
        "get_user_model().objects.get_or_create(username='bench')\n"
        "from io import StringIO\n"
        "out = StringIO()\n"
        "start = time.perf_counter()\n"
        "try:\n"
        f"    call_command('import_sessions', {str(path)!r}, user='bench', stdout=out, stderr=StringIO())\n"
        "except Exception as error:\n"
        "    out.write('summary: ' + str(error) + '\\n')\n"
        "took = time.perf_counter() - start\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
        "line = [l for l in out.getvalue().splitlines() if l.startswith('summary')][-1]\n"
        "print(f'{took:.1f} {int(hwm) // 1024} {line}')\n"
    )
    result = subprocess.run(
        [PYTHON, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    if result.returncode:
        raise SystemExit(result.stderr[-3000:])
    took, rss, line = result.stdout.strip().splitlines()[-1].split(" ", 2)
    return float(took), int(rss), line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-state-db-"))
    try:
        cases = []  # a count of 0 leaves that case out
        if args.sessions:
            path = many_sessions(work / "many.db", args.sessions)
            cases.append((f"{args.sessions:,} sessions, no index", path))
        if args.rows:
            cases.append(
                (f"1 session of {args.rows:,} rows", one_long_session(work / "long.db", args.rows))
            )
        for label, path in cases:
            data = work / f"data-{path.stem}"
            data.mkdir()
            size = path.stat().st_size / 2**20
            took, rss, line = run_import(path, data)
            again, again_rss, again_line = run_import(path, data)
            wal = data / "hermes.sqlite3-wal"
            wal_mb = wal.stat().st_size / 2**20 if wal.exists() else 0.0
            fast = "PASS" if took <= TARGET_SECONDS else "MISS"
            small = "PASS" if max(rss, again_rss) <= TARGET_MB else "MISS"
            print(
                f"{label} ({size:.1f} MB): {took:.1f} s [{fast} ≤ {TARGET_SECONDS} s], "
                f"peak RSS {rss} MB [{small} ≤ {TARGET_MB} MB]; {line}"
            )
            print(f"  again (all duplicates): {again:.1f} s, peak RSS {again_rss} MB; {again_line}")
            print(f"  WAL after both: {wal_mb:.1f} MB")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
