"""OpenHands V0 session folders as a real ``~/.openhands/sessions`` holds them (issue #25,
16 real folders, 2,594 files, 23 condensations): tool call ids that the provider numbers per
response (``toolu_1`` again in a later response), an ``event_cache/<from>-<to>.json`` copy
of every 25 events beside ``events/``, and folders of a conversation opened and never used
(only the system prompt and state changes). Each observation answers the action that caused
it, a condensation forgets only the calls it names, the cache is passed over and the unused
conversation is an empty session: no failure, no orphan result."""

import json

import pytest

from hermes_web.importers import import_directory
from hermes_web.importers.formats import openhands
from hermes_web.models import Compaction, Message
from tests.web.agent_import_helpers import pairs_ok

pytestmark = pytest.mark.django_db
SESSION = "5c1e9b27d04f4a8e9b3d6f2a1c7e0b48"
UNUSED = "0a9d3e71c58b4f26a1e7d4c9b2f05e63"


def _response(n: int, call_id: str, command: str, thought: str) -> dict:
    call = {"id": call_id, "type": "function", "function": {"name": "execute_bash"}}
    call["function"]["arguments"] = json.dumps({"command": command})
    message = {"role": "assistant", "content": thought, "tool_calls": [call]}
    return {
        "id": f"gen-{n}",
        "model": "deepseek/deepseek-v3.2-exp",
        "choices": [{"message": message}],
    }


def _run(event_id: int, n: int, call_id: str, command: str, output: str) -> list[dict]:
    thought = f"Step {n}: {command}"
    meta = {
        "function_name": "execute_bash",
        "tool_call_id": call_id,
        "model_response": _response(n, call_id, command, thought),
        "total_calls_in_response": 1,
    }
    stamp = f"2025-10-06T13:{event_id:02d}:00"
    action = {
        "id": event_id,
        "timestamp": stamp,
        "source": "agent",
        "message": f"Running command: {command}",
        "action": "run",
        "tool_call_metadata": meta,
        "args": {"command": command, "thought": thought, "blocking": False},
    }
    observation = {
        "id": event_id + 1,
        "timestamp": stamp,
        "source": "agent",
        "message": f"Command `{command}` executed with exit code 0.",
        "cause": event_id,
        "observation": "run",
        "content": output,
        "tool_call_metadata": meta,
        "extras": {"command": command, "metadata": {"exit_code": 0}},
        "success": True,
    }
    return [action, observation]


def _system(event_id: int) -> dict:
    return {
        "id": event_id,
        "timestamp": "2025-10-06T13:00:00",
        "source": "agent",
        "message": "You are OpenHands agent.",
        "action": "system",
        "args": {"content": "You are OpenHands agent.", "openhands_version": "0.58.0"},
    }


def _state(event_id: int) -> dict:
    return {
        "id": event_id,
        "timestamp": "2025-10-06T13:00:00",
        "source": "environment",
        "message": "",
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": "awaiting_user_input"},
    }


def _events() -> list[dict]:
    user = {
        "id": 2,
        "timestamp": "2025-10-06T13:01:00",
        "source": "user",
        "message": "Make each widget's feed URL editable.",
        "action": "message",
        "args": {"content": "Make each widget's feed URL editable.", "image_urls": None},
    }
    events = [_state(0), _system(1), user]
    # the provider numbers its calls per response: toolu_1 and toolu_2 come back later
    events += _run(3, 1, "toolu_1", "git checkout -b feat/editable-urls", "Switched branch")
    events += _run(5, 2, "toolu_2", "pytest backend -q", "12 passed")
    condensation = {
        "id": 7,
        "timestamp": "2025-10-06T13:07:00",
        "source": "agent",
        "message": "Summary: branch created, tests green.",
        "action": "condensation",
        "args": {
            "forgotten_event_ids": None,
            "forgotten_events_start_id": 3,
            "forgotten_events_end_id": 6,
            "summary": "USER_CONTEXT: editable feed URLs. Branch feat/editable-urls; 12 tests pass.",
            "summary_offset": 2,
        },
    }
    events.append(condensation)
    events += _run(8, 3, "toolu_1", "git push -u origin feat/editable-urls", "branch pushed")
    events += _run(10, 4, "toolu_2", "gh pr create --fill", "https://github.com/o/r/pull/7")
    return events


def _sessions(root):
    folder = root / "sessions" / SESSION
    (folder / "events").mkdir(parents=True)
    (folder / "event_cache").mkdir()
    events = _events()
    for event in events:
        (folder / "events" / f"{event['id']}.json").write_text(json.dumps(event))
    (folder / "event_cache" / "0-25.json").write_text(json.dumps(events[:25]))
    (folder / "metadata.json").write_text(json.dumps({"conversation_id": SESSION}))
    unused = root / "sessions" / UNUSED / "events"
    unused.mkdir(parents=True)
    for event in (_state(0), _system(1), _state(2)):
        (unused / f"{event['id']}.json").write_text(json.dumps(event))
    return root / "sessions", folder


def _parsed(folder):
    path = folder / "events" / "0.json"
    with open(path, "rb") as stream:
        (session,) = openhands.parse(stream, str(path))
    return session


def test_each_observation_answers_the_action_that_caused_it(tmp_path):
    _, folder = _sessions(tmp_path)
    session = _parsed(folder)
    assert [m for m in session.messages if m.meta] == []  # no result left answering nothing
    calls = [m for m in session.messages if m.tool_calls]
    results = [m for m in session.messages if m.role == "tool"]
    assert len({c.tool_calls[0]["id"] for c in calls}) == 4  # unique, though the model reused two
    for call, result in zip(calls, results, strict=True):
        assert result.tool_call_id == call.tool_calls[0]["id"]
    assert results[2].content == "branch pushed"
    assert calls[2].tool_calls[0]["id"].startswith("toolu_1")


def test_a_condensation_forgets_only_the_calls_it_names(tmp_path):
    _, folder = _sessions(tmp_path)
    session = _parsed(folder)
    active = [m for m in session.messages if m.active and not m.meta]
    assert [m.role for m in active] == ["system", "user", "user", *["assistant", "tool"] * 2]
    assert active[2].is_summary
    assert active[-1].content == "https://github.com/o/r/pull/7"


def test_a_sessions_folder_imports_with_no_failure(alice, tmp_path):
    root, _ = _sessions(tmp_path)
    reports, passed_over = import_directory(root, owner=alice)
    assert [str(p) for r in reports for p in r.refused] == []
    assert [p.name for p, _ in passed_over] == ["0-25.json"]
    (session,) = [s for r in reports for s in r.sessions]
    assert [e.session for r in reports for e in r.empties] == [UNUSED]
    pairs_ok(Message.objects.filter(session=session).order_by("position"))
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.source == "openhands"
    assert Message.objects.filter(session=session, archived_by=compaction).count() == 4
