"""Pages around the OpenAI-compatible endpoint: API key snippets, sessions made by clients."""

import json

import pytest
from django.urls import reverse

from hermes_web.models import ApiKey, Session
from tests.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def upstream(settings):
    server = FakeOpenAIServer().start()
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    settings.HERMES_CHAT_API_BASE = server.base_url
    settings.HERMES_CHAT_API_KEY = "x"
    settings.HERMES_LLM_MAX_RETRIES = 0
    yield server
    server.stop()


def test_the_api_keys_page_shows_the_base_url_and_working_snippets(alice_client, upstream):
    page = alice_client.get(reverse("api_keys")).content.decode()
    assert "Use it from your own agent" in page
    assert "http://testserver/v1" in page
    assert 'base_url="http://testserver/v1", api_key="hk_…"' in page
    assert 'model="openai/fake-chat"' in page
    assert "curl http://testserver/v1/chat/completions" in page
    created = alice_client.post(
        reverse("create_api_key"), {"name": "my agent"}, follow=True
    ).content.decode()
    raw = created.split('id="raw-key" tabindex="0">', 1)[1].split("<", 1)[0]
    assert raw.startswith("hk_")
    assert f'api_key="{raw}"' in created
    assert f"Authorization: Bearer {raw}" in created


def test_a_session_made_by_a_client_shows_its_source_and_name(
    alice, alice_client, client, upstream
):
    raw = ApiKey.issue(owner=alice, name="agent")[1]
    upstream.enqueue({"content": "Hi there."})
    response = client.post(
        "/v1/chat/completions",
        data=json.dumps(
            {"model": "openai/fake-chat", "messages": [{"role": "user", "content": "Hello bot"}]}
        ),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}", "User-Agent": "crab-agent/2.1 (darwin)"},
    )
    assert response.status_code == 200, response.content
    session = Session.objects.get(public_id=response.headers["X-Hermes-Session"])
    assert (session.title, session.client_name) == ("Hello bot", "crab-agent/2.1")
    listing = alice_client.get(reverse("conversation_list")).content.decode()
    assert "API client" in listing
    assert "crab-agent/2.1" in listing
    detail = alice_client.get(reverse("conversation_detail", args=[session.public_id]))
    assert "API client (crab-agent/2.1)" in detail.content.decode()
    assert "API client" in dict(Session.Source.choices).values()


def test_a_request_over_the_upload_limit_gets_413_and_stores_nothing(alice, client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000
    raw = ApiKey.issue(owner=alice, name="agent")[1]
    body = {"model": "hermes-demo/agent", "messages": [{"role": "user", "content": "x" * 5_000}]}
    response = client.post(
        "/v1/chat/completions",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert not Session.objects.exists()


def test_wrong_methods_get_405_in_openais_shape(client):
    response = client.get("/v1/chat/completions")
    assert (response.status_code, response["Allow"]) == (405, "POST")
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert client.post("/v1/models").status_code == 405


def test_a_replayed_agent_log_continues_one_session_call_after_call(alice, client, upstream):
    """Requests and responses in the shape of a real agent log (the agent re-sends each reply
    without the fields the API added, keys in another order): every call continues the same
    session and the model receives exactly what the agent sent."""
    from pathlib import Path

    from hermes_web.models import Message

    log = json.loads((Path(__file__).parent.parent / "fixtures/openai_agent_log.json").read_text())
    raw = ApiKey.issue(owner=alice, name="agent")[1]
    sessions = set()
    for call in log["calls"]:
        message = call["response"]["choices"][0]["message"]
        upstream.enqueue(
            {
                "content": message["content"],
                "tool_calls": message["tool_calls"],
                "prompt_tokens": call["response"]["usage"]["prompt_tokens"],
            }
        )
        response = client.post(
            "/v1/chat/completions",
            data=json.dumps({"model": "fake-chat", "messages": call["messages"]}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {raw}", "User-Agent": "OpenAI/Python 1.98.0"},
        )
        assert response.status_code == 200, response.content
        sessions.add(response.headers["X-Hermes-Session"])
        sent = upstream.requests[-1]["messages"]
        assert [m.get("content") for m in sent] == [m.get("content") for m in call["messages"]]
    assert len(sessions) == 1
    session = Session.objects.get(public_id=sessions.pop())
    final = log["calls"][-1]
    rows = list(Message.objects.filter(session=session).active())
    assert len(rows) == len(final["messages"]) + 1
    assert rows[-1].content == final["response"]["choices"][0]["message"]["content"]
    assert [r.provider_prompt_tokens for r in rows if r.role == "assistant"] == [
        c["response"]["usage"]["prompt_tokens"] for c in log["calls"]
    ]
    assert session.client_name == "OpenAI/Python 1.98.0"
