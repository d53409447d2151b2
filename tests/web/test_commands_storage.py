"""import_sessions, export_session and compact, run as management commands."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from hermes_web.models import Compaction, Session
from tests.web.compaction_helpers import conversation

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def run(*args):
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_import_prints_the_ids(alice):
    out, _ = run("import_sessions", str(FIXTURES / "hermes_export.jsonl"), "--user", "alice")
    assert f"imported 20260511_180601_82f04a.{alice.pk}  8 messages  CSV quoted newlines" in out
    assert out.count("imported ") == 3


def test_import_a_directory_with_mixed_formats(alice, tmp_path):
    for name in ("codex_rollout.jsonl", "claude_code_session.jsonl", "openai_list.json"):
        (tmp_path / name).write_bytes((FIXTURES / name).read_bytes())
    out, _ = run("import_sessions", str(tmp_path), "--user", "alice")
    assert out.count("imported ") == 3
    assert set(Session.objects.values_list("source", flat=True)) == {
        "import:codex",
        "import:claude-code",
        "import:openai",
    }


def test_import_failure_exits_nonzero_and_names_the_line(alice, tmp_path):
    lines = (FIXTURES / "hermes_export.jsonl").read_text().splitlines()
    bad = tmp_path / "export.jsonl"
    bad.write_text(lines[0] + "\n{not json\n")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 session"):
        call_command("import_sessions", str(bad), "--user", "alice", stdout=out, stderr=err)
    assert "imported 20260511_180601_82f04a" in out.getvalue()
    assert f"error: {bad}, line 2: broken JSON" in err.getvalue()


def test_import_unknown_user():
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        run("import_sessions", str(FIXTURES / "openai_list.json"), "--user", "nobody")


def test_export_openai_to_stdout(alice):
    run("import_sessions", str(FIXTURES / "openai_list.json"), "--user", "alice")
    session = Session.objects.get()
    out, _ = run("export_session", session.public_id, "--format", "openai")
    assert json.loads(out) == json.loads((FIXTURES / "openai_list.json").read_text())


def test_hermes_jsonl_round_trip(alice, bob, tmp_path):
    run("import_sessions", str(FIXTURES / "hermes_export.jsonl"), "--user", "alice")
    target = tmp_path / "out.jsonl"
    run(
        "export_session",
        f"api-de1f3305a7c44380.{alice.pk}",  # imported ids are namespaced per user
        "--format",
        "hermes-jsonl",
        "--output",
        str(target),
    )
    exported = json.loads(target.read_text())
    original = json.loads((FIXTURES / "hermes_export.jsonl").read_text().splitlines()[2])
    assert [
        (m["role"], m["content"], m["active"], m["compacted"]) for m in exported["messages"]
    ] == [(m["role"], m["content"], m["active"], m["compacted"]) for m in original["messages"]]
    # What we export, Hermes-compatible importers (ours included) read back.
    run("import_sessions", str(target), "--user", "bob")
    copy = Session.objects.get(owner=bob)
    assert copy.messages.filter(active=True).count() == 4


def test_compact_then_export_the_report(alice):
    session = conversation(alice, n_messages=120, context_length=16_000)
    out, _ = run(
        "compact",
        session.public_id,
        "--mode",
        "in-place",
        "--focus",
        "the tests",
        "--deterministic",
    )
    run_row = Compaction.objects.get()
    assert f"compaction {run_row.public_id}: committed" in out
    assert "tokens: " in out
    assert run_row.mode == "in_place"
    assert run_row.focus == "the tests"
    md, _ = run("export_session", session.public_id, "--format", "report-md")
    assert md.startswith("# Compaction report")
    assert "**Focus:** the tests" in md
    doc = json.loads(run("export_session", run_row.public_id, "--format", "report-json")[0])
    assert doc["compaction"]["status"] == "committed"
    assert doc["report"]["status"] == "compacted"


def test_compact_dry_run_changes_nothing(alice):
    session = conversation(alice, n_messages=120, context_length=16_000)
    out, _ = run("compact", session.public_id, "--dry-run")
    assert ": dry_run" in out
    session.refresh_from_db()
    assert session.end_reason == ""
    assert not session.messages.filter(archived=True).exists()


def test_compact_a_rotated_session_continues_at_its_tip(alice):
    session = conversation(alice, n_messages=120, context_length=16_000)
    first, _ = run("compact", session.public_id)
    assert "continues in session" in first
    run("compact", session.public_id)
    child = Session.objects.get(parent=session)
    assert Compaction.objects.order_by("queued_at").last().session == child


def test_export_unknown_id():
    with pytest.raises(CommandError, match="no session"):
        run("export_session", "nope")
