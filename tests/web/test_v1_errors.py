"""Every ``/v1`` answer is JSON in its protocol's shape: unknown paths, hostile bodies, and a
hypothesis fuzz over request bodies of the three protocols (never a 500, never HTML)."""

import json

import pytest
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from hermes_web.models import ApiKey, Message, Session
from tests.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.django_db

ENDPOINTS = ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/messages/count_tokens")


@pytest.fixture(scope="module")
def fake():
    server = FakeOpenAIServer(default_reply={"content": "fine"}).start()
    yield server
    server.stop()


@pytest.fixture
def upstream(settings, fake):
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    settings.HERMES_CHAT_API_BASE = fake.base_url
    settings.HERMES_CHAT_API_KEY = "upstream-key"
    settings.HERMES_API_MODELS = []
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_TIMEOUT = 5
    return fake


@pytest.fixture
def raw_key(alice):
    return ApiKey.issue(owner=alice, name="agent")[1]


def post(path: str, body: bytes, key: str) -> "object":
    return Client().post(
        path, data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )


def assert_protocol_error(response, path: str, status: int | None = None) -> dict:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    payload = json.loads(response.content)
    if status is not None:
        assert response.status_code == status, payload
    assert 400 <= response.status_code < 500 or response.status_code in (502, 504), payload
    if path.startswith("/v1/messages"):
        assert payload["type"] == "error"
        assert set(payload["error"]) == {"type", "message"}
    else:
        assert set(payload["error"]) == {"message", "type", "param", "code"}
    return payload


@pytest.mark.parametrize(
    "path", ["/v1/embeddings", "/v1/", "/v1/files/abc", "/v1/messages/batches", "/v1/models/x/y"]
)
def test_unknown_v1_paths_answer_a_json_404_in_the_protocols_shape(path, raw_key):
    for method in ("get", "post"):
        response = getattr(Client(), method)(path, HTTP_AUTHORIZATION=f"Bearer {raw_key}")
        payload = assert_protocol_error(response, path, 404)
        message = payload["error"]["message"]
        assert path in message


def test_head_of_the_site_answers_200(client, alice):
    assert client.head("/").status_code == 200
    assert client.get("/").status_code == 200


@pytest.mark.parametrize("path", ENDPOINTS[:3])
def test_json_nested_past_the_parsers_limit_is_a_400(path, raw_key, upstream):
    body = b"[" * 100_000 + b"]" * 100_000
    assert_protocol_error(post(path, body, raw_key), path, 400)
    nested = "[" * 5_000 + '"x"' + "]" * 5_000  # past json.dumps's recursion limit too
    part = f'{{"type": "text", "text": "x", "deep": {nested}}}'
    deep = (
        '{"model": "openai/fake-chat", "max_tokens": 10, '
        f'"messages": [{{"role": "user", "content": [{part}]}}], '
        f'"input": [{{"role": "user", "content": [{part.replace("text", "input_text", 1)}]}}]}}'
    )
    assert_protocol_error(post(path, deep.encode(), raw_key), path, 400)
    assert not Session.objects.exists()


def test_an_unknown_content_part_type_is_a_400_naming_it(raw_key, upstream):
    cases = {
        "/v1/chat/completions": {
            "model": "openai/fake-chat",
            "messages": [{"role": "user", "content": [{"type": "video", "x": 1}]}],
        },
        "/v1/messages": {
            "model": "claude-sonnet-4-5",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": [{"type": "video", "x": 1}]}],
        },
        "/v1/responses": {
            "model": "openai/fake-chat",
            "input": [{"role": "user", "content": [{"type": "video", "x": 1}]}],
        },
    }
    for path, body in cases.items():
        payload = assert_protocol_error(post(path, json.dumps(body).encode(), raw_key), path, 400)
        assert "video" in payload["error"]["message"]
    assert not Session.objects.exists()
    assert upstream.requests == []


# -- the fuzz ----------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
text = st.text(max_size=30)
parts = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "text",
                "image",
                "image_url",
                "input_text",
                "tool_use",
                "tool_result",
                "video",
                "thinking",
            ]
        )
    },
    optional={
        "text": text | json_values,
        "id": text,
        "name": text,
        "input": json_values,
        "tool_use_id": text,
        "content": json_values,
        "source": json_values,
        "image_url": json_values,
    },
)
content = text | st.lists(parts, max_size=3) | json_values
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "tool", "developer", "robot"])},
        optional={"content": content, "tool_calls": json_values, "tool_call_id": text},
    ),
    max_size=4,
)
items = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                ["message", "function_call", "function_call_output", "reasoning", "web_search_call"]
            )
        },
        optional={
            "role": st.sampled_from(["user", "assistant", "developer", "x"]),
            "content": content,
            "call_id": text,
            "name": text,
            "arguments": text | json_values,
            "output": text | json_values,
        },
    ),
    max_size=4,
)
bodies = st.fixed_dictionaries(
    {"model": st.sampled_from(["openai/fake-chat", "claude-sonnet-4-5", "nope"]) | json_values},
    optional={
        "messages": messages | json_values,
        "input": items | text | json_values,
        "system": text | st.lists(parts, max_size=2) | json_values,
        "instructions": text | json_values,
        "tools": json_values,
        "tool_choice": json_values,
        "max_tokens": json_values,
        "stop_sequences": json_values,
        "stream": st.booleans(),
    },
)


@hsettings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(ENDPOINTS), body=bodies | json_values, raw=st.binary(max_size=40))
def test_fuzzed_bodies_get_json_4xx_or_a_reply_never_a_500(path, body, raw, raw_key, upstream):
    for data in (json.dumps(body).encode(), raw):
        response = post(path, data, raw_key)
        if response.status_code == 200:
            if response.get("Content-Type", "").startswith("text/event-stream"):
                stream = b"".join(response.streaming_content)
                assert b"server_error" not in stream
                assert b'"api_error"' not in stream
            else:
                json.loads(response.content)
            continue
        assert_protocol_error(response, path)
    # Whatever was refused stored nothing half: every session has its reply.
    for session in Session.objects.all():
        assert Message.objects.filter(session=session, role="assistant").exists()
