"""Regenerate the newest reply (ChatGPT's basic): without JavaScript a POST form that reloads
the page at the new turn; with htmx the new turn takes the old reply's place. The old reply is
archived, never deleted, and only the newest finished reply offers it."""

import pytest
from django.urls import reverse

from hermes_web.agent.loop import run_turn
from hermes_web.models import AgentTurn, Message
from hermes_web.services.chat import send_message, start_chat
from hermes_web.services.sessions import append_message, openai_messages

pytestmark = pytest.mark.django_db


def answered(session, text, answer):
    turn = send_message(session=session, text=text)
    call = [{"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]
    append_message(session, role="assistant", content=None, tool_calls=call)
    append_message(session, role="tool", content='{"entries": []}', tool_call_id="c1")
    reply = append_message(session, role="assistant", content=answer)
    AgentTurn.objects.filter(pk=turn.pk).update(status="done")
    return reply


@pytest.fixture
def chat(alice, settings):
    from hermes_web.agent import demo_model

    settings.HERMES_CHAT_MODEL = ""  # the offline demo model answers the new turn
    demo_model.STREAM_DELAY = 0
    session = start_chat(owner=alice)
    first = answered(session, "first question", "first **answer**")
    last = answered(session, "What is in this workspace?", "an answer to take back")
    return session, first, last


def test_only_the_newest_finished_reply_offers_regenerate(alice_client, chat):
    session, first, last = chat
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    url = reverse("chat_regenerate", args=[session.public_id])
    assert page.count(f'action="{url}"') == 1
    form = page[page.index(f'action="{url}"') :]
    assert f'name="message" value="{last.pk}"' in form[: form.index("</form>")]
    assert page.index(f'id="reply-{last.pk}"') < page.index(f'action="{url}"')


def test_regenerate_without_javascript_archives_the_reply_and_answers_again(
    alice_client, bob_client, chat
):
    session, first, last = chat
    url = reverse("chat_regenerate", args=[session.public_id])
    assert bob_client.post(url, {"message": last.pk}).status_code == 404
    response = alice_client.post(url, {"message": last.pk})
    assert response.status_code == 302
    assert response.url.startswith(reverse("chat_detail", args=[session.public_id]))
    # The old turn's rows (call, result, reply) are archived, not deleted; the question stays.
    old = Message.objects.filter(session=session, archived=True)
    assert old.count() == 3
    assert "an answer to take back" in [m.content for m in old]
    assert [m["content"] for m in openai_messages(session)][-1] == "What is in this workspace?"
    turn = AgentTurn.objects.filter(session=session).latest("created_at")
    assert turn.status == "queued"
    assert turn.user_message.content == "What is in this workspace?"
    assert run_turn(turn.pk) is None
    contents = [m["content"] for m in openai_messages(session) if m["role"] == "assistant"]
    assert "an answer to take back" not in contents
    assert "Demo model (offline)" in (contents[-1] or "")
    # Asking again for the reply that is gone is refused in words, nothing changed.
    again = alice_client.post(url, {"message": last.pk}, follow=True).content.decode()
    assert "Only the newest reply can be regenerated" in again
    assert AgentTurn.objects.filter(session=session).count() == 3


def test_regenerate_with_htmx_puts_the_new_turn_in_the_old_replys_place(alice_client, chat):
    session, first, last = chat
    rows = list(
        Message.objects.filter(session=session, position__gt=last.position - 3).values_list(
            "pk", flat=True
        )
    )
    response = alice_client.post(
        reverse("chat_regenerate", args=[session.public_id]),
        {"message": last.pk},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "turn-queued" in body or "queued" in body
    for pk in rows:
        assert f'<div id="msg-{pk}" hx-swap-oob="delete"></div>' in body
    assert f'id="msg-{first.pk}" hx-swap-oob' not in body


def test_a_reply_that_is_not_the_newest_is_refused(alice_client, chat):
    session, first, last = chat
    response = alice_client.post(
        reverse("chat_regenerate", args=[session.public_id]), {"message": first.pk}
    )
    assert response.status_code == 302
    assert not Message.objects.filter(session=session, archived=True).exists()
    assert AgentTurn.objects.filter(session=session, status="queued").count() == 0
