"""Memory benchmark: web and worker RSS while serving, exporting, importing and compacting a
1M-message session.

Everything runs against a throwaway SQLite database in a temp dir (never the real one):

    .venv/bin/python bench/bench_memory.py [--messages 1000000] [--import-messages N] [--keep]

Phases, each measured as the peak RSS (VmHWM, reset between phases) of the process doing it:
- web (gunicorn, one sync worker, as Procfile.scaled runs it): the conversation page (first and
  newest window), the chat page, the streamed openai and hermes-jsonl exports, an upload over
  the size limit (refused from its Content-Length), and import uploads of the session as an
  OpenAI JSON file, a Claude Code transcript and a Codex rollout (those two JSONL files are
  larger than the upload limit at 1M messages: their phases raise it for that process);
- worker: one compaction of the whole session (load, engine with the deterministic summarizer,
  commit by rotation), in a fresh process as a Celery task would run it; then the web process
  serving the inspector page of that compaction and its fact-survival audit.

Target: every phase under 300 MB. Prints each figure with PASS/MISS.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PYTHON = sys.executable
TARGET_MB = 300

_ASKS = [
    "Why does the parser fail on the second config file?",
    "Run the tests again and show me what broke.",
    "Look for every caller of load_settings in src/.",
    "Fix the off-by-one in the pagination helper, please.",
    "What does the retry decorator do when the budget runs out?",
    "Add a test for the empty-window case and run it.",
]
_REPLIES = [
    "The parser reads the second file with the first file's encoding; I changed it to detect "
    "the encoding per file and the test passes now.",
    "Two tests failed: test_window_empty and test_retry_budget. Both expect the old default.",
    "Done. The helper now counts from zero and the last page is no longer dropped.",
    "It stops retrying and re-raises the last error with the attempt count in the message.",
]
_TOOLS = ["read_file", "terminal", "search_files"]


def _words(rng: random.Random, size: int) -> str:
    vocabulary = ["def", "class", "return", "import", "self", "value", "error", "config"]
    out, length = [], 0
    while length < size:
        word = rng.choice(vocabulary)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


def rows(n_messages: int, seed: int = 7):
    """(position, role, content JSON, tool_calls JSON, tool_call_id, tool_name, tokens) rows
    of a provider-valid agent session: short turns, tool rounds, now and then a long output."""
    rng = random.Random(seed)
    position = 0

    def row(role, content, calls=None, call_id="", name=""):
        nonlocal position
        text = content if isinstance(content, str) else ""
        tokens = 4 + len(text) // 4 + (len(json.dumps(calls)) // 4 if calls else 0)
        out = (
            position,
            role,
            json.dumps(content),
            json.dumps(calls) if calls else None,
            call_id,
            name,
            tokens,
        )
        position += 1
        return out

    yield row("system", "You are Hermes, a coding agent working in the user's repository.")
    turn = 0
    while position < n_messages:
        turn += 1
        yield row("user", f"(turn {turn}) {rng.choice(_ASKS)}")
        if position + 3 <= n_messages and rng.random() < 0.7:
            name = rng.choice(_TOOLS)
            call_id = f"call_{turn}"
            args = (
                {"path": f"src/module_{turn % 97}.py"}
                if name != "terminal"
                else {"command": "pytest -q"}
            )
            yield row(
                "assistant",
                "",
                [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            )
            size = 3000 if rng.random() < 0.04 else rng.randint(80, 300)
            yield row("tool", _words(rng, size), call_id=call_id, name=name)
        if position < n_messages:
            yield row("assistant", rng.choice(_REPLIES))


# --- setup -----------------------------------------------------------------------------


def django_env(data_dir: Path) -> dict:
    env = {
        **os.environ,
        "HERMES_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "HERMES_DEMO_DATA": "false",
        "SECRET_KEY": "bench-memory-not-secret",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("DATABASE_URL", None)
    return env


def build(data_dir: Path, n_messages: int) -> dict:
    """Migrate, create a user, an API key and a session, then write its rows with sqlite3."""
    env = django_env(data_dir)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    script = """
import json, django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
from hermes_web.models import ApiKey
from hermes_web.services.sessions import create_session
user = get_user_model().objects.create_user("bench", password="bench-pass-123")
_, key = ApiKey.issue(owner=user, name="bench")
session = create_session(owner=user, title="one million", context_length=200_000)
client = Client()
client.force_login(user)
print(json.dumps({"key": key, "session": session.public_id, "session_pk": session.pk,
                  "cookie": client.cookies["sessionid"].value}))
"""
    out = subprocess.run(
        [PYTHON, "-c", script], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    info = json.loads(out.stdout.strip().splitlines()[-1])
    started = time.perf_counter()
    db = sqlite3.connect(data_dir / "hermes.sqlite3")
    db.execute("PRAGMA journal_mode=WAL")
    columns = (
        "session_id, position, role, content, tool_calls, tool_call_id, tool_name, token_count, "
        "active, archived, is_summary, extra, created_at, reasoning, provider_prompt_tokens"
    )
    now = "2026-12-03 08:00:00"
    batch = []
    for position, role, content, calls, call_id, name, tokens in rows(n_messages):
        batch.append(
            (
                info["session_pk"],
                position,
                role,
                content,
                calls,
                call_id,
                name,
                tokens,
                1,
                0,
                0,
                "{}",
                now,
                None,
                None,
            )
        )
        if len(batch) >= 20_000:
            db.executemany(
                f"INSERT INTO hermes_web_message ({columns}) VALUES ({', '.join('?' * 15)})", batch
            )
            batch = []
    if batch:
        db.executemany(
            f"INSERT INTO hermes_web_message ({columns}) VALUES ({', '.join('?' * 15)})", batch
        )
    db.commit()
    size = db.execute(
        "SELECT sum(length(content)) + sum(coalesce(length(tool_calls), 0)) FROM hermes_web_message"
    ).fetchone()[0]
    db.close()
    info["build_seconds"] = time.perf_counter() - started
    info["text_mb"] = size / 2**20
    return info


# --- measuring -------------------------------------------------------------------------


def hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_hwm(pid: int) -> None:
    # Writing 5 to clear_refs resets the peak RSS to the current RSS (Linux >= 4.0).
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("PPid:") and int(line.split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Web:
    """gunicorn with one sync worker (Procfile.scaled's shape) on the bench database."""

    def __init__(self, data_dir: Path, info: dict, env: dict | None = None):
        self.port = free_port()
        self.info = info
        self.log = open(data_dir / "gunicorn.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "gunicorn",
                "hermes_web.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                "1",
                "--threads",
                "1",
                "--timeout",
                "600",
                "--preload",
            ],
            cwd=ROOT,
            env={**django_env(data_dir), **(env or {})},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/healthz")[0] in (200, 503):
                    break
            except OSError:
                time.sleep(0.3)
        self.worker = children(self.proc.pid)[0]

    def request(self, method, path, body=None, headers=None, sink=False, timeout=600):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = {
                "Authorization": f"Bearer {self.info['key']}",
                "Cookie": f"sessionid={self.info['cookie']}",
                **(headers or {}),
            }
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            total = 0
            self.head = b""
            while chunk := response.read(1 << 20):
                total += len(chunk)
                self.head = self.head or chunk[:65536]
            return response.status, total
        finally:
            conn.close()

    def measure(self, label: str, method: str, path: str, **kwargs) -> tuple[str, float, str]:
        reset_hwm(self.worker)
        started = time.perf_counter()
        status, size = self.request(method, path, **kwargs)
        seconds = time.perf_counter() - started
        detail = f"HTTP {status}, {size / 2**20:.1f} MB, {seconds:.1f}s"
        if path == "/api/import" and status == 200:
            with contextlib.suppress(ValueError, KeyError, IndexError):
                imported = json.loads(self.head)["imported"][0]
                kept = imported["fidelity"]
                rows = kept["messages"] + kept["archived"] + kept["meta_rows"]
                detail += f", {kept['records']:,} records stored as {rows:,} rows"
        return (f"web  {label}", hwm_mb(self.worker), detail)

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.log.close()


WORKER_SCRIPT = """
import json, resource, time, django
django.setup()
from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import run_compaction
session = Session.objects.get(public_id=%(session)r)
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
run = Compaction.objects.create(session=session, trigger="manual", summarizer="deterministic",
                                mode="rotation")
started = time.perf_counter()
run = run_compaction(run.pk)
print(json.dumps({"status": run.status, "error": run.error, "id": run.public_id, "seconds": time.perf_counter() - started,
                  "baseline_mb": baseline, "before": run.tokens_before, "after": run.tokens_after,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def compact_in_worker(data_dir: Path, info: dict) -> dict:
    out = subprocess.run(
        [PYTHON, "-c", WORKER_SCRIPT % {"session": info["session"]}],
        cwd=ROOT,
        env=django_env(data_dir),
        capture_output=True,
        text=True,
    )
    if out.returncode:
        return {"error": out.stderr[-2000:], "peak_mb": float("nan")}
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_import(data_dir: Path, n_messages: int) -> tuple[Path, str]:
    """A multipart body holding an OpenAI-format JSON list of ``n_messages``, on disk."""
    boundary = "benchmemoryboundary"
    path = data_dir / "import.multipart"
    with path.open("w") as out:
        out.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            'filename="session.json"\r\nContent-Type: application/json\r\n\r\n['
        )
        for i, (_, role, content, calls, call_id, _name, _) in enumerate(rows(n_messages, seed=11)):
            message = {"role": role, "content": json.loads(content)}
            if calls:
                message["tool_calls"] = json.loads(calls)
            if call_id:
                message["tool_call_id"] = call_id
            out.write(("," if i else "") + json.dumps(message))
        out.write(f"]\r\n--{boundary}--\r\n")
    return path, f"multipart/form-data; boundary={boundary}"


def write_jsonl_import(data_dir: Path, fmt: str, n_messages: int) -> tuple[Path, str]:
    """A multipart body holding a Claude Code transcript or a Codex rollout of about
    ``n_messages`` stored rows (tests/agent_logs.py: split responses, stubs, meta rows,
    compactions), on disk."""
    from tests.agent_logs import claude_code_lines, codex_lines

    boundary = "benchmemoryboundary"
    if fmt == "claude-code":
        lines, name = claude_code_lines(n_messages), "5e55a1d0-0000-4000-8000-00000000abcd.jsonl"
    else:
        lines, name = codex_lines(n_messages), "rollout-2026-02-23T11-40-00-bench.jsonl"
    path = data_dir / f"import-{fmt}.multipart"
    with path.open("w") as out:
        out.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{name}"\r\nContent-Type: application/x-ndjson\r\n\r\n'
        )
        for line in lines:
            out.write(line + "\n")
        out.write(f"\r\n--{boundary}--\r\n")
    return path, f"multipart/form-data; boundary={boundary}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument(
        "--import-messages",
        type=int,
        default=None,
        help="messages in the imported file (default: --messages)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument(
        "--chat", action="store_true", help="kept for old command lines: always measured now"
    )
    args = parser.parse_args()
    results: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="hermes-bench-memory-") as tmp:
        data_dir = Path(tmp)
        info = build(data_dir, args.messages)
        print(
            f"built a {args.messages:,}-message session ({info['text_mb']:.0f} MB of message text) "
            f"in {info['build_seconds']:.1f}s"
        )
        sid = info["session"]
        phases = [
            ("idle (after start)", "GET", "/healthz", {}),
            ("conversation page, first window", "GET", f"/conversations/{sid}/", {}),
            (
                "conversation page, a late window",
                "GET",
                f"/conversations/{sid}/?start={args.messages - 150}",
                {},
            ),
            ("export openai (streamed)", "GET", f"/api/sessions/{sid}/export?format=openai", {}),
            (
                "export hermes-jsonl (streamed)",
                "GET",
                f"/api/sessions/{sid}/export?format=hermes-jsonl",
                {},
            ),
            (
                "upload declared 1 GiB (refused unread)",
                "POST",
                "/api/import",
                {
                    "body": b"",
                    "headers": {
                        "Content-Length": str(2**30),
                        "Content-Type": "multipart/form-data; boundary=x",
                    },
                },
            ),
        ]
        phases.append(("chat page (its newest window)", "GET", f"/chat/{sid}/", {}))
        n_import = args.import_messages if args.import_messages is not None else args.messages
        if n_import:
            upload, content_type = write_import(data_dir, n_import)
            size = upload.stat().st_size
            phases.append(
                (
                    f"import openai file ({size / 2**20:.0f} MB, {n_import:,} msgs)",
                    "POST",
                    "/api/import",
                    {
                        "body": upload,
                        "headers": {"Content-Type": content_type, "Content-Length": str(size)},
                    },
                )
            )
            for fmt in ("claude-code", "codex"):
                upload, content_type = write_jsonl_import(data_dir, fmt, n_import)
                size = upload.stat().st_size
                phases.append(
                    (
                        f"import {fmt} file ({size / 2**20:.0f} MB, ~{n_import:,} msgs)",
                        "POST",
                        "/api/import",
                        {
                            "body": upload,
                            "headers": {"Content-Type": content_type, "Content-Length": str(size)},
                            # Claude Code records are verbose: 1M messages is over 200 MB.
                            "env": {"HERMES_MAX_UPLOAD_BYTES": str(max(size * 2, 200 * 2**20))},
                        },
                    )
                )
        # A fresh web process per phase: what one request costs, not what earlier ones left.
        for label, method, path, kwargs in phases:
            web = Web(data_dir, info, kwargs.pop("env", None))
            try:
                if isinstance(kwargs.get("body"), Path):
                    with kwargs["body"].open("rb") as body:
                        results.append(web.measure(label, method, path, **{**kwargs, "body": body}))
                else:
                    results.append(web.measure(label, method, path, **kwargs))
            finally:
                web.stop()
        compaction = compact_in_worker(data_dir, info)
        detail = (
            f"{compaction.get('status')}, {compaction.get('seconds', 0):.1f}s, tokens "
            f"{compaction.get('before')} -> {compaction.get('after')}, process baseline "
            f"{compaction.get('baseline_mb', 0):.0f} MB"
        )
        if compaction.get("error"):
            detail += f", error: {compaction['error'][-300:]}"
        results.append(("worker compaction (load, engine, commit)", compaction["peak_mb"], detail))
        if compaction.get("id"):
            web = Web(data_dir, info)
            try:
                label = "inspector of that compaction"
                results.append(web.measure(label, "GET", f"/compactions/{compaction['id']}/"))
                label = "its fact-survival audit (reads the whole middle)"
                results.append(web.measure(label, "GET", f"/compactions/{compaction['id']}/audit/"))
            finally:
                web.stop()
        if args.keep:
            keep = Path(tempfile.mkdtemp(prefix="hermes-bench-memory-kept-"))
            os.rename(data_dir / "hermes.sqlite3", keep / "hermes.sqlite3")
            print(f"kept the database in {keep}")
    print(f"\n{'phase':<62} {'peak RSS':>9}  verdict  detail")
    for label, mb, detail in results:
        verdict = "PASS" if mb < TARGET_MB else "MISS"
        print(f"{label:<62} {mb:>6.0f} MB  {verdict:<7}  {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
