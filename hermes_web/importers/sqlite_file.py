"""A SQLite file someone gave us, opened so that only its real tables are ever read.

Every importer that reads a SQLite file goes through here: the file is opened read-only
(``immutable`` when it is the user's own file, so no -wal or -shm ever appears beside it),
``query_only`` and ``trusted_schema`` off, and each name the reader will use is resolved
the way SQLite resolves it (ASCII case-insensitively) to a plain table. A view or a virtual
table under a read name is refused before any SELECT runs: its SQL or module code would run
inside our reads (a view named ``Messages`` made a 4 KB file store 742 MB; a recursive one
wrote gigabytes of temp). Triggers on a read table are refused too, except write triggers
(``AFTER``/``BEFORE INSERT/UPDATE/DELETE``), which real databases keep for their full-text
index and which cannot fire on a read-only connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hermes_web.importers.base import ImportProblem, ParsedSession

MAGIC = b"SQLite format 3\x00"


def is_sqlite(head: bytes) -> bool:
    """The first bytes of a file are a SQLite database header."""
    return head[: len(MAGIC)] == MAGIC


def fold(name: str) -> str:
    """A name as SQLite compares identifiers: ASCII letters case-insensitively, nothing else
    (SQLite does not fold non-ASCII letters, so neither does this)."""
    return name.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def connect(path: Path, file: str, *, writable_copy: bool = False, **kwargs) -> sqlite3.Connection:
    """Open ``path`` read-only and immutable (``writable_copy``: a private copy of ours, opened
    normally so SQLite applies its -wal there), with ``query_only`` and ``trusted_schema`` off.
    ``kwargs`` go to ``sqlite3.connect`` (e.g. a ``factory``)."""
    mode = "rw" if writable_copy else "ro&immutable=1"
    try:
        db = sqlite3.connect(
            f"{Path(path).resolve().as_uri()}?mode={mode}",
            uri=True,
            check_same_thread=False,
            **kwargs,
        )
    except sqlite3.DatabaseError as error:
        raise ImportProblem(file, 0, f"not a readable SQLite database: {error}") from None
    try:
        db.execute("PRAGMA query_only = ON")
        db.execute("PRAGMA trusted_schema = OFF")
    except sqlite3.DatabaseError as error:
        db.close()
        raise ImportProblem(file, 0, f"not a readable SQLite database: {error}") from None
    return db


def real_tables(db: sqlite3.Connection) -> dict[str, str]:
    """The plain tables of the database (not views, not virtual tables), folded name → the
    name as stored. Reads only ``sqlite_master``."""
    tables = {}
    for name, sql in db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"):
        if isinstance(name, str) and not _virtual(sql):
            tables[fold(name)] = name
    return tables


def require_tables(db: sqlite3.Connection, file: str, names: tuple[str, ...]) -> dict[str, str]:
    """Resolve each of ``names`` as SQLite would and refuse the file unless every one is a
    plain table with no read-time trigger; the stored name of each (folded name → name).

    A missing table is not refused here (the reader says what it expected); a view, a
    virtual table or a trigger that could run on a read is, naming it."""
    wanted = {fold(n) for n in names}
    found: dict[str, str] = {}
    rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    for kind, name, table, sql in rows:
        name_key = fold(name) if isinstance(name, str) else ""
        table_key = fold(table) if isinstance(table, str) else ""
        if name_key in wanted and kind != "table" and kind != "index" and kind != "trigger":
            raise ImportProblem(file, 0, f"'{name}' is a {kind}, not a table: refused")
        if name_key in wanted and kind == "table":
            if _virtual(sql):
                raise ImportProblem(file, 0, f"'{name}' is a virtual table, not a table: refused")
            found[name_key] = name
        if kind == "trigger" and table_key in wanted and not _write_trigger(sql or ""):
            raise ImportProblem(file, 0, f"table '{table}' has a trigger ('{name}'): refused")
    return found


def _virtual(sql: object) -> bool:
    return isinstance(sql, str) and " ".join(sql.split()).upper().startswith("CREATE VIRTUAL")


def _write_trigger(sql: str) -> bool:
    words = " ".join(sql.upper().split())
    return any(
        f" {when} {op} ON " in words
        for when in ("AFTER", "BEFORE")
        for op in ("INSERT", "UPDATE", "DELETE")
    )


def quoted(name: str) -> str:
    """An identifier quoted for SQL (a table or column name read from the file)."""
    return '"' + name.replace('"', '""') + '"'


def columns(db: sqlite3.Connection, table: str, wanted: tuple[str, ...]) -> list[str]:
    """Those of ``wanted`` that ``table`` has, in ``wanted``'s order (an older version of the
    agent may lack some)."""
    have = {row[1] for row in db.execute(f"PRAGMA table_info({quoted(table)})")}
    return [c for c in wanted if c in have]


def agent_tables(
    db: sqlite3.Connection, file: str, agent: str, tables: dict[str, tuple[tuple, tuple]]
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """An agent database's tables checked as ``require_tables`` does, each present, with its
    columns among those wanted and the required ones there: ``tables`` maps a table to
    (wanted columns, required columns). Returns the stored names and each table's columns;
    refuses the file as "not a <agent> database" naming what is missing."""
    names = require_tables(db, file, tuple(tables))
    for table in tables:
        if table not in names:
            raise ImportProblem(file, 0, f"not a {agent} database: it has no '{table}' table")
    found = {}
    for table, (wanted, needed) in tables.items():
        found[table] = columns(db, names[table], wanted)
        if missing := [c for c in needed if c not in found[table]]:
            raise ImportProblem(
                file, 0, f"not a {agent} database: table '{table}' lacks {', '.join(missing)}"
            )
    return names, found


def rows(
    db: sqlite3.Connection, table: str, names: list[str], tail: str = "", parameters: tuple = ()
) -> list[dict[str, Any]]:
    """``SELECT names FROM table`` then ``tail`` (a WHERE or ORDER BY of ours), one dict a
    row; the table and column names, read from the file, are quoted."""
    sql = f"SELECT {', '.join(map(quoted, names))} FROM {quoted(table)}{tail}"  # noqa: S608
    return [dict(zip(names, row, strict=True)) for row in db.execute(sql, parameters)]


# What an agent's reader gives ``each_session``: its session rows (each with an ``id``), in
# the order to import them, and how one of them is read, ``read(row, number)``.
Sessions = tuple[list[dict[str, Any]], Callable[[dict[str, Any], int], ParsedSession]]


def each_session(
    db: sqlite3.Connection, file: str, sessions: Callable[[sqlite3.Connection, str], Sessions]
) -> Iterator[ParsedSession | ImportProblem]:
    """Every session of an agent's database, read one at a time; ``db`` closed at the end.

    ``sessions(db, file)`` checks the tables (an ``ImportProblem`` refuses the whole file) and
    lists the session rows with their reader. A session whose reading fails is yielded as its
    problem, naming the session, and the next one is read; a database SQLite cannot read is
    refused whole."""
    try:
        listed, read = sessions(db, file)
        for number, row in enumerate(listed, 1):
            try:
                yield read(row, number)
            except ImportProblem as problem:
                problem.session = problem.session or str(row["id"])
                yield problem
    except sqlite3.DatabaseError as error:
        raise ImportProblem(file, 0, f"not a readable SQLite database: {error}") from None
    finally:
        db.close()
