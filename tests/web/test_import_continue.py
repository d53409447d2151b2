"""Continue sessions (issue #25): history items become messages (text and image parts,
tool calls with their tool messages or their ``toolCallState`` output, thinking as
reasoning), context items a meta row, ``conversationSummary`` a native compaction."""

import json

import pytest

from compaction.summary import is_summary_message
from hermes_web.importers.formats import continue_dev
from hermes_web.models import Message, Session
from tests.web.agent_import_helpers import AGENTS, imported, pairs_ok, parsed, refused

pytestmark = pytest.mark.django_db
DIR = AGENTS / "continue"
AGENT = DIR / "2f9c4e1a-7b3d-4c8e-a5f6-0d1e2b3c4a5f.json"
CHAT = DIR / "8b1d0c2e-5f4a-4e3b-9c7d-6a5b4c3d2e1f.json"


def _one(path=AGENT):
    (session,) = parsed(continue_dev.parse, path)
    return session


def test_agent_session_messages_calls_results_and_reasoning():
    session = _one()
    assert session.public_id == "2f9c4e1a-7b3d-4c8e-a5f6-0d1e2b3c4a5f"
    assert session.title == "Speed up the CSV export"
    assert session.model == "Claude 3.7 Sonnet"
    assert session.extra["continue"]["mode"] == "agent"
    user = session.messages[0]
    assert user.content[0]["text"].startswith("The CSV export takes 40 s")
    assert user.content[1]["image_url"]["url"].startswith("data:image/png")
    context = session.messages[1]
    assert context.meta == "context_items"
    assert context.content.startswith("### export.py\n```reports/export.py")
    grep = session.messages[2]
    assert grep.reasoning == "serialize() probably queries per row."
    assert grep.content is None
    state_result = session.messages[3]
    assert (state_result.tool_call_id, state_result.tool_name) == ("call_grep1", "grep_search")
    assert state_result.content.startswith("### Search results\nreports/serialize.py:3")
    read_result = session.messages[5]
    assert read_result.tool_call_id == "call_read1"
    assert read_result.content.startswith("def serialize(row):")  # the tool message, not the state
    assert session.messages[-1].reasoning == "One in_bulk() call replaces 10k gets."
    pairs_ok(session.messages)


def test_conversation_summary_is_a_native_compaction():
    session = _one()
    (compaction,) = session.native_compactions
    assert compaction.source == "continue"
    assert compaction.summary.startswith("The CSV export is slow")
    replaced = [m for m in session.messages if m.replaced_by == 0]
    assert [m.role for m in replaced] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    summary = next(m for m in session.messages if m.is_summary)
    assert summary.summary_of == 0
    # Stored as the agent wrote it; a prompt of ours wraps it so the engine reads it.
    assert summary.content == session.native_compactions[0].summary
    assert is_summary_message({"role": "user", "content": Message.prompt_content(summary.content)})
    assert [m.content for m in session.messages if m.active and not m.meta][1:] == [
        "Do it.",
        "Done: export.py now prefetches customers with in_bulk().",
    ]


def test_chat_session_with_a_generic_title_is_named_by_its_first_question():
    session = _one(CHAT)
    assert session.title == "what does the --since flag do?"
    assert [m.role for m in session.messages] == ["user", "assistant", "user", "assistant", "tool"]
    canceled = session.messages[-1]  # only a toolCallStates entry, canceled, no output
    assert (canceled.tool_call_id, canceled.content) == ("tc-9", "[tool call canceled in Continue]")
    assert "synthetic" not in canceled.extra


@pytest.mark.parametrize("path", [AGENT, CHAT], ids=["agent", "chat"])
def test_sessions_import_with_format_auto(alice, path):
    (session,) = imported(path, alice, "continue")
    assert session.source == Session.Source.IMPORT_CONTINUE


def test_bad_sessions_are_refused_whole(alice, tmp_path):
    path = tmp_path / "session.json"
    path.write_bytes(AGENT.read_bytes()[:700])
    assert "broken JSON" in refused(path, alice).problem
    data = json.loads(AGENT.read_text())
    data["history"][0]["message"]["role"] = "wizard"
    path.write_text(json.dumps(data))
    assert "history item 1: unknown role 'wizard'" in refused(path, alice).problem
    data = json.loads(AGENT.read_text())
    data["history"][2]["message"]["toolCalls"] = {"id": "x"}
    path.write_text(json.dumps(data))
    assert (
        "history item 3: toolCalls is a JSON object, expected array" in refused(path, alice).problem
    )
    path.write_text(json.dumps({"history": "none", "sessionId": "x"}))
    assert "expected an object with a 'history' list" in refused(path, alice, "continue").problem
