"""Shared set-up of the /v1 protocol tests: the fake upstream as the served model and a key."""

from hermes_web.models import ApiKey
from tests.fake_openai import FakeOpenAIServer


def start_upstream(settings) -> FakeOpenAIServer:
    """A fake upstream serving ``openai/fake-chat`` with a small window (64,000-token trigger)."""
    server = FakeOpenAIServer().start()
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    settings.HERMES_CHAT_API_BASE = server.base_url
    settings.HERMES_CHAT_API_KEY = "upstream-key"
    settings.HERMES_API_MODELS = ["openai/fake-other"]
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_TIMEOUT = 5
    settings.HERMES_CONTEXT_LENGTH = 85_000
    settings.HERMES_SUMMARY_MODEL = ""
    return server


def issue_key(owner) -> str:
    return ApiKey.issue(owner=owner, name="agent")[1]
