"""The real Claude Code CLI, headless, through hermes-web to an Anthropic model: its streamed
requests reach the model in Anthropic's own protocol (``anthropic_native``), a tool round
included, and the conversation is one stored session."""

import json

import pytest

from tests.web.anthropic_fake import FakeAnthropic, serve_for
from tests.web.test_v1_real_clients import claude_env, installed, run, sessions_holding
from tests.web.v1_helpers import issue_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.agent_clients]

PROMPT = "Run echo PELICAN-42."
# A server tool's call: only Anthropic's own protocol carries it (the chat translation has
# no place for it), to the client and back.
SEARCH = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "echo"},
}


class ClaudeModel(FakeAnthropic):
    """Answers the conversation by where it is (a side request of the client, such as a
    title, gets plain text): first a Bash call, then the last word."""

    def next_reply(self, body, headers):
        self.requests.append(body)
        self.headers.append(headers)
        sent = json.dumps(body.get("messages"))
        if PROMPT not in sent:
            return {"content": [{"type": "text", "text": "A side answer."}]}
        if '"tool_result"' not in sent:
            command = {"command": "echo PELICAN-42", "description": "Print a word"}
            return {
                "content": [
                    SEARCH,
                    {"type": "text", "text": "Running it."},
                    {"type": "tool_use", "id": "toolu_bash_1", "name": "Bash", "input": command},
                ],
                "usage": {"cache_read_input_tokens": 900},
            }
        return {"content": [{"type": "text", "text": "The command printed PELICAN-42."}]}


@pytest.fixture
def model(settings):
    server = serve_for(settings, server=ClaudeModel())
    yield server
    server.stop()


def test_claude_code_streams_through_to_an_anthropic_model_natively(
    live_server, model, alice, tmp_path
):
    claude = installed("claude")
    env = claude_env(tmp_path, live_server.url, issue_key(alice))
    work = tmp_path / "project"
    work.mkdir()
    command = [str(claude), "-p", PROMPT, "--model", "claude-sonnet-4-5", "--verbose"]
    done = run([*command, "--allowedTools", "Bash", "--output-format", "stream-json"], env, work)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines[-1]["result"] == "The command printed PELICAN-42."
    # What Claude Code read is the model's own stream: its message id, the server tool's
    # block and the cache usage (a translated stream has none of them).
    said = [line["message"] for line in lines if line.get("type") == "assistant"]
    assert {message["id"] for message in said} == {"msg_fake"}
    blocks = [block["type"] for message in said for block in message["content"]]
    assert blocks == ["server_tool_use", "text", "tool_use", "text"]
    assert said[0]["usage"]["cache_read_input_tokens"] == 900

    conversation = [r for r in model.requests if PROMPT in json.dumps(r.get("messages"))]
    assert len(conversation) == 2
    assert all(request["stream"] is True for request in conversation)
    # Claude Code asks for context edits with every request; hermes-web serves them (here
    # they clear nothing) and sends the rest as written.
    assert not any("context_management" in request for request in conversation)
    results = [
        block
        for m in conversation[1]["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == ["toolu_bash_1"]
    assert "PELICAN-42" in json.dumps(results[0]["content"])

    [session] = sessions_holding(alice, PROMPT)  # the tool round continued one session
    roles = list(session.messages.order_by("position").values_list("role", flat=True))
    assert roles[-3:] == ["assistant", "tool", "assistant"]
    answer = session.messages.order_by("position").last()
    assert answer.content == "The command printed PELICAN-42."
