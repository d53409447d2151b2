"""A Hermes per-session transcript (``sessions/<id>.jsonl``) is read one line per message
while it is stored, in batches, and still all or nothing."""

import io
import json

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.formats.hermes import parse_jsonl
from hermes_web.models import Message, Session

pytestmark = pytest.mark.django_db
SID = "20260601_090000_abc123"


def _lines(turns: int) -> list[dict]:
    """A transcript as Hermes writes it: a session_meta row, then one message per line."""
    rows: list[dict] = [
        {"role": "session_meta", "model": "openai/gpt-4o", "platform": "cli", "tools": []}
    ]
    for turn in range(turns):
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "terminal", "arguments": '{"command": "pytest -q"}'},
        }
        rows += [
            {"role": "user", "content": f"turn {turn}: run the tests"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": "ok " * 40},
            {"role": "assistant", "content": f"Green in turn {turn}."},
        ]
    return rows


def _write(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


class _Reads(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.furthest = 0

    def readline(self, size=-1):
        line = super().readline(size)
        self.furthest = max(self.furthest, self.tell())
        return line


def test_the_transcript_is_read_as_its_messages_are_taken():
    data = "".join(json.dumps(r) + "\n" for r in _lines(2_000)).encode()
    stream = _Reads(data)
    (parsed,) = list(parse_jsonl(stream, f"{SID}.jsonl"))
    first = next(parsed.stream)
    assert (first.role, parsed.model, parsed.title) == (
        "user",
        "openai/gpt-4o",
        "turn 0: run the tests",
    )
    assert stream.furthest < len(data) // 100
    assert sum(1 for _ in parsed.stream) == 8_000 - 1
    assert stream.furthest == len(data)


def test_a_streamed_transcript_is_stored_in_order_with_its_metadata(alice, tmp_path):
    path = tmp_path / f"{SID}.jsonl"
    rows = _lines(1_500)  # 6,000 messages: several batches
    _write(path, rows)
    report = import_path(path, owner=alice)
    assert report.ok, [str(e) for e in report.refused]
    session = report.sessions[0]
    assert session.public_id == f"{SID}.{alice.pk}"
    assert session.extra["source_id"] == session.extra["hermes_id"] == SID
    assert (session.model, session.title) == ("openai/gpt-4o", "turn 0: run the tests")
    assert session.extra["hermes_source"] == "cli"
    assert session.fidelity["skipped"] == {"session_meta row (kept as session metadata)": 1}
    positions = list(
        Message.objects.filter(session=session).order_by("position").values_list("role", flat=True)
    )
    assert positions == [r["role"] for r in rows[1:]]
    assert session.fidelity["tool_calls"] == session.fidelity["tool_results_paired"] == 1_500

    again = import_path(path, owner=alice)
    assert [d.problem for d in again.duplicates] == [
        "already imported: a duplicate (use --skip-existing to skip it)"
    ]
    assert Session.objects.count() == 1


def test_a_bad_line_late_in_a_transcript_stores_nothing(alice, tmp_path):
    path = tmp_path / f"{SID}.jsonl"
    rows = _lines(1_500)
    rows[5_900] = {"role": "robot", "content": "beep"}
    _write(path, rows)
    report = import_path(path, owner=alice)
    assert len(report.errors) == 1
    assert "robot" in report.errors[0].problem
    assert report.errors[0].line == 5_901
    assert not Session.objects.exists()
    assert not Message.objects.exists()
