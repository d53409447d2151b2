"""The real opencode, pi and aider, headless, against a live hermes-web and the local fake
upstream: several turns of one conversation, a real tool call, through a compaction.

The pinned clients are installed by the test itself when missing: the npm packages into
``var/agent-clients/<client>`` (Node is /usr/bin/node), aider into its own venv under
``var/agent-clients/aider`` (never into the project's). Marked ``agent_clients``; skipped
when the registry cannot be reached and the client is not there yet. Each client's config
lives in ``tmp_path`` (HOME, XDG dirs), so nothing touches the real home.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from compaction import PREFIX_OPENING
from hermes_web.models import Session
from tests.web.test_v1_real_clients import (
    LAST,
    LONG_REPLY,
    MARKER,
    PROMPTS,
    base_env,
    compact_now,
    run,
    sessions_holding,
    turns_saying,
)
from tests.web.v1_helpers import AgentUpstream, issue_key, start_upstream

# Each client starts once per turn (7 runs); on a loaded machine that passes the default 300 s.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.agent_clients,
    pytest.mark.timeout(900),
]

OPENCODE = "opencode-ai@1.18.33"
PI = "@mariozechner/pi-coding-agent@0.73.1"
AIDER = "aider-chat==0.86.2"
CLIENTS = Path(__file__).resolve().parents[2] / "var" / "agent-clients"
TOOL_WORD = "PELICAN-42"
AFTER = {"content": "After the summary.", "prompt_tokens": 9_000}


def npm_installed(name: str, package: str, binary: str) -> Path:
    """``var/agent-clients/<name>/node_modules/.bin/<binary>``, npm-installed if missing."""
    prefix = CLIENTS / name
    path = prefix / "node_modules" / ".bin" / binary
    if not path.exists():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed")
        prefix.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), package],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not path.exists():
            pytest.skip(f"npm could not install {package}: {done.stderr[-500:]}")
    return path


@pytest.fixture
def upstream(settings):
    server = start_upstream(settings, AgentUpstream)
    yield server
    server.stop()


def tool_call(call_id: str, name: str, arguments: dict) -> dict:
    """A model reply calling one tool, its arguments as compact JSON (the clients send back
    their own ``JSON.stringify``)."""
    return {
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": json.dumps(arguments, separators=(",", ":")),
                },
            }
        ]
    }


def assert_one_chain_through_the_compaction(
    upstream, owner, compaction, said=lambda prompt: prompt
) -> list[dict]:
    """The shared verdict: the last turn's request carried the compacted context, one stored
    conversation holds the replaced turn, and the compaction's result continued it.

    ``said(prompt)`` is the user turn's text as the client sends it."""
    conversation = [r for r in upstream.requests if turns_saying(r["messages"], said(LAST))]
    assert conversation, [r.get("messages", [])[-1:] for r in upstream.requests]
    sent = conversation[-1]["messages"]
    assert PREFIX_OPENING in json.dumps(sent, ensure_ascii=False)
    assert not turns_saying(sent, said(PROMPTS[2]))  # replaced by the summary
    holding = sessions_holding(owner, MARKER)
    assert len(holding) == 1, [s.pk for s in holding]
    assert compaction.session_id == holding[0].pk
    assert compaction.result_session.client_messages > holding[0].client_messages
    return sent


def sessions_opened_by(owner, prompt: str) -> list[Session]:
    """The sessions whose first user turn says ``prompt`` (a client's side call quoting it
    after its own instruction, such as opencode's title request, does not count)."""
    found = []
    for session in Session.objects.filter(owner=owner):
        users = list(session.messages.order_by("position").values("role", "content"))
        first = [m for m in users if m["role"] == "user"][:1]
        if turns_saying(first, prompt):
            found.append(session)
    return found


def assert_the_tool_ran(upstream, owner, prompt: str, call_id: str) -> None:
    """The client ran the tool for real, sent its output back to the model, and that round
    continued the session the prompt started."""
    # The conversation's own requests (a side call such as opencode's title request quotes
    # the prompt inside its own text).
    agent = [r for r in upstream.requests if turns_saying(r.get("messages") or [], prompt)]
    assert agent, [(r.get("messages") or [])[-1:] for r in upstream.requests]
    sent = agent[-1]["messages"]
    results = [m for m in sent if m.get("role") == "tool" and m.get("tool_call_id") == call_id]
    assert results, sent
    assert TOOL_WORD in json.dumps(results[0]["content"])
    holding = sessions_opened_by(owner, prompt)
    assert len(holding) == 1, [s.pk for s in holding]
    roles = list(holding[0].messages.order_by("position").values_list("role", flat=True))
    assert roles[-3:] == ["assistant", "tool", "assistant"]


# -- opencode ---------------------------------------------------------------------------------


def opencode_env(home: Path, base_url: str, key: str) -> dict[str, str]:
    config = home / ".config" / "opencode"
    config.mkdir(parents=True)
    (config / "opencode.json").write_text(
        json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "provider": {
                    "hermes": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "hermes-web",
                        "options": {"baseURL": base_url, "apiKey": "{env:HERMES_API_KEY}"},
                        "models": {"fake-chat": {"name": "fake-chat"}},
                    }
                },
                "model": "hermes/fake-chat",
                "small_model": "hermes/fake-chat",
                "autoupdate": False,
                "share": "disabled",
            },
            indent=2,
        )
    )
    return {
        **base_env(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "HERMES_API_KEY": key,
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    }


def opencode_said(prompt: str) -> str:
    """``opencode run`` joins its message arguments, quoting each one that has a space."""
    return f'"{prompt}"' if " " in prompt else prompt


def test_opencode_runs_a_tool_and_several_turns_through_a_compaction(
    live_server, upstream, alice, tmp_path
):
    opencode = npm_installed("opencode", OPENCODE, "opencode")
    env = opencode_env(tmp_path, f"{live_server.url}/v1", issue_key(alice))
    work = tmp_path / "project"
    work.mkdir()
    first = f"Run echo {TOOL_WORD}."
    upstream.enqueue(
        tool_call("call_bash_1", "bash", {"command": f"echo {TOOL_WORD}", "description": "Echo"})
    )
    upstream.default_reply = LONG_REPLY
    prompts = [first, *PROMPTS, LAST]
    for number, prompt in enumerate(prompts):
        command = [str(opencode), "run", "--model", "hermes/fake-chat"]
        if number:
            command.append("--continue")
        if prompt == LAST:
            compaction = compact_now(alice)
            upstream.clear()
            upstream.default_reply = AFTER
        done = run([*command, prompt], env, work)
        if number == 0:
            assert_the_tool_ran(upstream, alice, opencode_said(first), "call_bash_1")
    assert "After the summary." in done.stdout
    assert_one_chain_through_the_compaction(upstream, alice, compaction, opencode_said)


# -- pi ---------------------------------------------------------------------------------------


def pi_env(home: Path, base_url: str, key: str) -> dict[str, str]:
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True)
    (agent / "models.json").write_text(
        json.dumps(
            {
                "providers": {
                    "hermes": {
                        "baseUrl": base_url,
                        "api": "openai-completions",
                        "apiKey": "HERMES_API_KEY",
                        "models": [{"id": "fake-chat", "contextWindow": 200000}],
                    }
                }
            },
            indent=2,
        )
    )
    return {**base_env(home), "HERMES_API_KEY": key, "PI_OFFLINE": "1"}


def test_pi_runs_a_tool_and_several_turns_through_a_compaction(
    live_server, upstream, alice, tmp_path
):
    pi = npm_installed("pi", PI, "pi")
    env = pi_env(tmp_path, f"{live_server.url}/v1", issue_key(alice))
    work = tmp_path / "project"
    work.mkdir()
    first = f"Run echo {TOOL_WORD}."
    upstream.enqueue(tool_call("call_bash_1", "bash", {"command": f"echo {TOOL_WORD}"}))
    upstream.default_reply = LONG_REPLY
    prompts = [first, *PROMPTS, LAST]
    for number, prompt in enumerate(prompts):
        command = [str(pi), "--model", "hermes/fake-chat", "-p"]
        if number:
            command.append("--continue")
        if prompt == LAST:
            compaction = compact_now(alice)
            upstream.clear()
            upstream.default_reply = AFTER
        done = run([*command, prompt], env, work)
        if number == 0:
            assert_the_tool_ran(upstream, alice, first, "call_bash_1")
    assert "After the summary." in done.stdout
    assert_one_chain_through_the_compaction(upstream, alice, compaction)


# -- aider ------------------------------------------------------------------------------------


def aider_installed() -> Path:
    """aider in its own venv under ``var/agent-clients/aider``, pip-installed if missing."""
    venv = CLIENTS / "aider" / "venv"
    path = venv / "bin" / "aider"
    if not path.exists():
        python = shutil.which("python3.11")
        if python is None:
            pytest.skip("python3.11 is not installed (aider 0.86 supports 3.10-3.12)")
        steps = [[python, "-m", "venv", str(venv)], [str(venv / "bin" / "pip"), "install", AIDER]]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                pytest.skip(f"could not install {AIDER}: {done.stderr[-500:]}")
    return path


def test_aider_rebuilding_its_history_gets_the_compacted_context(
    live_server, upstream, alice, tmp_path
):
    aider = aider_installed()
    env = {**base_env(tmp_path), "HERMES_API_KEY": issue_key(alice)}
    work = tmp_path / "project"
    work.mkdir()
    (work / "app.py").write_text("print('hello')\n")
    upstream.default_reply = LONG_REPLY
    for prompt in [*PROMPTS, LAST]:
        if prompt == LAST:
            compact_now(alice)
            upstream.clear()
            upstream.default_reply = AFTER
        command = [
            str(aider),
            "--model",
            "openai/fake-chat",
            "--openai-api-base",
            f"{live_server.url}/v1",
            "--openai-api-key",
            env["HERMES_API_KEY"],
            "--no-git",
            "--no-auto-commits",
            "--no-analytics",
            "--no-check-update",
            "--no-show-model-warnings",
            "--no-pretty",
            "--yes-always",
            "--restore-chat-history",
            "--max-chat-history-tokens",
            "200000",
            "--map-tokens",
            "0",
            "--message",
            prompt,
            "app.py",
        ]
        done = run(command, env, work)
    assert "After the summary." in done.stdout
    # aider appends its edit-format reminders to the turn it sends; its history holds the
    # user's words as they were.
    conversation = [r for r in upstream.requests if user_texts(r["messages"])[-1:] == [LAST]]
    assert conversation, [(r.get("messages") or [])[-1:] for r in upstream.requests]
    sent = conversation[-1]["messages"]
    assert PREFIX_OPENING in json.dumps(sent, ensure_ascii=False)  # the compacted context
    assert PROMPTS[2] not in user_texts(sent)  # replaced by the summary
    assert PROMPTS[3] in user_texts(sent)  # the kept tail, rebuilt by aider, sent as it was


def user_texts(messages: list[dict]) -> list[str]:
    """Each user turn's first paragraph (a string content, as aider sends)."""
    return [
        str(m.get("content") or "").split("\n\n")[0].strip()
        for m in messages
        if m.get("role") == "user"
    ]
