"""Cursor chats exported by SpecStory (.specstory/history/*.md), the v1 and v2 markdown."""

from pathlib import Path

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.detect import detect_format
from hermes_web.importers.formats import cursor
from hermes_web.models import Message, Session

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures/agents/cursor"
V1 = FIXTURES / "2025-03-08_11-08-adding-rich-colors.md"
V2 = FIXTURES / "2026-07-13_13-40Z-fix-the-flaky-test.md"


def _parse(path):
    with open(path, "rb") as stream:
        return list(cursor.parse(stream, path.name))


@pytest.mark.parametrize("path", [V1, V2])
def test_detected_as_cursor(path):
    assert detect_format(path, path.name) == "cursor"


def test_v1_turns_continuations_merged_and_fenced_role_lines_are_text():
    (session,) = _parse(V1)
    assert session.title == "Adding Rich Colors to the CLI"
    assert session.public_id == "2025-03-08_11-08-adding-rich-colors"
    assert [m.role for m in session.messages] == ["user", "assistant", "user", "assistant"]
    listing = session.messages[1]
    assert "Listed current directory" in listing.content
    assert "+ from rich.console import Console" in listing.content
    assert listing.extra["tool_uses"] == 1  # "Read file:"
    assert "_**Assistant**_ is not a turn inside a fence" in session.messages[2].content
    assert session.messages[3].content == "Done: overdue tasks print in bold red."


def test_v2_session_id_model_times_thinking_and_tool_uses():
    (session,) = _parse(V2)
    assert session.public_id == "5c7d5c23-0691-4467-b98e-0fb865b4a639"
    assert session.title == "fix the flaky test in app.py"  # the heading is only a time
    assert session.model == "claude-4.5-sonnet-thinking"
    assert session.created_at.isoformat() == "2026-07-13T13:40:49+00:00"
    user, agent, thanks = session.messages
    assert agent.reasoning == "The test depends on dict ordering; run it first."
    assert "<think>" not in agent.content
    assert agent.content.startswith("I'll run the suite first.")
    assert agent.content.endswith("Sorted the keys; the test passes now.")
    assert agent.extra["tool_uses"] == 2
    assert thanks.created_at.isoformat() == "2026-07-13T13:45:02+00:00"


def test_imported_with_auto_detection(alice):
    before = V2.read_bytes()
    report = import_path(V2, owner=alice)
    assert report.errors == []
    assert report.format == "cursor"
    (session,) = report.sessions
    assert Session.objects.get(pk=session.pk).source == Session.Source.IMPORT_CURSOR
    assert Message.objects.filter(session=session).count() == 3
    assert V2.read_bytes() == before


def test_markdown_without_turns_is_refused(alice, tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\n_**User**_ is how SpecStory marks a turn, said inline here.\n")
    report = import_path(path, owner=alice, fmt="cursor")
    assert ["not a SpecStory chat export" in e.problem for e in report.errors] == [True]
