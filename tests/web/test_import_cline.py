"""Cline / Roo Code task folders (issue #25): ``api_conversation_history.json`` (Anthropic
blocks: text, image, tool_use, tool_result; ``<task>`` unwrapped, environment details as
meta rows; Roo Code's condense summary as a native compaction) and ``ui_messages.json``
when it is all there is (say / ask records; Roo Code's ``condense_context``)."""

import json

import pytest

from compaction.summary import is_summary_message
from hermes_web.importers import import_path
from hermes_web.importers.formats import cline
from hermes_web.models import Message, Session
from tests.web.agent_import_helpers import (
    AGENTS,
    imported,
    pairs_ok,
    parsed,
    refused,
    wrapper_free,
)

pytestmark = pytest.mark.django_db
DIR = AGENTS / "cline"
CLINE_TASK = DIR / "tasks" / "1767644899093"
API = CLINE_TASK / "api_conversation_history.json"
UI_BESIDE_API = CLINE_TASK / "ui_messages.json"
UI_ALONE = DIR / "tasks" / "1760534080239" / "ui_messages.json"
ROO = (
    DIR / "roo" / "tasks" / "0f6b2c1e-8d4a-4c7e-9b1a-3e5d7f9a1c2b" / "api_conversation_history.json"
)
WRAPPERS = ("<task>", "<environment_details>", "[TASK RESUMPTION]", "<feedback>")


def _one(path):
    (session,) = parsed(cline.parse, path)
    return session


def test_api_history_task_tools_images_and_environment_details():
    session = _one(API)
    assert session.public_id == "1767644899093"
    assert session.title == "The cart total ignores the discount code; fix src/cart.ts"
    task = session.messages[0]
    assert task.content[0] == {
        "type": "text",
        "text": "The cart total ignores the discount code; fix src/cart.ts",
    }
    assert task.content[1]["image_url"]["url"] == "data:image/png;base64,iVBORw0KGgo="
    metas = [m.meta for m in session.messages if m.meta]
    assert metas == ["environment_details"] * 3 + ["task_resumption", "environment_details"]
    read = next(m for m in session.messages if m.tool_calls)
    assert json.loads(read.tool_calls[0]["function"]["arguments"]) == {"path": "src/cart.ts"}
    denied = next(m for m in session.messages if m.tool_call_id == "toolu_02EDIT")
    assert denied.extra == {"is_error": True}
    feedback = session.messages[session.messages.index(denied) + 1]
    assert feedback.content == "Keep the signature; read the code from the session."
    assert session.messages[-3].content.startswith("<attempt_completion>")  # XML tool style
    pairs_ok(session.messages)


def test_roo_condense_summary_is_a_native_compaction_of_the_marked_rows():
    session = _one(ROO)
    (compaction,) = session.native_compactions
    assert compaction.source == "roo-code"
    assert compaction.summary.startswith("## 1. Previous Conversation")
    assert compaction.extra == {"condense_id": "c-7a1"}
    replaced = [m for m in session.messages if m.replaced_by == 0]
    assert [m.role for m in replaced] == ["assistant", "tool"]
    assert all(m.archived for m in replaced)
    assert session.messages[0].active  # the task was not condensed
    summary = next(m for m in session.messages if m.is_summary)
    assert summary.summary_of == 0
    # Stored as the agent wrote it; a prompt of ours wraps it so the engine reads it.
    assert summary.content == session.native_compactions[0].summary
    assert is_summary_message({"role": "user", "content": Message.prompt_content(summary.content)})
    pairs_ok(session.messages)


def test_ui_messages_alone_become_turns_calls_and_results():
    session = _one(UI_ALONE)
    assert session.model == "x-ai/grok-code-fast-1"
    assert session.title == "Make a TypeScript MCP server that runs VS Code commands"
    rows = [(m.role, m.meta) for m in session.messages]
    assert rows[:3] == [("user", ""), ("assistant", ""), ("tool", "")]
    listing = session.messages[1]
    assert listing.reasoning == "Start by listing the folder."
    assert listing.tool_calls[0]["function"]["name"] == "listFilesRecursive"
    assert session.messages[2].content == "No files found."
    command = next(m for m in session.messages if m.tool_calls and "npx" in str(m.tool_calls))
    output = session.messages[session.messages.index(command) + 1]
    assert output.content == "Creating vscode-commands...\nDone."
    question = next(m for m in session.messages if "Which commands" in str(m.content))
    assert question.content == "Which commands should it expose?\n- open_explorer\n- run_task"
    mcp = next(m for m in session.messages if m.tool_name == "open_explorer")
    assert mcp.content == "Error: VS Code extension is not connected."
    assert session.skipped["say:api_req_started record"] == 1
    pairs_ok(session.messages)


def test_roo_condense_context_record_keeps_the_tokens_recorded():
    session = _one(UI_ALONE)
    (compaction,) = session.native_compactions
    assert (compaction.tokens_before, compaction.tokens_after) == (118000, 9200)
    assert compaction.summary.startswith("Scaffolded vscode-commands")
    assert all(m.archived for m in session.messages if m.replaced_by == 0)
    assert session.messages[-1].content.startswith("The server is scaffolded")
    assert session.messages[-1].active


@pytest.mark.parametrize("path", [API, ROO, UI_ALONE], ids=["cline", "roo", "ui-only"])
def test_task_files_import_with_format_auto(alice, path):
    (session,) = imported(path, alice, "cline")
    assert session.source == Session.Source.IMPORT_CLINE
    wrapper_free([session], WRAPPERS)


def test_ui_messages_beside_the_api_history_add_nothing(alice):
    report = import_path(UI_BESIDE_API, owner=alice)
    assert report.format == "cline"
    assert report.refused == []
    assert report.sessions == []


def test_a_file_out_of_its_task_folder_gets_a_stable_id(alice, tmp_path):
    copy = tmp_path / "api_conversation_history.json"
    copy.write_bytes(API.read_bytes())
    (first,) = imported(copy, alice, "cline")
    assert first.extra["source_id"].startswith("cline-")
    assert len(import_path(copy, owner=alice).duplicates) == 1


def test_bad_task_files_are_refused_whole(alice, tmp_path):
    cut = tmp_path / "api_conversation_history.json"
    cut.write_bytes(API.read_bytes()[:500])
    assert "broken JSON" in refused(cut, alice).problem
    entries = json.loads(API.read_text())
    entries[1]["content"][1]["id"] = 7
    cut.write_text(json.dumps(entries))
    assert "message 2: a tool_use block has no string id" in refused(cut, alice).problem
    entries = json.loads(API.read_text())
    entries[0]["role"] = "system"
    cut.write_text(json.dumps(entries))
    assert "unknown role 'system'" in refused(cut, alice, "cline").problem
    records = json.loads(UI_ALONE.read_text())
    records[3]["text"] = ["not", "text"]
    (tmp_path / "ui").mkdir()
    ui = tmp_path / "ui" / "ui_messages.json"  # alone: no API history beside it
    ui.write_text(json.dumps(records))
    assert "record 4: text is a JSON list" in refused(ui, alice).problem
    assert Message.objects.count() == 0


def test_a_task_folder_imports_once_through_the_command(alice):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("import_sessions", str(CLINE_TASK), user=alice.username, stdout=out)
    assert (
        out.getvalue().count("imported ") == 1
    )  # ui_messages.json and task_metadata.json add nothing
    assert Session.objects.filter(owner=alice, source=Session.Source.IMPORT_CLINE).count() == 1
