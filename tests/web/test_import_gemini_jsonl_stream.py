"""The newer Gemini CLI log (``session-*.jsonl``) is read one line at a time (issue #25):
the first pass keeps only where each message is, the second reads the messages left into a
spool, so a long log never sits in memory whole. What the CLI would show is unchanged:
records replaced by id in place, ``$rewindTo`` dropping the rewound turns, a ``$set`` of
``messages`` (its compression) archiving what it dropped."""

import json
import tracemalloc

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.formats import gemini_cli
from hermes_web.models import Compaction, Message
from tests.web.native_fixtures import gemini_tool_turn

pytestmark = pytest.mark.django_db

SID = "2b9e7c41-0d3a-4f8e-b1c6-5a7d9e3f2c08"
OUTPUT = "".join(f"row {i}: balance = sum(entries)\n" for i in range(40))


def _turn(n: int) -> list[dict]:
    return gemini_tool_turn(n, OUTPUT, hour="2026-03-05T08")


def _log(path, turns: int):
    """A log as the CLI appends it: metadata, messages, a ``$set`` after each, a gemini
    message written twice (streamed, then final), one rewind and one compression."""
    lines = [{"sessionId": SID, "projectHash": "ab12", "startTime": "2026-03-05T08:00:00Z"}]
    for n in range(turns):
        user, reply = _turn(n)
        lines += [user, {**reply, "content": "Read"}, reply]
        lines.append({"$set": {"lastUpdated": user["timestamp"]}})
        if n == 10:  # the user rewound turn 10 and asked again
            lines += [{"$rewindTo": "u-10"}, user, reply]
        if n == turns // 2:  # the CLI's compression: a snapshot, then the last two turns
            snapshot = {
                "id": "snap",
                "type": "user",
                "content": "<state_snapshot>ledger</state_snapshot>",
            }
            kept = [snapshot, *_turn(n - 1), user, reply]
            lines.append({"$set": {"messages": kept}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_long_log_is_read_without_holding_it(tmp_path):
    path = _log(tmp_path / "session-2026-03-05T08-00-2b9e7c41.jsonl", 2000)
    size = path.stat().st_size
    assert size > 5_000_000
    tracemalloc.start()
    try:
        with open(path, "rb") as stream:
            (session,) = gemini_cli.parse(stream, path.name)
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert session.stream is not None  # spooled, not a list
    assert not session.messages
    assert peak < size // 4, f"{peak:,} bytes held while reading a {size:,}-byte log"
    messages = list(session.stream)
    (compaction,) = session.native_compactions  # the history rewrite, its snapshot the summary
    assert compaction.summary == "<state_snapshot>ledger</state_snapshot>"
    active = [m for m in messages if m.active and not m.meta]
    assert active[0].is_summary
    # the two turns the compression kept, then the 999 after it, each user + gemini + tool
    assert len(active) == 1 + 2 * 3 + 999 * 3


def test_the_log_imports_as_the_cli_shows_it(alice, tmp_path):
    path = _log(tmp_path / "session-2026-03-05T08-00-2b9e7c41.jsonl", 30)
    report = import_path(path, owner=alice, fmt="auto")
    assert report.ok, report.refused
    (session,) = report.sessions
    rows = list(Message.objects.filter(session=session).order_by("position"))
    texts = [r.content for r in rows if r.role == "user" and not r.is_summary]
    assert texts.count("Turn 10: why?") == 1  # the rewound ask is gone, the new one kept
    replies = [r.content for r in rows if r.role == "assistant"]
    assert "Read" not in replies  # the streamed draft was replaced by the final reply
    (compaction,) = Compaction.objects.filter(session=session)
    assert "ledger" in compaction.native_summary
    assert [r.content for r in rows if r.active and r.role == "user"][1] == "Turn 14: why?"
