"""Goose sessions (issue #36 item 1): the legacy ``<id>.jsonl`` (a metadata line, then one
Message a line) and the newer ``sessions.db`` (tables ``sessions`` and ``messages`` with
``content_json`` / ``metadata_json``), detected by content and by tables; toolRequest /
toolResponse paired by id, thinking kept as reasoning, the working directory kept, and
Goose's compaction (the summary a user message hidden from the user, the history before it
hidden from the model) kept as a native compaction.

Fixtures are our own, built with the shapes Goose's serde types and schema write
(crates/goose/src/conversation/message.rs, session/session_manager.rs)."""

import json
import sqlite3

import pytest

from hermes_web.importers import detect_format, import_path
from hermes_web.importers.formats import goose
from hermes_web.models import Compaction, Message, Session
from tests.web.agent_import_helpers import _meta, imported, pairs_ok, parsed

pytestmark = pytest.mark.django_db
T0 = 1_754_605_244
SUMMARY = "The user wants the flaky test fixed; tests/test_io.py was read."
HIDDEN = {"userVisible": False, "agentVisible": True}
OLD = {"userVisible": True, "agentVisible": False}


def text(value):
    return {"type": "text", "text": value}


def request(call_id, name, args):
    return {
        "type": "toolRequest",
        "id": call_id,
        "toolCall": {"status": "success", "value": {"name": name, "arguments": args}},
    }


def response(call_id, value, error=False):
    return {
        "type": "toolResponse",
        "id": call_id,
        "toolResult": {
            "status": "success",
            "value": {"content": [text(value)], "isError": error},
        },
    }


def message(role, content, at, metadata=None, mid=""):
    return {
        "id": mid or f"msg_{at}",
        "role": role,
        "created": T0 + at,
        "content": content,
        "metadata": metadata or {"userVisible": True, "agentVisible": True},
    }


def conversation(compacted=False):
    """A turn with two tool calls (one failing), thinking, then (optionally) a compaction as
    Goose's compact_messages leaves it: the history flagged invisible to the agent, the
    summary, the continuation note, the preserved user message."""
    old = OLD if compacted else None
    rows = [
        message("user", [text("Why is test_io flaky?")], 1, old),
        message(
            "assistant",
            [
                {"type": "thinking", "thinking": "Read the test first.", "signature": "sig"},
                text("Looking."),
                request("toolu_1", "developer__shell", {"command": "cat tests/test_io.py"}),
                request("toolu_2", "developer__shell", {"command": "pytest -x"}),
            ],
            2,
            old,
        ),
        message(
            "user",
            [response("toolu_1", "def test_io(): ..."), response("toolu_2", "1 failed", True)],
            3,
            old,
        ),
        message("assistant", [text("It races on a temp file.")], 4, old),
    ]
    if compacted:
        rows += [
            message("user", [text(SUMMARY)], 5, HIDDEN),
            message(
                "assistant",
                [text("Your context was compacted. The previous message contains a summary.")],
                6,
                HIDDEN,
            ),
            message("user", [text("Fix it then.")], 7),
            message("assistant", [text("Fixed: a unique temp dir per test.")], 8),
        ]
    return rows


def write_jsonl(path, rows):
    head = {
        "working_dir": "/home/alice/proj",
        "description": "Flaky test_io",
        "schedule_id": None,
        "message_count": len(rows),
        "total_tokens": 5120,
        "input_tokens": 5000,
        "output_tokens": 120,
    }
    path.write_text("".join(json.dumps(r) + "\n" for r in [head, *rows]))
    return path


SCHEMA = """
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP);
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '',
  description TEXT NOT NULL DEFAULT '', user_set_name BOOLEAN DEFAULT FALSE,
  session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  extension_data TEXT DEFAULT '{}', total_tokens INTEGER, input_tokens INTEGER,
  output_tokens INTEGER, accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
  accumulated_output_tokens INTEGER, schedule_id TEXT, recipe_json TEXT,
  user_recipe_values_json TEXT, provider_name TEXT, model_config_json TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
  session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
  content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
  timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER, metadata_json TEXT);
"""


def write_db(path, rows):
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.execute(
        "INSERT INTO sessions (id, name, working_dir, created_at, total_tokens, provider_name,"
        " model_config_json) VALUES ('20250807_1', 'Flaky test_io', '/home/alice/proj',"
        " '2025-08-07 22:20:44', 5120, 'anthropic', ?)",
        (json.dumps({"model_name": "claude-sonnet-4", "context_limit": 200000}),),
    )
    db.executemany(
        "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp,"
        " metadata_json) VALUES (?, '20250807_1', ?, ?, ?, ?)",
        [
            (r["id"], r["role"], json.dumps(r["content"]), r["created"], json.dumps(r["metadata"]))
            for r in rows
        ],
    )
    db.commit()
    db.close()
    return path


def _rows(session):
    return list(Message.objects.filter(session=session).order_by("position"))


def test_a_goose_jsonl_is_detected_and_imports_with_its_calls_paired(alice, tmp_path):
    """Before: not recognised as Goose's (no "goose" format)."""
    path = write_jsonl(tmp_path / "20250807_1.jsonl", conversation())
    (session,) = imported(path, alice, "goose")
    assert session.source == Session.Source.IMPORT_GOOSE
    assert session.title == "Flaky test_io"
    assert session.extra["cwd"] == "/home/alice/proj"
    assert session.extra["goose"]["total_tokens"] == 5120
    rows = _rows(session)
    assert [r.role for r in rows] == ["user", "assistant", "tool", "tool", "assistant"]
    turn = rows[1]
    assert turn.content == "Looking."
    assert turn.reasoning == "Read the test first."
    assert [c["function"]["name"] for c in turn.tool_calls] == ["developer__shell"] * 2
    assert json.loads(turn.tool_calls[0]["function"]["arguments"]) == {
        "command": "cat tests/test_io.py"
    }
    results = {r.tool_call_id: r for r in rows if r.role == "tool"}
    assert results["toolu_1"].content == "def test_io(): ..."
    assert results["toolu_2"].content == "1 failed"
    assert results["toolu_2"].extra.get("is_error") is True


def test_an_older_metadata_line_without_message_count_is_still_goose(tmp_path):
    path = tmp_path / "old.jsonl"
    head = {"description": "Old one", "working_dir": "/srv"}
    path.write_text(json.dumps(head) + "\n" + json.dumps(conversation()[0]) + "\n")
    assert detect_format(path, path.name) == "goose"
    (session,) = parsed(goose.parse, path)
    assert session.title == "Old one"
    assert session.extra["cwd"] == "/srv"


def test_gooses_compaction_becomes_a_native_compaction(alice, tmp_path):
    path = write_jsonl(tmp_path / "20250807_1.jsonl", conversation(compacted=True))
    (session,) = imported(path, alice, "goose")
    compaction = Compaction.objects.get(session=session)
    assert compaction.source == "goose"
    assert compaction.native_summary == SUMMARY
    assert compaction.trigger == "auto"
    rows = _rows(session)
    summary = next(r for r in rows if r.is_summary)
    before = [r for r in rows if r.position < summary.position]
    assert len(before) == 5
    assert all(r.archived and not r.active for r in before)
    note = next(r for r in rows if r.position > summary.position)
    assert _meta(note) == "goose_continuation"
    assert note.content.startswith("Your context was compacted")
    after = next(r for r in rows if r.content == "Fix it then.")
    assert after.active
    assert after.position > summary.position


def test_a_compact_the_user_asked_for_is_manual_and_an_old_marker_is_kept(tmp_path):
    rows = conversation(compacted=True)
    rows[5]["content"] = [text("Your context was compacted at the user's request. Go on.")]
    # before Goose 1.14: a conversationCompacted content, no summary kept
    rows.append(message("assistant", [{"type": "conversationCompacted", "msg": "Compacted"}], 9))
    (session,) = parsed(goose.parse, write_jsonl(tmp_path / "s.jsonl", rows))
    first, second = session.native_compactions
    assert (first.trigger, first.summary) == ("manual", SUMMARY)
    assert (second.summary, second.marker) == ("", "Compacted")


def test_a_torn_last_line_keeps_everything_before_it(tmp_path):
    path = write_jsonl(tmp_path / "20250807_1.jsonl", conversation())
    whole = [m.content for m in parsed(goose.parse, path)[0].messages]
    path.write_bytes(path.read_bytes() + b'{"role": "assistant", "created": 1, "conte')
    (session,) = parsed(goose.parse, path)
    assert session.torn_line == len(conversation()) + 2
    assert [m.content for m in session.messages] == whole


def test_a_goose_sessions_db_is_found_by_its_tables_and_imports(alice, tmp_path):
    """Before: refused as a Hermes state.db lacking its columns."""
    path = write_db(tmp_path / "sessions.db", conversation(compacted=True))
    assert detect_format(path, "sessions.db") == "goose-db"
    report = import_path(path, owner=alice)
    assert report.refused == [], [str(e) for e in report.errors]
    (session,) = report.sessions
    assert session.source == Session.Source.IMPORT_GOOSE
    assert session.model == "claude-sonnet-4"
    assert session.extra["cwd"] == "/home/alice/proj"
    rows = _rows(session)
    pairs_ok(rows)
    assert rows[1].reasoning == "Read the test first."
    compaction = Compaction.objects.get(session=session)
    assert compaction.native_summary == SUMMARY
    assert [r.content for r in rows if r.active and r.role == "assistant"][-1] == (
        "Fixed: a unique temp dir per test."
    )


def test_a_message_whose_content_is_not_json_fails_its_session_only(alice, tmp_path):
    path = write_db(tmp_path / "sessions.db", conversation())
    db = sqlite3.connect(path)
    db.execute("UPDATE messages SET content_json = '[{' WHERE id = 2")
    db.commit()
    db.close()
    report = import_path(path, owner=alice)
    (problem,) = report.errors
    assert "message 2: 'content_json' is not JSON" in problem.problem
    assert str(tmp_path) not in str(problem)
    assert not Session.objects.exists()
