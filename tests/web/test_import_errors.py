"""Bad input: each problem names file, line and what is wrong; nothing of a failed session is stored."""

import json
import sqlite3
from pathlib import Path

import pytest

from hermes_web.importers import import_path
from hermes_web.models import Message, Session

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _hermes_lines():
    return (FIXTURES / "hermes_export.jsonl").read_bytes().splitlines(keepends=True)


def _write(tmp_path, name, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _only_problem(report):
    assert len(report.errors) == 1, [str(e) for e in report.errors]
    return report.errors[0]


def test_malformed_line_fails_only_that_session(alice, tmp_path):
    lines = _hermes_lines()
    path = _write(
        tmp_path, "export.jsonl", lines[0] + b'{"id": "broken", "messages": [\n' + lines[2]
    )
    report = import_path(path, owner=alice)
    problem = _only_problem(report)
    assert (problem.file, problem.line) == ("export.jsonl", 2)
    assert "broken JSON" in problem.problem
    assert "export.jsonl, line 2: broken JSON" in str(problem)
    assert sorted(s.extra["source_id"] for s in report.sessions) == [
        "20260511_180601_82f04a",
        "api-de1f3305a7c44380",
    ]


def test_unknown_role_fails_the_session_and_stores_none_of_it(alice, tmp_path):
    lines = _hermes_lines()
    bad = json.loads(lines[1])
    bad["messages"][3]["role"] = "wizard"
    path = _write(tmp_path, "export.jsonl", lines[0] + json.dumps(bad).encode() + b"\n" + lines[2])
    report = import_path(path, owner=alice)
    problem = _only_problem(report)
    assert problem.line == 2
    assert "unknown role 'wizard'" in problem.problem
    assert problem.session == "20260511_193215_1c9e0d"
    assert not Session.objects.filter(extra__source_id="20260511_193215_1c9e0d").exists()
    assert Session.objects.count() == 2


def test_invalid_utf8_names_the_line(alice, tmp_path):
    lines = _hermes_lines()
    path = _write(
        tmp_path, "export.jsonl", lines[0] + b'{"id": "x", "messages": [], "title": "caf\xe9"}\n'
    )
    report = import_path(path, owner=alice)
    problem = _only_problem(report)
    assert problem.line == 2
    assert "not valid UTF-8" in problem.problem
    assert len(report.sessions) == 1


def test_session_object_without_messages(alice, tmp_path):
    path = _write(tmp_path, "export.jsonl", _hermes_lines()[0] + b'{"id": "lonely"}\n')
    problem = _only_problem(import_path(path, owner=alice, fmt="hermes-jsonl"))
    assert problem.line == 2
    assert "no 'messages' list" in problem.problem


def test_a_failure_while_storing_rolls_the_session_back(alice, tmp_path):
    lines = _hermes_lines()
    bad = json.loads(lines[2])
    bad["messages"][2]["tool_calls"] = "not json"  # a string that is not a list
    path = _write(tmp_path, "export.jsonl", json.dumps(bad).encode() + b"\n")
    problem = _only_problem(import_path(path, owner=alice))
    assert "tool_calls" in problem.problem
    assert not Session.objects.exists()
    assert not Message.objects.exists()


def test_wrong_kind_of_file(alice, tmp_path):
    path = _write(tmp_path, "photo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    problem = _only_problem(import_path(path, owner=alice))
    assert problem.file == "photo.png"
    assert "not a recognized format" in problem.problem
    assert not Session.objects.exists()


def test_empty_file(alice, tmp_path):
    problem = _only_problem(import_path(_write(tmp_path, "empty.jsonl", b""), owner=alice))
    assert "empty" in problem.problem


def test_json_of_the_wrong_shape(alice, tmp_path):
    path = _write(tmp_path, "conf.json", b'{"name": "not a conversation"}')
    problem = _only_problem(import_path(path, owner=alice))
    assert "not a recognized format" in problem.problem


def test_broken_openai_json_names_the_line(alice, tmp_path):
    path = _write(
        tmp_path,
        "chat.json",
        b'[\n {"role": "user", "content": "hi"},\n {"role": "assistant" "content": "x"}\n]',
    )
    problem = _only_problem(import_path(path, owner=alice))
    assert problem.line == 3
    assert "broken JSON" in problem.problem


def test_openai_unknown_role_stores_nothing(alice, tmp_path):
    path = _write(
        tmp_path,
        "chat.json",
        json.dumps(
            [{"role": "user", "content": "hi"}, {"role": "robot", "content": "beep"}]
        ).encode(),
    )
    problem = _only_problem(import_path(path, owner=alice))
    assert "message 2" in problem.problem
    assert "unknown role 'robot'" in problem.problem
    assert not Session.objects.exists()


def test_oversized_file_is_refused_before_reading(alice, tmp_path, settings):
    settings.HERMES_MAX_UPLOAD_BYTES = 1000
    problem = _only_problem(import_path(FIXTURES / "hermes_export.jsonl", owner=alice))
    assert "limit is" in problem.problem
    assert not Session.objects.exists()


def test_oversized_line_is_refused_without_buffering_it(alice, tmp_path, monkeypatch):
    from hermes_web.importers import base

    monkeypatch.setattr(base, "MAX_LINE_BYTES", 5000)
    lines = _hermes_lines()  # the first session line is ~7 kB, the third ~4 kB
    path = _write(tmp_path, "export.jsonl", lines[0] + lines[2])
    report = import_path(path, owner=alice, fmt="hermes-jsonl")
    problem = _only_problem(report)
    assert problem.line == 1
    assert "line longer than" in problem.problem
    assert [s.extra["source_id"] for s in report.sessions] == ["api-de1f3305a7c44380"]


def test_claude_code_broken_line_is_left_out_and_named(alice, tmp_path):
    """Issue #36: one damaged line no longer refuses the transcript; it is named instead."""
    lines = (FIXTURES / "claude_code_session.jsonl").read_bytes().splitlines(keepends=True)
    lines[4] = lines[4][:40] + b"\n"
    report = import_path(
        _write(tmp_path, "t.jsonl", b"".join(lines)), owner=alice, fmt="claude-code"
    )
    assert not report.errors
    (session,) = report.sessions
    assert session.fidelity["unreadable_lines"] == [5]
    assert "last_line_incomplete" not in session.fidelity


def test_codex_unknown_role(alice, tmp_path):
    lines = (FIXTURES / "codex_rollout.jsonl").read_text().splitlines()
    record = json.loads(lines[2])
    record["payload"]["role"] = "narrator"
    lines[2] = json.dumps(record)
    problem = _only_problem(
        import_path(_write(tmp_path, "r.jsonl", "\n".join(lines).encode()), owner=alice)
    )
    assert (problem.line, problem.problem) == (3, "unknown role 'narrator'")
    assert not Session.objects.exists()


def test_a_jsonl_file_given_as_the_wrong_format(alice):
    problem = _only_problem(
        import_path(FIXTURES / "codex_rollout.jsonl", owner=alice, fmt="claude-code")
    )
    assert "not a Claude Code transcript" in problem.problem


def test_another_sqlite_schema_is_refused(alice, tmp_path):
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT)")
    db.commit()
    db.close()
    problem = _only_problem(import_path(path, owner=alice))
    assert "not a Hermes state.db" in problem.problem
    assert problem.file == "other.db"


def test_a_corrupt_sqlite_file_is_refused(alice, tmp_path):
    path = _write(tmp_path, "state.db", b"SQLite format 3\x00" + b"\xff" * 2000)
    problem = _only_problem(import_path(path, owner=alice))
    assert "SQLite" in problem.problem or "Hermes" in problem.problem


def test_unknown_format_name(alice):
    problem = _only_problem(import_path(FIXTURES / "openai_list.json", owner=alice, fmt="yaml"))
    assert "unknown format 'yaml'" in problem.problem
