"""Issue #27: the chat page tells the truth and follows the conversation (items 4, 9)."""

import re

import pytest
from django.urls import reverse

from compaction.messages import content_text
from hermes_web.models import Message, Session
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = pytest.mark.django_db


def test_a_stub_in_a_continuation_expands_to_the_original_output(alice, alice_client):
    """Item 4: "Full output (72 chars)" showed the stub line itself; now the original."""
    session = seed_conversation(alice, n=200, seed=5, mode="rotation")
    run = compact_now(
        session, alice, mode="rotation", overrides={"tail_token_budget": 6_000, "profile": "hermes"}
    )
    assert run.status == "committed", run.error
    child = Session.objects.get(pk=run.result_session_id)
    stubs = [
        row
        for row in Message.objects.filter(session=child, role="tool").order_by("position")
        if "[ref:" in content_text(row.content) and len(content_text(row.content)) < 800
    ]
    assert stubs, "the hermes passes wrote no stand-in into the continuation"
    html = alice_client.get(reverse("chat_detail", args=[child.public_id])).content.decode()
    shown = 0
    for stub in stubs:
        ref = int(re.search(r"\[ref:(\d+)\]", content_text(stub.content))[1])
        original = run.input_rows()[ref]
        text = content_text(original.content)
        href = reverse("message_detail", args=[session.public_id, original.position])
        if href in html:
            shown += 1
            assert f"Full output ({len(text):,} chars)" in html
    assert shown > 0
    assert f"Full output ({len(content_text(stubs[0].content))} chars)" not in html


def test_a_reload_after_creating_an_api_key_creates_no_second_key(alice, alice_client):
    """Item 13: POST, redirect, GET; the raw key is shown once, with a copy button."""
    from hermes_web.models import ApiKey

    response = alice_client.post(reverse("create_api_key"), {"name": "backup"})
    assert response.status_code == 302
    assert response.url == reverse("api_keys")
    shown = alice_client.get(response.url).content.decode()
    raw = shown.split('id="raw-key" tabindex="0">', 1)[1].split("<", 1)[0]
    assert raw.startswith("hk_")
    assert 'data-copy="#raw-key"' in shown
    again = alice_client.get(response.url).content.decode()  # the reload
    assert raw not in again
    assert ApiKey.objects.filter(owner=alice).count() == 1
    assert '<th><span class="visually-hidden">Actions</span></th>' in again


def test_a_chat_can_be_renamed_and_deleted_with_its_whole_chain(alice, alice_client, bob_client):
    """Item 12: rename and delete, for the whole rotation chain; nobody else's."""
    session = seed_conversation(alice, n=120, seed=8, mode="rotation")
    run = compact_now(session, alice, mode="rotation")
    child = Session.objects.get(pk=run.result_session_id)
    rename = reverse("chat_rename", args=[child.public_id])
    assert bob_client.post(rename, {"title": "mine now"}).status_code == 404
    response = alice_client.post(rename, {"title": "  Parser   crash  "})
    assert response.url == reverse("chat_detail", args=[child.public_id]) + "#chat-notices"
    assert set(
        Session.objects.filter(pk__in=[session.pk, child.pk]).values_list("title", flat=True)
    ) == {"Parser crash"}
    page = alice_client.get(response.url).content.decode()
    assert "Renamed to “Parser crash”." in page
    refused = alice_client.post(rename, {"title": "   "})
    assert "not renamed" in alice_client.get(refused.url).content.decode()
    delete = reverse("chat_delete", args=[child.public_id])
    assert bob_client.post(delete).status_code == 404
    gone = alice_client.post(delete)
    assert gone.url == reverse("chat")
    assert not Session.objects.filter(pk__in=[session.pk, child.pk]).exists()
    assert not Message.objects.filter(session_id__in=[session.pk, child.pk]).exists()
    assert (
        "Deleted the chat “Parser crash” (2 sessions)."
        in alice_client.get(gone.url).content.decode()
    )
