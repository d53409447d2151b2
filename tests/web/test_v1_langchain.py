"""LangChain's real ``ChatOpenAI`` against a live hermes-web and the local fake upstream.

The fake model spaces its tool-call JSON (``{"command": "ls"}``); LangChain parses the
arguments into a dict and ``json.dumps`` them again when it sends the history back. The
conversation must still be one session chain (no new session after each tool call), and
after a compaction the compacted context must reach the upstream.
"""

import json

import pytest
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import run_compaction
from tests.web.test_openai_endpoint import MIDDLE_MARKER, file_text
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)


@tool
def run_shell(command: str) -> str:
    """Run a shell command in the workspace and return its output."""
    marker = MIDDLE_MARKER if command == "cat src/2.txt" else ""
    return file_text(command, marker)


def model_arguments(number: int) -> str:
    """Arguments as a model writes them, never as LangChain's ``json.dumps`` re-writes them
    (``{"command": "…"}``): spaced around the colon, or compact, by turn."""
    command = f"cat src/{number}.txt"
    return f'{{ "command" : "{command}" }}' if number % 2 else f'{{"command":"{command}"}}'


def spaced_call(number: int) -> dict:
    return {
        "id": f"call_{number}",
        "type": "function",
        "function": {"name": "run_shell", "arguments": model_arguments(number)},
    }


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_chatopenai_with_spaced_tool_arguments_stays_one_conversation_through_a_compaction(
    live_server, alice, upstream, streamed
):
    # The README's LangChain set-up, as it is run here.
    llm = ChatOpenAI(
        model="fake-chat",
        base_url=f"{live_server.url}/v1",
        api_key=issue_key(alice),
        streaming=streamed,
        max_retries=0,
    )
    agent = llm.bind_tools([run_shell])
    messages = [
        SystemMessage("You are a careful agent."),
        HumanMessage("Read the sources, one file at a time."),
    ]
    for number in range(8):
        upstream.enqueue(
            {
                "content": f"Reading file {number}." if number % 2 else "",
                "tool_calls": [spaced_call(number)],
                "prompt_tokens": 2_000 + 9_000 * number,
            }
        )
        reply = agent.invoke(messages)
        assert [call["args"] for call in reply.tool_calls] == [{"command": f"cat src/{number}.txt"}]
        messages.append(reply)
        for call in reply.tool_calls:
            messages.append(ToolMessage(run_shell.invoke(call["args"]), tool_call_id=call["id"]))
        # One conversation: a tool call never starts another session.
        assert Session.objects.count() == 1
    sent = upstream.requests[-1]["messages"]
    # LangChain re-serialised the model's arguments: other bytes, the same call.
    arguments = sent[-2]["tool_calls"][0]["function"]["arguments"]
    assert arguments != model_arguments(6)
    assert json.loads(arguments) == json.loads(model_arguments(6))
    session = Session.objects.get()
    assert session.messages.filter(role="tool").count() == 7  # the 8th is not sent yet

    run = run_compaction(Compaction.objects.get().pk)
    assert run.status == Compaction.Status.COMMITTED, run.error
    upstream.clear()
    messages.append(HumanMessage("Which gateway is busiest?"))
    upstream.enqueue({"content": "Gateway 3.", "prompt_tokens": 9_000})
    answer = agent.invoke(messages)
    assert answer.content == "Gateway 3."
    sent = upstream.requests[-1]["messages"]
    text = json.dumps(sent, ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert MIDDLE_MARKER not in text
    assert validate_tool_pairs(sent) == []
    assert sent[-1] == {"role": "user", "content": "Which gateway is busiest?"}
    # The compaction's continuation took the turn: still one chain, no stray session.
    assert Session.objects.filter(owner=alice).count() == 2
    assert run.result_session.messages.filter(content="Gateway 3.").exists()
