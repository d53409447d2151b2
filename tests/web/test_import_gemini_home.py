"""A Gemini CLI home folder imported whole (issue #25, three real ``~/.gemini/tmp`` trees,
125 files): every project's ``logs.json`` repeats the prompts of the sessions whose chat
recordings sit beside it in ``chats/``, and a project where nothing was typed yet has a
``logs.json`` of ``[]``. Neither may fail the import: the prompt log of a session already
imported from its recording is skipped (its prompts are there whole), the empty log is
nothing to import, and a session only the log knows is still imported."""

import json
import shutil

import pytest

from hermes_web.importers import import_directory, import_path
from hermes_web.models import Message, Session
from tests.web.agent_import_helpers import AGENTS

pytestmark = pytest.mark.django_db
RECORDING = AGENTS / "gemini_cli" / "session-2026-03-02T10-14-5e1c7a20.json"
RECORDED_ID = "5e1c7a20-4b8e-4f0a-9d31-2c6f0e8a1b77"


def _entry(session_id: str, n: int, text: str) -> dict:
    return {
        "sessionId": session_id,
        "messageId": n,
        "type": "user",
        "message": text,
        "timestamp": f"2026-03-02T10:1{n}:00.000Z",
    }


def _home(tmp_path):
    tmp = tmp_path / ".gemini" / "tmp"
    project = tmp / "9f2c41d07be5a3c8e6d1f0a4b7c2e9d85a3f6b1c0e7d4a2f9b8c5e1d3a6f7b0c4"
    (project / "chats").mkdir(parents=True)
    shutil.copy(RECORDING, project / "chats" / RECORDING.name)
    log = [
        _entry(RECORDED_ID, 0, "Why does the invoice total round wrong?"),
        _entry(RECORDED_ID, 1, "switch it to Decimal"),
        _entry("0c7d2e91-5a4b-4f3e-8d6c-1b2a3f4e5d60", 0, "list the cron jobs"),
    ]
    (project / "logs.json").write_text(json.dumps(log, indent=2), encoding="utf-8")
    empty = tmp / "4e8a1c3b5d7f9e0a2c4b6d8f1a3e5c7b9d0f2a4c6e8b1d3f5a7c9e0b2d4f6a8c"
    empty.mkdir()
    (empty / "logs.json").write_text("[]", encoding="utf-8")
    return tmp, project, empty


def test_a_home_folder_imports_without_failures(alice, tmp_path):
    tmp, _, _ = _home(tmp_path)
    reports, passed_over = import_directory(tmp, owner=alice)
    assert passed_over == []
    assert [str(p) for r in reports for p in r.refused] == []
    ids = set(Session.objects.filter(owner=alice).values_list("extra__source_id", flat=True))
    assert ids == {RECORDED_ID, "0c7d2e91-5a4b-4f3e-8d6c-1b2a3f4e5d60"}
    skipped = [p for r in reports for p in r.skipped]
    assert len(skipped) == 1
    assert "fuller file" in str(skipped[0])
    recorded = Session.objects.get(owner=alice, extra__source_id=RECORDED_ID)
    assert recorded.extra["import_report"]["kind"] == "session"  # the recording, not the log
    assert Message.objects.filter(session=recorded, role="tool").exists()


def test_an_empty_logs_json_is_nothing_to_import_not_an_error(alice, tmp_path):
    _, _, empty = _home(tmp_path)
    report = import_path(empty / "logs.json", owner=alice)
    assert (report.format, report.refused, report.sessions) == ("gemini-cli", [], [])


def test_a_recording_stays_a_duplicate_the_log_does_not(alice, tmp_path):
    _, project, _ = _home(tmp_path)
    import_path(project / "chats" / RECORDING.name, owner=alice)
    again = import_path(project / "chats" / RECORDING.name, owner=alice)
    assert len(again.duplicates) == 1  # a whole session imported twice is still a failure
    log = import_path(project / "logs.json", owner=alice)
    assert (len(log.duplicates), len(log.skipped), len(log.sessions)) == (0, 1, 1)
