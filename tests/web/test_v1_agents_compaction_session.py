"""``openai-agents``' own compaction: ``OpenAIResponsesCompactionSession`` wraps a session and
calls ``responses.compact`` when its history grows. Against a live hermes-web and the local fake
upstream, the SDK's call is served by our engine (a stored compaction), the compaction item it
keeps is what the next turn sends, and the model then reads our summary instead of the middle."""

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from agents import Agent, OpenAIProvider, RunConfig, Runner, SQLiteSession, function_tool
from agents.memory import OpenAIResponsesCompactionSession
from openai import AsyncOpenAI

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import Compaction
from tests.web.test_openai_endpoint import MIDDLE_MARKER, file_text
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)

# The SDK compacts only for OpenAI-named models (``gpt-*``, ``o<digit>*``).
MODEL = "gpt-4.1-mini"


@function_tool
def read_file(path: str) -> str:
    """Read a file of the workspace."""
    return file_text(path, MIDDLE_MARKER if path == "src/1.txt" else "")


@pytest.fixture
def on_loop():
    """Coroutines run on one event loop in a thread of its own (see test_v1_openai_agents)."""
    loop = asyncio.new_event_loop()
    with ThreadPoolExecutor(max_workers=1) as thread:
        yield lambda coroutine: thread.submit(loop.run_until_complete, coroutine).result()
    loop.close()


def test_the_sdks_compaction_session_is_served_by_our_engine_and_the_model_reads_its_summary(
    live_server, alice, upstream, settings, on_loop, tmp_path
):
    settings.HERMES_CHAT_MODEL = f"openai/{MODEL}"
    client = AsyncOpenAI(base_url=f"{live_server.url}/v1", api_key=issue_key(alice), max_retries=0)
    agent = Agent(name="Reader", instructions="You read files.", tools=[read_file], model=MODEL)
    config = RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)
    compactions: list[int] = []

    def after_five_reads(context: dict) -> bool:
        # Five tool turns (a call, its output and an answer each) before the first compaction.
        due = len(context["compaction_candidate_items"]) >= 15 and not compactions
        if due:
            compactions.append(1)
        return due

    session = OpenAIResponsesCompactionSession(
        session_id="reader",
        underlying_session=SQLiteSession("reader", str(tmp_path / "agent.sqlite3")),
        client=client,
        model=MODEL,
        should_trigger_compaction=after_five_reads,
    )
    for number in range(5):
        call = {
            "id": f"call_{number}",
            "type": "function",
            "function": {
                "name": "read_file",
                "arguments": json.dumps({"path": f"src/{number}.txt"}),
            },
        }
        prompt = 2_000 + 12_000 * number
        upstream.enqueue(
            {"content": "", "tool_calls": [call], "prompt_tokens": prompt},
            {"content": f"File {number} is read.", "prompt_tokens": prompt + 4_000},
        )
        result = on_loop(
            Runner.run(agent, f"Read src/{number}.txt.", session=session, run_config=config)
        )
        assert result.final_output == f"File {number} is read."

    # The SDK called responses.compact after the fifth turn: our engine ran and stored it.
    assert compactions == [1]
    run = Compaction.objects.get()
    assert run.status == Compaction.Status.COMMITTED, run.error
    assert run.session.owner == alice
    kept = on_loop(session.get_items())
    assert [item.get("type") for item in kept if item.get("type") == "compaction"] == ["compaction"]
    assert MIDDLE_MARKER not in json.dumps(kept)

    # The next turn sends what the session kept; the model reads our summary.
    upstream.clear()
    upstream.enqueue({"content": "Gateway 3 is the busiest.", "prompt_tokens": 9_000})
    result = on_loop(
        Runner.run(agent, "Which gateway is busiest?", session=session, run_config=config)
    )
    assert result.final_output == "Gateway 3 is the busiest."
    sent = upstream.requests[-1]["messages"]
    text = json.dumps(sent, ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert MIDDLE_MARKER not in text
    assert validate_tool_pairs(sent) == []
    live = run.result_session or run.session
    assert live.messages.filter(content="Gateway 3 is the busiest.").exists()
