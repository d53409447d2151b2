"""Writing imported sessions: one transaction per session holding its row, every message
(plain ``executemany`` inserts, in batches for a streamed session) and its parent links;
during an import that transaction is a savepoint in its group's (``groups``), so small
sessions share a commit and a search-index task while each still fails alone."""

from __future__ import annotations

from typing import cast

from django.db import DataError, IntegrityError, connection, transaction
from django.db.models import Field
from django.utils import timezone

from compaction import END_MARKER, SUMMARY_PREFIX
from hermes_web.importers import budget, groups
from hermes_web.importers.base import (
    ImportProblem,
    ParsedSession,
    clean_title,
    keep_controls_visible,
    keep_session_controls_visible,
    pair_stream,
    pair_tool_results,
    plain_words,
    text_of,
)
from hermes_web.importers.checks import (
    Checker,
    Tally,
    check_session,
    count_tokens,
    previous_summary,
)
from hermes_web.importers.discard import discard, discard_abandoned  # noqa: F401 - their home was here
from hermes_web.importers.links import Links, namespaced
from hermes_web.importers.native import NativeRows
from hermes_web.importers.validate import Invalid, check_text
from hermes_web.llm_models import context_length_for
from hermes_web.models import IMPORT_PENDING, Message, Session


class AlreadyImported(ImportProblem):
    """This user imported the session before; reported, not a failure."""


class EmptySession(ImportProblem):
    """The session holds no message (only metadata, or nothing): not stored, counted in the
    import's summary line."""


class _Titles:
    """The session's title, cleaned (``clean_title``); when the tool's title is only a
    wrapper or reasoning, the first user turn that says something."""

    def __init__(self, parsed: ParsedSession) -> None:
        self.title = clean_title(parsed.title)

    def add(self, message) -> None:
        if self.title or message.role != "user" or not message.active or message.meta:
            return
        if not message.is_summary:
            self.title = clean_title(text_of(message.content))


def _refuse_empty(tally: Tally, parsed: ParsedSession, file: str) -> None:
    if tally.total == tally.meta:
        raise EmptySession(
            file, parsed.line, "no messages: an empty session, not imported", parsed.public_id
        )


def store_session(parsed: ParsedSession, owner, file: str, links: Links | None = None) -> Session:
    """One session, one transaction: the session row, all its messages and its parent links,
    or nothing."""
    if parsed.stream is not None:
        close = getattr(parsed.stream, "close", None)
        try:
            streamed = _store_streamed(parsed, owner, file, links)
        finally:  # a spool file or an open reader, also when the session was refused unread
            if close is not None:
                close()
        return streamed
    if parsed.token_counts is None:  # not yet paired and checked by the parsing thread
        pair_tool_results(parsed)
        check_session(parsed, file)
    tally, titles = Tally(), _Titles(parsed)
    for message in parsed.messages:
        tally.add(message)
        titles.add(message)
    _refuse_empty(tally, parsed, file)
    public_id = _public_id(parsed, owner, file)
    # Charged before anything is written: a session over the import's budget writes nothing.
    budget.spend(parsed.stored_chars, file, parsed.line, parsed.public_id)
    model = parsed.model
    counts = parsed.token_counts or count_tokens(parsed.messages, model)
    now = timezone.now()
    extra = _session_extra(parsed)
    report = tally.report(parsed)
    extra["import_report"] = report
    fields = {"public_id": public_id} if public_id else {}
    own_links = links is None
    links = links or Links(owner)
    session = None
    try:
        with groups.session_transaction():
            session = Session.objects.create(
                owner=owner,
                title=titles.title,
                source=parsed.source,
                model=model[:200],
                context_length=context_length_for(model),
                created_at=parsed.created_at or now,
                ended_at=parsed.ended_at,
                end_reason=parsed.end_reason,
                previous_summary=previous_summary(parsed),
                extra=extra,
                **fields,
            )
            natives = NativeRows(session, parsed, file)
            _insert_messages(session, parsed, counts, natives)
            links.link(session, parsed)
            natives.finish()
    except ImportProblem as problem:
        links.rolled_back(session.pk if session else None)
        problem.file = problem.file or file
        raise
    except (IntegrityError, DataError, UnicodeEncodeError) as error:
        raise _storage_problem(error, file, parsed) from None
    links.stored(session, parsed)
    budget.note_stored(session.pk)
    if own_links:
        links.finish()
    groups.stored(session.pk)
    session.message_total = report["messages"]
    session.fidelity = report
    return session


_STREAM_BATCH = 2000


def _public_id(parsed: ParsedSession, owner, file: str) -> str:
    """The session's id in the owner's namespace; AlreadyImported when it is taken."""
    if not parsed.public_id:
        return ""
    try:
        check_text(parsed.public_id, "session id")
    except Invalid as error:
        raise ImportProblem(file, parsed.line, str(error)) from None
    public_id = namespaced(parsed.public_id, owner)
    if _taken(public_id, parsed.public_id, owner.pk):
        raise AlreadyImported(file, parsed.line, "already imported", parsed.public_id)
    return public_id


def _taken(public_id: str, tool_id: str, owner_pk: int) -> bool:
    """``public_id`` is stored, or ``tool_id`` is among the owner's sessions stored before ids
    had a namespace. Plain SQL: asked once per session, where building the ORM's query
    cost more than running it (a 20,000 session import)."""
    qn = connection.ops.quote_name
    table, column = qn(Session._meta.db_table), qn("public_id")
    owner = qn(Session._meta.get_field("owner").column)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {table} WHERE {column} = %s OR ({column} = %s AND {owner} = %s) "  # noqa: S608 - our names
            "LIMIT 1",
            [public_id, tool_id, owner_pk],
        )
        return cursor.fetchone() is not None


def _session_extra(parsed: ParsedSession) -> dict:
    """``parsed.extra`` plus the tool's own ids (what re-imports and links look up)."""
    extra = dict(parsed.extra)
    if parsed.public_id:
        extra["source_id"] = parsed.public_id
        if parsed.source == Session.Source.IMPORT_HERMES:
            extra["hermes_id"] = parsed.public_id
    if parsed.parent_id:
        extra["hermes_parent_id"] = parsed.parent_id
    if parsed.kind == "sub-agent":  # a child, never a rotation (see links)
        extra.setdefault("sub_agent", {})
    return extra


def _store_streamed(parsed: ParsedSession, owner, file: str, links: Links | None) -> Session:
    """A session whose messages arrive from ``parsed.stream``: paired, checked, counted and
    inserted in batches, so memory is bounded by the batch, not the file.

    A session that fits one batch is one transaction. A longer one is written in one short
    transaction per batch (``_STREAM_BATCH`` rows or ``_BATCH_CHARACTERS``), so that other
    writers (chat, ``/v1``) wait for a batch, not for the whole session; until its last
    batch commits it is marked ``extra["import_pending"]``, and a bad message anywhere (or a
    broken file, or the import's time budget) deletes what was committed: nothing of it is
    left half-stored."""
    public_id = _public_id(parsed, owner, file)
    own_links = links is None
    links = links or Links(owner)
    session: Session | None = None
    committed = False  # a batch of this session is committed: undone by deleting it
    tally, titles = Tally(), _Titles(parsed)
    checker = Checker(parsed, file)
    stream = pair_stream(parsed.stream, parsed)
    spent = budget.current()

    def fill() -> tuple[list, bool]:
        """The next batch, checked and charged to the import's budget (over it, the import
        is refused); and whether the stream is done."""
        batch: list = []
        start = charged = checker.stored
        for message in stream:
            parsed.controls_replaced += keep_controls_visible(message)
            checker.check(message)
            budget.spend(checker.stored - charged, file, parsed.line, parsed.public_id)
            charged = checker.stored
            tally.add(message)
            titles.add(message)
            batch.append(message)
            if len(batch) % _PAUSE_EVERY == 0:  # no lock held while a long session is read
                groups.pause()
            if len(batch) >= _STREAM_BATCH or checker.stored - start >= _BATCH_CHARACTERS:
                return batch, False
        return batch, True

    try:
        batch, done = fill()
        stored = 0
        while True:
            counts = count_tokens(batch, parsed.model) if batch else []
            # The first write goes into the import's group; the batches after it are not
            # grouped: each commits, so that their undo (discard) finds them committed.
            with groups.session_transaction() if session is None else transaction.atomic():
                if session is None:
                    session = Session(
                        owner=owner,
                        title="",
                        source=parsed.source,
                        model=parsed.model[:200],
                        context_length=context_length_for(parsed.model),
                        created_at=parsed.created_at or timezone.now(),
                        ended_at=parsed.ended_at,
                        end_reason=parsed.end_reason,
                        extra={**parsed.extra, **({} if done else {PENDING: True})},
                        **({"public_id": public_id} if public_id else {}),
                    )
                    if done:  # read whole: its row is written once, with its final fields
                        report = _finish_streamed(
                            session, parsed, owner, file, tally, titles, renamed=not public_id
                        )
                    session.save(force_insert=True)
                    natives = NativeRows(session, parsed, file)
                elif done:
                    report = _finish_streamed(
                        session, parsed, owner, file, tally, titles, renamed=not public_id
                    )
                if batch:
                    _insert_rows(session, batch, counts, stored, natives)
                    stored += len(batch)
                if done:
                    links.link(session, parsed)
                    natives.finish(children=links.attached(parsed))
            if done:
                break
            groups.release()  # the first batch's group commits with it
            committed = True
            if spent is not None:
                spent.check(file)
            batch = counts = []  # let the stored batch go before the next one is read
            batch, done = fill()
    except BaseException as error:
        if session is not None:
            links.rolled_back(session.pk)
            if committed:
                discard([session.pk])
        if isinstance(error, ImportProblem):
            error.file = error.file or file
            raise
        if isinstance(error, IntegrityError | DataError | UnicodeEncodeError):
            raise _storage_problem(error, file, parsed) from None
        raise
    links.stored(session, parsed)
    budget.note_stored(session.pk)
    if own_links:
        links.finish()
    groups.stored(session.pk)
    session.message_total = report["messages"]
    session.fidelity = report
    return session


# Messages read between two looks at the import's group (``groups.pause``).
_PAUSE_EVERY = 256
# Marks a session whose batches are still being written (see ``_store_streamed``); hidden
# from every page (``SessionQuerySet.for_user``) until its last batch removes it.
PENDING = IMPORT_PENDING
# Characters (sizes.message_size) one batch transaction writes at most.
_BATCH_CHARACTERS = 16 * 2**20


def _finish_streamed(
    session: Session,
    parsed: ParsedSession,
    owner,
    file: str,
    tally: Tally,
    titles: _Titles,
    *,
    renamed: bool,
) -> dict:
    """Once the stream is read: refuse an empty session, check what is known only now
    (title, metadata), write the session's final fields (set only, when its row is not
    written yet); its fidelity report."""
    _refuse_empty(tally, parsed, file)
    keep_session_controls_visible(parsed)  # title and metadata: known once read
    try:
        check_text(parsed.title, "title")
        check_text(parsed.extra, "session metadata")
    except Invalid as error:
        raise ImportProblem(file, parsed.line, str(error), parsed.public_id) from None
    report = tally.report(parsed)
    summary = tally.last_summary
    previous = ""
    if summary is not None:
        body = text_of(summary.content).split(SUMMARY_PREFIX, 1)[-1]
        previous = body.split(END_MARKER, 1)[0].strip()
    titles.title = clean_title(parsed.title) or titles.title  # known once read
    session.title = titles.title
    if parsed.public_id and renamed:  # an id known only once read (OpenAI)
        session.public_id = _public_id(parsed, owner, file)
    session.model = parsed.model[:200]
    session.context_length = context_length_for(parsed.model)
    session.previous_summary = previous
    session.extra = {**_session_extra(parsed), "import_report": report}
    session.created_at = parsed.created_at or session.created_at
    if session.pk is None:
        return report
    session.save(
        update_fields=[
            *("title", "model", "context_length", "previous_summary", "extra"),
            *("created_at", "public_id"),
        ]
    )
    return report


_INSERT_FIELDS = (
    "session",
    "position",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "reasoning",
    "token_count",
    "active",
    "archived",
    "is_summary",
    "extra",
    "archived_by",
    "created_at",
)
_BATCH = 500


def _insert_messages(
    session: Session, parsed: ParsedSession, counts: list[int], natives: NativeRows
) -> None:
    """Every message of ``parsed`` (see ``_insert_rows``)."""
    _insert_rows(session, parsed.messages, counts, 0, natives)


def _insert_rows(
    session: Session, messages: list, counts: list[int], start: int, natives: NativeRows
) -> None:
    """A plain ``executemany`` INSERT: bulk_create's per-row model instances and SQL
    compilation cost more than the database on a 50 MB import. Values still go through
    each field's ``get_db_prep_save``, so JSON and datetimes are stored exactly as the ORM
    stores them, on SQLite and PostgreSQL alike. A row an agent's own compaction replaced
    is archived by that compaction's row (``natives``).

    Meta rows are stored inactive and not archived, marked ``extra["meta"]``: every reader
    of the active conversation (chat, engine, exports) takes ``active=True`` rows only."""
    fields = [cast(Field, Message._meta.get_field(name)) for name in _INSERT_FIELDS]
    qn = connection.ops.quote_name
    sql = (
        f"INSERT INTO {qn(Message._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    json_fields = [(i, f) for i, f in enumerate(fields) if f.get_internal_type() == "JSONField"]
    created_field = fields[-1]
    batch: list[list] = []
    with connection.cursor() as cursor:
        for i, m in enumerate(messages):
            archived_by, extra = natives.row(m, start + i, counts[i])
            extra = {**extra, "meta": m.meta} if m.meta else extra
            row = [
                session.pk,
                start + i,
                m.role,
                m.content,
                m.tool_calls,
                m.tool_call_id[:200],
                m.tool_name[:200],
                m.reasoning,
                counts[i],
                m.active and not m.meta,
                m.archived and not m.meta,
                m.is_summary,
                extra,
                archived_by,
                created_field.get_db_prep_save(m.created_at or session.created_at, connection),
            ]
            for index, field in json_fields:
                row[index] = field.get_db_prep_save(row[index], connection)
            batch.append(row)
            if len(batch) >= _BATCH:
                cursor.executemany(sql, batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)


def _storage_problem(error: Exception, file: str, parsed: ParsedSession) -> ImportProblem:
    """What the database (or its driver) refused, said as this session's import problem."""
    if isinstance(error, IntegrityError):  # a concurrent import took the same id
        problem = f"could not store: {error}"
    elif isinstance(error, UnicodeEncodeError):  # a lone surrogate such as \ud800
        problem = plain_words(error)
    else:  # DataError, e.g. \u0000 in text, which PostgreSQL cannot store
        problem = "the database refused the text: " + " ".join(str(error).split())
    return ImportProblem(file, parsed.line, problem, parsed.public_id)


# An import still marked pending this long after its session row was written is abandoned:
# past the longest import's own time budget (the command line's), with a margin.
