"""An agent's own compactions found in imported transcripts become first-class
``Compaction``s (issue #25, items 1 and 2): one per shape (Claude Code boundary + summary,
several /compacts in one file, Codex ``compacted`` with its replacement history, a Hermes
rotation and an in-place Hermes compaction, a marker-only compaction), their recorded
numbers, the rows they archived in order, and nothing half-stored when one is bad."""

import json

import pytest

from hermes_web.importers import import_path, store_session
from hermes_web.importers.base import NativeCompaction, ParsedMessage, ParsedSession
from hermes_web.models import Compaction, Message, Session
from tests.web.native_fixtures import (
    claude_code_lines,
    codex_lines,
    hermes_rotation_lines,
    write_lines,
)

pytestmark = pytest.mark.django_db


def _ok(report):
    assert report.refused == [], [str(e) for e in report.refused]
    return report


# --- Claude Code ------------------------------------------------------------------------


def test_claude_code_boundaries_and_summaries_are_compactions_with_what_was_recorded(
    alice, tmp_path
):
    path = write_lines(tmp_path / "cc-0001.jsonl", claude_code_lines(compacts=3))
    session = _ok(import_path(path, owner=alice)).sessions[0]
    runs = list(Compaction.objects.filter(session=session).order_by("queued_at", "pk"))
    assert [r.source for r in runs] == ["claude-code"] * 3
    assert [r.status for r in runs] == [Compaction.Status.COMMITTED] * 3
    assert [r.trigger for r in runs] == ["manual", "auto", "manual"]
    # Tokens before as the transcript recorded them (compactMetadata.preTokens / postTokens).
    assert [r.tokens_before for r in runs] == [41_000, 152_300, 97_777]
    assert [r.tokens_after for r in runs] == [None, 8_125, None]
    assert runs[0].native_summary.startswith("Summary 1:")
    assert runs[0].native_marker == "Conversation compacted"
    assert runs[1].native_record["durationMs"] == 1234
    assert runs[0].report["tokens"]["counted_before"] > 0  # our own count, labelled


def test_claude_code_rows_are_archived_by_their_compaction_in_order(alice, tmp_path):
    path = write_lines(tmp_path / "cc-0002.jsonl", claude_code_lines(compacts=3))
    session = _ok(import_path(path, owner=alice)).sessions[0]
    runs = list(Compaction.objects.filter(session=session).order_by("queued_at", "pk"))
    for index, run in enumerate(runs):
        archived = list(run.archived_messages.order_by("position"))
        assert archived, index
        positions = [m.position for m in archived]
        assert positions == sorted(positions)
        assert all(m.archived and not m.active for m in archived)
        # Each compaction after the first replaced the previous one's summary row too.
        if index:
            assert archived[0].is_summary
            assert archived[0].extra["native_compaction"] == runs[index - 1].public_id
        # Contiguous: everything between its first and last row that is a turn.
        turns = Message.objects.filter(
            session=session,
            position__range=(positions[0], positions[-1]),
            extra__meta__isnull=True,
        )
        assert [m.position for m in turns] == positions
        # The report reads the same rows: the middle of an engine-shaped report.
        assert run.report["boundaries"]["middle"] == [0, len(archived)]
        assert run.report["message_tokens"] == [m.token_count for m in archived]
        assert list(run.input_rows()) == archived
    # The newest summary is active and names its compaction; the last rows are active.
    summary = Message.objects.get(session=session, is_summary=True, active=True)
    assert summary.extra["native_compaction"] == runs[-1].public_id
    assert runs[-1].report["native"]["summary_position"] == summary.position


def test_claude_code_summary_without_a_boundary_is_still_a_compaction(alice, tmp_path):
    lines = [json.loads(line) for line in claude_code_lines(compacts=1)]
    lines = [r for r in lines if r.get("subtype") != "compact_boundary"]
    path = write_lines(tmp_path / "cc-0003.jsonl", [json.dumps(r) for r in lines])
    session = _ok(import_path(path, owner=alice)).sessions[0]
    run = Compaction.objects.get(session=session)
    assert run.trigger == Compaction.Trigger.UNKNOWN
    assert run.tokens_before is None
    assert run.report["tokens"]["before"] == run.report["tokens"]["counted_before"] > 0
    assert run.archived_messages.count() == 4


def test_a_boundary_without_a_summary_is_a_marker_only_compaction(alice, tmp_path):
    lines = [json.loads(line) for line in claude_code_lines(compacts=1)]
    lines = [r for r in lines if not r.get("isCompactSummary")]
    path = write_lines(tmp_path / "cc-0004.jsonl", [json.dumps(r) for r in lines])
    session = _ok(import_path(path, owner=alice)).sessions[0]
    run = Compaction.objects.get(session=session)
    assert run.native_summary == ""
    assert run.native_marker == "Conversation compacted"
    assert run.tokens_before == 41_000
    assert run.report["native"]["summary_position"] is None
    assert run.archived_messages.count() == 4


def test_newer_builds_summary_without_the_flag_and_all_recorded_metadata(alice, tmp_path):
    """Builds from mid-2026 write the boundary (with preservedSegment,
    cumulativeDroppedTokens, isMeta) and the summary without ``isCompactSummary``."""
    lines = [json.loads(line) for line in claude_code_lines(compacts=1)]
    for record in lines:
        if record.get("subtype") == "compact_boundary":
            record["isMeta"] = True
            record["compactMetadata"].update(
                cumulativeDroppedTokens=151_851, preservedSegment={"headUuid": "u1"}
            )
        if record.get("isCompactSummary"):
            del record["isCompactSummary"]
            text = record["message"]["content"]
            record["message"]["content"] = text.split(": ", 1)[1]  # "This session is being…"
    path = write_lines(tmp_path / "cc-0006.jsonl", [json.dumps(r) for r in lines])
    session = _ok(import_path(path, owner=alice)).sessions[0]
    run = Compaction.objects.get(session=session)
    assert run.native_summary.startswith("This session is being continued")
    assert run.native_record["cumulativeDroppedTokens"] == 151_851
    assert run.native_record["preservedSegment"] == {"headUuid": "u1"}
    summary = Message.objects.get(session=session, is_summary=True)
    assert summary.extra["native_compaction"] == run.public_id
    # Not a user turn of its own: the only active user turn after it is "continue".
    users = Message.objects.filter(session=session, active=True, role="user", is_summary=False)
    assert [m.content for m in users.exclude(extra__has_key="meta")] == ["continue"]


# --- Codex ------------------------------------------------------------------------------


def test_codex_compacted_keeps_its_summary_and_its_replacement_history(alice, tmp_path):
    path = write_lines(tmp_path / "rollout-2026-01-01T00-00-00-codex.jsonl", codex_lines())
    session = _ok(import_path(path, owner=alice)).sessions[0]
    first, second = Compaction.objects.filter(session=session).order_by("queued_at", "pk")
    assert (first.source, second.source) == ("codex", "codex")
    assert first.trigger == Compaction.Trigger.UNKNOWN
    # The last token_count event before each compaction, as Codex counted the context.
    assert first.tokens_before == 61_500
    assert second.tokens_before == 23_456
    assert first.native_record["model_context_window"] == 272_000
    assert first.native_summary == "Codex summary: fixed src/app.py"
    # The second one's summary is encrypted: a marker, no summary row.
    assert second.native_summary == ""
    assert "encrypted" in second.native_marker
    assert second.report["native"]["summary_position"] is None
    # The rows of the replacement history are the rows it kept, stored after the summary.
    kept = first.report["native"]["kept_positions"]
    assert len(kept) == 1
    row = Message.objects.get(session=session, position=kept[0])
    assert row.content == "please fix src/app.py"
    assert row.extra["replayed"]
    summary_position = first.report["native"]["summary_position"]
    assert summary_position < kept[0]
    # ...and the second compaction replaced them, in order, with what came after.
    replaced = [m.position for m in second.archived_messages.order_by("position")]
    assert replaced[:2] == [summary_position, kept[0]]
    assert first.report["counts"] == {"messages_before": 4, "messages_after": 2}


def test_codex_compacted_without_summary_and_with_bare_kept_items(alice, tmp_path):
    """Shapes seen in the wild: ``message`` absent, replacement items without ``type``."""
    lines = codex_lines()[:7] + [
        json.dumps(
            {
                "timestamp": "2026-01-01T00:00:07.000Z",
                "type": "compacted",
                "payload": {"replacement_history": [{"role": "user", "content": "kept"}]},
            }
        ),
        codex_lines()[-1],
    ]
    path = write_lines(tmp_path / "rollout-bare.jsonl", lines)
    session = _ok(import_path(path, owner=alice)).sessions[0]
    run = Compaction.objects.get(session=session)
    assert run.native_marker == "Codex recorded this compaction without a summary"
    (kept,) = run.report["native"]["kept_positions"]
    assert Message.objects.get(session=session, position=kept).content == "kept"
    assert run.archived_messages.count() == 4


# --- Hermes -----------------------------------------------------------------------------


def test_hermes_rotation_is_a_compaction_of_the_parent_in_either_order(alice, tmp_path):
    lines = hermes_rotation_lines()
    for name, order in (("ab.jsonl", lines), ("ba.jsonl", lines[::-1])):
        Session.objects.all().delete()
        path = write_lines(tmp_path / name, order)
        _ok(import_path(path, owner=alice))
        parent = Session.objects.get(extra__source_id="h-parent")
        child = Session.objects.get(extra__source_id="h-child")
        run = Compaction.objects.get(source="hermes")
        assert (run.session_id, run.result_session_id) == (parent.pk, child.pk), name
        assert run.mode == Compaction.Mode.ROTATION
        assert run.native_summary.endswith("parent work: tests pass")
        rows = list(run.input_rows())
        assert [m.session_id for m in rows] == [parent.pk] * 4
        assert run.report["message_tokens"] == [m.token_count for m in rows]
        assert run.snapshot_position == rows[-1].position


def test_hermes_in_place_compaction_archives_the_compacted_rows(alice, tmp_path):
    session = {
        "id": "h-inplace",
        "started_at": 1_760_000_000,
        "messages": [
            {"id": 1, "role": "user", "content": "old question", "active": 0, "compacted": 1},
            {"id": 2, "role": "assistant", "content": "old answer", "active": 0, "compacted": 1},
            {"id": 3, "role": "user", "content": "[CONTEXT SUMMARY]: old q&a", "active": 1},
            {"id": 4, "role": "user", "content": "new question"},
        ],
    }
    path = write_lines(tmp_path / "inplace.jsonl", [json.dumps(session)])
    stored = _ok(import_path(path, owner=alice)).sessions[0]
    run = Compaction.objects.get(session=stored)
    assert run.mode == Compaction.Mode.IN_PLACE
    assert run.source == "hermes"
    assert [m.content for m in run.archived_messages.order_by("position")] == [
        "old question",
        "old answer",
    ]


# --- built directly ---------------------------------------------------------------------


def _parsed(natives, messages, public_id="direct-1"):
    return ParsedSession(
        source=Session.Source.IMPORT_CLAUDE_CODE,
        public_id=public_id,
        title="direct",
        messages=messages,
        native_compactions=natives,
    )


def test_a_marker_only_compaction_built_directly_is_stored_with_what_was_recorded(alice):
    natives = [
        NativeCompaction(
            source="gemini-cli", marker="Context compressed from 68% to 3%.", extra={"line": 7}
        )
    ]
    session = store_session(
        _parsed(natives, [ParsedMessage(role="user", content="hello")]), alice, "chat.json"
    )
    run = Compaction.objects.get(session=session)
    assert run.native_marker == "Context compressed from 68% to 3%."
    assert run.trigger == Compaction.Trigger.UNKNOWN
    assert run.report["counts"] == {"messages_before": 0, "messages_after": 0}
    assert run.source_label == "Gemini CLI's own compaction"


@pytest.mark.parametrize(
    ("native", "problem"),
    [
        (NativeCompaction(source="nobody"), "unknown agent 'nobody'"),
        (NativeCompaction(source="pi", tokens_before=-5), "tokens before is not a token count"),
        (NativeCompaction(source="pi", summary="bad \ud800 text"), "summary"),
    ],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["list", "streamed"])
def test_a_bad_compaction_leaves_nothing_half_stored(alice, native, problem, streamed):
    messages = [
        ParsedMessage(role="user", content="a", active=False, archived=True, replaced_by=0),
        ParsedMessage(role="user", content="summary", is_summary=True, summary_of=0),
    ]
    parsed = _parsed([native], messages)
    if streamed:  # the store path of Claude Code and Codex files: rows read as they are stored
        parsed.messages, parsed.stream = [], iter(messages)
    with pytest.raises(Exception) as caught:
        store_session(parsed, alice, "bad.jsonl")
    assert problem in str(caught.value)
    assert "compaction 1" in str(caught.value)
    assert not Session.objects.exists()
    assert not Message.objects.exists()
    assert not Compaction.objects.exists()


def test_a_row_naming_a_compaction_that_is_not_recorded_is_refused_whole(alice):
    messages = [ParsedMessage(role="user", content="a", active=False, archived=True, replaced_by=3)]
    with pytest.raises(
        Exception, match="names the agent's compaction 4, but the session records 1"
    ):
        store_session(_parsed([NativeCompaction(source="pi")], messages), alice, "bad.jsonl")
    assert not Session.objects.exists()
    assert not Compaction.objects.exists()


def test_native_compactions_are_not_undoable_and_not_in_our_history(alice, tmp_path):
    from hermes_web.services.compactions import lineage_history
    from hermes_web.services.undo import UndoRefused, undo_compaction

    path = write_lines(tmp_path / "cc-0005.jsonl", claude_code_lines(compacts=1))
    session = _ok(import_path(path, owner=alice)).sessions[0]
    run = Compaction.objects.get(session=session)
    with pytest.raises(UndoRefused, match="Claude Code's own compaction"):
        undo_compaction(run, user=alice)
    assert lineage_history(session) == []
