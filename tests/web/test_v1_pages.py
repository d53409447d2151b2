"""The API keys page shows the set-ups of the README for Claude Code, Codex and the SDKs."""

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_api_keys_page_shows_claude_code_codex_and_anthropic_sdk_set_ups(
    alice_client, settings
):
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    page = alice_client.get(reverse("api_keys")).content.decode()
    assert "export ANTHROPIC_BASE_URL=http://testserver\n" in page
    assert 'base_url = "http://testserver/v1"' in page
    assert 'wire_api = "responses"' in page
    assert 'model = "openai/fake-chat"' in page
    assert 'Anthropic(base_url="http://testserver", api_key="hk_…")' in page


def test_the_api_keys_page_shows_the_opencode_pi_and_aider_set_ups(alice_client, settings):
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    page = alice_client.get(reverse("api_keys")).content.decode()
    assert (
        '"options": {"baseURL": "http://testserver/v1", "apiKey": "{env:HERMES_API_KEY}"}' in page
    )
    assert '"model": "hermes/openai/fake-chat"' in page
    assert '"api": "openai-completions"' in page
    assert "pi --model hermes/openai/fake-chat -p" in page
    assert "aider --model openai/openai/fake-chat --openai-api-base http://testserver/v1" in page
