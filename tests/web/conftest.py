"""Fixtures shared by the web tests."""

import pytest
from django.core.cache import cache

from hermes_web import caching
from tests.fake_openai import FakeOpenAIServer
from tests.web.v1_helpers import start_upstream


@pytest.fixture
def llm(settings):
    """The chat model is the local fake OpenAI server, reached through litellm."""
    server = FakeOpenAIServer().start()
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    settings.HERMES_CHAT_API_BASE = server.base_url
    settings.HERMES_CHAT_API_KEY = "x"
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_TIMEOUT = 5
    settings.HERMES_CONTEXT_LENGTH = 128_000
    settings.HERMES_SUMMARY_MODEL = ""
    yield server
    server.stop()


@pytest.fixture
def upstream(settings):
    """The /v1 tests' upstream: the local fake OpenAI server behind the gateway's settings
    (``start_upstream``). A module with an upstream of its own defines its own fixture."""
    server = start_upstream(settings)
    yield server
    server.stop()


@pytest.fixture
def empty_cache(monkeypatch):
    """An empty cache before and after the test, the "no worker" banner's status held: its
    few seconds could run out between two views on a loaded machine and add queries that have
    nothing to do with what a test counts. Modules that count queries use it for every test."""
    monkeypatch.setattr(caching, "WORKER_STATUS_SECONDS", 3600)
    cache.clear()
    yield
    cache.clear()
