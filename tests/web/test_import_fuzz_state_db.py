"""The import fuzz (test_import_fuzz.py) on a Hermes ``state.db``: a real-shaped database of our
own, mutated by SQL the way a hostile or broken file would be (self-parents, parent cycles,
huge counts, a view in place of a table under a case variant of its name, values of the wrong
type, text that is not UTF-8, one row copied many times). Every case ends with a complete
import or plain refusals, nothing of a refused session stored, the stored bytes within the
amplification limit (issue #39)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.web.hermes_state_db import build_state_db
from tests.web.test_import_fuzz import FUZZ, _check, fuzz_limits  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db
EXPORT = Path(__file__).resolve().parent.parent / "fixtures" / "hermes_export.jsonl"

MESSAGE_COLUMNS = ["role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp",
                   "token_count", "reasoning", "_compressed_summary", "active"]  # fmt: skip
SESSION_COLUMNS = ["source", "model", "model_config", "parent_session_id", "started_at",
                   "ended_at", "message_count", "title"]  # fmt: skip
# Values of every SQLite type, and of none Hermes writes there.
VALUES = st.sampled_from([
    None, 0, -1, 2**63 - 1, 1e308, float("nan"), "", "x" * 70_000, "[1, 2", '{"a": [}',
    '"just a string"', "[]", '[{"id": 5}]', '{"role": "user"}', b"\xff\xfe\x00blob",
    "\ud800".encode("utf-8", "surrogatepass"),
])  # fmt: skip


def _session_ids(db: sqlite3.Connection) -> list[str]:
    return [row[0] for row in db.execute("SELECT id FROM sessions ORDER BY rowid")]


def _mutate(db: sqlite3.Connection, data) -> None:
    """One to three mutations of ``db``, chosen by hypothesis; one SQLite itself refuses (a
    NOT NULL column, a table already replaced by a view) leaves the file as it was."""
    ids = _session_ids(db)
    for _ in range(data.draw(st.integers(1, 3))):
        try:
            _mutate_once(db, data, ids)
        except sqlite3.Error:
            continue


def _mutate_once(db: sqlite3.Connection, data, ids: list[str]) -> None:
    what = data.draw(st.sampled_from([
        "self-parent", "cycle", "message-value", "session-value", "copies", "view",
        "not-utf8", "count",
    ]))  # fmt: skip
    one, other = data.draw(st.sampled_from(ids)), data.draw(st.sampled_from(ids))
    if what == "self-parent":
        db.execute("UPDATE sessions SET parent_session_id = id WHERE id = ?", (one,))
    elif what == "cycle":
        db.execute("UPDATE sessions SET parent_session_id = ? WHERE id = ?", (other, one))
        db.execute("UPDATE sessions SET parent_session_id = ? WHERE id = ?", (one, other))
    elif what == "message-value":
        column = data.draw(st.sampled_from(MESSAGE_COLUMNS))
        rowid = data.draw(st.integers(1, 40))
        db.execute(f"UPDATE messages SET {column} = ? WHERE id = ?", (data.draw(VALUES), rowid))
    elif what == "session-value":
        column = data.draw(st.sampled_from(SESSION_COLUMNS))
        db.execute(f"UPDATE sessions SET {column} = ? WHERE id = ?", (data.draw(VALUES), one))
    elif what == "copies":  # one row many times
        times = data.draw(st.sampled_from([10, 500]))
        for _ in range(times):
            db.execute(
                "INSERT INTO messages (session_id, role, content, timestamp, active) "
                "SELECT session_id, role, content, timestamp, active FROM messages "
                "WHERE id = (SELECT MIN(id) FROM messages)"
            )
    elif what == "view":  # the table replaced by a view, named in another case
        name = data.draw(st.sampled_from(["Messages", "MESSAGES", "messages"]))
        db.execute("ALTER TABLE messages RENAME TO messages_real")
        db.execute(f"CREATE VIEW {name} AS SELECT * FROM messages_real, messages_real AS b")
    elif what == "not-utf8":
        db.execute(
            "UPDATE messages SET content = CAST(x'c3284142ff' AS TEXT) WHERE id = ?",
            (data.draw(st.integers(1, 40)),),
        )
    else:
        db.execute("UPDATE sessions SET message_count = ? WHERE id = ?", (2**62, one))


@FUZZ
@given(data=st.data())
def test_every_mutation_of_a_state_db_ends_clean(alice, tmp_path, fuzz_limits, data):  # noqa: F811
    path = tmp_path / "state.db"
    path.unlink(missing_ok=True)
    build_state_db(path, EXPORT)
    db = sqlite3.connect(path)
    try:
        _mutate(db, data)
        db.commit()
    finally:
        db.close()
    _check(path, alice, "auto")
