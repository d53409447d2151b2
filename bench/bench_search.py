"""Search latency and index size at 10k, 100k and 1M stored messages (issue #35).

Fills a throwaway database (never the real one) with agent-like rows (paths, shell commands,
tool calls, error lines, CJK), written by plain bulk INSERTs so the search index's triggers
index them as any import would; at each size it times ``services.search`` (parse, count,
page of 20 hits, snippets) for one-word and phrase queries, and reports the index size:

    .venv/bin/python bench/bench_search.py [--sizes 10000,100000,1000000] [--db sqlite|postgres|both]

PostgreSQL is started on 127.0.0.1 in a temp folder (tools/localservices.py) when installed.
Target: p95 ≤ 300 ms at 1M messages for each query kind. Prints PASS/MISS.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_MS = 300
REPEAT = 5
ROWS_PER_SESSION = 2000
QUERIES = {
    # A word in ~4 % of rows, one in ~1 in 10,000, and an identifier of one row in ~50,000.
    "one word (common)": ["ECONNREFUSED", "Traceback", "pytest"],
    "one word (rare)": ["handler_4821", "router_1234", "0x7f3a"],
    "phrase": ['"connection refused"', '"No module named"', '"git commit --no-verify"'],
}

DIRS = ["src/app", "src/api", "lib/core", "tests/unit", "web/static/js", "cmd/server", "pkg/db"]
NAMES = ["parser", "models", "views", "handler", "config", "client", "router", "schema"]
EXTS = [".py", ".ts", ".go", ".rs", ".md", ".json", ".yaml"]
COMMANDS = [
    "pytest -q {path}",
    "git commit --no-verify -m 'wip {n}'",
    "npm run build -- --filter {name}",
    "rg -n '{name}' {dir}",
    "sed -n 1,80p {path}",
    "go test ./{dir}/...",
    "cargo build --release",
    "git checkout -b feat/{name}-v{n}",
]
ERRORS = [
    "Error: connect ECONNREFUSED 127.0.0.1:{port} (connection refused)",
    "ModuleNotFoundError: No module named '{name}_{n}'",
    'Traceback (most recent call last):\n  File "{path}", line {n}, in <module>',
    "TypeError: cannot read properties of undefined (reading '{name}')",
    "FAILED {path}::test_{name}_{n} - AssertionError: assert {n} == {port}",
    "fatal: pointer at 0x{hex} is not aligned",
    "错误：无法连接数据库 {name}",
]
WORDS = [
    "the",
    "a",
    "fix",
    "change",
    "update",
    "check",
    "add",
    "remove",
    "test",
    "file",
    "function",
    "value",
    "error",
    "output",
    "result",
    "because",
    "should",
    "could",
    "then",
    "now",
    "after",
    "before",
    "config",
    "build",
    "run",
    "server",
    "client",
    "request",
]


def _path(rng: random.Random) -> str:
    n = rng.randrange(60_000)
    return f"{rng.choice(DIRS)}/{rng.choice(NAMES)}_{n}{rng.choice(EXTS)}"


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        path=_path(rng),
        name=rng.choice(NAMES),
        dir=rng.choice(DIRS),
        n=rng.randrange(10_000),
        port=rng.choice([5432, 6379, 8080, 3000]),
        hex=f"{rng.randrange(16**6):06x}",
    )


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def make_row(i: int, rng: random.Random) -> tuple[str, str | None, str | None, str]:
    """(role, content JSON, tool_calls JSON, tool_call_id) of message ``i`` of a session."""
    turn = i % 4
    if turn == 0:
        text = f"please {_prose(rng, 6)} {_path(rng)} {_prose(rng, 8)}"
        return "user", json.dumps(text, ensure_ascii=False), None, ""
    if turn == 1:
        command = _fill(rng.choice(COMMANDS), rng)
        calls = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "terminal", "arguments": json.dumps({"command": command})},
            }
        ]
        return "assistant", json.dumps(_prose(rng, 10)), json.dumps(calls), ""
    if turn == 2:
        lines = [_fill(rng.choice(ERRORS), rng) if rng.random() < 0.3 else _path(rng)]
        lines += [f"{_path(rng)}:{rng.randrange(400)}: {_prose(rng, 5)}" for _ in range(4)]
        lines.append(f"exit code {rng.choice([0, 0, 0, 1, 2])}")
        return "tool", json.dumps("\n".join(lines), ensure_ascii=False), None, f"call_{i - 1}"
    return "assistant", json.dumps(f"I {_prose(rng, 20)} in {_path(rng)}."), None, ""


def fill_to(target: int, owner_id: int, state: dict) -> float:
    """Insert rows until ``target`` messages are stored; returns the seconds it took."""
    from django.db import connection, transaction

    from hermes_web.models import Session

    json_cast = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    sql = (
        "INSERT INTO hermes_web_message (session_id, position, role, content, tool_calls,"
        " tool_call_id, tool_name, reasoning, token_count, active, archived, is_summary, extra,"
        f" created_at) VALUES (%s, %s, %s, {json_cast}, {json_cast}, %s, '', NULL, 0, %s, %s,"
        f" %s, {json_cast}, %s)"
    )
    rng = state["rng"]
    started = time.perf_counter()
    while state["stored"] < target:
        session = Session.objects.create(owner_id=owner_id, title=f"bench {state['stored']}")
        n = min(ROWS_PER_SESSION, target - state["stored"])
        created = "2026-01-01 00:00:00" if connection.vendor == "sqlite" else "2026-01-01T00:00:00Z"
        batch = []
        for i in range(n):
            role, content, calls, call_id = make_row(i, rng)
            batch.append(
                (session.pk, i, role, content, calls, call_id, True, False, False, "{}", created)
            )
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, batch)
        state["stored"] += n
    return time.perf_counter() - started


def index_size(connection) -> int:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_total_relation_size('hermes_search')")
        else:
            cursor.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'hermes_search%'")
        return int(cursor.fetchone()[0] or 0)


def measure(user) -> dict[str, tuple[float, float, int]]:
    from hermes_web.services.search import parse_query, search

    figures = {}
    for label, queries in QUERIES.items():
        times = []
        hits = 0
        for _ in range(REPEAT):
            for q in queries:
                started = time.perf_counter()
                result = search(user, parse_query(q), limit=20)
                times.append((time.perf_counter() - started) * 1000)
                hits = max(hits, result.count)
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        figures[label] = (statistics.median(times), p95, hits)
    return figures


def run(db: str, sizes: list[int]) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")
    get_user_model().objects.create_user("other")  # a second owner's rows are never read
    state = {"stored": 0, "rng": random.Random(35)}
    misses = 0
    from hermes_web.services.search_index import sync

    for size in sizes:
        seconds = fill_to(size, user.pk, state)
        started = time.perf_counter()
        sync()  # what the worker's index_search task does after an import
        indexing = time.perf_counter() - started
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO hermes_search(hermes_search) VALUES ('optimize')")
        else:
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE hermes_search")
        size_mb = index_size(connection) / 2**20
        print(
            f"[{db}] {size:>9,} messages (+{seconds:.1f} s to write, +{indexing:.1f} s to index); "
            f"index {size_mb:,.1f} MB",
            flush=True,
        )
        for label, (p50, p95, hits) in measure(user).items():
            verdict = ""
            if size >= 1_000_000:
                ok = p95 <= TARGET_MS
                misses += not ok
                verdict = f"  {'PASS' if ok else 'MISS'} (p95 ≤ {TARGET_MS} ms)"
            print(
                f"    {label:<20} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  (≥ {hits:,} hits){verdict}"
            )
    return 1 if misses else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        return run("postgres" if os.environ.get("DATABASE_URL") else "sqlite", sizes)

    from tools.localservices import Postgres, free_port, postgres_bin_dir

    failures = 0
    child = [sys.executable, __file__, "--child", "--sizes", args.sizes]
    base = {**os.environ, "DJANGO_SETTINGS_MODULE": "hermes_web.settings"}
    base.pop("DATABASE_URL", None)
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        if args.db in ("sqlite", "both"):
            env = {**base, "HERMES_DATA_DIR": str(Path(tmp) / "sqlite")}
            failures += subprocess.run(child, env=env).returncode != 0
        if args.db in ("postgres", "both"):
            if postgres_bin_dir() is None:
                print("[postgres] skipped: PostgreSQL is not installed (make system-deps)")
            else:
                (ROOT / "var").mkdir(exist_ok=True)
                workdir = Path(tempfile.mkdtemp(prefix="bench-search-pg-", dir=ROOT / "var"))
                postgres = Postgres(workdir / "postgres", free_port())
                try:
                    url = postgres.start(durable=False)
                    env = {
                        **base,
                        "HERMES_DATA_DIR": str(Path(tmp) / "pg"),
                        "DATABASE_URL": url,
                        # Settings want a key off SQLite; this process serves nothing.
                        "SECRET_KEY": "bench-search-throwaway",
                    }
                    failures += subprocess.run(child, env=env).returncode != 0
                finally:
                    postgres.stop()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
