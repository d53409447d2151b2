"""A Gemini CLI chat recording is read one message at a time (issue #25, make bench: a 100 MB
chat imports under 300 MB): the messages go to a spool, never a list of the whole file, and
metadata written after the messages list still names and titles the session."""

import json
import tracemalloc

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.formats import gemini_cli
from hermes_web.models import Compaction, Message
from tests.web.native_fixtures import gemini_tool_turn

pytestmark = pytest.mark.django_db

SID = "7d3e0b51-2c4a-4e9f-8a61-5b0c9d2e4f13"
OUTPUT = "".join(f"line {i}: total = round(sum(prices), 2)\n" for i in range(40))


def _turn(n: int) -> list[dict]:
    turn = gemini_tool_turn(n, OUTPUT)
    if n % 100 == 99:
        turn.append(
            {"id": f"i-{n}", "type": "info", "content": "Context compressed from 70% to 4%."}
        )
    return turn


def _recording(path, turns: int, meta_last: bool = False):
    meta = {"sessionId": SID, "startTime": "2026-03-02T10:00:00Z", "summary": "Rounding bug"}
    messages = [m for n in range(turns) for m in _turn(n)]
    document = {"messages": messages, **meta} if meta_last else {**meta, "messages": messages}
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_a_large_recording_is_read_without_holding_it(tmp_path):
    path = _recording(tmp_path / "session-big.json", 2500)
    size = path.stat().st_size
    assert size > 5_000_000
    tracemalloc.start()
    try:
        with open(path, "rb") as stream:
            (session,) = gemini_cli.parse(stream, path.name)  # the first pass: every message
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert session.stream is not None  # spooled, not a list
    assert not session.messages
    assert peak < 1_000_000, f"{peak:,} bytes held while reading a {size:,}-byte chat"
    messages = list(session.stream)
    assert len(messages) == 2500 * 3
    assert len(session.native_compactions) == 25


def test_metadata_after_the_messages_still_names_the_session(alice, tmp_path):
    path = _recording(tmp_path / "session-late.json", 150, meta_last=True)
    report = import_path(path, owner=alice, fmt="gemini-cli")
    assert report.ok, report.refused
    (session,) = report.sessions
    assert session.public_id == f"{SID}.{alice.pk}"
    assert session.title == "Rounding bug"
    rows = Message.objects.filter(session=session)
    assert rows.count() == 150 * 3
    # the compression at turn 100 archived the 100 turns before it, not the tail
    assert rows.filter(active=False).count() == 100 * 3
    assert Compaction.objects.filter(session=session).count() == 1
