"""Claude Code ``/btw`` side questions (issue #25, real ``subagents/agent-aside_question-*``
transcripts): the side agent's user turn is Claude Code's ``<system-reminder>`` instructions
followed by what the user asked. The instructions are a meta row, the question is the
user's turn, so no user turn opens with the wrapper."""

import json

import pytest

from hermes_web.models import Message
from tests.web.agent_import_helpers import imported, wrapper_free

pytestmark = pytest.mark.django_db
SID = "4d7a1c92-6e3b-4f08-9a25-c1e8b0d3f6a7"
REMINDER = (
    "<system-reminder>This is a side question from the user. You must answer this question "
    "directly in a single response.\n\nCRITICAL CONSTRAINTS:\n- You have NO tools available"
    "</system-reminder>"
)


def _record(n: int, kind: str, content) -> dict:
    return {
        "parentUuid": f"u-{n - 1}" if n else None,
        "isSidechain": True,
        "agentId": "aside_question-5e0c2b7d91a4f386",
        "type": kind,
        "uuid": f"u-{n}",
        "timestamp": f"2026-04-02T09:0{n}:00.000Z",
        "sessionId": SID,
        "version": "2.1.90",
        "message": {"role": kind, "content": content},
    }


def test_the_side_question_is_the_turn_and_its_instructions_a_meta_row(alice, tmp_path):
    path = tmp_path / "agent-aside_question-5e0c2b7d91a4f386.jsonl"
    records = [
        _record(0, "user", f"{REMINDER}\n\nwhich branch holds the release notes?"),
        _record(1, "assistant", [{"type": "text", "text": "release/2.4, from the docket."}]),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (session,) = imported(path, alice, "claude-code")
    wrapper_free([session], ("<system-reminder>",))
    reminder = Message.objects.get(session=session, extra__meta="system_reminder")
    assert reminder.content.startswith("<system-reminder>This is a side question")
    turn = Message.objects.get(session=session, role="user", active=True)
    assert turn.content == "which branch holds the release notes?"
