"""Which agent wrote a SQLite file, from its tables (never assumed to be Hermes's).

Only ``sqlite_master`` and the column lists of plain tables are read (through
``sqlite_file``), never a row. A file whose schema lives only in its ``-wal`` (an agent that
has not checkpointed yet) is looked at again through a private copy with its WAL applied.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hermes_web.importers import budget, sqlite_file
from hermes_web.importers.base import ImportProblem
from hermes_web.importers.formats.hermes import open_live

_SHOWN_TABLES = 12


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    rows = db.execute(f"PRAGMA table_info({sqlite_file.quoted(table)})")
    return {sqlite_file.fold(row[1]) for row in rows if isinstance(row[1], str)}


def open_agent_db(path: Path, file: str) -> sqlite3.Connection:
    """An agent's database opened for reading (its ``-wal`` applied on a private copy), its
    WAL counted as read for the import's amplification limit."""
    wal = Path(path).with_name(Path(path).name + "-wal")
    if wal.is_file():
        budget.note_read(wal)
    return open_live(Path(path), file)


def kind_of(db: sqlite3.Connection) -> tuple[str, list[str]]:
    """The format name of an open database ("" when no agent's) and its plain tables."""
    tables = sqlite_file.real_tables(db)
    names = {
        sqlite_file.fold(n)
        for (n,) in db.execute("SELECT name FROM sqlite_master")
        if isinstance(n, str)
    }
    shown = sorted(n for k, n in tables.items() if not k.startswith("sqlite_"))
    if {"session", "message", "part"} <= tables.keys():  # opencode 1.2 and later
        return "opencode", shown
    if {"sessions", "messages"} <= tables.keys() and (
        "parts" in _columns(db, tables["messages"])
        or "summary_message_id" in _columns(db, tables["sessions"])
    ):  # Crush: its messages hold a JSON list of parts
        return "crush", shown
    if {"sessions", "messages"} <= tables.keys() and "content_json" in _columns(
        db, tables["messages"]
    ):  # Goose: its messages hold the JSON list of a Message's contents
        return "goose-db", shown
    if "sessions" in names or "messages" in names:
        return "hermes-db", shown  # its reader says what a Hermes state.db lacks
    return "", shown


def sqlite_format(path: Path, file: str) -> str:
    """The format of the SQLite file at ``path``, or a refusal naming its tables."""
    db = sqlite_file.connect(path, file)
    try:
        kind, tables = kind_of(db)
    except sqlite3.DatabaseError as error:
        raise ImportProblem(file, 0, f"not a readable SQLite database: {error}") from None
    finally:
        db.close()
    wal = Path(path).with_name(Path(path).name + "-wal")
    if not kind and wal.is_file() and wal.stat().st_size > 0:
        live = open_live(Path(path), file)
        try:
            kind, tables = kind_of(live)
        except sqlite3.DatabaseError as error:
            raise ImportProblem(file, 0, f"not a readable SQLite database: {error}") from None
        finally:
            live.close()
    if kind:
        return kind
    if not tables:
        raise ImportProblem(file, 0, "a SQLite database of no agent we know: it has no tables")
    more = f" and {len(tables) - _SHOWN_TABLES} more" if len(tables) > _SHOWN_TABLES else ""
    raise ImportProblem(
        file,
        0,
        "a SQLite database of no agent we know: tables " + ", ".join(tables[:_SHOWN_TABLES]) + more,
    )
