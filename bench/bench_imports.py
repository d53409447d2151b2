"""Import memory benchmark: a 200 MB Claude Code session folder and a 100 MB Gemini CLI chat.

Both inputs are written into a temp dir from our own shape generators (the Claude Code records
of tests/web/native_fixtures.py, Gemini CLI recording messages as in
tests/fixtures/agents/gemini_cli), then each is imported by ``import_sessions`` in a fresh
process against a throwaway SQLite database; the figure is that process's peak RSS (VmHWM).

    .venv/bin/python bench/bench_imports.py [--folder-mb 200] [--gemini-mb 100] [--keep]

The folder: the main transcript with a /compact (``compact_boundary`` + ``isCompactSummary``)
every 200 blocks and a ``<persisted-output>`` stub now and then naming a file in
``tool-results/``; four sub-agents under ``subagents/`` with their ``.meta.json``.
Target: each import under 300 MB peak RSS. Prints each figure with PASS/MISS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.web.native_fixtures import SID, _cc, _cc_block, _cc_compact  # noqa: E402

PYTHON = sys.executable
TARGET_MB = 300
MB = 1024 * 1024
COMPACT_EVERY = 200  # blocks between two /compacts
STUB_EVERY = 50  # blocks between two tool results kept in tool-results/
TOOL_RESULT_BYTES = 512 * 1024
SUB_AGENTS = 4


def _stub_records(k: int, clock: int, folder: Path) -> list[dict]:
    """A Bash call whose output Claude Code kept in ``tool-results/<id>.txt``, named by a stub."""
    call_id = f"toolu_big{k}"
    output = "".join(f"[{i:07d}] build step {i} of block {k} ok\n" for i in range(14_000))
    path = folder / "tool-results" / f"{call_id}.txt"
    path.write_text(output[:TOOL_RESULT_BYTES], encoding="utf-8")
    stub = (
        f"<persisted-output>\nOutput too large ({TOOL_RESULT_BYTES // 1024}KB). Full output "
        f"saved to: /home/dev/.claude/projects/-work-app/{SID}/tool-results/{call_id}.txt\n\n"
        f"Preview (first 2KB):\n{output[:2048]}\n...\n</persisted-output>"
    )
    call = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "make"}}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": stub}
    return [
        _cc("assistant", clock + 1, clock + 1, message={"id": f"msg_big{k}", **_said(call)}),
        _cc("user", clock + 2, clock + 2, message={"role": "user", "content": [result]}),
    ]


def _said(block: dict) -> dict:
    return {"role": "assistant", "model": "claude-sonnet-4-5", "content": [block]}


def write_claude_folder(root: Path, megabytes: int) -> Path:
    """``root/-work-app/<SID>.jsonl`` + ``<SID>/subagents`` + ``<SID>/tool-results``."""
    project = root / "-work-app"
    folder = project / SID
    (folder / "tool-results").mkdir(parents=True)
    (folder / "subagents").mkdir()
    budget = megabytes * MB
    agent_bytes = budget // 5 // SUB_AGENTS  # a fifth of the folder in sub-agents
    for a in range(SUB_AGENTS):
        agent_id = f"a{a:06x}"
        meta = {"agentType": "general-purpose", "description": f"Task {a}"}
        (folder / "subagents" / f"agent-{agent_id}.meta.json").write_text(json.dumps(meta))
        _write_transcript(
            folder / "subagents" / f"agent-{agent_id}.jsonl",
            agent_bytes,
            folder,
            extra={"isSidechain": True, "agentId": agent_id},
            stubs=False,
        )
    main_bytes = budget - _size(folder)
    _write_transcript(project / f"{SID}.jsonl", main_bytes, folder, extra={}, stubs=True)
    return root


def _write_transcript(path: Path, budget: int, folder: Path, extra: dict, stubs: bool) -> None:
    """Blocks of turns (and their tool-results files) until ``budget`` bytes are written."""
    written, clock, k = 0, 0, 0
    with open(path, "w", encoding="utf-8") as out:
        while written < budget:
            records = _cc_block(k, 3, clock)
            clock += 12
            if stubs and k % STUB_EVERY == STUB_EVERY - 1:
                records += _stub_records(k, clock, folder)
                written += TOOL_RESULT_BYTES
                clock += 2
            if k % COMPACT_EVERY == COMPACT_EVERY - 1:
                records += _cc_compact(k, clock)
                clock += 3
            for record in records:
                line = json.dumps({**record, **extra}) + "\n"
                out.write(line)
                written += len(line)
            k += 1


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_gemini_chat(path: Path, megabytes: int) -> Path:
    """A Gemini CLI chat recording (``session-*.json``): turns with thoughts, tokens and tool
    calls with their results, a "Context compressed" marker every 500 turns."""
    budget = megabytes * MB
    with open(path, "w", encoding="utf-8") as out:
        out.write(
            '{"sessionId": "5e1c7a20-4b8e-4f0a-9d31-2c6f0e8a1b77", "projectHash": "0c4b1f3e", '
            '"startTime": "2026-03-02T10:14:02.118Z", "lastUpdated": "2026-03-02T10:31:47.902Z",'
            ' "messages": [\n'
        )
        written, n = 0, 0
        while written < budget:
            for message in _gemini_turn(n):
                line = ("" if n == 0 and message["type"] == "user" else ",\n") + json.dumps(message)
                out.write(line)
                written += len(line)
            n += 1
        out.write("\n]}\n")
    return path


def _gemini_turn(n: int) -> list[dict]:
    stamp = f"2026-03-02T{10 + n // 360000 % 10:02d}:{n // 6000 % 60:02d}:{n // 100 % 60:02d}Z"
    output = "".join(f"line {i}: total = round(sum(prices), 2)  # turn {n}\n" for i in range(40))
    call_id = f"read_file-{n}"
    turn = [
        {"id": f"u-{n}", "timestamp": stamp, "type": "user", "content": f"Turn {n}: why?"},
        {
            "id": f"g-{n}",
            "timestamp": stamp,
            "type": "gemini",
            "content": f"I'll read src/billing/total_{n}.py first.",
            "thoughts": [
                {"subject": "Reading", "description": "The sum is float.", "timestamp": stamp}
            ],
            "tokens": {"input": 6907, "output": 82, "cached": 0, "thoughts": 24, "total": 7013},
            "model": "gemini-2.5-pro",
            "toolCalls": [
                {
                    "id": call_id,
                    "name": "read_file",
                    "args": {"absolute_path": f"/home/dev/shop/src/billing/total_{n}.py"},
                    "result": [
                        {
                            "functionResponse": {
                                "id": call_id,
                                "name": "read_file",
                                "response": {"output": output},
                            }
                        }
                    ],
                    "status": "success",
                    "timestamp": stamp,
                    "resultDisplay": "",
                }
            ],
        },
        {"id": f"g-{n}b", "timestamp": stamp, "type": "gemini", "content": "The sum is float."},
    ]
    if n % 500 == 499:
        turn.append(
            {
                "id": f"i-{n}",
                "timestamp": stamp,
                "type": "info",
                "content": "Context compressed from 68% to 3%.",
            }
        )
    return turn


def django_env(data_dir: Path) -> dict:
    env = {
        **os.environ,
        "HERMES_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
        "CELERY_TASK_ALWAYS_EAGER": "true",
        "HERMES_DEMO_DATA": "false",
        "SECRET_KEY": "bench-imports-not-secret",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("DATABASE_URL", None)
    return env


_IMPORT = """
import sys, django
django.setup()
from io import StringIO
from django.core.management import call_command
out, err = StringIO(), StringIO()
try:
    call_command("import_sessions", sys.argv[1], user="bench", stdout=out, stderr=err)
except SystemExit:
    pass
status = open("/proc/self/status").read()
peak = next(l for l in status.splitlines() if l.startswith("VmHWM:"))
print(out.getvalue().strip().splitlines()[-1] if out.getvalue().strip() else "")
print(err.getvalue().strip()[:600], file=sys.stderr)
print("PEAK", int(peak.split()[1]) // 1024)
"""


def measure(env: dict, target: Path) -> tuple[int, float, str]:
    started = time.perf_counter()
    result = subprocess.run(
        [PYTHON, "-c", _IMPORT, str(target)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0 or "PEAK" not in result.stdout:
        raise SystemExit(f"import of {target} failed:\n{result.stdout}\n{result.stderr}")
    lines = result.stdout.strip().splitlines()
    peak = int(lines[-1].split()[1])
    summary = " ".join(lines[:-1])
    if result.stderr.strip():
        summary += f" | {result.stderr.strip()}"
    return peak, seconds, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder-mb", type=int, default=200)
    parser.add_argument("--gemini-mb", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hermes-bench-imports-"))
    failures = 0
    try:
        env = django_env(work / "data")
        env["HERMES_MAX_UPLOAD_BYTES"] = str(max(args.folder_mb, args.gemini_mb) * 2 * MB)
        (work / "data").mkdir()
        subprocess.run([PYTHON, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        create = (
            "import django; django.setup()\n"
            "from django.contrib.auth import get_user_model\n"
            "get_user_model().objects.create_user('bench', password='bench-not-secret')\n"
        )
        subprocess.run([PYTHON, "-c", create], cwd=ROOT, env=env, check=True)
        folder = write_claude_folder(work / "projects", args.folder_mb)
        chat_dir = work / "gemini" / "chats"
        chat_dir.mkdir(parents=True)
        chat = write_gemini_chat(
            chat_dir / "session-2026-03-02T10-14-5e1c7a20.json", args.gemini_mb
        )
        inputs = [
            (f"Claude Code folder ({_size(folder) // MB} MB)", folder),
            (f"Gemini CLI chat ({_size(chat) // MB} MB)", chat),
        ]
        for label, target in inputs:
            peak, seconds, summary = measure(env, target)
            verdict = "PASS" if peak < TARGET_MB else "MISS"
            failures += verdict == "MISS"
            print(f"{label}: peak RSS {peak} MB, {seconds:.0f} s  {verdict} (< {TARGET_MB} MB)")
            print(f"  {summary}", flush=True)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
