"""Fixtures shared by the web tests."""

import pytest

from tests.fake_openai import FakeOpenAIServer


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
