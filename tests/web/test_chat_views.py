"""Chat pages and partials: no-JS forms, htmx polling, commands, rotation following, access."""

import pytest
from django.urls import reverse

from hermes_web.agent.loop import run_turn
from hermes_web.models import AgentTurn, Compaction, Message, Session
from hermes_web.services.chat import start_chat
from hermes_web.services.compactions import run_compaction
from hermes_web.services.sessions import append_message
from tests.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


@pytest.fixture
def llm(settings, tmp_path):
    server = FakeOpenAIServer().start()
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    settings.HERMES_CHAT_API_BASE = server.base_url
    settings.HERMES_CHAT_API_KEY = "x"
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_SUMMARY_MODEL = ""
    settings.HERMES_WORKSPACE = tmp_path
    yield server
    server.stop()


def big_session(owner):
    """A chat long enough for a manual compaction to have a middle."""
    session = start_chat(owner=owner)
    for i in range(12):
        append_message(session, role="user", content=f"question {i} " + "words " * 1500)
        append_message(
            session,
            role="assistant",
            content=f"answer {i} " + "more " * 1500,
            provider_prompt_tokens=1000 * i,
        )
    return session


def test_chat_page_lists_my_chats_only(alice_client, alice, bob):
    mine = start_chat(owner=alice)
    Session.objects.filter(pk=mine.pk).update(title="my chat")
    theirs = start_chat(owner=bob)
    Session.objects.filter(pk=theirs.pk).update(title="their chat")
    page = alice_client.get(reverse("chat")).content.decode()
    assert "<html" in page
    assert "my chat" in page
    assert "their chat" not in page


def test_other_peoples_chats_are_404(bob_client, alice):
    session = start_chat(owner=alice)
    assert bob_client.get(reverse("chat_detail", args=[session.public_id])).status_code == 404
    assert (
        bob_client.post(
            reverse("chat_send", args=[session.public_id]), {"message": "hi"}
        ).status_code
        == 404
    )
    assert bob_client.post(reverse("chat_compress", args=[session.public_id])).status_code == 404


def test_the_demo_model_is_labelled(alice_client, alice, settings):
    settings.HERMES_CHAT_MODEL = ""
    session = start_chat(owner=alice)
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert "demo model (offline)" in page
    assert "hermes-demo/agent" not in page


def test_sending_without_js_stores_the_message_and_redirects(alice_client, alice, llm):
    session = start_chat(owner=alice)
    response = alice_client.post(
        reverse("chat_send", args=[session.public_id]), {"message": "hello there"}
    )
    assert response.status_code == 302
    assert response.url == reverse("chat_detail", args=[session.public_id])
    turn = AgentTurn.objects.get(session=session)
    assert turn.status == AgentTurn.Status.QUEUED
    page = alice_client.get(response.url).content.decode()
    assert "hello there" in page
    assert "queued" in page
    llm.enqueue({"content": "General *Kenobi*", "prompt_tokens": 321})
    run_turn(turn.pk)
    page = alice_client.get(response.url).content.decode()
    assert "General <em>Kenobi</em>" in page
    assert "321" in page  # the context meter


def test_turn_status_polls_until_done_then_stops(alice_client, alice, llm):
    session = start_chat(owner=alice)
    response = alice_client.post(
        reverse("chat_send", args=[session.public_id]), {"message": "hi"}, headers=HTMX
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "<html" not in body
    turn = AgentTurn.objects.get(session=session)
    assert f'hx-get="{reverse("chat_turn_status", args=[turn.public_id])}"' in body
    assert 'hx-trigger="every 1s"' in body
    running = alice_client.get(reverse("chat_turn_status", args=[turn.public_id]), headers=HTMX)
    assert running.status_code == 200
    llm.enqueue({"content": "done!", "prompt_tokens": 50})
    run_turn(turn.pk)
    final = alice_client.get(reverse("chat_turn_status", args=[turn.public_id]), headers=HTMX)
    assert final.status_code == 286
    body = final.content.decode()
    assert "done!" in body
    assert "every 1s" not in body.split('id="chat-meter"')[0]
    assert '<div id="chat-meter" class="meter" hx-swap-oob="true"' in body
    assert '<div id="compaction-status" hx-swap-oob="true"' in body


def test_sending_while_the_agent_answers_queues_the_message_in_order(alice_client, alice, llm):
    session = start_chat(owner=alice)
    alice_client.post(reverse("chat_send", args=[session.public_id]), {"message": "first"})
    first = AgentTurn.objects.get(session=session)
    AgentTurn.objects.filter(pk=first.pk).update(status=AgentTurn.Status.RUNNING)
    response = alice_client.post(
        reverse("chat_send", args=[session.public_id]), {"message": "second"}, headers=HTMX
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "second" in body
    assert "queued" in body
    alice_client.post(reverse("chat_send", args=[session.public_id]), {"message": "third"})
    queued = list(AgentTurn.objects.filter(session=session).exclude(pk=first.pk).order_by("pk"))
    assert [t.queued_text for t in queued] == ["second", "third"]
    # Stored at once on the turn, not yet in the conversation: the running turn's reply
    # must come before them.
    assert not Message.objects.filter(session=session, content="second").exists()
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert page.index("second") < page.index("third")
    # Behind a running turn a queued one waits; then each is answered in its order.
    assert run_turn(queued[0].pk) == 0.5
    AgentTurn.objects.filter(pk=first.pk).update(status=AgentTurn.Status.QUEUED)
    llm.enqueue(
        {"content": "one", "prompt_tokens": 10},
        {"content": "two", "prompt_tokens": 20},
        {"content": "three", "prompt_tokens": 30},
    )
    assert run_turn(queued[1].pk) == 0.5  # the older ones go first
    for turn in (first, *queued):
        assert run_turn(turn.pk) is None
    rows = list(Message.objects.filter(session=session, role__in=["user", "assistant"]).active())
    assert [r.content for r in rows] == ["first", "one", "second", "two", "third", "three"]


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_message_is_a_clear_400(alice_client, alice, text):
    session = start_chat(owner=alice)
    response = alice_client.post(reverse("chat_send", args=[session.public_id]), {"message": text})
    assert response.status_code == 400
    assert "message field was empty" in response.content.decode()


def test_compress_command_queues_a_forced_compaction_with_its_focus(alice_client, alice):
    session = big_session(alice)
    response = alice_client.post(
        reverse("chat_send", args=[session.public_id]), {"message": "/compress the deploy key"}
    )
    assert response.status_code == 302
    run = Compaction.objects.get(session=session)
    assert (run.trigger, run.status, run.focus) == ("manual", "queued", "the deploy key")
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert f'hx-get="{reverse("chat_compaction_status", args=[run.public_id])}"' in page
    # The button does the same (and a second request while one is queued adds nothing).
    alice_client.post(reverse("chat_compress", args=[session.public_id]), {"focus": "x"})
    assert Compaction.objects.filter(session=session).count() == 1


def test_rotation_commit_moves_the_chat_to_the_child(alice_client, alice):
    session = big_session(alice)
    alice_client.post(reverse("chat_compress", args=[session.public_id]), {"focus": ""})
    run = Compaction.objects.get(session=session)
    status_url = reverse("chat_compaction_status", args=[run.public_id])
    polling = alice_client.get(status_url, headers=HTMX)
    assert polling.status_code == 200
    assert "queued" in polling.content.decode()
    run = run_compaction(run.pk)
    assert run.status == "committed", run.error
    done = alice_client.get(status_url, headers=HTMX)
    child_url = reverse("chat_detail", args=[run.result_session.public_id])
    assert done.headers["HX-Redirect"] == child_url
    # The old URL follows the conversation to the live session (issue #27) ...
    old_url = reverse("chat_detail", args=[session.public_id])
    assert alice_client.get(old_url).url == child_url
    # ... and its history view shows it read-only, with a link forward (no composer).
    old = alice_client.get(old_url + "?history=1").content.decode()
    assert "This session is read-only" in old
    assert f'href="{child_url}"' in old
    assert 'id="composer"' not in old
    assert 'hx-trigger="load"' not in old
    page = alice_client.get(child_url).content.decode()
    assert "Continued in a new session" in page
    assert f'href="{reverse("chat_detail", args=[session.public_id])}?history=1"' in page
    assert "Context compacted" in page
    assert f'href="/compactions/{run.public_id}/"' in page
    assert "committed" in page


def test_in_place_mode_stays_on_the_same_session(alice_client, alice):
    session = big_session(alice)
    response = alice_client.post(
        reverse("chat_send", args=[session.public_id]), {"message": "/mode in-place"}
    )
    assert response.status_code == 302
    session.refresh_from_db()
    assert session.compaction_mode == "in_place"
    alice_client.post(reverse("chat_send", args=[session.public_id]), {"message": "/compress"})
    run = run_compaction(Compaction.objects.get(session=session).pk)
    assert run.status == "committed"
    assert run.result_session_id == session.pk
    done = alice_client.get(reverse("chat_compaction_status", args=[run.public_id]), headers=HTMX)
    # The marker drops into the transcript live, and the meter shows the counted estimate.
    body = done.content.decode()
    assert done.status_code == 286
    assert 'hx-swap-oob="beforeend:#transcript"' in body
    assert "Context compacted" in body
    assert "after compaction" in body.split('id="chat-meter"')[1]
    page = alice_client.get(reverse("chat_detail", args=[session.public_id]))
    assert page.status_code == 200
    assert f'href="/compactions/{run.public_id}/"' in page.content.decode()


@pytest.mark.parametrize(
    ("text", "words"), [("/mode sideways", "Usage: /mode"), ("/frobnicate", "Unknown command")]
)
def test_bad_commands_are_a_clear_400(alice_client, alice, text, words):
    session = start_chat(owner=alice)
    response = alice_client.post(reverse("chat_send", args=[session.public_id]), {"message": text})
    assert response.status_code == 400
    assert words in response.content.decode()


def test_a_skipped_compaction_stops_polling_with_its_reason(alice_client, alice):
    session = start_chat(owner=alice)
    alice_client.post(reverse("chat_send", args=[session.public_id]), {"message": "/compress"})
    run = run_compaction(Compaction.objects.get(session=session).pk)
    assert run.status in ("skipped", "aborted")
    response = alice_client.get(
        reverse("chat_compaction_status", args=[run.public_id]), headers=HTMX
    )
    assert response.status_code == 286
    body = response.content.decode()
    assert run.status in body
    # Said in words, never as the raw code.
    assert run.reason == "nothing_to_compact"
    assert "nothing_to_compact" not in body
    head, tail = run.config["protect_first_n"], run.config["tail_token_budget"]
    assert (
        f"Nothing to compact: everything after the first {head} messages is within the "
        f"protected tail of {tail:,} tokens." in body
    )


def test_partials_need_login_and_ownership(client, bob_client, alice):
    session = start_chat(owner=alice)
    turn = AgentTurn.objects.create(session=session)
    url = reverse("chat_turn_status", args=[turn.public_id])
    assert client.get(url).status_code == 302
    assert bob_client.get(url, headers=HTMX).status_code == 404
    assert client.get(reverse("chat_send", args=[session.public_id])).status_code in (302, 405)


def test_a_rotation_committed_between_two_reads_of_the_page_still_moves_the_chat(
    alice_client, alice
):
    """The page reads the session (not ended yet), then the worker commits, then the page reads
    the compaction (committed): the row shows no poll, so it must ask once to follow."""
    session = big_session(alice)
    alice_client.post(reverse("chat_compress", args=[session.public_id]), {"focus": ""})
    run = run_compaction(Compaction.objects.get(session=session).pk)
    assert run.status == "committed", run.error
    # Replay the stale first read: the parent as it was before the commit.
    Session.objects.filter(pk=session.pk).update(ended_at=None, end_reason="")
    html = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    status_url = reverse("chat_compaction_status", args=[run.public_id])
    assert f'hx-get="{status_url}" hx-trigger="load"' in html
    follow = alice_client.get(status_url, headers=HTMX)
    assert follow.headers["HX-Redirect"] == reverse(
        "chat_detail", args=[run.result_session.public_id]
    )
    # On the child's own page the same committed row does not ask again (no redirect loop).
    child_page = alice_client.get(reverse("chat_detail", args=[run.result_session.public_id]))
    assert 'hx-trigger="load"' not in child_page.content.decode()


def test_a_turn_whose_session_rotated_meanwhile_moves_the_chat(alice_client, alice, llm):
    """Issue #37: a rotation committed while a turn ran (or before its last poll) left the
    URL and the sidebar on the old session, and Undo/Regenerate appeared only after a reload:
    the turn's final poll now sends the page to the live session."""
    session = big_session(alice)
    alice_client.post(
        reverse("chat_send", args=[session.public_id]), {"message": "one more"}, headers=HTMX
    )
    turn = AgentTurn.objects.get(session=session)
    llm.enqueue({"content": "answered", "prompt_tokens": 50})
    run_turn(turn.pk)
    alice_client.post(reverse("chat_compress", args=[session.public_id]), {"focus": ""})
    run = run_compaction(Compaction.objects.get(session=session).pk)
    assert run.status == "committed", run.error
    child_url = reverse("chat_detail", args=[run.result_session.public_id])

    final = alice_client.get(reverse("chat_turn_status", args=[turn.public_id]), headers=HTMX)
    assert final.headers["HX-Redirect"] == child_url

    # A message sent from the stale page goes to the live session, and the page follows.
    sent = alice_client.post(
        reverse("chat_send", args=[session.public_id]), {"message": "and then?"}, headers=HTMX
    )
    assert sent.headers["HX-Redirect"] == child_url
    assert Message.objects.filter(session=run.result_session, content="and then?").exists()
    assert not Message.objects.filter(session=session, content="and then?").exists()


def test_the_composer_is_three_lines_high_on_a_phone(alice_client, alice):
    """Issue #37: at 390 px the composer was one line high and cut its placeholder."""
    import re
    from pathlib import Path

    from django.conf import settings

    session = start_chat(owner=alice)
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    textarea = re.search(r'<textarea id="message"[^>]*>', page)
    assert textarea is not None
    rows = re.search(r'rows="(\d+)"', textarea.group(0))
    assert rows is not None
    assert int(rows.group(1)) >= 3
    css = (Path(settings.BASE_DIR) / "static/hermes_web/chat.css").read_text()
    phone = css.split("@media (max-width: 600px)", 1)[1].split("\n}", 1)[0]
    rule = re.search(r"\.composer textarea \{([^}]*)\}", phone)
    assert rule is not None
    assert "height: 2.6rem" not in rule.group(1)
    least = re.search(r"min-height: ([\d.]+)rem", rule.group(1))
    assert least is not None
    assert float(least.group(1)) >= 4.5


def test_a_chat_is_titled_from_its_first_message(alice_client, alice):
    """Issue #37: each chat's title is its own first message, on one line, cut at a word."""
    first = "Why did   ingest fail\\non March 14?".replace("\\n", "\n")
    long = "Please read every file under src and explain " + "the pipeline stages " * 6
    for text in (first, long):
        alice_client.post(reverse("chat_new"), {"message": text})
    titles = list(
        Session.objects.filter(owner=alice).order_by("pk").values_list("title", flat=True)
    )
    assert titles[0] == "Why did ingest fail on March 14?"
    assert titles[1].endswith("…")
    assert len(titles[1]) <= 80
    assert titles[1][:-1] == titles[1][:-1].rstrip()
    assert long.startswith(titles[1][:-1])
    assert long[len(titles[1]) - 1] == " "
    page = alice_client.get(reverse("chat")).content.decode()
    assert "Why did ingest fail on March 14?" in page
