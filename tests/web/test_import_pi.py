"""Pi session files: the tree read as the conversation Pi resumes plus its branches as
linked sessions, and Pi's own compaction as a NativeCompaction."""

import json
from pathlib import Path

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.base import pair_tool_results
from hermes_web.importers.detect import detect_format
from hermes_web.importers.formats import pi
from hermes_web.models import Message, Session

pytestmark = pytest.mark.django_db
FIXTURE = next((Path(__file__).resolve().parent.parent / "fixtures/agents/pi").glob("*.jsonl"))
SESSION_ID = "0f3c7e2a-5b1d-4c8e-9a6f-1d2e3f4a5b6c"


def _parse(path):
    with open(path, "rb") as stream:
        sessions = list(pi.parse(stream, path.name))
    for session in sessions:
        pair_tool_results(session)
    return sessions


def test_the_file_is_detected_as_pi():
    assert detect_format(FIXTURE, FIXTURE.name) == "pi"


def test_the_main_path_and_the_compaction_pi_recorded():
    main, branch = _parse(FIXTURE)
    assert main.public_id == SESSION_ID
    assert main.title == "store.ts byId crash"  # the session_info name
    assert main.model == "claude-sonnet-4-5"
    (compaction,) = main.native_compactions
    assert compaction.source == "pi"
    assert compaction.tokens_before == 48213
    assert compaction.summary.startswith("## Goal\nFix the failing `npm test`")
    assert compaction.extra["first_kept_entry_id"] == "a0000010"
    assert compaction.extra["details"]["modifiedFiles"] == ["src/store.ts"]

    turns = [m for m in main.messages if not m.meta]
    replaced = [m for m in turns if m.replaced_by == 0]
    # everything before the first kept entry: the first question, two calls and results
    assert [m.role for m in replaced] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert all(m.archived and not m.active for m in replaced)
    summary = next(m for m in turns if m.is_summary)
    assert summary.summary_of == 0
    assert summary.active
    assert summary.role == "user"
    assert "store.ts:42" in summary.content
    # Pi sends the summary, then the kept entries, then what came after
    after = turns[turns.index(summary) + 1 :]
    assert after[0].content == "Fix byId to return undefined when the item is missing."
    assert [m.kept_by for m in after[:4]] == [0, 0, 0, 0]
    assert after[-1].content == "All 14 tests pass."
    assert after[-1].kept_by is None

    call = next(m for m in main.messages if m.tool_calls)
    assert call.reasoning == "Run the tests first."
    assert json.loads(call.tool_calls[0]["function"]["arguments"]) == {"command": "npm test"}
    assert call.extra["thinking_signatures"] == ["sig1"]
    assert {m.meta for m in main.messages if m.meta} == {"branch_summary", "command"}

    assert branch.public_id == f"{SESSION_ID}.branch-b0000001"
    assert branch.parent_id == SESSION_ID
    assert branch.kind == "branch"
    assert [m.content for m in branch.messages][0] == "Rewrite the whole store in Rust instead."
    assert branch.extra["pi"]["branched_from_entry"] == "a0000008"


def test_importing_stores_both_sessions_linked_and_every_call_paired(alice):
    before = FIXTURE.read_bytes()
    report = import_path(FIXTURE, owner=alice)
    assert report.errors == []
    assert report.format == "pi"
    main, branch = report.sessions
    assert branch.parent_id == main.pk
    assert Session.objects.get(pk=main.pk).source == Session.Source.IMPORT_PI
    fidelity = main.fidelity
    assert fidelity["tool_calls"] == fidelity["tool_results_paired"] == 3
    assert fidelity["stub_results"] == 0
    assert fidelity["archived"] == 6
    assert fidelity["summaries"] == 1
    rows = Message.objects.filter(session=main).order_by("position")
    assert [r.role for r in rows if r.active][:2] == ["user", "user"]  # summary, kept question
    assert FIXTURE.read_bytes() == before


def _write(tmp_path, rows, name="s.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_version_1_file_is_a_chain_and_its_compaction_index_is_resolved(tmp_path):
    path = _write(
        tmp_path,
        [
            {"type": "session", "id": "v1", "timestamp": "2025-11-01T10:00:00Z", "cwd": "/w"},
            {"type": "message", "timestamp": "2025-11-01T10:00:01Z",
             "message": {"role": "user", "content": "first"}},
            {"type": "message", "timestamp": "2025-11-01T10:00:02Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "one"}]}},
            {"type": "message", "timestamp": "2025-11-01T10:00:03Z",
             "message": {"role": "user", "content": "second"}},
            {"type": "compaction", "timestamp": "2025-11-01T10:00:04Z", "summary": "s",
             "firstKeptEntryIndex": 3, "tokensBefore": 900},
            {"type": "message", "timestamp": "2025-11-01T10:00:05Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "two"}]}},
        ],
    )  # fmt: skip
    (session,) = _parse(path)
    assert [
        (m.content, m.replaced_by, m.kept_by) for m in session.messages if not m.is_summary
    ] == [
        ("first", 0, None),
        ("one", 0, None),
        ("second", None, 0),
        ("two", None, None),
    ]
    assert session.native_compactions[0].tokens_before == 900


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ([{"type": "message", "id": "x", "parentId": None}], "no session header"),
        ([{"type": "session", "id": "s"}], "no entries"),
        (
            [
                {"type": "session", "id": "s"},
                {"type": "message", "id": "m", "parentId": None, "message": {"role": "user"}},
                {"type": "message", "id": "m", "parentId": None, "message": {"role": "user"}},
            ],
            "entry id 'm' appears twice",
        ),
    ],
)
def test_bad_files_are_refused_by_line(alice, tmp_path, rows, problem):
    path = _write(tmp_path, rows)
    report = import_path(path, owner=alice, fmt="pi")
    assert [problem in e.problem for e in report.errors] == [True]
    assert not Session.objects.exists()


def test_a_branch_of_metadata_only_is_not_a_session(tmp_path):
    path = _write(
        tmp_path,
        [
            {"type": "session", "version": 3, "id": "s"},
            {"type": "message", "id": "u", "parentId": None, "message": {"role": "user", "content": "q"}},
            {"type": "label", "id": "l", "parentId": "u", "targetId": "u", "label": "start"},
            {"type": "message", "id": "a", "parentId": "u",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "r"}]}},
        ],
    )  # fmt: skip
    (session,) = _parse(path)
    assert session.skipped["branch without messages (not imported)"] == 1
