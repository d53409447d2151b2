"""The search index: one row per searchable text of a message or a compaction, kept by the
database itself.

What is indexed (each a *kind*):

- ``message``, ``tool_result``, ``summary``: the text of every Message row (``content`` as a
  string, or the ``text`` of its parts), by role; ``is_summary`` rows are ``summary``.
  Every row is indexed, archived ones included: a fold or truncation never rewrites a stored
  row (in-place compaction archives the originals and adds new rows, rotation copies into a
  child session), so "the whole stored original" of a folded tool result is an archived or
  parent-session row and is found like any other.
- ``tool_call``: the names and arguments of a row's ``tool_calls``.
- ``summary``, ``ledger``, ``native_summary`` of a Compaction: its report's summary text, the
  fact texts of its report's ledger (``report["ledger"]["facts"][kind][i]["text"]``) and an
  agent's own summary as its transcript wrote it.

How it stays current: rows are written by ``bulk_create`` (chat, compaction commit,
undo/redo), by plain ``executemany`` INSERTs (the import store), by ``.update()`` and by
cascaded deletes (a session or a user deleted); none of those sends a signal. So a trigger on
each of the two tables marks every written, changed or deleted row in ``hermes_search_pending``
(in the writer's own transaction, one small insert per row), and ``sync`` replaces the marked
rows' entries in batches: a search runs it first (bounded), and the store step of an import
queues the worker task ``index_search`` for its thousands of rows. No write path has to
remember the index, and none can leave it behind for good.

Entry ids: a message's text is ``id * 2``, its tool calls ``id * 2 + 1``; a compaction's
texts are ``COMPACTION_BASE + id * 4 + (0 summary, 1 ledger, 2 native summary)``. A writer
replaces an entry by its id, and newest-first order is id order.

SQLite: an FTS5 table with the ``trigram`` tokenizer (SQLite ≥ 3.34): any substring of three
or more characters is matchable, so ``src/app/parser.py``, ``--no-verify`` or CJK text are
found as typed. PostgreSQL: a plain table with a ``pg_trgm`` GIN index on the text, queried
with ILIKE. Migration ``0009_search_index`` creates both from this module: changing the SQL
here needs a new migration that drops and recreates them.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection as default_connection
from django.db.backends.base.base import BaseDatabaseWrapper

TABLE = "hermes_search"
# Entry ids written since they were last indexed (by the triggers); ``sync`` indexes them.
PENDING = "hermes_search_pending"
COMPACTION_BASE = 1 << 48
# Columns of an entry, in insert order (``id`` is FTS5's rowid on SQLite).
COLUMNS = (
    "body",
    "kind",
    "owner_id",
    "session_id",
    "message_id",
    "compaction_id",
    "role",
    "position",
    "created_at",
)
_INSERT_COLUMNS = ", ".join(COLUMNS)


def id_column(connection: BaseDatabaseWrapper = default_connection) -> str:
    """The entry id's column name on this database (FTS5 calls it ``rowid``)."""
    return "rowid" if connection.vendor == "sqlite" else "id"


# --- SQLite ------------------------------------------------------------------------------
# ``{m}`` / ``{c}`` stand for the message / compaction row (``new`` in a trigger, a table
# alias in the rebuild); filled by str.replace so the JSON braces need no escaping.

_SQLITE_MESSAGE_TEXT = """CASE json_type({m}.content)
    WHEN 'text' THEN json_extract({m}.content, '$')
    WHEN 'array' THEN (SELECT group_concat(CASE WHEN p.type = 'text' THEN p.value
                                                ELSE json_extract(p.value, '$.text') END, char(10))
                       FROM json_each({m}.content) p WHERE p.type IN ('text', 'object'))
  END"""
# A call's arguments are JSON text: its string and number values are indexed, unescaped (a
# command with quotes, a file body with newlines), or the text itself when it is not JSON.
_SQLITE_TOOL_CALLS_TEXT = """(SELECT group_concat(trim(
        coalesce(json_extract(c.value, '$.function.name'), '') || ' ' || coalesce(
          CASE WHEN json_valid(json_extract(c.value, '$.function.arguments'))
               THEN (SELECT group_concat(t.value, char(10))
                     FROM json_tree(json_extract(c.value, '$.function.arguments')) t
                     WHERE t.type IN ('text', 'integer', 'real'))
               ELSE json_extract(c.value, '$.function.arguments') END, '')), char(10))
    FROM json_each(CASE WHEN json_type({m}.tool_calls) = 'array' THEN {m}.tool_calls ELSE '[]' END) c
    WHERE c.type = 'object')"""
_SQLITE_LEDGER_TEXT = """(SELECT group_concat(json_extract(f.value, '$.text'), char(10))
    FROM json_each(CASE WHEN json_type({c}.report, '$.ledger.facts') = 'object'
                        THEN json_extract({c}.report, '$.ledger.facts') ELSE '{}' END) k,
         json_each(CASE WHEN k.type = 'array' THEN k.value ELSE '[]' END) f
    WHERE f.type = 'object')"""
_SQLITE_SUMMARY_TEXT = """CASE WHEN json_type({c}.report, '$.summary') = 'text'
    THEN json_extract({c}.report, '$.summary') END"""

_MESSAGE_KIND = """CASE WHEN {m}.is_summary THEN 'summary' WHEN {m}.role = 'tool' THEN 'tool_result'
    ELSE 'message' END"""


def _message_entries(text: str, tool_calls: str, m: str, source: str, rowid: str) -> str:
    """INSERT … SELECT of a message's two entries (text, tool calls), empty ones skipped."""
    select = (
        "SELECT {id}, body, kind, owner_id, session_id, message_id, NULL, role, position,"
        " created_at FROM (SELECT {m}.id * 2 + {k} AS {id}, {body} AS body, {kind} AS kind,"
        " s.owner_id AS owner_id, {m}.session_id AS session_id, {m}.id AS message_id,"
        " {m}.role AS role, {m}.position AS position, {m}.created_at AS created_at {source})"
        " WHERE body IS NOT NULL AND body <> ''"
    )
    parts = []
    for k, body, kind in ((0, text, _MESSAGE_KIND), (1, tool_calls, "'tool_call'")):
        parts.append(
            select.replace("{body}", body)
            .replace("{kind}", kind)
            .replace("{k}", str(k))
            .replace("{source}", source)
            .replace("{id}", rowid)
            .replace("{m}", m)
        )
    return "\n".join(f"INSERT INTO {TABLE} ({rowid}, {_INSERT_COLUMNS}) {p};" for p in parts)


def _compaction_entries(
    summary: str, ledger: str, native: str, c: str, source: str, rowid: str
) -> str:
    select = (
        "SELECT {id}, body, kind, owner_id, session_id, NULL, compaction_id, '', NULL, created_at"
        " FROM (SELECT {base} + {c}.id * 4 + {k} AS {id}, {body} AS body, '{kind}' AS kind,"
        " s.owner_id AS owner_id, {c}.session_id AS session_id, {c}.id AS compaction_id,"
        " coalesce({c}.finished_at, {c}.queued_at) AS created_at {source})"
        " WHERE body IS NOT NULL AND body <> ''"
    )
    parts = []
    for k, body, kind in (
        (0, summary, "summary"),
        (1, ledger, "ledger"),
        (2, native, "native_summary"),
    ):
        parts.append(
            select.replace("{body}", body)
            .replace("{kind}", kind)
            .replace("{k}", str(k))
            .replace("{base}", str(COMPACTION_BASE))
            .replace("{source}", source)
            .replace("{id}", rowid)
            .replace("{c}", c)
        )
    return "\n".join(f"INSERT INTO {TABLE} ({rowid}, {_INSERT_COLUMNS}) {p};" for p in parts)


def _sqlite_message_insert(m: str, source: str) -> str:
    return _message_entries(
        _SQLITE_MESSAGE_TEXT.replace("{m}", m),
        _SQLITE_TOOL_CALLS_TEXT.replace("{m}", m),
        m,
        source,
        "rowid",
    )


def _sqlite_compaction_insert(c: str, source: str) -> str:
    return _compaction_entries(
        _SQLITE_SUMMARY_TEXT.replace("{c}", c),
        _SQLITE_LEDGER_TEXT.replace("{c}", c),
        f"{c}.native_summary",
        c,
        source,
        "rowid",
    )


# The columns whose change changes an entry (archiving flips ``active``/``archived`` only,
# which the index does not hold: archived rows stay searchable).
_MESSAGE_COLUMNS = "content, tool_calls, role, is_summary, position, session_id, created_at"
_COMPACTION_COLUMNS = "report, native_summary, session_id, queued_at, finished_at"
_MESSAGE_ENTRY = "{row}.id * 2"
_COMPACTION_ENTRY = f"{COMPACTION_BASE} + {{row}}.id * 4"


def _sqlite_triggers() -> list[str]:
    statements = []
    for table, short, entry, columns in (
        ("hermes_web_message", "message", _MESSAGE_ENTRY, _MESSAGE_COLUMNS),
        ("hermes_web_compaction", "compaction", _COMPACTION_ENTRY, _COMPACTION_COLUMNS),
    ):
        for event, row in (("INSERT", "new"), (f"UPDATE OF {columns}", "new"), ("DELETE", "old")):
            name = f"hermes_search_{short}_{event.split()[0].lower()}"
            statements.append(
                f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN"
                f" INSERT OR IGNORE INTO {PENDING} (entry) VALUES ({entry.format(row=row)}); END"
            )
    return statements


SQLITE_CREATE = [
    f"CREATE VIRTUAL TABLE {TABLE} USING fts5(body, kind UNINDEXED, owner_id UNINDEXED,"
    " session_id UNINDEXED, message_id UNINDEXED, compaction_id UNINDEXED, role UNINDEXED,"
    " position UNINDEXED, created_at UNINDEXED, tokenize = 'trigram')",
    f"CREATE TABLE {PENDING} (entry INTEGER PRIMARY KEY)",
    *_sqlite_triggers(),
]
SQLITE_DROP = [
    *(
        f"DROP TRIGGER IF EXISTS hermes_search_{short}_{event}"
        for short in ("message", "compaction")
        for event in ("insert", "update", "delete")
    ),
    f"DROP TABLE IF EXISTS {PENDING}",
    f"DROP TABLE IF EXISTS {TABLE}",
]

# --- PostgreSQL --------------------------------------------------------------------------

_PG_MESSAGE_TEXT = """CASE jsonb_typeof({m}.content)
    WHEN 'string' THEN {m}.content #>> '{}'
    WHEN 'array' THEN (SELECT string_agg(CASE jsonb_typeof(p) WHEN 'string' THEN p #>> '{}'
                                              ELSE p ->> 'text' END, E'\\n')
                       FROM jsonb_array_elements({m}.content) p
                       WHERE jsonb_typeof(p) IN ('string', 'object'))
  END"""
_PG_TOOL_CALLS_TEXT = """(SELECT string_agg(btrim(
        coalesce(c -> 'function' ->> 'name', '') || ' ' ||
        coalesce(hermes_search_json_text(c -> 'function' ->> 'arguments'), '')), E'\\n')
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof({m}.tool_calls) = 'array'
                                   THEN {m}.tool_calls ELSE '[]'::jsonb END) c
    WHERE jsonb_typeof(c) = 'object')"""
_PG_LEDGER_TEXT = """(SELECT string_agg(f ->> 'text', E'\\n')
    FROM jsonb_each(CASE WHEN jsonb_typeof({c}.report -> 'ledger' -> 'facts') = 'object'
                         THEN {c}.report -> 'ledger' -> 'facts' ELSE '{}'::jsonb END) k,
         jsonb_array_elements(CASE WHEN jsonb_typeof(k.value) = 'array'
                                   THEN k.value ELSE '[]'::jsonb END) f
    WHERE jsonb_typeof(f) = 'object')"""
_PG_SUMMARY_TEXT = """CASE WHEN jsonb_typeof({c}.report -> 'summary') = 'string'
    THEN {c}.report ->> 'summary' END"""


def _pg_message_insert(m: str, source: str) -> str:
    return _message_entries(
        _PG_MESSAGE_TEXT.replace("{m}", m),
        _PG_TOOL_CALLS_TEXT.replace("{m}", m),
        m,
        source,
        "id",
    ).replace(" WHERE body IS NOT", " e WHERE body IS NOT")


def _pg_compaction_insert(c: str, source: str) -> str:
    return _compaction_entries(
        _PG_SUMMARY_TEXT.replace("{c}", c),
        _PG_LEDGER_TEXT.replace("{c}", c),
        f"{c}.native_summary",
        c,
        source,
        "id",
    ).replace(" WHERE body IS NOT", " e WHERE body IS NOT")


POSTGRES_CREATE = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    f"CREATE TABLE {TABLE} (id bigint PRIMARY KEY, body text NOT NULL,"
    " kind varchar(16) NOT NULL, owner_id bigint NOT NULL, session_id bigint NOT NULL,"
    " message_id bigint, compaction_id bigint, role varchar(16) NOT NULL DEFAULT '',"
    " position integer, created_at timestamptz)",
    f"CREATE INDEX hermes_search_body_trgm ON {TABLE} USING gin (body gin_trgm_ops)",
    f"CREATE INDEX hermes_search_owner_id ON {TABLE} (owner_id, id)",
    f"CREATE TABLE {PENDING} (entry bigint PRIMARY KEY)",
    # A call's arguments as their string and number values (the text itself when it is not
    # JSON: PostgreSQL 15 has no json_valid, so the cast's error is caught).
    "CREATE FUNCTION hermes_search_json_text(t text) RETURNS text LANGUAGE plpgsql"
    " IMMUTABLE AS $$\n"
    "BEGIN\n"
    "  RETURN (SELECT string_agg(v #>> '{}', E'\\n') FROM jsonb_path_query(t::jsonb, 'strict $.**') v\n"
    "          WHERE jsonb_typeof(v) IN ('string', 'number'));\n"
    "EXCEPTION WHEN others THEN RETURN t;\n"
    "END $$",
    "CREATE FUNCTION hermes_search_mark() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "DECLARE r record;\n"
    "BEGIN\n"
    "  IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;\n"
    f"  INSERT INTO {PENDING} (entry) VALUES (CASE TG_TABLE_NAME WHEN 'hermes_web_message'"
    f" THEN r.id * 2 ELSE {COMPACTION_BASE} + r.id * 4 END) ON CONFLICT DO NOTHING;\n"
    "  RETURN NULL;\n"
    "END $$",
    # TRUNCATE fires no row trigger (Django's flush between tests truncates): drop the
    # entries of the truncated table with it.
    "CREATE FUNCTION hermes_search_truncate() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  IF TG_TABLE_NAME = 'hermes_web_message' THEN\n"
    f"    DELETE FROM {TABLE} WHERE id < {COMPACTION_BASE};\n"
    f"    DELETE FROM {PENDING} WHERE entry < {COMPACTION_BASE};\n"
    "  ELSE\n"
    f"    DELETE FROM {TABLE} WHERE id >= {COMPACTION_BASE};\n"
    f"    DELETE FROM {PENDING} WHERE entry >= {COMPACTION_BASE};\n"
    "  END IF;\n  RETURN NULL;\nEND $$",
    f"CREATE TRIGGER hermes_search_message AFTER INSERT OR DELETE OR UPDATE OF {_MESSAGE_COLUMNS}"
    " ON hermes_web_message FOR EACH ROW EXECUTE FUNCTION hermes_search_mark()",
    f"CREATE TRIGGER hermes_search_compaction AFTER INSERT OR DELETE OR UPDATE OF"
    f" {_COMPACTION_COLUMNS} ON hermes_web_compaction FOR EACH ROW"
    " EXECUTE FUNCTION hermes_search_mark()",
    "CREATE TRIGGER hermes_search_message_truncate AFTER TRUNCATE ON hermes_web_message"
    " FOR EACH STATEMENT EXECUTE FUNCTION hermes_search_truncate()",
    "CREATE TRIGGER hermes_search_compaction_truncate AFTER TRUNCATE ON hermes_web_compaction"
    " FOR EACH STATEMENT EXECUTE FUNCTION hermes_search_truncate()",
]
POSTGRES_DROP = [
    "DROP TRIGGER IF EXISTS hermes_search_message ON hermes_web_message",
    "DROP TRIGGER IF EXISTS hermes_search_compaction ON hermes_web_compaction",
    "DROP TRIGGER IF EXISTS hermes_search_message_truncate ON hermes_web_message",
    "DROP TRIGGER IF EXISTS hermes_search_compaction_truncate ON hermes_web_compaction",
    "DROP FUNCTION IF EXISTS hermes_search_mark()",
    "DROP FUNCTION IF EXISTS hermes_search_truncate()",
    "DROP FUNCTION IF EXISTS hermes_search_json_text(text)",
    f"DROP TABLE IF EXISTS {PENDING}",
    f"DROP TABLE IF EXISTS {TABLE}",
]


def create_statements(vendor: str) -> list[str]:
    """DDL of the index table and its triggers for this database."""
    return POSTGRES_CREATE if vendor == "postgresql" else SQLITE_CREATE


def drop_statements(vendor: str) -> list[str]:
    return POSTGRES_DROP if vendor == "postgresql" else SQLITE_DROP


def _index_sql(vendor: str, table: str, where: str) -> list[str]:
    """The INSERT … SELECT statements that index the rows of ``table`` matching ``where``
    (``m``/``c`` is the row, ``s`` its session)."""
    if table == "message":
        source = f"FROM hermes_web_message m JOIN hermes_web_session s ON s.id = m.session_id WHERE {where}"
        sql = (_pg_message_insert if vendor == "postgresql" else _sqlite_message_insert)(
            "m", source
        )
    else:
        source = f"FROM hermes_web_compaction c JOIN hermes_web_session s ON s.id = c.session_id WHERE {where}"
        sql = (_pg_compaction_insert if vendor == "postgresql" else _sqlite_compaction_insert)(
            "c", source
        )
    return [part.strip().rstrip(";") for part in sql.split(";\n") if part.strip()]


def _placeholders(n: int) -> str:
    return ", ".join(["%s"] * n)


def _index_entries(cursor, vendor: str, entries: list[int]) -> None:
    """Replace the index entries of these entry ids by their rows' current texts (a row gone
    leaves none)."""
    rowid = "rowid" if vendor == "sqlite" else "id"
    messages = [e // 2 for e in entries if e < COMPACTION_BASE]
    compactions = [(e - COMPACTION_BASE) // 4 for e in entries if e >= COMPACTION_BASE]
    if messages:
        ids = [m * 2 for m in messages] + [m * 2 + 1 for m in messages]
        cursor.execute(f"DELETE FROM {TABLE} WHERE {rowid} IN ({_placeholders(len(ids))})", ids)
        for statement in _index_sql(vendor, "message", f"m.id IN ({_placeholders(len(messages))})"):
            cursor.execute(statement, messages)
    if compactions:
        ids = [COMPACTION_BASE + c * 4 + k for c in compactions for k in range(3)]
        cursor.execute(f"DELETE FROM {TABLE} WHERE {rowid} IN ({_placeholders(len(ids))})", ids)
        where = f"c.id IN ({_placeholders(len(compactions))})"
        for statement in _index_sql(vendor, "compaction", where):
            cursor.execute(statement, compactions)


SYNC_BATCH = 2000


def pending_count(connection: BaseDatabaseWrapper = default_connection) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {PENDING}")
        return cursor.fetchone()[0]


def sync(connection: BaseDatabaseWrapper = default_connection, *, limit: int | None = None) -> int:
    """Index the rows written since they were last indexed, at most ``limit`` of them (all
    when None), ``SYNC_BATCH`` per transaction; returns how many entries were indexed.

    The triggers only mark a written row (an insert into ``hermes_search_pending``): FTS5
    flushes its pending terms at every statement savepoint, so indexing from inside a row
    trigger made a bulk insert ~6× slower than indexing the same rows in batches here.
    Each batch is claimed by deleting its marks first: a row written again meanwhile is
    marked again and indexed by a later batch, and two workers never index the same batch
    (PostgreSQL: SKIP LOCKED; SQLite serializes writers).
    """
    from django.db import transaction

    vendor = connection.vendor
    done = 0
    while limit is None or done < limit:
        size = SYNC_BATCH if limit is None else min(SYNC_BATCH, limit - done)
        with connection.cursor() as cursor:
            # A read first: with nothing pending (most searches) no write lock is taken.
            cursor.execute(f"SELECT 1 FROM {PENDING} LIMIT 1")
            if cursor.fetchone() is None:
                break
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            if vendor == "postgresql":
                cursor.execute(
                    f"DELETE FROM {PENDING} WHERE entry IN (SELECT entry FROM {PENDING}"
                    " ORDER BY entry LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING entry",
                    [size],
                )
                entries = [row[0] for row in cursor.fetchall()]
            else:
                cursor.execute(f"SELECT entry FROM {PENDING} ORDER BY entry LIMIT %s", [size])
                entries = [row[0] for row in cursor.fetchall()]
                if entries:
                    cursor.execute(
                        f"DELETE FROM {PENDING} WHERE entry IN ({_placeholders(len(entries))})",
                        entries,
                    )
            if not entries:
                break
            _index_entries(cursor, vendor, entries)
        done += len(entries)
        if len(entries) < size:
            break
    return done


def rebuild(
    connection: BaseDatabaseWrapper = default_connection,
    *,
    batch: int = 50_000,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, int]:
    """Empty the index and index every message and compaction again, ``batch`` ids at a time.

    ``progress(table, done, total)`` is called after each batch. Returns the entry count and
    the rows read per table. Each batch commits on its own: a rebuild of a large database
    does not hold one huge transaction (searches meanwhile see a partial index).
    """
    vendor = connection.vendor
    counts = {}
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {PENDING}")
        cursor.execute(f"DELETE FROM {TABLE}")
        for kind, table in (
            ("message", "hermes_web_message"),
            ("compaction", "hermes_web_compaction"),
        ):
            cursor.execute(f"SELECT count(*), coalesce(max(id), 0) FROM {table}")
            total, top = cursor.fetchone()
            counts[table] = total
            alias = kind[0]
            statements = _index_sql(vendor, kind, f"{alias}.id > %s AND {alias}.id <= %s")
            low = 0
            while low < top:
                high = low + batch
                for statement in statements:
                    cursor.execute(statement, [low, high])
                low = high
                if progress is not None:
                    progress(table, min(high, top), top)
        if vendor == "sqlite":
            # Merge the b-tree segments the batches wrote: faster queries, smaller file.
            cursor.execute(f"INSERT INTO {TABLE}({TABLE}) VALUES ('optimize')")
        cursor.execute(f"SELECT count(*) FROM {TABLE}")
        counts["entries"] = cursor.fetchone()[0]
    return counts


def trigger_statements(vendor: str) -> list[str]:
    """Drop and create only the triggers that mark changed rows. On SQLite, a migration that
    remakes the message or compaction table (adding a column with a default does) drops the
    triggers with the old table: a later migration runs these to put them back."""
    if vendor == "postgresql":
        drops = [d for d in POSTGRES_DROP if d.startswith("DROP TRIGGER")]
        return [*drops, *(c for c in POSTGRES_CREATE if c.startswith("CREATE TRIGGER"))]
    drops = [d for d in SQLITE_DROP if d.startswith("DROP TRIGGER")]
    return [*drops, *_sqlite_triggers()]


def reinstall_triggers(schema_editor) -> None:  # noqa: ANN001 (migration API)
    """Put the triggers back (``trigger_statements``) and index again what was written while
    they were missing."""
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        for statement in trigger_statements(connection.vendor):
            cursor.execute(statement)
    rebuild(connection)


def install(schema_editor, reverse: bool = False) -> None:  # noqa: ANN001 (migration API)
    """Create (or drop) the index and its triggers; on create, index the rows already stored."""
    connection = schema_editor.connection
    statements = drop_statements if reverse else create_statements
    with connection.cursor() as cursor:
        for statement in statements(connection.vendor):
            cursor.execute(statement)
    if not reverse:
        rebuild(connection)
