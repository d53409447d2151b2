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
