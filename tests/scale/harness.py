"""The scale proofs' harness: real worker and web processes, data builders, row dumps.

Every process started here runs in its own process group, so a SIGKILL of the group takes
the Celery prefork parent and its pool children down together, as a machine losing power
(or an OOM kill of the whole container) would.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.conftest import database_url_for

ROOT = Path(__file__).resolve().parent.parent.parent
PYTHON = sys.executable


def worker_database_url() -> str:
    """A DATABASE_URL for subprocesses: the test database this process uses."""
    return database_url_for(connection.settings_dict)


def base_env(extra_env: dict | None = None) -> dict:
    return {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "SECRET_KEY": settings.SECRET_KEY,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "PYTHONDONTWRITEBYTECODE": "1",
        **(extra_env or {}),
    }


class _Process:
    """A subprocess in its own process group, its output in a log file."""

    def __init__(self, argv: list[str], log_path: Path, env: dict):
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group (parent and every pool child)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def group_alive(self) -> bool:
        """Whether any process of the group still runs (zombies awaiting their reaper do not count)."""
        self.proc.poll()  # reap our own child, the group leader
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z" and int(fields[2]) == self.proc.pid:
                return True
        return False

    def stop(self, timeout: float = 20) -> None:
        if self.alive():
            self.kill_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
        self.kill_group(signal.SIGKILL)  # stray pool children, if any
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)
        if not self._log.closed:
            self._log.close()


class ScaleWorker(_Process):
    """A real `celery worker` (prefork pool) on Redis with the test's PostgreSQL database."""

    def __init__(
        self,
        log_dir: Path,
        *,
        queues: str = "compaction",
        concurrency: int = 1,
        extra_env: dict | None = None,
        name: str | None = None,
    ):
        self.name = name or f"w{uuid.uuid4().hex[:6]}"
        argv = [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "hermes_web",
            "worker",
            "--pool=prefork",
            f"--concurrency={concurrency}",
            "-Q",
            queues,
            "-n",
            f"{self.name}@%h",
            "-l",
            "info",
            "--without-gossip",
            "--without-mingle",
        ]
        super().__init__(argv, log_dir / f"worker-{self.name}.log", base_env(extra_env))

    def ready(self) -> bool:
        return " ready." in self.log()

    def tasks_finished(self) -> int:
        log = self.log()
        return log.count("succeeded in") + log.count("raised unexpected")


def start_workers(log_dir: Path, count: int, timeout: float = 90, **kwargs) -> list[ScaleWorker]:
    """Start ``count`` workers at once and wait until every one is consuming."""
    workers = [ScaleWorker(log_dir, **kwargs) for _ in range(count)]
    deadline = time.monotonic() + timeout
    for worker in workers:
        while not worker.ready():
            if not worker.alive():
                raise AssertionError(f"worker {worker.name} exited:\n{worker.log()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"worker {worker.name} not ready after {timeout}s:\n{worker.log()[-4000:]}"
                )
            time.sleep(0.2)
    return workers


class WebServer(_Process):
    """gunicorn serving the project on 127.0.0.1 with the test's database."""

    def __init__(
        self,
        log_dir: Path,
        port: int,
        *,
        workers: int = 3,
        threads: int = 4,
        extra_env: dict | None = None,
    ):
        self.port = port
        argv = [
            PYTHON,
            "-m",
            "gunicorn",
            "hermes_web.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--timeout",
            "120",
            "--graceful-timeout",
            "5",
            "--preload",  # as in Procfile.scaled: workers fork from a warmed master
            "--access-logfile",  # as in Procfile.scaled: one line per request, to the log
            "-",
            "--no-control-socket",  # as in Procfile.scaled: no shared ~/.gunicorn/gunicorn.ctl
        ]
        super().__init__(argv, log_dir / "gunicorn.log", base_env(extra_env))

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict | None = None,
        timeout: float = 60,
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def healthz(self) -> dict | None:
        try:
            status, body = self.request("GET", "/healthz", timeout=10)
        except OSError:
            return None
        try:
            data = json.loads(body)
        except ValueError:
            return None
        data["_status"] = status
        return data

    def wait_ready(self, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"gunicorn exited:\n{self.log()[-4000:]}")
            health = self.healthz()
            if health is not None and health["_status"] == 200:
                return health
            time.sleep(0.3)
        raise AssertionError(f"gunicorn not healthy after {timeout}s:\n{self.log()[-4000:]}")


# --- data ------------------------------------------------------------------------------

_WORDS = [
    "the",
    "agent",
    "reads",
    "config",
    "file",
    "parser",
    "error",
    "retry",
    "token",
    "window",
    "summary",
    "tool",
    "call",
    "result",
    "branch",
    "commit",
    "test",
    "fixture",
    "database",
    "index",
    "query",
    "migration",
    "worker",
    "queue",
    "lease",
    "lock",
    "rotation",
    "archive",
    "session",
    "message",
    "request",
    "response",
    "latency",
    "budget",
    "tail",
    "head",
    "middle",
    "slim",
    "fold",
    "truncate",
    "report",
    "inspector",
    "timeline",
    "import",
    "export",
    "schema",
    "column",
    "value",
    "cache",
]


def _text(rng: random.Random, low: int = 300, high: int = 800) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:target]


def short_conversation(n_messages: int, seed: int = 0) -> list[dict]:
    """A provider-valid agent conversation of exactly ``n_messages`` short (300–800 char) messages."""
    rng = random.Random(seed)
    messages: list[dict] = [
        {"role": "system", "content": "You are Hermes, a coding agent. " + _text(rng, 200, 300)}
    ]
    turn = 0
    while len(messages) < n_messages:
        turn += 1
        messages.append({"role": "user", "content": f"(turn {turn}) " + _text(rng)})
        remaining = n_messages - len(messages)
        if remaining >= 3 and rng.random() < 0.5:
            call_id = f"call_{seed}_{turn}"
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": "read_file",
                                "arguments": json.dumps({"path": f"src/m{turn}.py"}),
                            },
                        }
                    ],
                }
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "name": "read_file",
                    "content": _text(rng),
                }
            )
        if len(messages) < n_messages:
            messages.append({"role": "assistant", "content": _text(rng)})
    return messages[:n_messages]


_TOKEN_CACHE: dict[tuple[int, int], list[int]] = {}


def build_session(
    owner,
    n_messages: int,
    *,
    seed: int = 0,
    title: str = "",
    compaction_mode: str = "",
    context_length: int = 200_000,
):
    """A root session holding ``n_messages`` rows, written with bulk_create (tokens counted once per template)."""
    from compaction import CompactionConfig, count_message_tokens
    from hermes_web.models import Message
    from hermes_web.services.sessions import create_session, token_model

    session = create_session(
        owner=owner,
        title=title or f"scale {seed}",
        context_length=context_length,
        compaction_mode=compaction_mode,
    )
    messages = short_conversation(n_messages, seed)
    key = (n_messages, seed)
    if key not in _TOKEN_CACHE:
        config = CompactionConfig(model=token_model(session))
        _TOKEN_CACHE[key] = [count_message_tokens(m, config) for m in messages]
    counts = _TOKEN_CACHE[key]
    Message.objects.bulk_create(
        [
            Message(
                session_id=session.pk,
                position=i,
                role=m["role"],
                content=m["content"],
                tool_calls=m.get("tool_calls"),
                tool_call_id=m.get("tool_call_id", ""),
                tool_name=m.get("name", ""),
                token_count=counts[i],
            )
            for i, m in enumerate(messages)
        ],
        batch_size=2000,
    )
    return session


def clone_session(template, owner, *, title: str):
    """A new root session with a copy of ``template``'s messages, copied inside PostgreSQL.

    Far faster than a second bulk_create of the same rows; used to build the throughput set.
    """
    from hermes_web.models import Message
    from hermes_web.services.sessions import create_session

    session = create_session(
        owner=owner,
        title=title,
        context_length=template.context_length,
        compaction_mode=template.compaction_mode,
    )
    columns = [
        f.column for f in Message._meta.concrete_fields if f.column not in ("id", "session_id")
    ]
    listed = ", ".join(f'"{c}"' for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO hermes_web_message (session_id, {listed}) "
            f"SELECT %s, {listed} FROM hermes_web_message WHERE session_id = %s ORDER BY position",
            [session.pk, template.pk],
        )
    return session


# --- inspection ------------------------------------------------------------------------


def dump_table(table: str, where: str = "", params: tuple = (), order: str = "id") -> list[str]:
    """Every row of ``table`` as its JSON text, in primary-key order (a byte-level snapshot)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT row_to_json(t)::text FROM {table} t {where} ORDER BY t.{order}", params
        )
        return [row[0] for row in cursor.fetchall()]


def table_counts() -> dict[str, int]:
    counts = {}
    with connection.cursor() as cursor:
        for table in (
            "hermes_web_session",
            "hermes_web_message",
            "hermes_web_compaction",
            "hermes_web_sessionlock",
        ):
            cursor.execute(f"SELECT count(*) FROM {table}")
            counts[table] = cursor.fetchone()[0]
    return counts


def orphan_report() -> dict[str, int]:
    """Rows pointing at nothing, or sessions that are half a rotation; all must be 0."""
    queries = {
        "messages_without_session": "SELECT count(*) FROM hermes_web_message m LEFT JOIN hermes_web_session s ON s.id = m.session_id WHERE s.id IS NULL",
        "child_sessions_without_messages": "SELECT count(*) FROM hermes_web_session s WHERE s.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM hermes_web_message m WHERE m.session_id = s.id)",
        "child_sessions_without_committed_run": "SELECT count(*) FROM hermes_web_session s WHERE s.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM hermes_web_compaction c WHERE c.result_session_id = s.id AND c.status = 'committed')",
        "ended_parents_without_child": "SELECT count(*) FROM hermes_web_session s WHERE s.end_reason = 'compression' AND NOT EXISTS (SELECT 1 FROM hermes_web_session c WHERE c.parent_id = s.id)",
        "archived_rows_without_committed_run": "SELECT count(*) FROM hermes_web_message m LEFT JOIN hermes_web_compaction c ON c.id = m.archived_by_id WHERE m.archived AND (c.id IS NULL OR c.status <> 'committed')",
        "sessions_with_two_children": "SELECT count(*) FROM (SELECT parent_id FROM hermes_web_session WHERE parent_id IS NOT NULL GROUP BY parent_id HAVING count(*) > 1) x",
        "duplicate_positions": "SELECT count(*) FROM (SELECT session_id, position FROM hermes_web_message GROUP BY 1, 2 HAVING count(*) > 1) x",
    }
    report = {}
    with connection.cursor() as cursor:
        for name, sql in queries.items():
            cursor.execute(sql)
            report[name] = cursor.fetchone()[0]
    return report


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def wait_until(predicate, timeout: float, message, workers=(), interval: float = 0.2):
    """Poll ``predicate``; fail with ``message`` (str or callable) and the workers' log tails on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    logs = "\n".join(
        f"--- {w.name if hasattr(w, 'name') else w.pid} ---\n{w.log()[-3000:]}" for w in workers
    )
    text = message() if callable(message) else message
    raise AssertionError(f"timed out after {timeout}s waiting for {text}\n{logs}")
