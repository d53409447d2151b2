"""Damage survived, never hidden (issue #36 item 2): a torn last line or a corrupt line of a
JSONL file costs that line, named on the session's pages and in the API, never the session;
results written before their calls are paired with them; Copilot's one-call events are one
turn; a Copilot session folder's session.db is not read as a Hermes state.db."""

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_web.importers import import_directory, import_path
from hermes_web.importers.base import TORN_LINE, ImportProblem, pair_tool_results
from hermes_web.importers.formats import claude_code, codex
from hermes_web.models import Message, Session

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
DAMAGE = FIXTURES / "damage"
CLAUDE_SID = "5f0c2a4e-8b1d-4c3e-9a7f-2d6b1e0c9f31"
# Every JSONL format that reads its lines through base.json_lines, with a clean file of it.
CLEAN = {
    "claude-code": FIXTURES / "claude_code_session.jsonl",
    "codex": FIXTURES / "codex_rollout.jsonl",
    "hermes-jsonl": FIXTURES / "hermes_sessions/20260404_110946_8657dc.jsonl",
    "pi": next((FIXTURES / "agents/pi").glob("*.jsonl")),
    "copilot-cli": FIXTURES
    / "agents/copilot_cli/3c9d2f14-8e6a-4b7c-a1d5-0f2e4c6b8a90/events.jsonl",
    "gemini-cli": FIXTURES / "agents/gemini_cli/session-2026-03-05T08-00-9a2d4c61.jsonl",
}


def _rows(session: Session) -> list[Message]:
    return list(Message.objects.filter(session=session).order_by("position"))


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# --- the two shapes of the issue ------------------------------------------------------------


@pytest.mark.django_db
def test_a_codex_rollout_cut_mid_record_imports_what_came_before(alice, alice_client):
    report = import_path(DAMAGE / "codex_torn_last_line.jsonl", owner=alice)
    assert not report.errors, [str(e) for e in report.errors]
    (session,) = report.sessions
    assert session.fidelity["last_line_incomplete"] == 12
    assert "unreadable_lines" not in session.fidelity
    assert session.fidelity["records"] == 11  # the 11 whole lines
    whole = import_path(FIXTURES / "codex_rollout.jsonl", owner=alice, skip_existing=True)
    assert whole.skipped  # the same session id: the cut copy is that session

    page = alice_client.get(f"/conversations/{session.public_id}/")
    assert page.status_code == 200
    assert f"line 12: {TORN_LINE}" in page.content.decode()
    api = alice_client.get(f"/api/sessions/{session.public_id}").json()
    assert api["import_report"]["last_line_incomplete"] == 12


@pytest.mark.django_db
def test_a_claude_code_file_with_a_corrupt_line_keeps_every_other_record(alice, alice_client):
    report = import_path(DAMAGE / "claude_code_corrupt_line.jsonl", owner=alice)
    assert not report.errors, [str(e) for e in report.errors]
    (session,) = report.sessions
    assert session.fidelity["unreadable_lines"] == [1]
    assert session.fidelity["unreadable_count"] == 1
    assert "broken JSON" in session.fidelity["unreadable"][0]
    assert "last_line_incomplete" not in session.fidelity
    # The clean transcript stores the same rows: only the summary line (a title) was lost.
    clean = import_path(CLEAN["claude-code"], owner=_other_user(), fmt="claude-code")
    (whole,) = clean.sessions
    assert [(m.role, m.content, m.tool_call_id) for m in _rows(session)] == [
        (m.role, m.content, m.tool_call_id) for m in _rows(whole)
    ]
    page = alice_client.get(f"/conversations/{session.public_id}/").content.decode()
    assert "1 line could not be read and was left out: line 1" in page
    api = alice_client.get(f"/api/sessions/{session.public_id}").json()
    assert api["import_report"]["unreadable_lines"] == [1]


def _other_user():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("bob-damage", password="bob-pass-1234")


@pytest.mark.django_db
def test_the_import_page_names_the_damage(alice_client):
    data = (DAMAGE / "codex_torn_last_line.jsonl").read_bytes()
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = alice_client.post(
        "/import/", {"file": SimpleUploadedFile("rollout.jsonl", data)}, follow=True
    )
    assert f"line 12: {TORN_LINE}" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", sorted(CLEAN))
def test_every_jsonl_format_survives_a_torn_last_line(fmt, alice, tmp_path):
    lines = CLEAN[fmt].read_bytes().rstrip(b"\n").split(b"\n")
    cut = b"\n".join(lines[:-1]) + b"\n" + lines[-1][: len(lines[-1]) // 2]
    path = _write(tmp_path / fmt, CLEAN[fmt].name, cut)
    report = import_path(path, owner=alice, fmt=fmt)
    assert not report.errors, [str(e) for e in report.errors]
    assert report.sessions[0].fidelity["last_line_incomplete"] == len(lines)


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", sorted(CLEAN))
def test_every_jsonl_format_survives_a_corrupt_middle_line(fmt, alice, tmp_path):
    lines = CLEAN[fmt].read_bytes().rstrip(b"\n").split(b"\n")
    middle = len(lines) // 2
    # Two writers at once: half a record, then the next one on the same line.
    lines[middle] = lines[middle][: len(lines[middle]) // 2] + b"\xff" + lines[middle]
    path = _write(tmp_path / fmt, CLEAN[fmt].name, b"\n".join(lines) + b"\n")
    report = import_path(path, owner=alice, fmt=fmt)
    assert not report.errors, [str(e) for e in report.errors]
    assert report.sessions[0].fidelity["unreadable_lines"] == [middle + 1]


@pytest.mark.django_db
def test_a_file_with_nothing_readable_is_refused(alice, tmp_path):
    path = _write(tmp_path, f"{CLAUDE_SID}.jsonl", b'{"type": "user", "mess\n{"type": "assi')
    report = import_path(path, owner=alice, fmt="claude-code")
    (problem,) = report.errors
    assert problem.line == 1
    assert "no line of the file could be read" in problem.problem
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_a_file_of_one_torn_line_is_refused_and_says_why(alice, tmp_path):
    path = _write(tmp_path, "r.jsonl", b'{"timestamp": "2025-09-03", "type": "session_me')
    (problem,) = import_path(path, owner=alice, fmt="codex").errors
    assert TORN_LINE in problem.problem
    assert not Session.objects.exists()


# --- results before their calls ------------------------------------------------------------


@pytest.mark.django_db
def test_claude_code_results_written_before_their_tool_use_are_paired(alice):
    report = import_path(DAMAGE / "claude_code_results_before_calls.jsonl", owner=alice)
    (session,) = report.sessions
    fidelity = session.fidelity
    assert (fidelity["tool_calls"], fidelity["tool_results_paired"]) == (4, 4)
    assert fidelity["stub_results"] == 0
    assert fidelity["meta_rows"] == 0
    assert fidelity["tool_results_before_their_call"] == 4
    rows = [r for r in _rows(session) if r.active]
    assert [r.role for r in rows] == ["user", "assistant", *["tool"] * 4, "assistant"]
    assert [c["id"] for c in rows[1].tool_calls] == [r.tool_call_id for r in rows[2:6]]
    assert rows[3].content == "config 2: port = 8001"
    assert rows[3].tool_name == "Read"


def test_pairing_takes_a_result_written_before_its_call():
    from hermes_web.importers.base import ParsedMessage, ParsedSession

    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    parsed = ParsedSession(source="import:hermes")
    parsed.messages = [
        ParsedMessage(role="user", content="list it"),
        ParsedMessage(role="tool", content="a.txt", tool_call_id="c1"),
        ParsedMessage(role="assistant", content=None, tool_calls=[call]),
        ParsedMessage(role="assistant", content="a.txt is there"),
    ]
    pair_tool_results(parsed)
    assert [(m.role, m.meta, m.content) for m in parsed.messages] == [
        ("user", "", "list it"),
        ("assistant", "", None),
        ("tool", "", "a.txt"),
        ("assistant", "", "a.txt is there"),
    ]
    assert not parsed.skipped


def test_a_result_whose_call_never_comes_is_still_kept_as_a_meta_row():
    from hermes_web.importers.base import ParsedMessage, ParsedSession

    parsed = ParsedSession(source="import:hermes")
    parsed.messages = [
        ParsedMessage(role="tool", content="orphan", tool_call_id="gone"),
        ParsedMessage(role="user", content="hello"),
    ]
    pair_tool_results(parsed)
    assert [(m.role, m.meta) for m in parsed.messages] == [
        ("tool", "tool_result_unknown"),
        ("user", ""),
    ]


# --- Copilot CLI ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_copilot_one_call_events_become_one_turn_with_its_real_results(alice):
    path = next((DAMAGE / "copilot_session_state").glob("*.jsonl"))
    report = import_path(path, owner=alice)
    assert not report.errors, [str(e) for e in report.errors]
    (session,) = report.sessions
    fidelity = session.fidelity
    assert (fidelity["tool_calls"], fidelity["tool_results_paired"]) == (6, 6)
    assert fidelity["stub_results"] == 0
    assert fidelity["meta_rows"] == 0
    rows = [r for r in _rows(session) if r.active]
    assert [r.role for r in rows] == ["user", "assistant", *["tool"] * 6, "assistant"]
    assert rows[1].content == "Checking all six services."
    assert [r.content for r in rows[2:8]] == [f"svc{i}: ok" for i in range(1, 7)]


@pytest.mark.django_db
def test_copilot_sequential_calls_stay_separate_turns(alice, tmp_path):
    events = [
        {"type": "session.start", "data": {"sessionId": "seq-1", "selectedModel": "gpt-5"}},
        {"type": "user.message", "data": {"content": "two steps"}},
        {
            "type": "assistant.message",
            "data": {"content": "", "toolRequests": [{"toolCallId": "a", "name": "bash"}]},
        },
        {"type": "tool.execution_complete", "data": {"toolCallId": "a", "result": "one"}},
        {
            "type": "assistant.message",
            "data": {"content": "", "toolRequests": [{"toolCallId": "b", "name": "bash"}]},
        },
        {"type": "tool.execution_complete", "data": {"toolCallId": "b", "result": "two"}},
    ]
    path = _write(tmp_path, "seq-1.jsonl", "\n".join(map(json.dumps, events)).encode())
    (session,) = import_path(path, owner=alice, fmt="copilot-cli").sessions
    rows = [r for r in _rows(session) if r.active]
    assert [r.role for r in rows] == ["user", "assistant", "tool", "assistant", "tool"]


@pytest.mark.django_db
def test_a_copilot_folder_with_session_db_imports_its_events(alice):
    reports, skipped = import_directory(DAMAGE / "copilot_folder", owner=alice)
    assert [str(e) for r in reports for e in r.errors] == []
    (report,) = reports  # the events.jsonl alone
    main = report.sessions[0]
    assert main.extra["source_id"] == "a3c7e915-2f64-4b0d-8e1a-7d9c5f3b2e60"
    assert main.extra["copilot_cli"]["copilotVersion"] == "1.0.60"
    assert any(p.name == "session.db" for p, _ in skipped)


# --- properties -----------------------------------------------------------------------------


def _parse(module, data: bytes, name: str):
    """The messages the importer builds from ``data`` (no database), and its session; or
    the problem it refused the file with."""
    import io

    try:
        (session,) = list(module.parse(io.BytesIO(data), name))
    except ImportProblem as problem:
        return problem, None
    messages = list(session.stream)
    shape = [(m.role, m.content, m.tool_calls, m.tool_call_id, m.meta, m.active) for m in messages]
    return shape, session


_FORMATS = {
    "claude-code": (claude_code, FIXTURES / "claude_code_session.jsonl"),
    "codex": (codex, FIXTURES / "codex_rollout.jsonl"),
}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(sorted(_FORMATS)), where=st.floats(0, 1))
def test_a_file_cut_at_any_byte_imports_every_whole_record_before_the_cut(fmt, where):
    module, clean = _FORMATS[fmt]
    data = clean.read_bytes()
    cut = int(where * len(data))
    head = data[:cut]
    whole = head[: head.rfind(b"\n") + 1]  # the complete lines before the cut
    torn = head[len(whole) :]
    try:  # cut just before a newline: the last record is whole
        json.loads(torn)
        whole, torn = head, b""
    except ValueError:
        pass
    got, session = _parse(module, head, clean.name)
    want, _ = _parse(module, whole, clean.name)
    if isinstance(want, ImportProblem):  # no whole record before the cut
        assert isinstance(got, ImportProblem)
        return
    assert got == want
    assert session.torn_line == (whole.count(b"\n") + 1 if torn.strip() else 0)
    assert not session.unreadable


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fmt=st.sampled_from(sorted(_FORMATS)),
    which=st.floats(0, 1, exclude_max=True),
    garbage=st.binary(min_size=1, max_size=20).filter(lambda b: b"\n" not in b),
    at=st.floats(0, 1),
)
def test_one_corrupted_line_keeps_every_other_record(fmt, which, garbage, at):
    module, clean = _FORMATS[fmt]
    lines = clean.read_bytes().splitlines(keepends=True)
    index = int(which * len(lines))
    line = lines[index].rstrip(b"\n")
    split = int(at * len(line))
    bad = line[:split] + b"\x00{" + garbage + line[split:]  # never valid JSON
    corrupted = b"".join(lines[:index]) + bad + b"\n" + b"".join(lines[index + 1 :])
    without = b"".join(lines[:index] + lines[index + 1 :])
    got, session = _parse(module, corrupted, clean.name)
    want, _ = _parse(module, without, clean.name)
    if isinstance(want, ImportProblem):
        assert isinstance(got, ImportProblem)
        return
    assert got == want
    if index == len(lines) - 1:  # the last line: taken for one still being written
        assert (session.unreadable, session.torn_line) == ([], index + 1)
    else:
        assert [line for line, _ in session.unreadable] == [index + 1]
