"""Issue #17 through the chat service, the turn loop and the pages, against the local fake OpenAI server via
litellm (no worker: turns and compactions run by calling their task bodies): Stop, context
overflow recovery, the meter's honesty, carried labels, chains in the sidebar, the bounded
transcript window, refusals that keep the text."""

import json

import pytest
from django.urls import reverse

from compaction import PREFIX_OPENING
from hermes_web.agent.loop import run_turn
from hermes_web.agent.overflow import is_context_overflow
from hermes_web.models import AgentTurn, Compaction, Message, Session
from hermes_web.services.chat import context_meter, send_message, start_chat
from hermes_web.services.compactions import request_compaction, run_compaction
from hermes_web.services.sessions import append_message, openai_messages

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}
OVERFLOW_400 = {
    "status": 400,
    "error": (
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9013 tokens. Please reduce the length of the messages. "
        "(context_length_exceeded)"
    ),
}

# The summarizer goes to the same server (no summary model configured): its reply.
SUMMARY = {"content": "## Active Task\nNone.\n\n## Goal\nFake summary."}


def chat_calls(server):
    """The chat model calls among the server's requests (the summarizer sends no tools)."""
    return [r for r in server.requests if r.get("tools")]


@pytest.fixture
def llm(settings, tmp_path):
    from tests.fake_openai import FakeOpenAIServer

    server = FakeOpenAIServer().start()
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    settings.HERMES_CHAT_API_BASE = server.base_url
    settings.HERMES_CHAT_API_KEY = "x"
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_TIMEOUT = 5
    settings.HERMES_CONTEXT_LENGTH = 128_000
    settings.HERMES_SUMMARY_MODEL = ""
    settings.HERMES_WORKSPACE = tmp_path
    (tmp_path / "notes.md").write_text("The deploy key rotates on Fridays.\n")
    yield server
    server.stop()


def tool_call(call_id, name, **args):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def long_chat(owner, pairs=12, *, mode=""):
    session = start_chat(owner=owner)
    if mode:
        Session.objects.filter(pk=session.pk).update(compaction_mode=mode)
        session.refresh_from_db()
    for i in range(pairs):
        append_message(session, role="user", content=f"question {i} " + "words " * 1500)
        append_message(
            session,
            role="assistant",
            content=f"answer {i} " + "more " * 1500,
            provider_prompt_tokens=1000 * (i + 1),
        )
    return session


def assert_provider_valid(messages):
    """Every assistant tool call has exactly one result right after it; no orphan results."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "assistant":
            assert not open_calls, f"calls left unanswered: {open_calls}"
            open_calls = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls, f"calls left unanswered: {open_calls}"
    assert not open_calls


# -- Stop --------------------------------------------------------------------------------------


def test_stop_while_streaming_keeps_the_partial_reply_marked_stopped(alice, alice_client, llm):
    session = start_chat(owner=alice)
    turn = send_message(session=session, text="tell me a long story")
    # The first piece arrives after 0.3 s, so the loop flushes it and sees the stop there.
    llm.enqueue({"sleep": 0.3, "content": "Once upon a time " * 6, "chunk_sleep": 0.2})
    AgentTurn.objects.filter(pk=turn.pk).update(stop_requested=True)
    assert run_turn(turn.pk) is None
    turn.refresh_from_db()
    assert turn.status == AgentTurn.Status.STOPPED
    reply = Message.objects.get(session=session, role="assistant")
    assert reply.content.startswith("Once upon a time")
    assert len(reply.content) < len("Once upon a time " * 6)
    assert reply.extra["stopped"] is True
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert "You stopped this reply" in page
    assert "Once upon a time" in page
    # The conversation goes on from there.
    llm.enqueue({"content": "The end.", "prompt_tokens": 40})
    nxt = send_message(session=session, text="finish it")
    assert run_turn(nxt.pk) is None
    nxt.refresh_from_db()
    assert nxt.status == AgentTurn.Status.DONE


def test_stop_after_the_model_asked_for_tools_answers_every_call(alice, llm):
    session = start_chat(owner=alice)
    turn = send_message(session=session, text="read the notes")
    llm.enqueue(
        {
            "tool_calls": [
                tool_call("call_a", "read_file", path="notes.md"),
                tool_call("call_b", "list_files", path="."),
            ]
        }
    )
    AgentTurn.objects.filter(pk=turn.pk).update(stop_requested=True)
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == AgentTurn.Status.STOPPED
    results = list(Message.objects.filter(session=session, role="tool").order_by("position"))
    assert [r.tool_call_id for r in results] == ["call_a", "call_b"]
    assert all("not run" in r.content for r in results)
    assert len(llm.requests) == 1  # no second model call after the stop
    assert_provider_valid(openai_messages(session))


def test_stopping_a_queued_message_keeps_its_text(alice, alice_client, llm):
    session = start_chat(owner=alice)
    first = send_message(session=session, text="first")
    AgentTurn.objects.filter(pk=first.pk).update(status=AgentTurn.Status.RUNNING)
    queued = send_message(session=session, text="never mind this one")
    response = alice_client.post(reverse("chat_turn_stop", args=[queued.public_id]), headers=HTMX)
    assert response.status_code == 200
    queued.refresh_from_db()
    assert queued.status == AgentTurn.Status.STOPPED
    assert run_turn(queued.pk) is None  # a stopped turn never runs
    assert queued.queued_text == "never mind this one"
    assert "never mind this one" in response.content.decode()
    # Stop on someone else's turn is a 404.
    from django.test import Client

    other = Client()
    assert other.post(reverse("chat_turn_stop", args=[first.public_id])).status_code == 302


# -- context overflow ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["rotation", "in_place"])
def test_a_context_overflow_compacts_at_once_and_retries_once(alice, alice_client, llm, mode):
    session = long_chat(alice, mode=mode)
    # Two ineffective automatic runs would block automatic compaction (anti-thrash); the
    # overflow path is forced and does not care.
    for _ in range(2):
        Compaction.objects.create(
            session=session,
            trigger=Compaction.Trigger.AUTO,
            status=Compaction.Status.COMMITTED,
            tokens_before=100_000,
            tokens_after=99_000,
            result_session=session,
        )
    llm.enqueue(OVERFLOW_400, SUMMARY, {"content": "Recovered answer.", "prompt_tokens": 3_000})
    turn = send_message(session=session, text="and now?")
    assert run_turn(turn.pk) is None
    turn.refresh_from_db()
    assert turn.status == AgentTurn.Status.DONE, turn.error
    calls = chat_calls(llm)
    assert len(calls) == 2
    retry = calls[1]["messages"]
    assert PREFIX_OPENING in json.dumps(retry, ensure_ascii=False)
    assert len(retry) < len(calls[0]["messages"])
    assert retry[-1] == {"role": "user", "content": "and now?"}
    # The two seeded runs have no finish time (PostgreSQL sorts NULL first when descending).
    run = (
        Compaction.objects.filter(status=Compaction.Status.COMMITTED)
        .exclude(finished_at=None)
        .latest("finished_at")
    )
    assert turn.usage["overflow"]["compaction"] == run.public_id
    live = Session.objects.get(pk=turn.session_id)
    if mode == "rotation":
        assert live.parent_id == session.pk
    else:
        assert live.pk == session.pk
    assert Message.objects.filter(session=live, active=True, content="Recovered answer.").exists()
    final = alice_client.get(reverse("chat_turn_status", args=[turn.public_id]), headers=HTMX)
    if mode == "rotation":  # the page follows the turn into the continuation session
        assert final.headers["HX-Redirect"] == reverse("chat_detail", args=[live.public_id])
        final = alice_client.get(reverse("chat_detail", args=[live.public_id]))
    assert "refused the request as too long" in final.content.decode()
    assert "compacted at once" in final.content.decode()


def test_a_second_overflow_fails_the_turn_in_words(alice, llm):
    session = long_chat(alice)
    llm.enqueue(OVERFLOW_400, SUMMARY, OVERFLOW_400)
    turn = send_message(session=session, text="again?")
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == AgentTurn.Status.FAILED
    assert turn.error_kind == "bad_request"
    assert "did not make it fit" in turn.error
    assert len(chat_calls(llm)) == 2  # retried exactly once


def test_other_errors_are_not_mistaken_for_overflow(alice, llm):
    session = long_chat(alice, pairs=3)
    llm.enqueue({"status": 400, "error": "messages are broken"})
    turn = send_message(session=session, text="hm")
    run_turn(turn.pk)
    turn.refresh_from_db()
    assert turn.status == AgentTurn.Status.FAILED
    assert not Compaction.objects.filter(session=session).exists()


def test_overflow_is_recognised_by_status_and_words():
    class Fake(Exception):
        def __init__(self, status, text):
            super().__init__(text)
            self.status_code = status

    assert is_context_overflow(Fake(413, "Request Entity Too Large"))
    assert is_context_overflow(Fake(400, "prompt is too long: 210000 tokens > 200000 maximum"))
    assert not is_context_overflow(Fake(400, "invalid tool schema"))
    assert not is_context_overflow(Fake(500, "context length"))
    wrapped = RuntimeError("turn failed")
    wrapped.__cause__ = Fake(413, "too large")
    assert is_context_overflow(wrapped)


# -- the meter -----------------------------------------------------------------------------------


def test_meter_after_an_in_place_compaction_shows_the_estimate_not_the_old_count(alice):
    session = long_chat(alice, mode="in_place")
    before = context_meter(session)
    assert before["latest"] == 12_000
    assert not before["estimate"]
    run = run_compaction(request_compaction(session=session, requested_by=alice).pk)
    assert run.status == "committed", run.error
    after = context_meter(Session.objects.get(pk=session.pk))
    assert after["estimate"] is True
    assert after["latest"] == run.tokens_after
    assert not after["over"]


def test_meter_warns_when_the_threshold_is_at_the_window(alice, alice_client, settings):
    settings.HERMES_CHAT_MODEL = ""  # the demo model: a 64,000 window, threshold 64,000
    session = start_chat(owner=alice)
    meter = context_meter(session)
    if meter["threshold"] < meter["window"]:  # a profile that keeps it below the window
        assert meter["warnings"] == []
        pytest.skip("this profile keeps the threshold below the window")
    assert [w["code"] for w in meter["warnings"]] == ["threshold_at_window"]
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert "automatic compaction would only start once the window is already full" in page
    assert "a prompt this big starts an automatic compaction" in page
    assert "the most the model accepts in one call" in page


@pytest.mark.parametrize(
    ("where", "code"), [("threshold", "over_threshold"), ("window", "over_window"), ("low", None)]
)
def test_meter_warns_when_the_last_compaction_left_too_much(alice, alice_client, where, code):
    from hermes_web.services.compactions import compaction_config_for

    session = start_chat(owner=alice)
    Session.objects.filter(pk=session.pk).update(context_length=128_000)
    session.refresh_from_db()
    threshold = compaction_config_for(session).threshold_tokens  # whatever the profile says
    after = {"threshold": threshold + 1_234, "window": 130_000, "low": threshold // 2}[where]
    run = Compaction.objects.create(
        session=session,
        result_session=session,
        status=Compaction.Status.COMMITTED,
        tokens_before=150_000,
        tokens_after=after,
    )
    from django.utils import timezone

    Compaction.objects.filter(pk=run.pk).update(finished_at=timezone.now())
    codes = [w["code"] for w in context_meter(session)["warnings"]]
    assert codes == ([code] if code else [])
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert (f'href="/compactions/{run.public_id}/">Why?' in page) == bool(code)
    assert f"{after:,}" in page  # thousands separators


# -- rotation: labels carried, chains grouped ----------------------------------------------------


def test_rotation_keeps_prompt_labels_and_groups_the_chain(alice, alice_client):
    session = long_chat(alice)
    run = run_compaction(request_compaction(session=session, requested_by=alice).pk)
    assert run.status == "committed", run.error
    child = run.result_session
    carried = list(
        Message.objects.filter(
            session=child, role="assistant", provider_prompt_tokens__isnull=False
        )
    )
    assert carried, "the tail's assistant rows lost their per-call prompt counts"
    for row in carried:
        original = Message.objects.get(session=session, role="assistant", content=row.content)
        assert row.provider_prompt_tokens == original.provider_prompt_tokens
    page = alice_client.get(reverse("chat_detail", args=[child.public_id])).content.decode()
    assert f"prompt {carried[-1].provider_prompt_tokens:,} tokens" in page
    # One sidebar entry for the chain, pointing at the live session, with both listed.
    sidebar = page.split('class="chat-list"')[1].split("</ul>")[0]
    assert sidebar.count('class="chat-chain"') == 1
    assert "2 sessions in this chain" in sidebar
    assert f'href="/chat/{child.public_id}/" aria-current="page">' in sidebar
    assert f'href="/chat/{session.public_id}/"' in sidebar


def test_equal_titles_are_told_apart_by_date_and_short_id(alice, alice_client):
    one = start_chat(owner=alice, title="What is in this workspace?")
    two = start_chat(owner=alice, title="What is in this workspace?")
    other = start_chat(owner=alice, title="Something else")
    page = alice_client.get(reverse("chat")).content.decode()
    assert f"· {one.public_id[:6]}</span>" in page
    assert f"· {two.public_id[:6]}</span>" in page
    assert f"· {other.public_id[:6]}</span>" not in page


# -- the bounded window, refusals ----------------------------------------------------------------


def test_the_page_shows_the_newest_messages_and_loads_earlier_ones(alice, alice_client):
    session = start_chat(owner=alice)
    for i in range(150):
        append_message(session, role="user", content=f"message number {i:03d}")
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert "message number 149" in page
    assert "message number 090" in page
    assert "message number 089" not in page
    assert "Show earlier messages" in page
    url = page.split('hx-get="')[1].split('"')[0].replace("&amp;", "&")
    earlier = alice_client.get(url, headers=HTMX).content.decode()
    assert "message number 089" in earlier
    assert "message number 030" in earlier
    assert "message number 090" not in earlier
    url = earlier.split('hx-get="')[1].split('"')[0]
    first = alice_client.get(url, headers=HTMX).content.decode()
    assert "System prompt" in first
    assert "Show earlier messages" not in first


@pytest.mark.parametrize("text", ["/mode sideways", "/foo bar", "x" * 100_001])
def test_refusals_keep_the_text_in_the_box(alice, alice_client, text):
    session = start_chat(owner=alice)
    response = alice_client.post(reverse("chat_send", args=[session.public_id]), {"message": text})
    assert response.status_code == 400
    assert f">{text}</textarea>" in response.content.decode()


# -- anti-thrash cool-down ------------------------------------------------------------------------


def test_the_anti_thrash_block_lifts_after_its_cool_down(alice, alice_client):
    from datetime import timedelta

    from django.utils import timezone

    from hermes_web.services.compactions import maybe_auto_compact

    session = long_chat(alice, pairs=3)
    for _ in range(2):  # two automatic runs that each saved 1 %
        Compaction.objects.create(
            session=session,
            result_session=session,
            trigger=Compaction.Trigger.AUTO,
            status=Compaction.Status.COMMITTED,
            tokens_before=100_000,
            tokens_after=99_000,
            finished_at=timezone.now(),
        )
    blocked = maybe_auto_compact(session, prompt_tokens=120_000)
    assert (blocked.status, blocked.reason) == ("skipped", "ineffective")
    assert maybe_auto_compact(session, prompt_tokens=120_000) is None  # still blocked
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert "tries once more after a 5-minute cool-down" in page
    Compaction.objects.filter(pk=blocked.pk).update(
        finished_at=timezone.now() - timedelta(seconds=301)
    )
    probe = maybe_auto_compact(session, prompt_tokens=120_000)
    assert probe is not None
    assert (probe.status, probe.trigger) == ("queued", "auto")
