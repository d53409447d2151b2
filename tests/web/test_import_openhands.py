"""OpenHands trajectories and session folders (issue #25): events become messages, actions
their tool calls (one per model response), observations the results found by
``tool_call_id`` or ``cause``; ``condensation`` events are native compactions whose
forgotten rows are archived and whose summary is a summary row."""

import json
import shutil

import pytest

from compaction.summary import is_summary_message
from hermes_web.importers import import_path
from hermes_web.importers.formats import openhands
from hermes_web.models import Message, Session
from tests.web.agent_import_helpers import AGENTS, imported, pairs_ok, parsed, refused

pytestmark = pytest.mark.django_db
DIR = AGENTS / "openhands"
TRAJECTORY = DIR / "trajectory-queue-fix.json"
EXPORTED = DIR / "exported-trajectory.json"
FOLDER = DIR / "sessions" / "7f3c0d9e21a64b1c"


def _one(path=TRAJECTORY):
    (session,) = parsed(openhands.parse, path)
    return session


def test_events_become_turns_calls_and_results():
    session = _one()
    assert session.public_id == "trajectory-queue-fix"
    assert session.model == "anthropic/claude-sonnet-4-20250514"
    assert session.extra["openhands"] == {
        "openhands_version": "0.44.0",
        "agent_class": "CodeActAgent",
    }
    system, user = session.messages[0], session.messages[1]
    assert system.role == "system"
    assert user.content[0] == {"type": "text", "text": "Fix the flaky test in tests/test_queue.py"}
    assert user.content[1]["image_url"]["url"].startswith("data:image/png")
    assert session.title == "Fix the flaky test in tests/test_queue.py"
    recall = session.messages[2]
    assert (recall.meta, recall.content) == ("recall", "Added workspace context")
    pairs_ok(session.messages)


def test_actions_of_one_model_response_are_one_message_with_the_model_arguments():
    session = _one()
    turn = next(m for m in session.messages if m.tool_calls and len(m.tool_calls) == 2)
    assert turn.content == "Let me look at the test and run it."
    assert [c["id"] for c in turn.tool_calls] == ["toolu_01READ", "toolu_01RUN"]
    assert json.loads(turn.tool_calls[1]["function"]["arguments"]) == {
        "command": "pytest tests/test_queue.py -q"
    }
    assert turn.extra["usage"]["prompt_tokens"] == 5120
    position = session.messages.index(turn)
    run = session.messages[position + 2]
    assert (run.tool_call_id, run.extra["exit_code"]) == ("toolu_01RUN", 1)


def test_actions_without_tool_metadata_pair_with_their_observation_by_cause():
    session = _one()
    ipython = next(m for m in session.messages if m.extra.get("action") == "run_ipython")
    assert ipython.tool_calls[0]["id"] == "openhands-9"
    assert ipython.tool_calls[0]["function"]["name"] == "run_ipython"
    result = session.messages[session.messages.index(ipython) + 1]
    assert result.tool_call_id == "openhands-9"
    assert result.content.startswith("0\n")


def test_condensation_range_is_a_native_compaction_with_its_summary_row():
    session = _one()
    first, second = session.native_compactions
    assert first.source == "openhands"
    assert first.summary.startswith("USER_CONTEXT: fix flaky tests/test_queue.py")
    assert first.extra["forgotten_event_ids"] == [4, 5, 6, 7, 8, 9, 10]
    replaced = [m for m in session.messages if m.replaced_by == 0]
    assert [m.role for m in replaced] == ["assistant", "tool", "tool", "assistant", "tool"]
    assert all(m.archived and not m.active for m in replaced)
    summary = next(m for m in session.messages if m.summary_of == 0)
    assert summary.is_summary
    # Stored as the agent wrote it; a prompt of ours wraps it so the engine reads it.
    assert summary.content == session.native_compactions[0].summary
    assert is_summary_message({"role": "user", "content": Message.prompt_content(summary.content)})
    # summary_offset 2: after the two events kept at the head (system prompt, first task)
    kept = [m for m in session.messages if m.active and not m.meta]
    assert kept.index(summary) == 2


def test_condensation_by_ids_without_summary_keeps_a_marker():
    session = _one()
    second = session.native_compactions[1]
    assert second.summary == ""
    assert second.marker == "condensation forgot 2 event(s)"
    replaced = [m for m in session.messages if m.replaced_by == 1]
    assert [(m.role, m.tool_call_id) for m in replaced] == [
        ("assistant", ""),
        ("tool", "toolu_02EDIT"),
    ]
    assert session.messages[-1].content == "Fixed: test_drain waits on q.join()."
    assert not session.messages[-1].tool_calls  # finish is the closing text, not a call


def test_exported_trajectory_object_and_session_folder(alice):
    assert _one(EXPORTED).messages[-1].tool_call_id == "toolu_01RUN"
    sessions = imported(FOLDER / "events" / "1.json", alice, "openhands")
    (session,) = sessions
    assert session.extra["source_id"] == "7f3c0d9e21a64b1c"
    rows = list(Message.objects.filter(session=session).order_by("position"))
    assert [r.archived for r in rows] == [False, True, True, False, False, False]
    # summary_offset 1: the summary follows the one event kept at the head (the task)
    assert rows[3].is_summary
    assert "Read tests/test_queue.py: test_drain sleeps." in rows[3].content
    # the other event files and metadata.json add nothing: the folder was read once
    for name in ("events/2.json", "events/6.json", "metadata.json"):
        report = import_path(FOLDER / name, owner=alice, name=str(FOLDER / name))
        assert report.refused == []
        assert report.sessions == []


def test_trajectory_imports_with_format_auto(alice):
    (session,) = imported(TRAJECTORY, alice, "openhands")
    assert session.source == Session.Source.IMPORT_OPENHANDS
    assert Message.objects.filter(session=session, archived=True).count() == 7


def test_bad_trajectories_are_refused_whole(alice, tmp_path):
    cut = tmp_path / "trajectory.json"
    cut.write_bytes(TRAJECTORY.read_bytes()[:2000])
    assert "broken JSON" in refused(cut, alice).problem
    events = json.loads(TRAJECTORY.read_text())
    events[4]["args"] = "view"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(events))
    assert "event 4: args is a JSON string, expected object" in refused(bad, alice).problem
    events = json.loads(TRAJECTORY.read_text())
    del events[6]["id"]
    bad.write_text(json.dumps(events))
    assert "event 7 has no integer 'id'" in refused(bad, alice, "openhands").problem
    lone = tmp_path / "0.json"
    shutil.copy(FOLDER / "events" / "1.json", lone)
    assert "single OpenHands event" in refused(lone, alice).problem


def test_events_api_page_is_a_trajectory_too(alice, tmp_path):
    page = tmp_path / "events.json"
    page.write_text(json.dumps({"events": json.loads(TRAJECTORY.read_text())}))
    (session,) = parsed(openhands.parse, page)
    assert len(session.native_compactions) == 2
    assert session.messages[-1].content == "Fixed: test_drain waits on q.join()."


def test_a_session_folder_imports_once_through_the_command(alice):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("import_sessions", str(FOLDER), user=alice.username, stdout=out)
    assert out.getvalue().count("imported ") == 1  # one session for seven files
    (session,) = Session.objects.filter(owner=alice)
    assert session.extra["source_id"] == "7f3c0d9e21a64b1c"
