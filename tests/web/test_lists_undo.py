"""Undo and redo from the compaction inspector: a plain form (works without JS), the refusal
in words before anyone clicks, the undo history, and the ``undone`` status on every page that
lists compactions (timeline, tree, compare, conversation list, home)."""

import html

import pytest
from django.urls import reverse

from hermes_web.models import Compaction, Session
from hermes_web.services.sessions import append_message, resolve_tip
from tests.web.test_chat_undo import compacted

pytestmark = pytest.mark.django_db


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_the_inspector_undoes_then_redoes_and_records_both(alice, alice_client, bob_client, mode):
    session, run, _ = compacted(alice, mode)
    page_url = reverse("compaction_detail", args=[run.public_id])
    page = text(alice_client.get(page_url))
    assert "Undo this compaction" in page
    assert "Never undone." in page
    undo_url = reverse("compaction_undo", args=[run.public_id])
    assert f'action="{undo_url}"' in page

    assert bob_client.post(undo_url).status_code == 404
    response = alice_client.post(undo_url)
    assert response.status_code == 302
    assert response.url == page_url
    assert Compaction.objects.get(pk=run.pk).status == "undone"
    page = text(alice_client.get(page_url))
    assert "Undone: the context from before this compaction is restored" in page
    assert "Redo this compaction" in page
    assert "Never undone." not in page
    assert page.count("<li><strong>undo</strong>") == 1
    assert "by alice" in page

    response = alice_client.post(reverse("compaction_redo", args=[run.public_id]))
    assert response.url == page_url
    assert Compaction.objects.get(pk=run.pk).status == "committed"
    page = text(alice_client.get(page_url))
    assert "<li><strong>redo</strong>" in page
    assert "<li><strong>undo</strong>" in page
    # Newest first.
    assert page.index("<strong>redo</strong>") < page.index("<strong>undo</strong>")


def test_the_refusal_is_in_words_and_the_button_offers_to_carry_over(alice, alice_client):
    session, run, _ = compacted(alice, "rotation")
    live = resolve_tip(Session.objects.get(pk=session.pk))
    append_message(live, role="user", content="a question asked after the compaction")
    append_message(live, role="assistant", content="its answer")
    page = text(alice_client.get(reverse("compaction_detail", args=[run.public_id])))
    assert "2 messages were added after this compaction" in page
    assert "Undo this compaction and carry 2 messages over" in page
    assert 'name="carry_over" value="1"' in page

    # Without carry_over the post is refused, with the reason, and nothing changes.
    response = alice_client.post(reverse("compaction_undo", args=[run.public_id]), follow=True)
    assert "2 messages were added after this compaction" in text(response)
    assert Compaction.objects.get(pk=run.pk).status == "committed"

    alice_client.post(reverse("compaction_undo", args=[run.public_id]), {"carry_over": "1"})
    page = text(alice_client.get(reverse("compaction_detail", args=[run.public_id])))
    assert "2 messages carried over" in page
    parent = Session.objects.get(pk=session.pk)
    assert parent.messages.filter(content="its answer", active=True).exists()


def test_a_later_compaction_blocks_the_undo_with_its_reason(alice, alice_client):
    session, first, _ = compacted(alice, "in_place")
    from hermes_web.services.compactions import request_compaction, run_compaction

    for i in range(12):
        append_message(session, role="user", content=f"more {i} " + "words " * 1500)
    second = run_compaction(request_compaction(session=session, requested_by=alice).pk)
    assert second.status == "committed", second.error
    page = text(alice_client.get(reverse("compaction_detail", args=[first.public_id])))
    assert "was built on this one; undo that one first" in page
    assert "Undo this compaction</button>" not in page


def test_dry_runs_have_no_undo_box(alice, alice_client):
    session, run, _ = compacted(alice, "in_place")
    Compaction.objects.filter(pk=run.pk).update(trigger=Compaction.Trigger.WHAT_IF)
    page = text(alice_client.get(reverse("compaction_detail", args=[run.public_id])))
    assert 'id="undo"' not in page


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_undone_runs_show_on_every_listing_page(alice, alice_client, mode):
    session, run, _ = compacted(alice, mode)
    alice_client.post(reverse("compaction_undo", args=[run.public_id]))
    pages = {
        "timeline": reverse("conversation_timeline", args=[session.public_id]),
        "tree": reverse("conversation_tree", args=[session.public_id]),
        "compare": reverse("compare")
        + f"?session={session.public_id}&a={run.public_id}&b={run.public_id}",
        "list": reverse("conversation_list"),
        "home": reverse("home"),
        "conversation": reverse("conversation_detail", args=[session.public_id]),
    }
    for name, url in pages.items():
        page = text(alice_client.get(url))
        assert "undone" in page, name


def test_the_tally_counts_undone_runs_apart():
    from hermes_web.presenters.vocabulary import tally_compactions

    tally = tally_compactions(
        [
            ("committed", "manual", 2),
            ("undone", "auto", 1),
            ("skipped", "auto", 1),
            ("dry_run", "what_if", 3),
        ]
    )
    assert tally == {"committed": 2, "what_if": 3, "undone": 1, "other": 1, "total": 7}
