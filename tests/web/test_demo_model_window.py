"""The offline demo model keeps to its own 64,000-token window and to a client's tools.

A provider refuses a prompt over its window; the demo does too (litellm's
ContextWindowExceededError), and as an agent that sees file sizes it reads only what still
fits, so the chat's automatic compactions start under the window, not above it. Offered a
/v1 client's tools, it calls those (the one ``tool_choice`` names) instead of its own.
"""

import json

import openai
import pytest

from hermes_web.agent import demo_model
from hermes_web.agent.overflow import is_context_overflow
from hermes_web.llm_models import DEMO_CONTEXT_LENGTH, DEMO_MODEL
from hermes_web.models import ApiKey, Compaction, Message, Session
from hermes_web.services.chat import start_chat
from hermes_web.services.compactions import run_compaction
from hermes_web.services.sessions import resolve_tip
from tests.web.test_chat import turn_for

pytestmark = pytest.mark.django_db

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city", "unit"],
        },
    },
}
SHELL = {
    "type": "function",
    "function": {
        "name": "run_shell",
        "description": "Run a shell command in the repository",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def test_a_prompt_over_the_window_is_refused_as_a_provider_refuses_it():
    import litellm

    demo_model.register()
    big = [{"role": "user", "content": "word " * (DEMO_CONTEXT_LENGTH + 1_000)}]
    for stream in (False, True):
        with pytest.raises(litellm.ContextWindowExceededError) as refused:
            litellm.completion(model=DEMO_MODEL, messages=big, stream=stream)
        assert is_context_overflow(refused.value)
        assert "64,000 tokens" in str(refused.value)
    fits = [{"role": "user", "content": "word " * 1_000}]
    assert litellm.completion(model=DEMO_MODEL, messages=fits).usage.prompt_tokens > 1_000


def test_a_demo_chat_stays_under_its_window_and_compacts_before_reaching_it(alice, settings):
    settings.HERMES_CHAT_MODEL = ""
    demo_model.STREAM_DELAY = 0
    session = start_chat(owner=alice)
    assert session.context_length == DEMO_CONTEXT_LENGTH
    questions = [
        "What is in this workspace?",
        "Why did ingest fail on March 14?",
        "Tell me about the readings csv",
        "What do the logs say about checksums?",
        "Explain the pipeline config",
        "Which module parses the sensors?",
    ]
    for question in questions:
        turn = turn_for(resolve_tip(Session.objects.get(pk=session.pk)), question)
        assert turn.status == "done", turn.error
        assert not (turn.usage or {}).get("overflow"), "the demo outgrew its window mid-turn"
        # The automatic compaction a turn queued runs before the next question (a worker's job).
        for queued in Compaction.objects.in_progress():
            run_compaction(queued.pk)
    prompts = list(
        Message.objects.filter(
            session__owner=alice, role="assistant", provider_prompt_tokens__isnull=False
        ).values_list("provider_prompt_tokens", flat=True)
    )
    assert max(prompts) <= DEMO_CONTEXT_LENGTH
    autos = list(Compaction.objects.filter(trigger=Compaction.Trigger.AUTO))
    assert autos, "six exploring turns cross the threshold at least once"
    for run in autos:
        assert run.status == "committed", run.error
        assert run.tokens_before <= DEMO_CONTEXT_LENGTH, run.tokens_before


@pytest.fixture
def sdk(live_server, alice, settings):
    settings.HERMES_CHAT_MODEL = ""
    raw = ApiKey.issue(owner=alice, name="agent")[1]
    return openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=raw, max_retries=0, timeout=30)


def test_on_v1_it_calls_the_tool_the_client_names(sdk):
    messages = [{"role": "user", "content": "What is the weather in Paris today?"}]
    forced = sdk.chat.completions.create(
        model=DEMO_MODEL,
        messages=messages,
        tools=[SHELL, WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    (call,) = forced.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "c"}
    assert forced.choices[0].finish_reason == "tool_calls"


def test_on_v1_it_uses_the_clients_tools_never_its_own_and_then_answers(sdk):
    messages = [{"role": "user", "content": "Run the shell command that lists the repository"}]
    first = sdk.chat.completions.create(model=DEMO_MODEL, messages=messages, tools=[WEATHER, SHELL])
    (call,) = first.choices[0].message.tool_calls
    assert call.function.name == "run_shell"  # the fitting one, not list_files
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "README.md\nsrc/\ntests/"},
    ]
    chunks = list(
        sdk.chat.completions.create(
            model=DEMO_MODEL, messages=messages, tools=[WEATHER, SHELL], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    assert "`run_shell` returned: README.md src/ tests/" in text
    names = set(Message.objects.filter(role="tool").values_list("tool_name", flat=True))
    assert names <= {"run_shell", ""}
