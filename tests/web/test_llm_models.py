"""One context-window resolver: a session on a model gets the same window whichever door it
came in by (chat, sessions API, import, the OpenAI-compatible /v1 endpoint).

The /v1 session is a real call through litellm to the local fake upstream (tests/fake_openai.py).
"""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from compaction import CompactionConfig
from hermes_web import llm_models
from hermes_web.models import ApiKey, Session
from tests.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.django_db

# In litellm's bundled model map (max_input_tokens 128,000), so the map decides the window,
# not the 200,000 default: the API and the importers used to take the default regardless.
MAPPED = "openai/gpt-4o-mini"


@pytest.fixture
def upstream(settings):
    server = FakeOpenAIServer().start()
    settings.HERMES_CHAT_MODEL = MAPPED
    settings.HERMES_CHAT_API_BASE = server.base_url
    settings.HERMES_CHAT_API_KEY = "upstream-key"
    settings.HERMES_API_MODELS = []
    settings.HERMES_SUMMARY_MODEL = ""
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_TIMEOUT = 5
    settings.HERMES_CONTEXT_LENGTH = 0
    yield server
    server.stop()


def windows_by_door(client, alice) -> dict[str, int]:
    """Create one session through each door, on the configured chat model; their windows."""
    client.force_login(alice)
    model = llm_models.chat_model()

    response = client.post("/chat/new/")
    assert response.status_code == 302
    chat = Session.objects.get(owner=alice, source=Session.Source.CHAT)

    response = client.post(
        "/api/sessions", data=json.dumps({"model": model}), content_type="application/json"
    )
    assert response.status_code == 201, response.content
    api = Session.objects.get(public_id=response.json()["id"])

    doc = {"model": model, "messages": [{"role": "user", "content": "hello"}]}
    upload = SimpleUploadedFile("conversation.json", json.dumps(doc).encode())
    response = client.post("/api/import", {"file": upload})
    assert response.status_code == 200, response.content
    imported = Session.objects.get(owner=alice, source=Session.Source.IMPORT_OPENAI)

    raw = ApiKey.issue(owner=alice, name="agent")[1]
    response = client.post(
        "/v1/chat/completions",
        data=json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert response.status_code == 200, response.content
    v1 = Session.objects.get(owner=alice, source=Session.Source.API)

    sessions = {"chat": chat, "api": api, "import": imported, "v1": v1}
    assert {door: s.model for door, s in sessions.items()} == dict.fromkeys(sessions, model)
    return {door: s.context_length for door, s in sessions.items()}


def test_every_door_gives_a_mapped_model_the_same_window(client, alice, upstream):
    windows = windows_by_door(client, alice)
    assert windows == dict.fromkeys(windows, 128_000)


def test_the_operator_override_reaches_every_door(client, alice, upstream, settings):
    settings.HERMES_CONTEXT_LENGTH = 90_000
    windows = windows_by_door(client, alice)
    assert windows == dict.fromkeys(windows, 90_000)


def test_an_unknown_model_gets_the_one_documented_default(client, alice, upstream, settings):
    settings.HERMES_CHAT_MODEL = "openai/not-a-model-litellm-knows"
    windows = windows_by_door(client, alice)
    assert windows == dict.fromkeys(windows, llm_models.DEFAULT_CONTEXT_LENGTH)


def test_the_defaults_agree_with_the_engine_and_the_column():
    assert CompactionConfig().context_length == llm_models.DEFAULT_CONTEXT_LENGTH
    assert Session._meta.get_field("context_length").default == llm_models.DEFAULT_CONTEXT_LENGTH


def test_the_demo_model_and_the_demo_conversations_share_one_window(alice, settings):
    from hermes_web.demo import load_demo_conversations

    settings.HERMES_CONTEXT_LENGTH = 0
    assert llm_models.context_length_for(llm_models.DEMO_MODEL) == llm_models.DEMO_CONTEXT_LENGTH
    load_demo_conversations(alice)
    windows = set(Session.objects.filter(owner=alice).values_list("context_length", flat=True))
    assert windows == {llm_models.DEMO_CONTEXT_LENGTH}


@pytest.mark.parametrize(
    ("summary", "chat", "uses_llm"),
    [
        ("", "", False),
        ("", llm_models.DEMO_MODEL, False),
        ("demo-summarizer", "", False),
        ("", "openai/gpt-4o-mini", True),
        ("openai/gpt-4o-mini", llm_models.DEMO_MODEL, True),
        # The first configured name is a demo one, the second is real: the summarizer built
        # and the "can this run inline" answer agree (they used to disagree).
        ("demo-summarizer", "openai/gpt-4o-mini", True),
    ],
)
def test_the_summarizer_and_the_inline_rule_agree(settings, summary, chat, uses_llm):
    from compaction import LLMSummarizer

    settings.HERMES_SUMMARY_MODEL, settings.HERMES_CHAT_MODEL = summary, chat
    assert llm_models.summarizes_with_llm("auto") is uses_llm
    assert isinstance(llm_models.build_summarizer("auto"), LLMSummarizer) is uses_llm
    assert llm_models.summarizes_with_llm("deterministic") is False


def test_litellm_is_set_up_once_without_per_chunk_logging():
    """No litellm callbacks are configured, so its per-chunk success logging (a thread-pool
    task per streamed chunk) is off: it only competed for the GIL with the streaming request
    (bench_openai: SSE overhead median 31.5 -> 19.4 ms)."""
    from hermes_web.llm_models import litellm_module

    litellm = litellm_module()
    assert litellm is litellm_module()
    assert litellm.disable_streaming_logging is True
    assert litellm.suppress_debug_info is True
    assert not litellm.success_callback
    assert not litellm.callbacks
