"""The real Claude Code CLI's API microcompaction through hermes-web: ``clear_tool_uses_20250919``.

Claude Code 2.1.332 sends that edit only under a feature flag (``tengu_jiggly_blossom``, its
"tool result clearing after idle"), and only on the first request after the conversation sat
idle for over 65 minutes with at least 27 tool uses in it. Offline, the flag is read from the
cached feature values in ``~/.claude.json`` (``cachedGrowthBookFeatures``) when telemetry is off
and ``CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF`` is set; the idle is made by moving the
saved transcript's timestamps two hours back before ``--continue``. Claude Code also sends
the edit only to an endpoint it believes takes system messages mid-conversation (the model's
capability, looked up for Anthropic's own API): ``CLAUDE_CODE_FORCE_MID_CONVERSATION_SYSTEM``
says so for hermes-web.
"""

import datetime
import json
import re
from pathlib import Path

import pytest

from hermes_web.openai_compat.anthropic_compaction import CLEARED
from tests.web.test_v1_real_clients import base_env, installed, main_requests, run
from tests.web.v1_helpers import issue_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.agent_clients]

CALLS = 30  # past Claude Code's own minimum of 27 tool uses
KEPT = 12  # what Claude Code asks to keep
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def earlier(value, hours: float):
    """``value`` (a transcript row) with every timestamp moved ``hours`` back: ISO strings
    and epoch milliseconds."""
    if isinstance(value, str) and ISO.fullmatch(value):
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        moment -= datetime.timedelta(hours=hours)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    if isinstance(value, dict):
        return {key: earlier(item, hours) for key, item in value.items()}
    if isinstance(value, list):
        return [earlier(item, hours) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and 1.7e12 < value < 1.9e12:
        return value - int(hours * 3_600_000)
    return value


def transcript(home: Path) -> Path:
    [path] = (home / ".claude" / "projects").glob("*/*.jsonl")
    return path


def test_claude_code_clear_tool_uses_is_applied_reported_and_the_agent_answers(
    live_server, upstream, alice, tmp_path
):
    claude = installed("claude")
    (tmp_path / ".claude.json").write_text(
        json.dumps({"cachedGrowthBookFeatures": {"tengu_jiggly_blossom": "on"}})
    )
    env = {
        **base_env(tmp_path),
        "ANTHROPIC_BASE_URL": live_server.url,
        "ANTHROPIC_API_KEY": issue_key(alice),
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF": "1",
        "CLAUDE_CODE_FORCE_MID_CONVERSATION_SYSTEM": "1",
    }
    work = tmp_path / "project"
    work.mkdir()
    for number in range(CALLS):
        command = f"echo RESULT-{number:02d}; seq 1 2500"  # ~11,000 characters of output
        upstream.enqueue(
            {
                "tool_calls": [
                    {
                        "id": f"call_seq_{number:02d}",
                        "type": "function",
                        "function": {
                            "name": "Bash",
                            "arguments": json.dumps({"command": command, "description": "seq"}),
                        },
                    }
                ]
            }
        )
    upstream.default_reply = {"content": "All commands ran."}
    options = ["--model", "claude-sonnet-4-5", "--allowedTools", "Bash", "--output-format", "json"]
    first = run([str(claude), "-p", "Run the commands.", *options], env, work)
    assert json.loads(first.stdout)["result"] == "All commands ran."
    # No clearing yet: Claude Code asks for it only after an idle.
    assert all(CLEARED not in json.dumps(request["messages"]) for request in upstream.requests)

    saved = transcript(tmp_path)
    rows = [json.loads(line) for line in saved.read_text().splitlines() if line.strip()]
    saved.write_text("".join(json.dumps(earlier(row, 2)) + "\n" for row in rows))
    upstream.clear()
    upstream.default_reply = {"content": "After the clearing."}
    back = run([str(claude), "-p", "Back again.", "--continue", *options], env, work)
    assert json.loads(back.stdout)["result"] == "After the clearing."

    # Our gateway cleared what the model read: every result but the newest twelve.
    sent = main_requests(upstream, "Back again.")[-1]["messages"]
    results = [m for m in sent if m["role"] == "tool"]
    assert len(results) == CALLS
    assert [m["content"] for m in results[: CALLS - KEPT]] == [CLEARED] * (CALLS - KEPT)
    assert all("RESULT-" in json.dumps(m["content"]) for m in results[CALLS - KEPT :])
    # Claude Code got the applied edit back (it saves the reply's context_management).
    rows = [json.loads(line) for line in saved.read_text().splitlines() if line.strip()]
    replies = [
        row["message"]
        for row in rows
        if row.get("type") == "assistant" and "After the clearing." in json.dumps(row["message"])
    ]
    assert replies
    [applied] = replies[-1]["context_management"]["applied_edits"]
    assert applied["type"] == "clear_tool_uses_20250919"
    assert applied["cleared_tool_uses"] == CALLS - KEPT
    assert applied["cleared_input_tokens"] >= 20_000  # Claude Code's clear_at_least
