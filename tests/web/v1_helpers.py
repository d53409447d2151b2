"""Shared set-up of the /v1 protocol tests: the fake upstream as the served model and a key."""

from typing import Any

from hermes_web.models import ApiKey
from tests.fake_openai import FakeOpenAIServer


class AgentUpstream(FakeOpenAIServer):
    """A fake upstream whose queued replies go to the agent's own requests (those that offer
    tools) only; a client's side calls made at the same time (opencode's title request) and
    the summarizer get ``default_reply``, whichever arrives first."""

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            if self._queue and body.get("tools"):
                return self._queue.popleft()
            return dict(self.default_reply)


def start_upstream(settings, server_class: type[FakeOpenAIServer] = FakeOpenAIServer):
    """A fake upstream serving ``openai/fake-chat`` with a small window (64,000-token trigger)."""
    server = server_class().start()
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
