"""Copilot session folders as VS Code's Copilot agent writes them (issue #25, two real
``~/.copilot/session-state/<id>/`` folders, ``producer: copilot-agent``): the user's
``content`` carries ``<reminder>``, ``<attachments>`` and the request again in
``<userRequest>``; a refused request leaves only a ``session.error``; a compaction may start
and never complete before the session shuts down; the folder holds ``vscode.*.json``
bookkeeping beside ``events.jsonl``. The request is the user's turn and the IDE context a
meta row, the error is shown, the turns taken while Copilot compacted in the background stay
after its summary, the unfinished compaction compacts nothing, and importing the
folder reads the log and passes over the bookkeeping, with no failure."""

import pytest

from hermes_web.importers import import_directory
from hermes_web.importers.formats import copilot_cli
from hermes_web.models import Compaction, Message
from tests.web.agent_import_helpers import AGENTS, imported, parsed, wrapper_free

pytestmark = pytest.mark.django_db
FOLDER = AGENTS / "copilot_cli" / "8e41b7c2-5d09-4f3a-b6e8-2c7a91d04f55"
EVENTS = FOLDER / "events.jsonl"
ASK = "Rename docs/setup.md to docs/install.md and fix the links to it."


def test_the_request_is_the_turn_and_the_ide_context_a_meta_row():
    (session,) = parsed(copilot_cli.parse, EVENTS)
    context, request = session.messages[:2]
    assert (context.meta, request.meta) == ("ide_context", "")
    assert context.content.startswith("<reminder>")
    assert "<attachments>" in context.content
    assert ASK not in context.content
    assert request.content == ASK
    assert session.title == ASK


def test_a_session_error_is_shown_as_a_meta_row():
    (session,) = parsed(copilot_cli.parse, EVENTS)
    error = session.messages[-1]
    assert (error.role, error.meta) == ("assistant", "session_error")
    assert error.content == "[quota] 402 You have no quota (Request ID: 0A1B:2C3D)"
    assert session.messages[-2].content == "ok, then just fix the link"


def test_only_the_completed_compaction_is_one():
    (session,) = parsed(copilot_cli.parse, EVENTS)
    (compaction,) = session.native_compactions
    assert compaction.tokens_before == 100398
    assert session.skipped["session.compaction_start event (kept with the compaction)"] == 1
    unfinished = "session.compaction_start with no completion in the log (nothing compacted)"
    assert session.skipped[unfinished] == 1


def test_imported_with_format_auto(alice):
    (session,) = imported(EVENTS, alice, "copilot-cli")
    wrapper_free([session], ("<reminder>", "<attachments>", "<current_datetime>"))
    (compaction,) = Compaction.objects.filter(session=session)
    assert (compaction.source, compaction.tokens_before) == ("copilot-cli", 100398)
    assert "pwsh is not available" in compaction.native_summary
    archived = Message.objects.filter(session=session, archived_by=compaction)
    assert archived.filter(role="tool").count() == 2  # the grep and report_intent results


def test_turns_taken_while_compacting_stay_after_the_summary():
    """Copilot summarizes the conversation as it was at compaction_start (its
    preCompactionMessagesLength messages); the move tried meanwhile is still in context."""
    (session,) = parsed(copilot_cli.parse, EVENTS)
    conversation = [m for m in session.messages if not m.meta]
    archived = [m for m in conversation if m.archived]
    assert len(archived) == 4  # preCompactionMessagesLength
    summary_at = next(i for i, m in enumerate(conversation) if m.is_summary)
    kept = conversation[summary_at + 1 : summary_at + 3]
    assert [m.role for m in kept] == ["assistant", "tool"]
    assert kept[0].tool_calls[0]["id"] == "tooluse_mv01"
    assert all(m.active for m in kept)
    assert kept[1].extra["is_error"]


def test_the_session_folder_imports_and_its_bookkeeping_is_passed_over(alice):
    reports, passed_over = import_directory(FOLDER, owner=alice)
    assert [str(p) for r in reports for p in r.refused] == []
    assert [r.format for r in reports] == ["copilot-cli"]
    assert sorted(p.name for p, _ in passed_over) == [
        "vscode.metadata.json",
        "vscode.requests.metadata.json",
    ]
