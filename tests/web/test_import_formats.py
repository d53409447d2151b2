"""Importing each format from fixture files written like the real tools' output."""

import json
import sqlite3
from pathlib import Path

import pytest

from compaction import SUMMARY_PREFIX
from hermes_web.importers import import_path
from hermes_web.models import Message, Session
from hermes_web.services.sessions import openai_messages
from tests.web.hermes_state_db import build_state_db

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ROOT, CHILD, GATEWAY = "20260511_180601_82f04a", "20260511_193215_1c9e0d", "api-de1f3305a7c44380"


def _ok(report):
    assert report.errors == [], [str(e) for e in report.errors]
    assert report.duplicates == [], [str(e) for e in report.duplicates]
    return report


def _id(tool_id, owner):
    """Imported ids live in their owner's namespace."""
    return f"{tool_id}.{owner.pk}"


def _check_hermes_sessions(alice):
    root = Session.objects.get(public_id=_id(ROOT, alice))
    child = Session.objects.get(public_id=_id(CHILD, alice))
    gateway = Session.objects.get(public_id=_id(GATEWAY, alice))
    assert root.extra["source_id"] == ROOT
    assert root.owner == alice
    assert root.source == Session.Source.IMPORT_HERMES
    # The rotation chain is rebuilt.
    assert child.parent == root
    assert child.root == root
    assert root.root == root
    assert root.end_reason == "compression"
    assert root.ended_at is not None
    assert child.compression_count == 1
    # The summary row is recognized and its body becomes the previous summary.
    summary = child.messages.get(is_summary=True)
    assert summary.content.startswith(SUMMARY_PREFIX)
    assert child.previous_summary.startswith("## Active Task")
    assert "END OF CONTEXT SUMMARY" not in child.previous_summary
    # Prefixed JSON content is decoded into parts.
    parts = root.messages.get(position=6).content
    assert parts[1]["type"] == "image_url"
    # Tool calls and results keep their ids and names.
    assistant = root.messages.get(position=2)
    assert assistant.tool_calls[0]["id"] == "call_7f3a"
    assert assistant.reasoning == "Start by reading reader.py."
    tool = root.messages.get(position=3)
    assert (tool.tool_call_id, tool.tool_name) == ("call_7f3a", "read_file")
    assert all(m.token_count > 0 for m in root.messages.all())
    # In-place history: compacted rows archived, the duplicate flagged, legacy summary found.
    rows = list(gateway.messages.order_by("position"))
    assert [m.active for m in rows] == [False] * 4 + [True] * 4
    assert all(m.archived for m in rows[:4])
    assert rows[3].extra.get("superseded") is True
    assert rows[5].is_summary
    assert [m["role"] for m in openai_messages(gateway)] == ["system", "user", "user", "assistant"]


def test_hermes_jsonl_export(alice):
    report = _ok(import_path(FIXTURES / "hermes_export.jsonl", owner=alice))
    assert report.format == "hermes-jsonl"
    assert [s.public_id for s in report.sessions] == [_id(i, alice) for i in (ROOT, CHILD, GATEWAY)]
    _check_hermes_sessions(alice)


def test_hermes_state_db(alice, tmp_path):
    db = build_state_db(tmp_path / "state.db", FIXTURES / "hermes_export.jsonl")
    report = _ok(import_path(db, owner=alice))
    assert report.format == "hermes-db"
    assert len(report.sessions) == 3
    _check_hermes_sessions(alice)


def test_state_db_is_opened_read_only(alice, tmp_path):
    db = build_state_db(tmp_path / "state.db", FIXTURES / "hermes_export.jsonl")
    db.chmod(0o444)
    before = db.read_bytes()
    _ok(import_path(db, owner=alice))
    assert db.read_bytes() == before
    assert not (tmp_path / "state.db-wal").exists()


def test_importing_twice_reports_duplicates(alice):
    _ok(import_path(FIXTURES / "hermes_export.jsonl", owner=alice))
    again = import_path(FIXTURES / "hermes_export.jsonl", owner=alice)
    assert again.sessions == []
    assert not again.ok
    assert [d.session for d in again.duplicates] == [ROOT, CHILD, GATEWAY]
    assert "duplicate" in str(again.duplicates[0])
    assert Session.objects.count() == 3


def test_importing_twice_with_skip_existing_skips_quietly(alice):
    _ok(import_path(FIXTURES / "hermes_export.jsonl", owner=alice))
    again = _ok(import_path(FIXTURES / "hermes_export.jsonl", owner=alice, skip_existing=True))
    assert again.ok
    assert again.sessions == []
    assert len(again.skipped) == 3


def test_ids_are_namespaced_so_a_collision_reveals_nothing(alice, bob):
    """Bob gets the same id whether or not Alice imported the session before him."""
    _ok(import_path(FIXTURES / "hermes_export.jsonl", owner=alice))
    report = _ok(import_path(FIXTURES / "hermes_export.jsonl", owner=bob))
    ids = {s.public_id for s in report.sessions}
    assert ids == {_id(ROOT, bob), _id(CHILD, bob), _id(GATEWAY, bob)}
    child = Session.objects.get(public_id=_id(CHILD, bob))
    assert child.parent.public_id == _id(ROOT, bob)
    assert child.parent.owner == bob
    assert Session.objects.get(public_id=_id(CHILD, alice)).parent.owner == alice


def test_a_child_imported_before_its_parent_is_linked_later(alice, tmp_path):
    lines = (FIXTURES / "hermes_export.jsonl").read_text().splitlines()
    (tmp_path / "child.jsonl").write_text(lines[1] + "\n")
    (tmp_path / "parent.jsonl").write_text(lines[0] + "\n")
    _ok(import_path(tmp_path / "child.jsonl", owner=alice))
    assert Session.objects.get(public_id=_id(CHILD, alice)).parent is None
    _ok(import_path(tmp_path / "parent.jsonl", owner=alice))
    child = Session.objects.get(public_id=_id(CHILD, alice))
    assert child.parent.public_id == _id(ROOT, alice)
    assert child.root.public_id == _id(ROOT, alice)
    assert child.compression_count == 1


@pytest.mark.parametrize("name", ["openai_list.json", "openai_object.json"])
def test_openai(alice, name):
    report = _ok(import_path(FIXTURES / name, owner=alice))
    assert report.format == "openai"
    session = report.sessions[0]
    assert session.source == Session.Source.IMPORT_OPENAI
    messages = openai_messages(session)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[2]["tool_calls"][0]["id"] == messages[3]["tool_call_id"] == "call_abc123"
    if name == "openai_object.json":
        assert session.title == "Paris weather"
        assert session.model == "gpt-4o"
    else:
        assert session.title == "What's the weather in Paris?"


def test_claude_code_transcript(alice):
    report = _ok(import_path(FIXTURES / "claude_code_session.jsonl", owner=alice))
    assert report.format == "claude-code"
    session = report.sessions[0]
    assert session.public_id == _id("5f0c2a4e-8b1d-4c3e-9a7f-2d6b1e0c9f31", alice)
    assert session.source == Session.Source.IMPORT_CLAUDE_CODE
    assert session.title == "Add pagination to the todo list endpoint"
    assert session.model == "claude-sonnet-4-20250514"
    messages = openai_messages(session)
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    # Three records of one API response are merged into one assistant message.
    first = messages[1]
    assert first["content"] == "I'll read the route handler."
    assert first["reasoning"] == "I need to see the route first."
    assert first["tool_calls"][0]["function"] == {
        "name": "Read",
        "arguments": json.dumps({"file_path": "/home/dev/todo-api/app/routes.py"}),
    }
    assert messages[2]["tool_call_id"] == "toolu_01A9dXq3"
    assert messages[2]["name"] == "Read"
    assert "list_todos" in messages[2]["content"]
    assert messages[4]["tool_call_id"] == messages[3]["tool_calls"][0]["id"] == "toolu_01B7fRt2"
    assert (
        Message.objects.get(session=session, tool_call_id="toolu_01B7fRt2").extra["is_error"]
        is True
    )


def test_codex_rollout(alice):
    report = _ok(import_path(FIXTURES / "codex_rollout.jsonl", owner=alice))
    assert report.format == "codex"
    session = report.sessions[0]
    assert session.public_id == _id("0199104c-5c2a-7d83-b4f1-7e3c1b2a9d40", alice)
    assert session.source == Session.Source.IMPORT_CODEX
    assert session.model == "gpt-5-codex"
    assert session.title == "Add a --verbose flag that prints each file processed."
    messages = openai_messages(session)
    # The <environment_context> block is session metadata, not a user turn.
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert not any("<environment_context>" in str(m["content"]) for m in messages)
    meta = Message.objects.get(session=session, extra__meta="environment_context")
    assert (meta.active, meta.archived) == (False, False)
    assert session.extra["codex"]["cli_version"] == "0.30.0"
    assert session.extra["codex"]["git"]["branch"] == "main"
    call = messages[1]
    assert call["reasoning"] == "**Locating argument parsing**"
    assert call["tool_calls"][0]["id"] == messages[2]["tool_call_id"] == "call_Q1w2E3r4"
    assert messages[2]["name"] == "shell"
    assert messages[3]["tool_calls"][0]["function"]["name"] == "apply_patch"
    assert messages[4]["tool_call_id"] == "call_T5y6U7i8"


def test_explicit_format_overrides_detection(alice):
    report = _ok(import_path(FIXTURES / "openai_list.json", owner=alice, fmt="openai"))
    assert report.format == "openai"


def test_sqlite_file_detection_does_not_need_an_extension(alice, tmp_path):
    db = build_state_db(tmp_path / "backup", FIXTURES / "hermes_export.jsonl")
    assert sqlite3.connect(db).execute("SELECT count(*) FROM sessions").fetchone() == (3,)
    assert _ok(import_path(db, owner=alice)).format == "hermes-db"


def test_import_token_counts_match_the_engine():
    from compaction import CompactionConfig, count_messages_tokens, generate_conversation
    from hermes_web.importers import count_tokens
    from hermes_web.importers.base import ParsedMessage

    conversation = generate_conversation(300, seed=5)
    parsed = [
        ParsedMessage(
            role=m["role"],
            content=m.get("content"),
            tool_calls=m.get("tool_calls"),
            tool_call_id=m.get("tool_call_id") or "",
        )
        for m in conversation
    ]
    engine = count_messages_tokens(
        [p.as_openai() for p in parsed], CompactionConfig(model="gpt-4o")
    )
    assert count_tokens(parsed, "gpt-4o") == engine


def test_import_token_counts_keep_counts_not_token_ids():
    """An import counts every row; one long row (a tool result of megabytes) is counted
    without a list of its token ids (36 bytes a token: 27 MB for this 3 MB row)."""
    import tracemalloc

    from hermes_web.importers import count_tokens
    from hermes_web.importers.base import ParsedMessage

    text = "".join(f"line {i} value = {i * 7}\n" for i in range(150_000))
    parsed = [ParsedMessage(role="tool", content=text, tool_call_id="c1")]
    count_tokens([ParsedMessage(role="user", content="warm")], "gpt-4o")  # encoding loaded
    tracemalloc.start()
    (count,) = count_tokens(parsed, "gpt-4o")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count * 36 > 25_000_000  # the list of ids the old count held
    assert peak < 3 * len(text)  # the row's text, copied once to be counted


def test_sessions_imported_before_ids_had_a_namespace_are_still_duplicates_and_parents(
    alice, tmp_path
):
    lines = (FIXTURES / "hermes_export.jsonl").read_text().splitlines()
    (tmp_path / "root.jsonl").write_text(lines[0] + "\n")
    (tmp_path / "child.jsonl").write_text(lines[1] + "\n")
    _ok(import_path(tmp_path / "root.jsonl", owner=alice))
    Session.objects.filter(owner=alice).update(public_id=ROOT)  # the id an older version gave
    again = import_path(tmp_path / "root.jsonl", owner=alice)
    assert len(again.duplicates) == 1
    _ok(import_path(tmp_path / "child.jsonl", owner=alice))
    assert Session.objects.get(public_id=_id(CHILD, alice)).parent.public_id == ROOT
