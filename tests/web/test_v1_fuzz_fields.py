"""A hypothesis fuzz of ``/v1`` from real-shaped requests of every protocol (chat completions,
Responses, Anthropic Messages; JSON and ``stream: true``): one to three places of a request that
a real agent sends (tools, tool calls and results, system prompt, sampling numbers) are replaced
by wrong types, huge numbers, lone surrogates or nested junk, or removed. Every answer is a
reply or a JSON error in the protocol's shape, never a 5xx, never a traceback or a server path.

Against the offline demo model (a litellm custom provider, what a fresh ``make run`` serves):
it is where a string ``parameters`` once came back as a 502 carrying litellm's traceback.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from hermes_web.llm_models import DEMO_MODEL
from hermes_web.models import ApiKey

pytestmark = pytest.mark.django_db

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}

CHAT = {
    "model": DEMO_MODEL,
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": [{"type": "text", "text": "Read main.py"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "main.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"},
        {"role": "user", "content": "Now explain it."},
    ],
    "tools": [
        {
            "type": "function",
            "function": {"name": "read_file", "description": "Read a file", "parameters": SCHEMA},
        }
    ],
    "tool_choice": "auto",
    "temperature": 0.2,
    "max_tokens": 200,
    "stop": ["</done>"],
}

RESPONSES = {
    "model": DEMO_MODEL,
    "instructions": "You are a coding agent.",
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Read main.py"}]},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "read_file",
            "arguments": '{"path": "main.py"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "print('hi')"},
        {"role": "user", "content": "Now explain it."},
    ],
    "tools": [{"type": "function", "name": "read_file", "parameters": SCHEMA}],
    "tool_choice": "auto",
    "max_output_tokens": 200,
    "store": False,
}

MESSAGES = {
    "model": DEMO_MODEL,
    "max_tokens": 200,
    "system": [{"type": "text", "text": "You are a coding agent."}],
    "messages": [
        {"role": "user", "content": "Read main.py"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "m"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print('hi')"},
                {"type": "text", "text": "Now explain it."},
            ],
        },
    ],
    "tools": [{"name": "read_file", "description": "Read a file", "input_schema": SCHEMA}],
    "tool_choice": {"type": "auto"},
    "temperature": 0.5,
    "stop_sequences": ["</done>"],
}

PROTOCOLS = {"/v1/chat/completions": CHAT, "/v1/responses": RESPONSES, "/v1/messages": MESSAGES}

junk_scalars = (
    st.none()
    | st.booleans()
    | st.sampled_from([0, -1, 2**31, 10**30, -(10**30), 1e308, -1e308, 0.5])
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(["", "oops", "\ud800", "a\x00b", "é" * 3, "auto", "function", "x" * 3000])
    | st.text(max_size=12)
)
junk = st.recursive(
    junk_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path into ``value`` (the root excluded)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*path, key))
            found += places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((*path, index))
            found += places(item, (*path, index))
    return found


def mutate(body: dict, path: tuple, how: str, value: Any) -> None:
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "remove":
        del parent[last]
    elif how == "add" and isinstance(parent, dict):
        parent[f"{last}_x"] = value
    else:
        parent[last] = value


LEAKS = ("Traceback", 'File "', "site-packages", "/work/", "/root/", '.py"', "line ")


def assert_clean(text: str) -> None:
    for leak in LEAKS[:5]:
        assert leak not in text, text[:2000]


@pytest.fixture
def key(alice, settings):
    settings.HERMES_CHAT_MODEL = ""  # the offline demo model
    settings.HERMES_API_MODELS = []
    settings.HERMES_SUMMARY_MODEL = ""
    return ApiKey.issue(owner=alice, name="fuzz")[1]


@hsettings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    path=st.sampled_from(list(PROTOCOLS)),
    stream=st.booleans(),
    data=st.data(),
)
def test_mutated_real_requests_never_get_a_5xx_or_a_traceback(key, path, stream, data):
    body = copy.deepcopy(PROTOCOLS[path])
    body["stream"] = stream
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        spots = places(body)
        if not spots:
            break
        spot = data.draw(st.sampled_from(spots), label="place")
        how = data.draw(st.sampled_from(["replace", "replace", "remove", "add"]), label="how")
        mutate(body, spot, how, data.draw(junk, label="value"))
    raw = json.dumps(body)  # lone surrogates become \ud800 escapes, as a client would send
    response = Client().post(
        path, data=raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code < 500, response.content[:2000]
    kind = response.get("Content-Type", "")
    if response.status_code == 200 and kind.startswith("text/event-stream"):
        text = b"".join(response.streaming_content).decode("utf-8", "replace")
        assert "server_error" not in text, text[:2000]
        assert_clean(text)
        return
    assert kind.startswith("application/json"), (response.status_code, response.content[:500])
    payload = json.loads(response.content)
    assert_clean(response.content.decode("utf-8", "replace"))
    if response.status_code >= 400:
        if path == "/v1/messages":
            assert payload["type"] == "error"
            assert set(payload["error"]) == {"type", "message"}
        else:
            assert set(payload["error"]) == {"message", "type", "param", "code"}
