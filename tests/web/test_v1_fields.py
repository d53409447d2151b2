"""Every field a ``/v1`` protocol sends on to the model is checked first: a wrong type is a 400
in the protocol's shape naming its place, never a 502 with litellm's traceback; and no
upstream exception's text reaches a client with a traceback or a server path in it.

Against the offline demo model (a litellm custom provider): it is what a fresh ``make run``
serves, and where a string ``parameters`` once came back as a 502 carrying a traceback.
"""

import json

import pytest
from django.test import Client

from hermes_web.llm_models import DEMO_MODEL
from hermes_web.models import Session
from hermes_web.openai_compat.errors import scrub
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db

CHAT = {"model": DEMO_MODEL, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": DEMO_MODEL, "input": "hi"}
MESSAGES = {"model": DEMO_MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def demo(settings):
    """The demo model as the served model (no HERMES_CHAT_MODEL: a fresh install's default)."""
    settings.HERMES_CHAT_MODEL = ""
    settings.HERMES_API_MODELS = []
    settings.HERMES_SUMMARY_MODEL = ""


@pytest.fixture
def key(alice, demo):
    return issue_key(alice)


def post(path: str, body: dict, key: str):
    return Client().post(
        path,
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )


def error_message(response, path: str) -> str:
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    payload = json.loads(response.content)
    if path.startswith("/v1/messages"):
        assert payload["type"] == "error"
        assert payload["error"]["type"] == "invalid_request_error"
    return payload["error"]["message"]


CASES = [
    # (path, base body, extra fields, the place and what the refusal must name)
    (
        "/v1/chat/completions",
        CHAT,
        {"tools": [{"type": "function", "function": {"name": "x", "parameters": "oops"}}]},
        "tools[0].function.parameters: must be an object",
    ),
    (
        "/v1/chat/completions",
        CHAT,
        {"tools": [{"type": "function", "function": {"name": 3}}]},
        "tools[0].function.name: must be a non-empty string",
    ),
    ("/v1/chat/completions", CHAT, {"tools": "x"}, "tools: must be an array"),
    (
        "/v1/chat/completions",
        CHAT,
        {
            "tools": [
                {"type": "function", "function": {"name": "x", "parameters": {"required": [[]]}}}
            ]
        },
        "tools[0].function.parameters.required[0]: must be a string",
    ),
    (
        "/v1/responses",
        RESPONSES,
        {"tools": [{"type": "function", "name": "x", "parameters": {"properties": {"a": 1}}}]},
        "tools[0].parameters.properties.a: must be an object",
    ),
    ("/v1/chat/completions", CHAT, {"tool_choice": "sometimes"}, "tool_choice: must be none"),
    (
        "/v1/chat/completions",
        CHAT,
        {"tool_choice": {"type": "function", "function": "x"}},
        "tool_choice.function: must be an object",
    ),
    (
        "/v1/chat/completions",
        CHAT,
        {"temperature": 1e308},
        "temperature: must be a number from 0 to 2",
    ),
    ("/v1/chat/completions", CHAT, {"temperature": "hot"}, "temperature: must be a number"),
    ("/v1/chat/completions", CHAT, {"max_tokens": 10**30}, "max_tokens: must be an integer"),
    ("/v1/chat/completions", CHAT, {"max_tokens": 2.5}, "max_tokens: must be an integer"),
    ("/v1/chat/completions", CHAT, {"stop": [1, 2]}, "stop[0]: must be a string"),
    ("/v1/chat/completions", CHAT, {"logit_bias": {"50256": "x"}}, "logit_bias.50256"),
    ("/v1/chat/completions", CHAT, {"response_format": {"type": "yaml"}}, "response_format.type"),
    ("/v1/chat/completions", CHAT, {"seed": True}, "seed: must be an integer"),
    (
        "/v1/responses",
        RESPONSES,
        {"tools": [{"type": "function", "name": "x", "parameters": "oops"}]},
        "tools[0].parameters: must be an object",
    ),
    (
        "/v1/responses",
        RESPONSES,
        {"tools": [{"type": "namespace", "tools": [{"type": "function", "name": ""}]}]},
        "tools[0].tools[0].name: must be a non-empty string",
    ),
    ("/v1/responses", RESPONSES, {"tool_choice": 7}, "tool_choice: must be an object"),
    (
        "/v1/responses",
        RESPONSES,
        {"max_output_tokens": -1},
        "max_output_tokens: must be an integer",
    ),
    ("/v1/responses", RESPONSES, {"top_p": 2}, "top_p: must be a number from 0 to 1"),
    (
        "/v1/messages",
        MESSAGES,
        {"tools": [{"name": "x", "input_schema": "oops"}]},
        "tools.0.input_schema: must be an object",
    ),
    (
        "/v1/messages",
        MESSAGES,
        {"tools": [{"name": "x"}]},
        "tools.0.input_schema: must be an object",
    ),
    (
        "/v1/messages",
        MESSAGES,
        {"tools": [{"name": "x", "input_schema": {}}], "tool_choice": {"type": "tool"}},
        "tool_choice.name: must be a non-empty string",
    ),
    ("/v1/messages", MESSAGES, {"max_tokens": "many"}, "max_tokens: must be an integer"),
    ("/v1/messages", MESSAGES, {"temperature": 1.5}, "temperature: must be a number from 0 to 1"),
    ("/v1/messages", MESSAGES, {"thinking": {"type": "maybe"}}, "thinking.type"),
    (
        "/v1/messages/count_tokens",
        MESSAGES,
        {"tools": [{"name": "x", "input_schema": []}]},
        "tools.0.input_schema",
    ),
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("path", "base", "extra", "said"), CASES)
def test_a_forwarded_field_of_the_wrong_type_is_a_400_naming_its_place(
    path, base, extra, said, stream, key
):
    body = {**base, **extra}
    if path != "/v1/messages/count_tokens":
        body["stream"] = stream
    response = post(path, body, key)
    assert response.status_code == 400, response.content[:500]
    message = error_message(response, path)
    assert said in message
    assert not Session.objects.exists()


def test_the_right_types_of_the_same_fields_pass(key):
    tools = [{"type": "function", "function": {"name": "x", "parameters": {"type": "object"}}}]
    cases = {
        "/v1/chat/completions": {
            **CHAT,
            "tools": tools,
            "tool_choice": "auto",
            "temperature": 0.5,
            "max_tokens": 100,
            "stop": ["\n\n"],
            "seed": 7,
        },
        "/v1/responses": {
            **RESPONSES,
            "tools": [{"type": "function", "name": "x", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "x"},
            "max_output_tokens": 100,
        },
        "/v1/messages": {
            **MESSAGES,
            "tools": [{"name": "x", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "auto"},
            "temperature": 1,
            "stop_sequences": ["END"],
        },
    }
    for path, body in cases.items():
        response = post(path, body, key)
        assert response.status_code == 200, (path, response.content[:500])


def test_scrub_removes_tracebacks_frames_and_server_paths():
    opened = str(FileNotFoundError(2, "No such file or directory", "/nonexistent/hermes/a.py"))
    raw = (
        f"litellm.APIConnectionError: {opened} Traceback (most recent call last):\n"
        '  File "/srv/app/.venv/lib/python3.11/site-packages/litellm/main.py", line 6616, '
        "in completion\n    response = _complete_custom_providers(ctx)\n"
    )
    text = scrub(raw)
    assert text.startswith("litellm.APIConnectionError:")
    for leak in ("Traceback", "File ", "line 6616", "/nonexistent", "/srv/app", "site-packages"):
        assert leak not in text
    assert scrub(r"cannot read C:\Users\bob\app\x.py now") == "cannot read … now"
    # A URL is the provider's own address, not a server path: it stays.
    said = "see https://api.example.com/v1/chat/completions for details"
    assert scrub(said) == said
    assert len(scrub("x" * 10_000)) == 400
