"""Claude Code and Codex imports are read in two passes through a spool file: memory bounded
by a batch, not the file; stored rows identical to the whole-session importer's; still all
or nothing per session with problems naming line and field."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from hermes_web.importers import import_path
from tests.agent_logs import claude_code_lines, codex_lines
from tests.web.import_rows import stored_rows

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GOLDEN = FIXTURES / "jsonl_import_golden.json"
CLAUDE_SID = "5e55a1d0-0000-4000-8000-00000000abcd"


def _write(path: Path, lines) -> Path:
    with path.open("w") as out:
        for line in lines:
            out.write(line + "\n")
    return path


def _golden_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, format): the committed fixtures and two generated mixed sessions."""
    main = FIXTURES / "claude_code" / "7c1e9a52-3b0d-4f8e-a6c4-91d2e5f0b7a3.jsonl"
    return {
        "claude_code_session": (FIXTURES / "claude_code_session.jsonl", "claude-code"),
        "claude_code_main": (main, "claude-code"),
        "claude_code_agent": (
            main.with_suffix("") / "subagents" / "agent-a5f19c2.jsonl",
            "claude-code",
        ),
        "codex_rollout": (FIXTURES / "codex_rollout.jsonl", "codex"),
        "codex_rollout_current": (FIXTURES / "codex_rollout_current.jsonl", "codex"),
        "claude_code_mixed": (
            _write(tmp_path / f"{CLAUDE_SID}.jsonl", claude_code_lines(700)),
            "claude-code",
        ),
        "codex_mixed": (_write(tmp_path / "rollout-mixed.jsonl", codex_lines(700)), "codex"),
    }


def _digest(row: list) -> str:
    text = json.dumps(row, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_stored_rows_are_those_of_the_whole_session_importer(django_user_model, tmp_path):
    """The golden file was written by the importer that held the whole session in memory
    (HERMES_WRITE_GOLDEN=1 on that code): archive marks, merged split responses, result
    pairing, stubs, late/unknown results, meta rows, titles and token counts all agree."""
    got = {}
    for number, (name, (path, fmt)) in enumerate(_golden_files(tmp_path).items()):
        owner = django_user_model.objects.create_user(f"golden{number}", password="x-pass-1234")
        report = import_path(path, owner=owner, fmt=fmt)
        assert report.ok, [str(e) for e in report.refused]
        (session,) = report.sessions
        got[name] = stored_rows(session)
    got = json.loads(json.dumps(got))
    for data in got.values():  # a digest per row keeps the golden file small
        data["messages"] = [_digest(row) for row in data["messages"]]
    if os.environ.get("HERMES_WRITE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(got, separators=(",", ":"), sort_keys=True))
    expected = json.loads(GOLDEN.read_text())
    assert sorted(got) == sorted(expected)
    for name in expected:
        want, have = expected[name], got[name]
        assert len(have["messages"]) == len(want["messages"]), name
        for index, (a, b) in enumerate(zip(have["messages"], want["messages"], strict=True)):
            assert a == b, (name, index)
        assert {k: v for k, v in have.items() if k != "messages"} == {
            k: v for k, v in want.items() if k != "messages"
        }, name
