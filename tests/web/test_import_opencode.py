"""opencode sessions (issue #36 item 1): its SQLite ``opencode.db`` identified by its tables
(before: refused as "not a Hermes state.db"), with its rows in the -wal read from a private
copy, steps and tool parts paired, reasoning kept, a ``compaction`` part and its summary
message as opencode's own compaction, a sub-agent session linked to its parent; the older
JSON storage folder; a SQLite file of no known agent refused naming its tables.

Fixtures are our own, built with the schema opencode 1.2–1.16 creates."""

import hashlib
import json
import os
import sqlite3

import pytest

from hermes_web.importers import detect_format, import_directory, import_path
from hermes_web.models import Compaction, Message, Session

pytestmark = pytest.mark.django_db

SCHEMA = """
CREATE TABLE `project` (`id` text PRIMARY KEY, `worktree` text NOT NULL, `time_created` integer NOT NULL);
CREATE TABLE `session` (`id` text PRIMARY KEY, `project_id` text NOT NULL, `parent_id` text,
  `slug` text NOT NULL, `directory` text NOT NULL, `title` text NOT NULL, `version` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL);
CREATE TABLE `message` (`id` text PRIMARY KEY, `session_id` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL);
CREATE TABLE `part` (`id` text PRIMARY KEY, `message_id` text NOT NULL, `session_id` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL);
CREATE TABLE `session_message` (`id` text PRIMARY KEY, `session_id` text NOT NULL,
  `type` text NOT NULL, `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `data` text NOT NULL, `seq` integer NOT NULL);
CREATE TABLE `event` (`id` text PRIMARY KEY, `aggregate_id` text NOT NULL, `seq` integer NOT NULL,
  `type` text NOT NULL, `data` text NOT NULL);
CREATE TABLE `credential` (`id` text PRIMARY KEY, `secret` text NOT NULL);
"""
T0 = 1_781_674_674_000  # epoch milliseconds, as opencode writes them


class Writer:
    """Rows of an opencode.db, ids increasing as opencode's are."""

    def __init__(self, db):
        self.db, self.n = db, 0

    def _id(self, prefix):
        self.n += 1
        return f"{prefix}_{self.n:06d}"

    def session(self, sid, title, parent=None):
        self.db.execute(
            "INSERT INTO session VALUES (?, 'prj', ?, 'slug', '/home/me/app', ?, '1.17.3', ?, ?)",
            (sid, parent, title, T0 + self.n, T0 + self.n),
        )

    def message(self, sid, data, parts):
        mid = self._id("msg")
        when = T0 + self.n * 1000
        data = {"time": {"created": when}, **data}
        self.db.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)", (mid, sid, when, when, json.dumps(data))
        )
        for part in parts:
            self.db.execute(
                "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                (self._id("prt"), mid, sid, when, when, json.dumps(part)),
            )
        return mid


def user(w, sid, text):
    return w.message(sid, {"role": "user", "agent": "build"}, [{"type": "text", "text": text}])


def assistant(w, sid, parts, **data):
    info = {"role": "assistant", "modelID": "kimi-k2.6", "providerID": "opencode", **data}
    return w.message(sid, info, parts)


def tool(call_id, name, args, output, status="completed"):
    state = {"status": status, "input": args, "output": output, "title": name}
    if status == "error":
        state = {"status": status, "input": args, "error": output}
    return {"type": "tool", "tool": name, "callID": call_id, "state": state}


STEP = {"type": "step-start"}
FINISH = {"type": "step-finish", "reason": "tool-calls", "tokens": {"input": 900, "output": 40}}


def build(path, *, wal=False):
    db = sqlite3.connect(path)
    if wal:  # before the schema: even the tables are only in the -wal
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")
    db.executescript(SCHEMA)
    db.execute("INSERT INTO credential VALUES ('c', 'never read')")
    w = Writer(db)
    w.session("ses_main", "Fix the build")
    user(w, "ses_main", "the build fails on main.py")
    assistant(
        w,
        "ses_main",
        [
            STEP,
            {"type": "reasoning", "text": "Read main.py first."},
            {"type": "text", "text": "Reading it."},
            tool("call_1", "read", {"filePath": "main.py"}, "print(1)"),
            tool("call_2", "bash", {"command": "make"}, "exit 2", status="error"),
            FINISH,
            STEP,
            {"type": "text", "text": "Fixed: main.py line 1."},
            {"type": "step-finish", "reason": "stop", "tokens": {"input": 950, "output": 12}},
        ],
    )
    # opencode's own compaction: a user message with a compaction part, then the summary
    w.message("ses_main", {"role": "user"}, [{"type": "compaction", "auto": True}])
    assistant(
        w,
        "ses_main",
        [STEP, {"type": "text", "text": "## Goal\nFix the build of main.py."}],
        summary=True,
        mode="compaction",
        tokens={"input": 41_000, "output": 310, "cache": {"read": 2_000, "write": 0}},
    )
    user(w, "ses_main", "now run the tests")
    assistant(w, "ses_main", [STEP, tool("call_3", "task", {"prompt": "run tests"}, "3 passed")])
    w.session("ses_child", "run tests (@general subagent)", parent="ses_main")
    user(w, "ses_child", "run tests")
    assistant(w, "ses_child", [STEP, {"type": "text", "text": "3 passed"}])
    db.commit()
    return db


def test_an_opencode_db_is_found_by_its_tables_and_imports(alice, tmp_path):
    """Before: refused as "not a Hermes state.db: it has no 'sessions' table"."""
    path = tmp_path / "opencode.db"
    build(path).close()
    assert detect_format(path, "opencode.db") == "opencode"
    report = import_path(path, owner=alice)
    assert report.refused == [], report.errors
    main = Session.objects.get(public_id=f"ses_main.{alice.pk}")
    assert main.source == Session.Source.IMPORT_OPENCODE
    assert main.title == "Fix the build"
    assert main.model == "kimi-k2.6"
    rows = list(Message.objects.filter(session=main).order_by("position"))
    first_step = next(r for r in rows if r.role == "assistant")
    assert first_step.content == "Reading it."
    assert first_step.reasoning == "Read main.py first."
    assert [c["id"] for c in first_step.tool_calls] == ["call_1", "call_2"]
    results = {r.tool_call_id: r for r in rows if r.role == "tool"}
    assert results["call_1"].content == "print(1)"
    assert results["call_2"].content == "exit 2"
    assert results["call_2"].extra.get("is_error") is True
    assert results["call_3"].content == "3 passed"
    assert any(r.role == "assistant" and r.content == "Fixed: main.py line 1." for r in rows)
    assert all("never read" not in json.dumps(m.content) for m in Message.objects.all())


def test_the_compaction_part_and_summary_message_are_opencodes_own_compaction(alice, tmp_path):
    path = tmp_path / "opencode.db"
    build(path).close()
    import_path(path, owner=alice)
    main = Session.objects.get(public_id=f"ses_main.{alice.pk}")
    compaction = Compaction.objects.get(session=main)
    assert compaction.source == "opencode"
    assert compaction.native_summary == "## Goal\nFix the build of main.py."
    assert compaction.tokens_before == 43_000  # input + cache read, as recorded
    assert compaction.tokens_after == 310
    assert compaction.trigger == "auto"
    archived = Message.objects.filter(session=main, archived=True)
    assert any(r.content == "the build fails on main.py" for r in archived)
    summary = Message.objects.get(session=main, is_summary=True)
    assert "Fix the build of main.py." in summary.content
    later = next(
        r for r in Message.objects.filter(session=main) if r.content == "now run the tests"
    )
    assert later.active
    assert later.position > summary.position


def test_a_sub_agent_session_is_linked_to_its_parent(alice, tmp_path):
    path = tmp_path / "opencode.db"
    build(path).close()
    import_path(path, owner=alice)
    main = Session.objects.get(public_id=f"ses_main.{alice.pk}")
    child = Session.objects.get(public_id=f"ses_child.{alice.pk}")
    assert child.parent_id == main.pk


def test_rows_only_in_the_wal_are_read_and_nothing_is_written_beside_it(alice, tmp_path):
    """opencode 1.4 kept every row in its -wal: opened immutable, the file had no tables."""
    work = tmp_path / "work"
    work.mkdir()
    db = build(work / "opencode.db", wal=True)
    live = tmp_path / "live"
    live.mkdir()
    for name in ("opencode.db", "opencode.db-wal", "opencode.db-shm"):
        (live / name).write_bytes((work / name).read_bytes())
    db.close()
    assert (live / "opencode.db-wal").stat().st_size > 0
    main_file = sqlite3.connect(f"{(live / 'opencode.db').as_uri()}?mode=ro&immutable=1", uri=True)
    assert main_file.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    main_file.close()
    before = {n: hashlib.sha256((live / n).read_bytes()).digest() for n in os.listdir(live)}
    report = import_path(live / "opencode.db", owner=alice)
    assert report.refused == [], report.errors
    assert Session.objects.filter(public_id=f"ses_main.{alice.pk}").exists()
    after = {n: hashlib.sha256((live / n).read_bytes()).digest() for n in os.listdir(live)}
    assert after == before


def _storage(tmp_path):
    storage = tmp_path / "storage"
    (storage / "session" / "prj").mkdir(parents=True)
    session = {"id": "ses_json", "title": "Old layout", "time": {"created": T0}}
    (storage / "session" / "prj" / "ses_json.json").write_text(json.dumps(session))
    messages = [
        ("msg_1", {"role": "user"}, [{"id": "prt_1", "type": "text", "text": "list files"}]),
        (
            "msg_2",
            {"role": "assistant", "modelID": "claude-sonnet-4"},
            [
                {"id": "prt_2", "type": "step-start"},
                {"id": "prt_3", **tool("call_9", "ls", {"path": "."}, "a.py\nb.py")},
                {"id": "prt_4", "type": "text", "text": "Two files."},
            ],
        ),
    ]
    for number, (mid, info, parts) in enumerate(messages):
        folder = storage / "message" / "ses_json"
        folder.mkdir(parents=True, exist_ok=True)
        data = {"id": mid, "sessionID": "ses_json", "time": {"created": T0 + number}, **info}
        (folder / f"{mid}.json").write_text(json.dumps(data))
        for part in parts:
            part_folder = storage / "part" / mid
            part_folder.mkdir(parents=True, exist_ok=True)
            (part_folder / f"{part['id']}.json").write_text(json.dumps(part))
    return storage


def test_the_json_storage_folder_imports(alice, tmp_path):
    storage = _storage(tmp_path)
    path = storage / "session" / "prj" / "ses_json.json"
    report = import_path(path, owner=alice)
    assert report.format == "opencode"
    assert report.refused == [], report.errors
    rows = list(
        Message.objects.filter(session__public_id=f"ses_json.{alice.pk}").order_by("position")
    )
    assert [r.role for r in rows] == ["user", "assistant", "tool"]
    assert rows[1].tool_calls[0]["function"]["name"] == "ls"
    assert rows[2].content == "a.py\nb.py"


def test_a_storage_folder_imports_its_sessions_passing_over_messages_and_parts(alice, tmp_path):
    storage = _storage(tmp_path)
    reports, skipped = import_directory(storage, owner=alice)
    assert [r.format for r in reports] == ["opencode"]
    assert reports[0].refused == [], reports[0].errors
    assert len(skipped) == 6  # its two messages and four parts, read with the session
    assert Session.objects.filter(public_id=f"ses_json.{alice.pk}").exists()


def test_a_sqlite_file_of_no_known_agent_is_refused_naming_its_tables(alice, tmp_path):
    path = tmp_path / "notes.db"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE notes (id INTEGER); CREATE TABLE tags (id INTEGER);")
    db.close()
    report = import_path(path, owner=alice)
    assert [e.problem for e in report.errors] == [
        "a SQLite database of no agent we know: tables notes, tags"
    ]
    assert not Session.objects.exists()


def test_a_view_in_place_of_an_opencode_table_is_refused_unread(alice, tmp_path):
    """Only plain tables are read: a view named ``part`` would run its SQL inside our read."""
    path = tmp_path / "opencode.db"
    db = build(path)
    db.executescript("DROP TABLE part; CREATE VIEW part AS SELECT * FROM message;")
    db.close()
    report = import_path(path, owner=alice, fmt="opencode")
    assert [e.problem for e in report.errors] == ["'part' is a view, not a table: refused"]
    assert not Session.objects.exists()
