"""The real Claude Code and Codex CLIs, headless, against a live hermes-web and the local fake
upstream: several turns of one conversation through a compaction.

The pinned npm packages are installed by the test itself into ``var/agent-clients`` when
missing (Node is /usr/bin/node). Marked ``agent_clients``; skipped when npm cannot be
reached and the packages are not there yet.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compaction import PREFIX_OPENING
from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import run_compaction
from tests.web.v1_helpers import issue_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.agent_clients]

CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.332"
CODEX = "@openai/codex@0.171.0"
PREFIX = Path(__file__).resolve().parents[2] / "var" / "agent-clients"
MARKER = "ZEBRA-QUARTZ-7731"  # said in the third turn (the head keeps the first two): the
# compaction replaces that turn (its words may live on in the summary's fact ledger)
# Turns before the compaction; the replies are long so the middle of the conversation is
# worth summarizing (the head and the tail stay as they are).
PROMPTS = [
    "Start a log.",
    "Next entry.",
    f"The code word is {MARKER}.",
    "Another entry.",
    "One more.",
]
LAST = "Thanks, and now?"
LONG_REPLY = {
    "content": " ".join(
        f"entry {n}: the gateway {n % 7} batched its readings." for n in range(500)
    ),
    "prompt_tokens": 70_000,
}


def turns_saying(messages: list[dict], text: str) -> list[dict]:
    """The user messages of a request whose text is ``text`` (a string, or text blocks of
    which one is ``text``; a client may wrap its own notes around the user's words)."""
    found = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        texts = [p.get("text", "").strip() for p in parts if isinstance(p, dict)]
        if text in texts:
            found.append(message)
    return found


def installed(binary: str) -> Path:
    """``node_modules/.bin/<binary>``, npm-installing the pinned packages first if needed."""
    path = PREFIX / "node_modules" / ".bin" / binary
    if not path.exists():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed")
        PREFIX.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(PREFIX),
                CLAUDE_CODE,
                CODEX,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not path.exists():
            pytest.skip(f"npm could not install the clients: {done.stderr[-500:]}")
    return path


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        command,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (
        f"{command[:3]} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )
    return done


def base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": f"{Path('/usr/bin')}:{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
    }


def claude_env(home: Path, url: str, key: str) -> dict[str, str]:
    """Claude Code's environment for hermes-web at ``url`` with our API ``key``, quiet."""
    return {
        **base_env(home),
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
    }


def main_requests(upstream, needle: str) -> list[dict]:
    """The upstream requests of the conversation (not the client's side calls)."""
    return [r for r in upstream.requests if needle in json.dumps(r.get("messages"))]


def sessions_holding(owner, text: str) -> list[Session]:
    """The sessions with a turn that says ``text`` (a summary quoting it does not count)."""
    return [
        session
        for session in Session.objects.filter(owner=owner)
        if any(text in json.dumps(m.content) for m in session.messages.filter(is_summary=False))
    ]


def compact_now(session_owner) -> Compaction:
    run_ = Compaction.objects.filter(session__owner=session_owner).order_by("-pk").first()
    assert run_ is not None, "no compaction was queued"
    run_ = run_compaction(run_.pk)
    assert run_.status == Compaction.Status.COMMITTED, run_.error
    return run_


def test_claude_code_runs_several_turns_through_a_compaction(
    live_server, upstream, alice, tmp_path
):
    claude = installed("claude")
    key = issue_key(alice)
    env = claude_env(tmp_path, live_server.url, key)
    work = tmp_path / "project"
    work.mkdir()
    upstream.default_reply = LONG_REPLY
    prompts = [*PROMPTS, LAST]
    outputs = []
    for number, prompt in enumerate(prompts):
        command = [
            str(claude),
            "-p",
            prompt,
            "--model",
            "claude-sonnet-4-5",
            "--output-format",
            "json",
        ]
        if number:
            command.append("--continue")
        if number == len(PROMPTS):
            compaction = compact_now(alice)
            upstream.clear()
            upstream.default_reply = {"content": "After the summary.", "prompt_tokens": 9_000}
        outputs.append(json.loads(run(command, env, work).stdout))
    assert outputs[-1]["result"] == "After the summary."
    conversation = main_requests(upstream, LAST)
    assert conversation, upstream.requests
    sent = json.dumps(conversation[-1]["messages"], ensure_ascii=False)
    assert PREFIX_OPENING in sent  # the compacted context reached the upstream
    assert not turns_saying(conversation[-1]["messages"], PROMPTS[2])  # replaced by the summary
    holding = sessions_holding(alice, MARKER)
    assert len(holding) == 1  # one conversation, continued after the compaction
    assert compaction.session_id == holding[0].pk
    assert compaction.result_session.client_messages > holding[0].client_messages


def test_codex_runs_several_turns_through_a_compaction(live_server, upstream, alice, tmp_path):
    codex = installed("codex")
    key = issue_key(alice)
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "fake-chat"\n'
        'model_provider = "hermes"\n'
        "[model_providers.hermes]\n"
        'name = "hermes-web"\n'
        f'base_url = "{live_server.url}/v1"\n'
        'env_key = "HERMES_API_KEY"\n'
        'wire_api = "responses"\n'
    )
    env = {**base_env(tmp_path), "CODEX_HOME": str(home), "HERMES_API_KEY": key}
    work = tmp_path / "project"
    work.mkdir()
    upstream.default_reply = LONG_REPLY
    prompts = [*PROMPTS, LAST]
    for number, prompt in enumerate(prompts):
        if number == 0:
            command = [str(codex), "exec", "--skip-git-repo-check", prompt]
        else:
            command = [str(codex), "exec", "--skip-git-repo-check", "resume", "--last", prompt]
        if number == len(PROMPTS):
            compaction = compact_now(alice)
            upstream.clear()
            upstream.default_reply = {"content": "After the summary.", "prompt_tokens": 9_000}
        done = run(command, env, work)
    assert "After the summary." in done.stdout + done.stderr
    conversation = main_requests(upstream, LAST)
    assert conversation, upstream.requests
    sent = json.dumps(conversation[-1]["messages"], ensure_ascii=False)
    assert PREFIX_OPENING in sent
    assert not turns_saying(conversation[-1]["messages"], PROMPTS[2])
    holding = sessions_holding(alice, MARKER)
    assert len(holding) == 1
    assert compaction.session_id == holding[0].pk
    assert compaction.result_session.client_messages > holding[0].client_messages


def test_claude_code_runs_a_tool_and_its_result_continues_the_conversation(
    live_server, upstream, alice, tmp_path
):
    claude = installed("claude")
    env = claude_env(tmp_path, live_server.url, issue_key(alice))
    work = tmp_path / "project"
    work.mkdir()
    arguments = {"command": "echo PELICAN-42", "description": "Print a word"}
    upstream.enqueue(
        {
            "tool_calls": [
                {
                    "id": "call_bash_1",
                    "type": "function",
                    # compact JSON, as a model writes it; Claude Code sends back its own
                    "function": {
                        "name": "Bash",
                        "arguments": json.dumps(arguments, separators=(",", ":")),
                    },
                }
            ]
        }
    )
    upstream.default_reply = {"content": "The command printed PELICAN-42."}
    command = [str(claude), "-p", "Run echo PELICAN-42.", "--model", "claude-sonnet-4-5"]
    done = run([*command, "--allowedTools", "Bash", "--output-format", "json"], env, work)
    assert json.loads(done.stdout)["result"] == "The command printed PELICAN-42."
    conversation = main_requests(upstream, "Run echo PELICAN-42.")
    results = [m for m in conversation[-1]["messages"] if m["role"] == "tool"]
    assert results
    assert results[0]["tool_call_id"] == "call_bash_1"
    assert "PELICAN-42" in json.dumps(results[0]["content"])
    holding = sessions_holding(alice, "Run echo PELICAN-42.")
    assert len(holding) == 1  # the tool round continued the same session
    roles = list(holding[0].messages.order_by("position").values_list("role", flat=True))
    assert roles[-3:] == ["assistant", "tool", "assistant"]


def test_codex_runs_a_tool_and_its_output_continues_the_conversation(
    live_server, upstream, alice, tmp_path
):
    codex = installed("codex")
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "fake-chat"\nmodel_provider = "hermes"\n[model_providers.hermes]\n'
        f'name = "hermes-web"\nbase_url = "{live_server.url}/v1"\n'
        'env_key = "HERMES_API_KEY"\nwire_api = "responses"\n'
    )
    env = {**base_env(tmp_path), "CODEX_HOME": str(home), "HERMES_API_KEY": issue_key(alice)}
    work = tmp_path / "project"
    work.mkdir()
    upstream.enqueue(
        {
            "tool_calls": [
                {
                    "id": "call_exec_1",
                    "type": "function",
                    "function": {"name": "exec_command", "arguments": '{"cmd":"echo PELICAN-42"}'},
                }
            ]
        }
    )
    upstream.default_reply = {"content": "The command ran."}
    done = run([str(codex), "exec", "--skip-git-repo-check", "Run echo PELICAN-42."], env, work)
    assert "The command ran." in done.stdout + done.stderr
    conversation = main_requests(upstream, "Run echo PELICAN-42.")
    results = [m for m in conversation[-1]["messages"] if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == ["call_exec_1"]
    holding = sessions_holding(alice, "Run echo PELICAN-42.")
    assert len(holding) == 1
    roles = list(holding[0].messages.order_by("position").values_list("role", flat=True))
    assert roles[-3:] == ["assistant", "tool", "assistant"]
