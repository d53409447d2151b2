"""The chat says each figure once and names it (issue #37, chat items): a reply's "prompt N
tokens" from before the last compaction says so (the meter shows the context now, not that
call's); after an undo or a redo its outcome is said once; the sparkline under the meter has
a visible label."""

import re

import pytest
from django.urls import reverse

from hermes_web.models import Message
from hermes_web.services.sessions import append_message
from tests.web.test_chat_undo import compacted

pytestmark = pytest.mark.django_db

BEFORE = "before the last compaction"


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_prompt_labels_from_before_the_compaction_say_so(alice, alice_client, mode):
    session, run, _ = compacted(alice, mode)
    live = run.result_session
    kept = list(
        Message.objects.filter(
            session=live, active=True, role="assistant", provider_prompt_tokens__isnull=False
        )
    )
    assert kept, "the kept tail has no reply with a provider count"
    append_message(live, role="user", content="and now?")
    append_message(live, role="assistant", content="Now this.", provider_prompt_tokens=4_321)
    page = alice_client.get(reverse("chat_detail", args=[live.public_id])).content.decode()
    labels = re.findall(r'<div class="muted small call-prompt">(.*?)</div>', page, re.S)
    old = [label for label in labels if "4,321" not in label]
    assert old, labels
    assert all(BEFORE in label for label in old), labels
    assert all(f"left ≈{run.tokens_after:,}" in label for label in old)
    (new,) = [label for label in labels if "4,321" in label]
    assert BEFORE not in new


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_an_undo_and_a_redo_are_each_said_once(alice, alice_client, mode):
    _, run, _ = compacted(alice, mode)
    undo = alice_client.post(reverse("chat_compaction_undo", args=[run.public_id, "undo"]))
    page = alice_client.get(undo.url).content.decode()
    assert page.count("Undone: the context from before this compaction is restored") == 1
    assert 'id="chat-notices"' in page  # the redirect's anchor is still there
    redo = alice_client.post(reverse("chat_compaction_undo", args=[run.public_id, "redo"]))
    page = alice_client.get(redo.url).content.decode()
    assert page.count("(redone after an undo)") == 1


def test_a_refused_undo_is_still_said_next_to_the_status_row(alice, alice_client):
    session, run, _ = compacted(alice, "in_place")
    append_message(session, role="user", content="a message after the compaction")
    response = alice_client.post(reverse("chat_compaction_undo", args=[run.public_id, "undo"]))
    page = alice_client.get(response.url).content.decode()
    notices = page.split('id="chat-notices">')[1].split("</div>")[0]
    assert 'class="notice chat-notice error"' in notices


def test_the_sparkline_under_the_meter_has_a_visible_label(alice, alice_client):
    session, run, _ = compacted(alice, "in_place")
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    meter = page.split('id="chat-meter"')[1].split("</header>")[0]
    bars = len(re.findall(r'class="meter-bar(?: over)?"', meter))
    assert bars >= 1
    label = re.search(r'<p class="meter-bars-label[^"]*" id="meter-bars-label">([^<]+)</p>', meter)
    assert label, meter
    assert f"the last {bars} model call" in label.group(1)
    assert 'aria-labelledby="meter-bars-label"' in meter
