"""Claude Code and Codex imports are read in two passes through a spool file: memory bounded
by a batch, not the file; stored rows identical to the whole-session importer's; still all
or nothing per session with problems naming line and field."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import tracemalloc
from pathlib import Path

import pytest
from django.db import connection

from hermes_web.importers import count_tokens, import_path
from hermes_web.importers.base import ParsedMessage
from hermes_web.llm_models import context_length_for
from hermes_web.models import Message, Session
from tests.agent_logs import claude_code_lines, codex_lines
from tests.web.import_rows import stored_rows

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GOLDEN = FIXTURES / "jsonl_import_golden.json"
CLAUDE_SID = "5e55a1d0-0000-4000-8000-00000000abcd"
SMALL = 6000  # messages of the smaller file


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


def _peak(path: Path, owner, fmt: str) -> int:
    tracemalloc.start()
    try:
        report = import_path(path, owner=owner, fmt=fmt)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.ok, [str(e) for e in report.refused]
    return peak


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_import_memory_does_not_grow_with_the_file(fmt, django_user_model, tmp_path):
    if connection.vendor != "sqlite":
        # What the parser and spool hold does not depend on the database; the PostgreSQL
        # stage runs the same store through the other import tests (and 40 s is saved).
        pytest.skip("measured once, on the embedded (SQLite) setup")
    lines = claude_code_lines if fmt == "claude-code" else codex_lines
    # Warm the one-off caches: the tokenizer and litellm's model map (5 MB, read once).
    count_tokens([ParsedMessage(role="user", content="warm the tokenizer")], "")
    context_length_for("")
    peaks, sizes = [], []
    for run, n in enumerate((SMALL, SMALL, 4 * SMALL)):  # the first one warms Django's caches
        # Outputs of a few kB, as agent sessions have: the per-call ids the store keeps
        # (about 100 bytes a message) stay small next to a batch of messages.
        path = _write(
            tmp_path / f"{CLAUDE_SID}-{run}.jsonl", lines(n, sid=f"s-{run}", output=(2500, 5000))
        )
        owner = django_user_model.objects.create_user(f"m{run}", password="x-pass-1234")
        sizes.append(path.stat().st_size)
        peaks.append(_peak(path, owner, fmt))
    # Held whole, the parsed session grows with the file (about 1.2 kB a message); read
    # through the spool, a batch of messages and the ids of the tool calls seen so far.
    assert peaks[2] < 1.5 * peaks[1], (peaks, sizes)


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_a_bad_line_near_the_end_of_a_big_file_stores_nothing(fmt, alice, tmp_path):
    lines = list((claude_code_lines if fmt == "claude-code" else codex_lines)(6000))
    bad = next(i for i in range(len(lines) - 1, 0, -1) if "Fixed in turn" in lines[i])
    record = json.loads(lines[bad])
    if fmt == "claude-code":
        record["message"]["role"] = "robot"
        lines[bad] = json.dumps(record)
    else:  # (a line cut short is left out and named, not a refusal: issue #36)
        record["payload"]["type"] = 5
        lines[bad] = json.dumps(record)
    path = _write(tmp_path / f"{CLAUDE_SID}.jsonl", lines)
    report = import_path(path, owner=alice, fmt=fmt)
    (problem,) = report.errors
    assert problem.line == bad + 1
    expected = "unknown role 'robot'" if fmt == "claude-code" else "record has no item 'type'"
    assert expected in problem.problem
    assert not Session.objects.exists()
    assert not Message.objects.exists()


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_an_invalid_message_late_in_the_file_names_its_line_and_stores_nothing(
    fmt, alice, tmp_path
):
    """Found while storing (validation runs on the replayed messages): the line still named."""
    lines = list((claude_code_lines if fmt == "claude-code" else codex_lines)(6000))
    bad = next(i for i in range(len(lines) - 1, 0, -1) if "Fixed in turn" in lines[i])
    lines[bad] = lines[bad].replace("Fixed in turn", "Fixed \\ud800 in turn")
    path = _write(tmp_path / f"{CLAUDE_SID}.jsonl", lines)
    report = import_path(path, owner=alice, fmt=fmt)
    (problem,) = report.errors
    assert problem.line == bad + 1, str(problem)
    assert "content" in problem.problem, str(problem)
    assert "surrogate" in problem.problem.lower(), str(problem)
    assert not Session.objects.exists()
    assert not Message.objects.exists()


def _temp_files_open() -> int:
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed by now
            continue
        found += target.startswith(tempfile.gettempdir()) and target.endswith("(deleted)")
    return found


def test_the_spool_file_is_closed_after_the_import_and_after_a_failure(alice, tmp_path):
    good = _write(tmp_path / "rollout-good.jsonl", codex_lines(300))
    bad = _write(tmp_path / "rollout-bad.jsonl", [*codex_lines(300), "{broken"])
    before = _temp_files_open()
    assert import_path(good, owner=alice, fmt="codex").ok
    failed = import_path(bad, owner=alice, fmt="codex")  # its problem's traceback is kept
    assert not failed.ok
    again = import_path(good, owner=alice, fmt="codex")  # refused before the spool is read
    assert again.duplicates
    assert _temp_files_open() == before
