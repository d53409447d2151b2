"""Kimi CLI context files (~/.kimi/sessions/<hash>/<id>/context.jsonl): OpenAI-like messages
with the _checkpoint and _usage pseudo-roles, detected by content, the provider's token
counts kept on their rows, and Kimi CLI's compaction kept as a native compaction."""

import json

import pytest

from hermes_web.importers import import_directory
from hermes_web.importers.detect import detect_format
from hermes_web.importers.formats import kimi_cli
from hermes_web.models import Compaction, Session
from tests.web.agent_import_helpers import imported, pairs_ok, parsed, refused

pytestmark = pytest.mark.django_db
SESSION_ID = "3c2b1a09-8f7e-4d6c-b5a4-93827160f5e4"
COMPACTED = "<system>Previous context has been compacted. Here is the compaction output:</system>"
SUMMARY = "<current_focus>\nDeploy the backend.\n</current_focus>"


def _call(call_id, command):
    return {
        "type": "function",
        "id": call_id,
        "function": {"name": "Shell", "arguments": json.dumps({"command": command})},
    }


def _rows(compacted=True):
    head = (
        [
            {"role": "_checkpoint", "id": 0},
            {"role": "user", "content": [{"type": "text", "text": COMPACTED},
                                         {"type": "text", "text": SUMMARY}]},
            {"role": "_usage", "token_count": 2100},
        ]
        if compacted
        else []
    )  # fmt: skip
    return head + [
        {"role": "_checkpoint", "id": 1},
        {"role": "user", "content": "Is the build green?"},
        {"role": "_checkpoint", "id": 2},
        {"role": "_usage", "token_count": 9581},
        {
            "role": "assistant",
            "content": [
                {"type": "think", "think": "Check CI, then the logs.", "encrypted": None},
                {"type": "text", "text": "Checking."},
            ],
            "tool_calls": [_call("tool_1", "gh run list"), _call("tool_2", "tail build.log")],
        },
        {"role": "_usage", "token_count": 9692},
        {"role": "tool", "content": [{"type": "text", "text": "<system>ok</system>"},
                                     {"type": "text", "text": "run 12 passed"}],
         "tool_call_id": "tool_1"},
        {"role": "tool", "content": [{"type": "text", "text": "BUILD SUCCESS"}],
         "tool_call_id": "tool_2"},
        {"role": "_checkpoint", "id": 3},
        {"role": "user", "content": [{"type": "text", "text": "<system>CHECKPOINT 3</system>"}]},
        {"role": "_usage", "token_count": 10506},
        {"role": "assistant", "content": [{"type": "text", "text": "Green: run 12 passed."}]},
        {"role": "_usage", "token_count": 10595},
    ]  # fmt: skip


def _write(tmp_path, rows):
    folder = tmp_path / "697a0ebec3147bb421a9dd6a0531906f" / SESSION_ID
    folder.mkdir(parents=True)
    path = folder / "context.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def context(tmp_path):
    return _write(tmp_path, _rows())


def test_a_kimi_context_file_is_detected_by_its_pseudo_roles(context):
    assert detect_format(context, context.name) == "kimi-cli"


def test_messages_calls_results_checkpoints_and_usage(context):
    (session,) = parsed(kimi_cli.parse, context)
    assert session.public_id == SESSION_ID  # the session folder's name
    assert session.title == "Is the build green?"
    rows = [m for m in session.messages if not m.meta and not m.is_summary]
    question, call, first, second, answer = rows
    assert question.extra["checkpoint"] == 1
    assert call.reasoning == "Check CI, then the logs."
    assert call.content == "Checking."
    assert [c["id"] for c in call.tool_calls] == ["tool_1", "tool_2"]
    assert call.extra["usage"] == {"prompt_tokens": 9581, "context_tokens": 9692}
    assert (first.tool_call_id, first.tool_name) == ("tool_1", "Shell")
    assert first.content == "<system>ok</system>\nrun 12 passed"
    assert second.content == "BUILD SUCCESS"
    assert answer.extra["usage"] == {"prompt_tokens": 10506, "context_tokens": 10595}
    (note,) = [m for m in session.messages if m.meta]
    assert note.meta == "checkpoint"
    assert session.extra["kimi_cli"] == {"checkpoints": 4, "context_tokens": 10595}
    assert session.skipped["checkpoint record (kept as the next row's checkpoint)"] == 4
    pairs_ok(session.messages)


def test_the_compacted_head_of_a_context_file_is_a_native_compaction(context):
    (session,) = parsed(kimi_cli.parse, context)
    (compaction,) = session.native_compactions
    assert compaction.source == "kimi-cli"
    assert compaction.summary == SUMMARY
    assert compaction.tokens_after == 2100  # the _usage written right after it
    assert compaction.tokens_before is None  # no rotated context_N.jsonl beside it
    summary = session.messages[0]
    assert summary.is_summary
    assert summary.summary_of == 0
    assert summary.active


def test_import_stores_the_session_its_compaction_and_a_fidelity_report(context, alice):
    (session,) = imported(context, alice, "kimi-cli")
    assert session.source == Session.Source.IMPORT_KIMI_CLI
    compaction = Compaction.objects.get(session=session)
    assert compaction.source == "kimi-cli"
    assert compaction.native_summary == SUMMARY
    assert compaction.tokens_after == 2100
    fidelity = session.fidelity
    assert fidelity["tool_calls"] == fidelity["tool_results_paired"] == 2
    assert fidelity["stub_results"] == 0
    assert fidelity["summaries"] == 1


def test_a_file_without_compaction_has_none(tmp_path):
    path = _write(tmp_path, _rows(compacted=False))
    assert detect_format(path, path.name) == "kimi-cli"
    (session,) = parsed(kimi_cli.parse, path)
    assert session.native_compactions == []
    assert not any(m.is_summary for m in session.messages)


def test_a_usage_record_without_a_count_is_refused_with_its_line(tmp_path, alice):
    rows = _rows(compacted=False)
    rows[3] = {"role": "_usage", "token_count": "many"}
    problem = refused(_write(tmp_path, rows), alice)
    assert problem.line == 4
    assert "token_count" in problem.problem


def test_the_wire_log_beside_it_gives_the_session_its_times(context, alice):
    wire = context.with_name("wire.jsonl")
    wire.write_text(
        json.dumps({"type": "metadata", "protocol_version": "1.3"})
        + "\n"
        + "".join(
            json.dumps({"timestamp": t, "message": {"type": k, "payload": {}}}) + "\n"
            for t, k in [(1767261600.5, "TurnBegin"), (1767261601.0, "StepBegin"),
                         (1767261720.25, "TurnEnd")]
        )
        + "not json\n"
    )  # fmt: skip
    (session,) = imported(context, alice, "kimi-cli")
    assert session.created_at.timestamp() == 1767261600.5
    assert session.ended_at.timestamp() == 1767261720.25
    assert session.extra["kimi_cli"]["wire_protocol"] == "1.3"
    assert session.extra["kimi_cli"]["wire_turns"] == 1


def test_a_wire_log_imported_alone_points_to_the_context_file(tmp_path, alice):
    wire = tmp_path / "wire.jsonl"
    wire.write_text(json.dumps({"type": "metadata", "protocol_version": "1.3"}) + "\n")
    assert detect_format(wire, wire.name) == "kimi-cli"
    problem = refused(wire, alice)
    assert "context.jsonl" in problem.problem


def test_a_sessions_folder_imports_each_context_and_reads_the_wire_log_with_it(tmp_path, alice):
    context = _write(tmp_path, _rows())
    context.with_name("context_1.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _rows(compacted=False))
    )
    context.with_name("wire.jsonl").write_text(
        json.dumps({"type": "metadata", "protocol_version": "1.3"}) + "\n"
    )
    reports, skipped = import_directory(tmp_path, owner=alice)
    assert [str(e) for r in reports for e in r.refused] == []
    ids = sorted(s.extra["source_id"] for r in reports for s in r.sessions)
    assert ids == [SESSION_ID, f"{SESSION_ID}.context_1"]  # the earlier context beside it
    # the compaction's size before: the last _usage of the context it replaced
    compaction = Compaction.objects.get(session__extra__source_id=SESSION_ID)
    assert (compaction.tokens_before, compaction.tokens_after) == (10595, 2100)
    assert [(path.name, why) for path, why in skipped] == [
        ("wire.jsonl", "Kimi CLI wire log (read with its context.jsonl)")
    ]


def test_a_torn_last_line_keeps_everything_before_it(context):
    whole = list(parsed(kimi_cli.parse, context)[0].messages)
    context.write_bytes(context.read_bytes() + b'{"role": "assistant", "content": "half')
    (session,) = parsed(kimi_cli.parse, context)
    assert session.torn_line is not None
    assert session.torn_line == len(_rows()) + 1
    assert [m.content for m in session.messages] == [m.content for m in whole]
