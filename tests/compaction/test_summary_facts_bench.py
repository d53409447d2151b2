"""``bench/summary_facts.py`` measures what it says (issue #26): sessions replayed as the
agent lived them, compacted before every model call, Hermes exports read, harness wrappers
not taken for the user's constraints.

The transcripts are our own, in the shapes of real ones: a Claude Code session with
``compact_boundary`` records (``tests/web/native_fixtures.py``), a Hermes ``sessions/<id>.jsonl``
export (a ``session_meta`` line, then one message a line), a ``<task-notification>`` user row.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.compaction.builders import assistant, call, result, system, user
from tests.web.native_fixtures import claude_code_lines

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("summary_facts", ROOT / "bench/summary_facts.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_claude_code_session_keeps_the_rows_its_own_compactions_archived(bench):
    data = "\n".join(claude_code_lines(compacts=3)).encode()
    agent, messages = bench._imported(data, "session.jsonl")
    assert agent == "claude-code"
    users = [m["content"] for m in messages if m["role"] == "user"]
    # Every block's request is there, also those before each compaction; no summary row.
    for k in range(3):
        assert f"Block {k}: edit src/app_{k}.py; never touch config/prod.yaml" in users
    assert "pytest -q tests/test_app_0.py" in bench.extract(messages)["commands"]
    assert len(users) == 4  # the three blocks and "continue"; the summaries are left out


def test_a_hermes_session_export_is_read(bench, tmp_path):
    lines = [{"role": "session_meta", "tools": [], "model": "glm-5"}]
    for n in range(5):
        lines.append(
            {"role": "user", "content": f"log task {n}", "timestamp": "2026-05-15T16:35:24"}
        )
        lines.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": f"c{n}",
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": f"tasks/t{n}.md"}),
                        },
                    }
                ],
                "timestamp": "2026-05-15T16:35:30",
            }
        )
        lines.append(
            {
                "role": "tool",
                "content": "ok",
                "tool_call_id": f"c{n}",
                "timestamp": "2026-05-15T16:35:31",
            }
        )
    path = tmp_path / "20260515_163524_672363be.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    agent, messages = bench.load(str(path))
    assert agent == "hermes"
    assert "tasks/t4.md" in bench.extract(messages)["paths"]


def test_a_task_notification_is_no_user_constraint(bench):
    notification = (
        "<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n"
        "<summary>Background command must finish before the build.</summary>\n</task-notification>"
    )
    facts = bench.extract([user(notification), user("Never push to main.")])
    assert facts["constraints"] == {"Never push to main."}


def test_a_session_is_compacted_between_tool_calls_not_only_at_user_turns(bench):
    # One request, then a long run of tool calls (an agent working alone): the window fills
    # without a new user turn, and the agent compacts before its next model call.
    messages = [system(), user("Port the module; never change the public API.")]
    for n in range(60):
        messages.append(assistant(None, call(f"c{n}", "terminal", command=f"cat src/m{n}.py")))
        messages.append(result(f"c{n}", json.dumps({"output": "x = 1\n" * 900, "exit_code": 0})))
    found = bench.rounds(messages, "hermes", 32_000, None, most=2)
    assert found, "no compaction although the window filled between tool calls"


def test_windows_drive_paths_of_shell_commands_are_facts(bench):
    # Claude Code under Git Bash on Windows: the real sessions' reads name E:/… and C:\… paths.
    middle = [
        assistant(
            None,
            call("w1", "Bash", command='ls -la "E:/AI/Codex/TestProject/reports" 2>&1 | head -20'),
            call("w2", "Bash", command='cat "C:\\Users\\Admin\\.claude\\settings.json"'),
            call("w3", "Bash", command="wc -l E:/CC-test/guide.md && head -50 src/a.py"),
        ),
        result("w1", "ok"),
        result("w2", "{}"),
        result("w3", "12"),
    ]
    assert bench.extract(middle)["paths"] == {
        "E:/AI/Codex/TestProject/reports",
        "C:\\Users\\Admin\\.claude\\settings.json",
        "E:/CC-test/guide.md",
        "src/a.py",
    }
