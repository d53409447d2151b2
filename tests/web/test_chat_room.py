"""Chats on the demo model (honest token counts) with compactions run as a worker would.

Issue #13's "done when": a demo chat never shows a compaction that leaves the context over
the window, and a chat whose every turn reads a large file does not compact on two
consecutive turns.
"""

import pytest

from hermes_web.agent.loop import run_turn
from hermes_web.models import AgentTurn, Compaction, Session
from hermes_web.services.chat import send_message, start_chat
from hermes_web.services.compactions import run_compaction

pytestmark = pytest.mark.django_db

QUESTIONS = [
    "What is in this workspace?",
    "Why did ingest fail on March 14?",
    "Tell me about the readings csv",
    "Read the ingest log again and list the errors",
    "What does the README say?",
    "Show me the readings csv once more",
    "Explain the ingest log in detail",
    "What changed in the CHANGELOG?",
]


@pytest.fixture
def demo(settings):
    from hermes_web.agent import demo_model

    settings.HERMES_CHAT_MODEL = ""
    demo_model.STREAM_DELAY = 0
    return demo_model


def _turn(session, text):
    turn = send_message(session=Session.objects.get(pk=session.pk), text=text)
    assert run_turn(turn.pk) is None
    turn.refresh_from_db()
    assert turn.status == AgentTurn.Status.DONE, turn.error
    return turn


def _run_queued():
    done = []
    for run in Compaction.objects.filter(status=Compaction.Status.QUEUED).order_by("pk"):
        done.append(run_compaction(run.pk))
    return done


def _chat(session, questions):
    """Run the questions; return (turn numbers that queued a compaction, prompt sizes, runs)."""
    compacted_on, prompts, runs = [], [], []
    for number, question in enumerate(questions):
        turn = _turn(session, question)
        prompts.append(turn.usage["prompt_tokens"])
        done = _run_queued()
        if done:
            compacted_on.append(number)
        runs += done
        # Rotation moves the chat to the child session.
        session = Session.objects.filter(owner=session.owner).order_by("-pk").first()
    return compacted_on, prompts, runs


def test_a_demo_chat_never_shows_a_compaction_that_leaves_it_over_the_window(alice, demo):
    session = start_chat(owner=alice)
    window = session.context_length
    compacted_on, prompts, runs = _chat(session, QUESTIONS)
    assert compacted_on, prompts  # the chat did cross the threshold
    for run in runs:
        assert run.status == Compaction.Status.COMMITTED, (run.status, run.reason, run.error)
        report = run.report
        assert report["profile"] == "hermes"
        assert run.tokens_after < report["tokens"]["threshold"] < window
        codes = {w["code"] for w in report["warnings"]}
        assert not codes & {"over_window", "over_threshold", "cannot_make_room"}, codes
    # Each compaction rotated the chat to a new session.
    assert Session.objects.filter(owner=alice).count() == len(runs) + 1


def test_a_chat_that_reads_a_large_file_every_turn_does_not_compact_on_consecutive_turns(
    alice, demo
):
    session = start_chat(owner=alice)
    questions = ["What is in this workspace?"] + [
        f"Anything else worth knowing? (round {i})" for i in range(9)
    ]
    compacted_on, prompts, runs = _chat(session, questions)
    assert len(compacted_on) >= 2, (compacted_on, prompts)
    assert all(b - a > 1 for a, b in zip(compacted_on, compacted_on[1:], strict=False)), (
        compacted_on,
        prompts,
    )
    assert all(run.status == Compaction.Status.COMMITTED for run in runs)
