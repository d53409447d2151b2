"""Clients that do not simply append to their history still keep one conversation or get the
compacted context: LangChain re-serialising the model's tool arguments, aider rebuilding its
history around its "files added to the chat" turns."""

import json

import openai
import pytest

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import run_compaction
from tests.web.test_openai_endpoint import MIDDLE_MARKER, file_text
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


@pytest.fixture
def sdk(live_server, alice, upstream):
    return openai.OpenAI(
        base_url=f"{live_server.url}/v1", api_key=issue_key(alice), max_retries=0, timeout=30
    )


def test_langchain_re_serialised_arguments_stay_one_conversation(sdk, upstream):
    messages = [{"role": "user", "content": "List the files."}]
    for number in range(3):
        # The model writes compact JSON; the client sends back its own json.dumps (spaced,
        # keys in another order).
        upstream.enqueue(
            {
                "tool_calls": [
                    {
                        "id": f"call_{number}",
                        "type": "function",
                        "function": {"name": "shell", "arguments": '{"command":"ls","cwd":"/"}'},
                    }
                ]
            }
        )
        reply = sdk.chat.completions.create(model="fake-chat", messages=messages, tools=TOOLS)
        call = reply.choices[0].message.tool_calls[0]
        rewritten = json.dumps({"cwd": "/", "command": "ls"})
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": "shell", "arguments": rewritten},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "a.txt b.txt"})
    assert Session.objects.count() == 1


SYSTEM = {"role": "system", "content": "Act as an expert software developer."}
FILES = [
    {"role": "user", "content": "I added these files to the chat so you can edit them: app.py"},
    {"role": "assistant", "content": "Ok, any changes I propose will be to those files."},
]


def test_an_aider_style_rebuilt_history_gets_the_compacted_context(sdk, upstream, alice):
    done: list[dict] = []  # aider's done_messages: the history it grows
    for number in range(10):
        cur = {"role": "user", "content": f"Step {number}: go on."}
        messages = [SYSTEM, *done, *FILES, cur]  # the file turns always come after the history
        marker = MIDDLE_MARKER if number == 2 else ""
        upstream.enqueue(
            {
                "content": file_text(f"step {number}", marker),
                "prompt_tokens": 2_000 + 7_000 * number,
            }
        )
        reply = sdk.chat.completions.create(model="fake-chat", messages=messages)
        done += [cur, {"role": "assistant", "content": reply.choices[0].message.content}]
    # No request was a prefix of the next: each one started a session of its own.
    assert Session.objects.filter(owner=alice).count() == 10
    run = run_compaction(Compaction.objects.get().pk)
    assert run.status == Compaction.Status.COMMITTED, run.error
    upstream.clear()

    cur = {"role": "user", "content": "Which step batched the most?"}
    upstream.enqueue({"content": "Step 3.", "prompt_tokens": 9_000})
    raw = sdk.chat.completions.with_raw_response.create(
        model="fake-chat", messages=[SYSTEM, *done, *FILES, cur]
    )
    assert raw.parse().choices[0].message.content == "Step 3."
    assert raw.headers["x-hermes-compaction"].endswith(f"/compactions/{run.public_id}/")
    sent = upstream.requests[-1]["messages"]
    text = json.dumps(sent, ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert MIDDLE_MARKER not in text
    assert sent[-3:] == [*FILES, cur]  # what the client rebuilt is sent as it is
    assert sent[0]["content"].startswith(SYSTEM["content"])
    assert validate_tool_pairs(sent) == []
    assert len(sent) < len(done) + 4
    # Another conversation with the same key is left alone.
    upstream.enqueue({"content": "Hello."})
    sdk.chat.completions.create(model="fake-chat", messages=[{"role": "user", "content": "new"}])
    assert PREFIX_OPENING not in json.dumps(upstream.requests[-1]["messages"])
