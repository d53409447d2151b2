"""The real ``openai-agents`` SDK against a live hermes-web and the local fake upstream: its
default model (the Responses API) and ``OpenAIChatCompletionsModel``, a function tool,
several ``Runner.run`` turns that carry the previous items (``to_input_list``), a compaction,
and an answer after it; each run is one conversation."""

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIProvider,
    RunConfig,
    Runner,
    function_tool,
)
from openai import AsyncOpenAI

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import run_compaction
from tests.web.test_openai_endpoint import MIDDLE_MARKER, file_text
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)


@function_tool
def read_file(path: str) -> str:
    """Read a file of the workspace."""
    return file_text(path, MIDDLE_MARKER if path == "src/1.txt" else "")


@pytest.fixture
def run():
    """Runner.run on one event loop for the whole test (the AsyncOpenAI client keeps its
    connections on the loop that opened them), in a thread of its own: after the browser
    tests the main thread holds Playwright's running loop, and a second loop cannot run
    there."""
    loop = asyncio.new_event_loop()
    with ThreadPoolExecutor(max_workers=1) as thread:
        yield lambda agent, items, config: thread.submit(
            loop.run_until_complete, Runner.run(agent, items, run_config=config)
        ).result()
    loop.close()


def build_agent(live_server, key: str, api: str) -> tuple[Agent, RunConfig]:
    """The README's openai-agents set-ups, as they are run here."""
    client = AsyncOpenAI(base_url=f"{live_server.url}/v1", api_key=key, max_retries=0)
    if api == "responses":  # the SDK's default model: OpenAIResponsesModel
        agent = Agent(
            name="Reader", instructions="You read files.", tools=[read_file], model="fake-chat"
        )
        provider = OpenAIProvider(openai_client=client)
        return agent, RunConfig(model_provider=provider, tracing_disabled=True)
    model = OpenAIChatCompletionsModel(model="fake-chat", openai_client=client)
    agent = Agent(name="Reader", instructions="You read files.", tools=[read_file], model=model)
    return agent, RunConfig(tracing_disabled=True)


def tool_turn(number: int) -> tuple[dict, dict]:
    """The model calls read_file (spaced JSON arguments), then answers about the output."""
    call = {
        "id": f"call_{number}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/{number}.txt"})},
    }
    prompt = 2_000 + 12_000 * number
    return (
        {"content": "", "tool_calls": [call], "prompt_tokens": prompt},
        {"content": f"File {number} is read.", "prompt_tokens": prompt + 4_000},
    )


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_an_agent_runs_several_turns_through_a_compaction_as_one_conversation(
    live_server, alice, upstream, api, run
):
    agent, config = build_agent(live_server, issue_key(alice), api)
    items: list = []
    for number in range(6):
        upstream.enqueue(*tool_turn(number))
        items.append({"role": "user", "content": f"Read src/{number}.txt."})
        result = run(agent, items, config)
        assert result.final_output == f"File {number} is read."
        items = result.to_input_list()
        # One conversation: neither the tool call nor the next turn starts another session.
        assert Session.objects.count() == 1
    session = Session.objects.get()
    assert session.messages.filter(role="tool").count() == 6
    sent = upstream.requests[-1]
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["read_file"]
    assert validate_tool_pairs(sent["messages"]) == []

    compaction = run_compaction(Compaction.objects.get().pk)
    assert compaction.status == Compaction.Status.COMMITTED, compaction.error
    upstream.clear()
    upstream.enqueue({"content": "Gateway 3 is the busiest.", "prompt_tokens": 9_000})
    items.append({"role": "user", "content": "Which gateway is busiest?"})
    result = run(agent, items, config)
    assert result.final_output == "Gateway 3 is the busiest."
    sent = upstream.requests[-1]["messages"]
    text = json.dumps(sent, ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert MIDDLE_MARKER not in text
    assert validate_tool_pairs(sent) == []
    assert sent[-1]["content"] in (
        "Which gateway is busiest?",
        [{"type": "text", "text": "Which gateway is busiest?"}],
    )
    assert Session.objects.filter(owner=alice).count() == 2  # the session and its continuation
    live = Session.objects.get(pk=compaction.result_session.pk)
    assert live.messages.filter(content="Gateway 3 is the busiest.").exists()
