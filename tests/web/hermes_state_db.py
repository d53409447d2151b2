"""Build a Hermes ``state.db`` with the real schema (v30 columns, reference §13.1)."""

import json
import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE system_prompts (hash TEXT PRIMARY KEY, prompt TEXT NOT NULL);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, created_source TEXT, user_id TEXT, session_key TEXT,
    chat_id TEXT, chat_type TEXT, thread_id TEXT, display_name TEXT, origin_json TEXT,
    expiry_finalized INTEGER DEFAULT 0, model TEXT, model_config TEXT, system_prompt TEXT,
    system_prompt_hash TEXT REFERENCES system_prompts(hash), parent_session_id TEXT REFERENCES sessions(id),
    started_at REAL NOT NULL, ended_at REAL, end_reason TEXT, message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0, input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0, cache_write_tokens INTEGER DEFAULT 0, reasoning_tokens INTEGER DEFAULT 0,
    api_call_count INTEGER DEFAULT 0, billing_provider TEXT, billing_base_url TEXT, billing_mode TEXT,
    estimated_cost_usd REAL, actual_cost_usd REAL, cost_status TEXT, cost_source TEXT, pricing_version TEXT,
    cwd TEXT, git_branch TEXT, git_repo_root TEXT, git_metadata_generation INTEGER, title TEXT, title_source TEXT,
    last_activity_at REAL, last_activity_description TEXT, last_activity_provenance TEXT,
    archived INTEGER DEFAULT 0, pinned INTEGER DEFAULT 0, hidden INTEGER DEFAULT 0, last_read_at REAL,
    tool_names TEXT, profile_name TEXT, transport_profile TEXT, rewind_count INTEGER DEFAULT 0,
    handoff_state TEXT, handoff_platform TEXT, handoff_error TEXT,
    compression_failure_cooldown_until REAL, compression_failure_error TEXT,
    compression_fallback_streak INTEGER DEFAULT 0, compression_ineffective_count INTEGER DEFAULT 0,
    compression_recovery_deadline REAL, compression_overload_streak INTEGER DEFAULT 0
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    effect_disposition TEXT, timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT,
    reasoning TEXT, reasoning_content TEXT, reasoning_details TEXT, codex_reasoning_items TEXT,
    codex_message_items TEXT, platform_message_id TEXT, observed INTEGER DEFAULT 0,
    _compressed_summary INTEGER NOT NULL DEFAULT 0, active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0, api_content TEXT, display_kind TEXT, display_metadata TEXT,
    display_identity BLOB, display_order INTEGER
);
CREATE INDEX idx_messages_session ON messages(session_id, id);
CREATE TABLE compression_locks (session_id TEXT PRIMARY KEY, holder TEXT, acquired_at REAL, expires_at REAL);
INSERT INTO schema_version VALUES (30);
"""

SESSION_COLUMNS = (
    "id",
    "source",
    "model",
    "model_config",
    "system_prompt",
    "parent_session_id",
    "started_at",
    "ended_at",
    "end_reason",
    "message_count",
    "title",
    "cwd",
)
MESSAGE_COLUMNS = (
    "session_id",
    "role",
    "content",
    "tool_call_id",
    "tool_calls",
    "tool_name",
    "timestamp",
    "finish_reason",
    "reasoning",
    "_compressed_summary",
    "active",
    "compacted",
)


def build_state_db(path: Path, jsonl_path: Path) -> Path:
    """A state.db holding the sessions of a Hermes JSONL export, stored the way Hermes stores them."""
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    for line in jsonl_path.read_text().splitlines():
        session = json.loads(line)
        db.execute(
            f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)}) VALUES ({', '.join('?' * len(SESSION_COLUMNS))})",
            [session.get(c) for c in SESSION_COLUMNS],
        )
        for message in session["messages"]:
            row = dict(message)
            content = row["content"]
            if isinstance(content, list | dict):
                row["content"] = "\x00json:" + json.dumps(content)
            if row.get("tool_calls") is not None:
                row["tool_calls"] = json.dumps(row["tool_calls"])
            db.execute(
                f"INSERT INTO messages ({', '.join(MESSAGE_COLUMNS)}) VALUES ({', '.join('?' * len(MESSAGE_COLUMNS))})",
                [row.get(c) for c in MESSAGE_COLUMNS],
            )
    db.commit()
    db.close()
    return path


# Hermes keeps its full-text index with triggers like these (real state.db files have them).
FTS_TRIGGERS = """
CREATE VIRTUAL TABLE messages_fts USING fts5(content, tool_name, tool_calls);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
  INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
  VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
  DELETE FROM messages_fts WHERE rowid = old.id;
END;
"""


def add_session(
    db: sqlite3.Connection, session_id: str, parent: str | None, started: float, messages=()
):
    """One sessions row (and its message rows: (role, content[, extra columns dict]))."""
    db.execute(
        "INSERT INTO sessions (id, source, model, parent_session_id, started_at, end_reason) "
        "VALUES (?, 'cli', 'gpt-4o', ?, ?, ?)",
        (session_id, parent, started, "compression" if parent is None else None),
    )
    for number, (role, content, *more) in enumerate(messages):
        extra = more[0] if more else {}
        columns = {
            "session_id": session_id,
            "role": role,
            "content": content,
            "timestamp": started + number,
        }
        columns.update(extra)
        names = ", ".join(columns)
        db.execute(
            f"INSERT INTO messages ({names}) VALUES ({', '.join('?' * len(columns))})",
            list(columns.values()),
        )


def empty_state_db(
    path: Path, *, fts: bool = True, page_size: int | None = None
) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    if page_size:
        db.execute(f"PRAGMA page_size = {page_size}")
    db.executescript(SCHEMA + (FTS_TRIGGERS if fts else ""))
    return db


def damage_table_page(path: Path, table: str, leaf: int = 0) -> int:
    """Overwrite one leaf page of ``table``'s b-tree with garbage: a full scan of the table
    fails from there on, rows on the other leaves stay readable through an index.
    The table must span several leaves (its root an interior page). Returns the page number."""
    db = sqlite3.connect(path)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    db.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    header = start + (100 if root == 1 else 0)
    if data[header] != 0x05:
        raise ValueError(f"{table} fits on one page; give it more rows")
    cells = int.from_bytes(data[header + 3 : header + 5], "big")
    children = []
    for i in range(cells):
        pointer = int.from_bytes(data[header + 12 + 2 * i : header + 14 + 2 * i], "big")
        children.append(int.from_bytes(data[start + pointer : start + pointer + 4], "big"))
    children.append(int.from_bytes(data[header + 8 : header + 12], "big"))
    page = children[leaf]
    offset = (page - 1) * page_size
    data[offset : offset + page_size] = b"\xa5" * page_size
    path.write_bytes(bytes(data))
    return page
