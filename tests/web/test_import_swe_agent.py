"""SWE-agent .traj files: the history the model saw (1.x with function calls, 0.7 with
actions in text), demonstrations as meta rows, the run's outcome as metadata."""

import json
from pathlib import Path

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.detect import detect_format
from hermes_web.importers.formats import swe_agent
from hermes_web.models import Message, Session

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures/agents/swe_agent"
CURRENT = FIXTURES / "django__django-17051.traj"
OLDER = FIXTURES / "marshmallow-code__marshmallow-1867.traj"


def _parse(path):
    with open(path, "rb") as stream:
        return list(swe_agent.parse(stream, path.name))


@pytest.mark.parametrize("path", [CURRENT, OLDER])
def test_detected_as_swe_agent(path):
    assert detect_format(path, path.name) == "swe-agent"


def test_function_calling_history_with_the_run_outcome():
    (session,) = _parse(CURRENT)
    assert session.public_id == "django__django-17051"
    assert session.title == "QuerySet.count() ignores distinct() on annotated querysets"
    assert session.model == "claude-sonnet-4-20250514"
    assert session.end_reason == "submitted"
    assert session.extra["swe_agent"]["submission"].startswith("diff --git")
    roles = [m.role for m in session.messages]
    assert roles == ["system", "user"] + ["assistant", "tool"] * 3
    view = session.messages[4]
    assert view.tool_calls[0]["function"]["name"] == "str_replace_editor"
    assert view.reasoning == "distinct must survive the clone"
    assert view.extra["swe_action"].startswith("str_replace_editor view")
    assert session.messages[5].tool_call_id == "toolu_01B"
    assert "cache_control" not in json.dumps(session.messages[1].content)


def test_an_older_trajectory_keeps_actions_as_text_and_demonstrations_as_meta():
    (session,) = _parse(OLDER)
    assert session.title == "TimeDelta serialization precision loses milliseconds"
    assert [m.meta for m in session.messages].count("demonstration") == 1
    assert session.messages[3].extra["swe_action"] == "create reproduce.py\n"


def test_a_trajectory_without_history_is_read_step_by_step(tmp_path):
    path = tmp_path / "only-steps.traj"
    path.write_text(
        json.dumps(
            {
                "trajectory": [
                    {"thought": "look", "action": "ls", "observation": "a.py"},
                    {"response": "done\n```\nsubmit\n```", "observation": ""},
                ]
            }
        )
    )
    (session,) = _parse(path)
    assert [(m.role, m.content) for m in session.messages] == [
        ("assistant", "look\n\nls"),
        ("user", "a.py"),
        ("assistant", "done\n```\nsubmit\n```"),
        ("user", ""),
    ]


def test_imported_with_auto_detection(alice):
    before = CURRENT.read_bytes()
    report = import_path(CURRENT, owner=alice)
    assert report.errors == []
    assert report.format == "swe-agent"
    (session,) = report.sessions
    assert session.fidelity["tool_calls"] == session.fidelity["tool_results_paired"] == 3
    assert Session.objects.get(pk=session.pk).source == Session.Source.IMPORT_SWE_AGENT
    assert Message.objects.filter(session=session).count() == 8
    assert CURRENT.read_bytes() == before


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"info": {}}, "no 'history' or 'trajectory' list"),
        ({"history": [{"role": "robot", "content": "x"}]}, "history[0]: unknown role 'robot'"),
        ({"trajectory": []}, "holds no messages"),
    ],
)
def test_bad_trajectories_are_refused_saying_where(alice, tmp_path, body, problem):
    path = tmp_path / "bad.traj"
    path.write_text(json.dumps(body))
    report = import_path(path, owner=alice, fmt="swe-agent")
    assert [problem in e.problem for e in report.errors] == [True]
    assert not Session.objects.exists()
