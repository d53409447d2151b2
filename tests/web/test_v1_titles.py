"""A session created through /v1 is titled by what the user asked, never by the wrapper an
agent puts first (Codex's ``<environment_context>`` and AGENTS.md turns, Claude Code's
``<system-reminder>`` blocks): the importers' ``clean_title`` rules."""

import json

import pytest

from hermes_web.models import Session
from tests.web.v1_helpers import issue_key, start_upstream

pytestmark = pytest.mark.django_db


@pytest.fixture
def upstream(settings):
    server = start_upstream(settings)
    server.enqueue({"content": "Done."})
    yield server
    server.stop()


def post(client, path: str, key: str, body: dict) -> Session:
    response = client.post(
        path, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 200, response.content
    return Session.objects.get(public_id=response["X-Hermes-Session"])


def text(value: str) -> dict:
    return {"type": "input_text", "text": value}


CODEX_INPUT = [
    {"type": "message", "role": "developer", "content": [text("<permissions>…</permissions>")]},
    {
        "type": "message",
        "role": "user",
        "content": [
            text(
                "# AGENTS.md instructions for /work/app\n\n<INSTRUCTIONS>\nUse uv.\n</INSTRUCTIONS>"
            )
        ],
    },
    {
        "type": "message",
        "role": "user",
        "content": [
            text(
                "<environment_context>\n  <cwd>/work/app</cwd>\n  <shell>bash</shell>\n"
                "</environment_context>"
            )
        ],
    },
    {"type": "message", "role": "user", "content": [text("Fix the flaky login test")]},
]


def test_a_codex_session_is_titled_by_the_request_not_its_context_turns(client, alice, upstream):
    session = post(
        client,
        "/v1/responses",
        issue_key(alice),
        {"model": "fake-chat", "input": CODEX_INPUT, "store": False},
    )
    assert session.title == "Fix the flaky login test"


def test_a_codex_ide_request_is_titled_by_the_request_inside_the_ide_context(
    client, alice, upstream
):
    ide = (
        "# Context from my IDE setup:\n\n## Active file: src/app.py\n\n"
        "## My request for Codex:\nRename the settings module\n"
    )
    session = post(
        client,
        "/v1/responses",
        issue_key(alice),
        {"model": "fake-chat", "input": [{"role": "user", "content": [text(ide)]}]},
    )
    assert session.title == "Rename the settings module"


def test_a_claude_code_session_is_titled_by_the_prompt_not_its_system_reminders(
    client, alice, upstream
):
    first_user = {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "<system-reminder>\nAs you answer the user's questions, you can use "
                "the following context:\n# claudeMd\n…\n</system-reminder>",
            },
            {
                "type": "text",
                "text": "Add a changelog entry for 2.4",
                "cache_control": {"type": "ephemeral"},
            },
        ],
    }
    session = post(
        client,
        "/v1/messages?beta=true",
        issue_key(alice),
        {
            "model": "claude-sonnet-4-5-20250929",
            "max_tokens": 512,
            "system": [{"type": "text", "text": "You are Claude Code."}],
            "messages": [first_user],
        },
    )
    assert session.title == "Add a changelog entry for 2.4"


def test_a_prompt_that_starts_with_a_reminder_in_one_string_keeps_what_follows(
    client, alice, upstream
):
    session = post(
        client,
        "/v1/chat/completions",
        issue_key(alice),
        {
            "model": "fake-chat",
            "messages": [
                {"role": "user", "content": "<system-reminder>todo: none</system-reminder>\nhi!"}
            ],
        },
    )
    assert session.title == "hi!"


def test_a_conversation_of_wrappers_only_gets_the_generic_title(client, alice, upstream):
    session = post(
        client,
        "/v1/chat/completions",
        issue_key(alice),
        {
            "model": "fake-chat",
            "messages": [
                {"role": "user", "content": "<environment_context></environment_context>"}
            ],
        },
    )
    assert session.title == "API conversation"
