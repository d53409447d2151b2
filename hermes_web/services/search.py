"""Search everything a user stored: messages, tool calls, tool results (archived originals of
folded rows included), summaries, fact ledgers and agents' own summaries.

``parse_query`` reads what people type: bare words (each must appear, anywhere in the text),
``"exact phrases"`` (must appear as written) and ``prefix*`` (a word's start; with a substring
index every prefix already matches, so the star is accepted and dropped). Matching is by
substring and ignores case, so identifiers are found as typed (``src/app/parser.py``,
``--no-verify``, ``0x7f3a``, ``feat/login-v2``, CJK, emoji).

``search`` first indexes the rows written since the last indexing (bounded), then runs it
on the index of ``search_index`` (FTS5 trigram on SQLite, pg_trgm on
PostgreSQL), only over the entries of the given owner, newest first. A term shorter than a
trigram cannot use the index: with a longer term beside it, it filters that term's matches;
alone, it scans only the newest ``SHORT_SCAN_MESSAGES`` messages (and every compaction) and
the result says so.
"""

from __future__ import annotations

import datetime as dt
import html
import re
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from hermes_web.models import Compaction, Message, Session
from hermes_web.services.search_index import COMPACTION_BASE, TABLE, id_column, pending_count, sync

KINDS = ("message", "tool_call", "tool_result", "summary", "ledger", "native_summary")
ROLES = tuple(Message.Role.values)
SOURCES = tuple(Session.Source.values)
MAX_QUERY_CHARS = 500
MAX_TERMS = 12
TRIGRAM = 3
SHORT_SCAN_MESSAGES = 50_000
# Rows written since the last indexing that a search indexes before it runs (about a second
# of work at most); more are left to the worker's index_search task, and the result says so.
SYNC_ON_SEARCH = 10_000
# A count past this many hits is reported as "at least": counting every hit of a common word
# over a million rows costs more than the page itself.
COUNT_CAP = 1000
SNIPPET_BEFORE = 60
SNIPPET_CHARS = 240

_TOKEN = re.compile(r'"([^"]*)"|(\S+)')


class SearchError(ValueError):
    """A query or filter that cannot be searched; the message says what and where."""


@dataclass(frozen=True)
class SearchQuery:
    """A parsed query and its filters."""

    terms: tuple[str, ...]
    kinds: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    conversation: str = ""
    since: dt.date | None = None
    until: dt.date | None = None


@dataclass(frozen=True)
class Hit:
    """One place a query matched; what a link to it (or a "Follow this") is built from.

    ``conversation`` and ``position`` name the message row (``position`` is None for a
    compaction's texts, which name ``compaction`` instead); ``snippet_html`` is escaped HTML
    with the matches in ``<mark>``.
    """

    kind: str
    conversation: str
    conversation_title: str
    source: str
    position: int | None
    role: str
    compaction: str | None
    snippet: str
    snippet_html: str
    created_at: dt.datetime | None
    url: str


@dataclass
class SearchResult:
    query: SearchQuery
    hits: list[Hit]
    count: int
    count_exact: bool
    offset: int
    limit: int
    # Set when a query of only short terms searched the newest rows only.
    partial: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def next_offset(self) -> int | None:
        more = self.offset + len(self.hits) < self.count or not self.count_exact
        return self.offset + self.limit if more and len(self.hits) == self.limit else None

    @property
    def previous_offset(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset else None


def parse_terms(text: str) -> tuple[str, ...]:
    """The terms of ``text``: quoted phrases kept whole, other words split on whitespace.

    Raises SearchError for an empty query, an unclosed quote, or one too long.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise SearchError(f"q: the query is {len(text)} characters; at most {MAX_QUERY_CHARS}")
    if text.count('"') % 2:
        at = text.rindex('"') + 1
        raise SearchError(f'q: the quote at character {at} is not closed; close it with "')
    terms: list[str] = []
    for match in _TOKEN.finditer(text):
        phrase, word = match.groups()
        term = (phrase if phrase is not None else word.rstrip("*")).strip()
        if "\x00" in term:
            raise SearchError("q: the query contains a NUL character")
        if term and term not in terms:
            terms.append(term)
    if not terms:
        raise SearchError('q: type something to search for (a word, a path, "a phrase")')
    if len(terms) > MAX_TERMS:
        raise SearchError(f"q: {len(terms)} terms; at most {MAX_TERMS}")
    return tuple(terms)


def parse_query(
    q: str,
    *,
    kinds: list[str] | tuple[str, ...] = (),
    roles: list[str] | tuple[str, ...] = (),
    sources: list[str] | tuple[str, ...] = (),
    conversation: str = "",
    since: str | dt.date | None = None,
    until: str | dt.date | None = None,
) -> SearchQuery:
    """A SearchQuery from request values; SearchError names the field that is wrong."""
    for name, given, allowed in (("kind", kinds, KINDS), ("role", roles, ROLES)):
        for value in given:
            if value not in allowed:
                raise SearchError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    for value in sources:
        if value not in SOURCES:
            raise SearchError(f"source: {value!r} is not a known source ({', '.join(SOURCES)})")
    start, end = _date("since", since), _date("until", until)
    if start and end and start > end:
        raise SearchError(f"since: {start} is after until {end}")
    return SearchQuery(
        terms=parse_terms(q),
        kinds=tuple(dict.fromkeys(kinds)),
        roles=tuple(dict.fromkeys(roles)),
        sources=tuple(dict.fromkeys(sources)),
        conversation=conversation.strip(),
        since=start,
        until=end,
    )


def _date(name: str, value: str | dt.date | None) -> dt.date | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(value.strip())
    except ValueError:
        raise SearchError(f"{name}: {value!r} is not a date (YYYY-MM-DD)") from None


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _fts_phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _where(user, query: SearchQuery) -> tuple[list[str], list[Any], bool]:
    """SQL conditions and parameters for ``query`` over ``user``'s entries; and whether the
    scan was bounded to the newest rows (short terms only)."""
    sqlite = connection.vendor == "sqlite"
    rowid = id_column()
    long_terms = [t for t in query.terms if len(t) >= TRIGRAM]
    short_terms = [t for t in query.terms if len(t) < TRIGRAM]
    where: list[str] = ["owner_id = %s"]
    params: list[Any] = [user.pk]
    if sqlite and long_terms:
        where.append(f"{TABLE} MATCH %s")
        params.append(" ".join(_fts_phrase(t) for t in long_terms))
    # PostgreSQL: every term is an ILIKE, which the trigram index serves (3+ characters).
    # SQLite: the short terms filter the rows MATCH found (case-insensitive for ASCII).
    like_terms = short_terms if sqlite else list(query.terms)
    op = "LIKE" if sqlite else "ILIKE"
    escape = " ESCAPE '\\'" if sqlite else ""
    for term in like_terms:
        where.append(f"body {op} %s{escape}")
        params.append(_like(term))
    bounded = not long_terms
    if bounded:
        newest = Message.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        where.append(f"({rowid} > %s)")
        params.append(max(0, newest - SHORT_SCAN_MESSAGES) * 2)
    if query.kinds:
        where.append(f"kind IN ({', '.join(['%s'] * len(query.kinds))})")
        params.extend(query.kinds)
    if query.roles:
        where.append(f"role IN ({', '.join(['%s'] * len(query.roles))})")
        params.extend(query.roles)
    sessions = Session.objects.for_user(user)
    if query.sources or query.conversation:
        if query.sources:
            sessions = sessions.filter(source__in=query.sources)
        if query.conversation:
            found = (
                Session.objects.for_user(user)
                .filter(public_id=query.conversation)
                .values_list("pk", "root_id")
                .first()
            )
            if found is None:
                raise SearchError(f"conversation: no conversation {query.conversation!r}")
            # The conversation's whole rotation chain: a fact's earlier and later sessions.
            root = found[1] or found[0]
            sessions = sessions.filter(Q(pk=root) | Q(root_id=root))
        # As a subquery: a user's sessions of one source can be many thousands.
        sql, sub_params = sessions.order_by().values("pk").query.sql_with_params()
        where.append(f"session_id IN ({sql})")
        params.extend(sub_params)
    if query.since:
        where.append("created_at >= %s")
        params.append(_bound(query.since))
    if query.until:
        where.append("created_at < %s")
        params.append(_bound(query.until + dt.timedelta(days=1)))
    return where, params, bounded


def _bound(day: dt.date) -> Any:
    moment = timezone.make_aware(dt.datetime.combine(day, dt.time()), dt.UTC)
    return connection.ops.adapt_datetimefield_value(moment)


def search(user, query: SearchQuery, *, offset: int = 0, limit: int = 20) -> SearchResult:
    """The hits of ``query`` among ``user``'s entries, newest first, ``limit`` from ``offset``.

    Compactions' texts (summaries, ledgers) come before messages: their entry ids are above
    every message's (``COMPACTION_BASE``).
    """
    where, params, bounded = _where(user, query)
    # The rows written since the last indexing (chat replies, /v1 turns, commits) are indexed
    # now, so a search sees everything already stored; a huge import is left to the worker.
    sync(limit=SYNC_ON_SEARCH)
    behind = pending_count()
    rowid = id_column()
    condition = " AND ".join(where)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {TABLE} WHERE {condition} LIMIT %s) t",
            [*params, COUNT_CAP + 1],
        )
        count = cursor.fetchone()[0]
        cursor.execute(
            f"SELECT {rowid}, kind, session_id, message_id, compaction_id, role, position,"
            f" created_at, body FROM {TABLE} WHERE {condition}"
            f" ORDER BY {rowid} DESC LIMIT %s OFFSET %s",
            [*params, limit, offset],
        )
        rows = cursor.fetchall()
    result = SearchResult(
        query=query,
        hits=_hits(user, query, rows),
        count=min(count, COUNT_CAP),
        count_exact=count <= COUNT_CAP,
        offset=offset,
        limit=limit,
        partial=bounded or behind > 0,
    )
    if behind:
        result.notes.append(
            f"{behind:,} rows written moments ago are still being indexed; search again "
            "shortly to include them."
        )
    if bounded:
        result.notes.append(
            f"Every term is shorter than {TRIGRAM} characters, so only the newest "
            f"{SHORT_SCAN_MESSAGES:,} messages (and every summary) were searched; "
            "add a longer word to search everything."
        )
    return result


def _hits(user, query: SearchQuery, rows: list[tuple]) -> list[Hit]:
    # Sessions and compactions are read again from the owner's own rows: an entry whose row
    # is gone or not the user's never becomes a hit, whatever the index holds.
    session_ids = {row[2] for row in rows}
    sessions = {
        s.pk: s
        for s in Session.objects.for_user(user)
        .filter(pk__in=session_ids)
        .only("pk", "public_id", "title", "source")
    }
    compaction_ids = {row[4] for row in rows if row[4] is not None}
    compactions = dict(
        Compaction.objects.for_user(user)
        .filter(pk__in=compaction_ids)
        .values_list("pk", "public_id")
    )
    pattern = re.compile("|".join(re.escape(t) for t in query.terms), re.IGNORECASE)
    hits = []
    for entry_id, kind, session_id, _message, compaction_id, role, position, created, body in rows:
        session = sessions.get(session_id)
        if session is None:
            continue
        compaction = compactions.get(compaction_id) if compaction_id is not None else None
        if entry_id >= COMPACTION_BASE:
            if compaction is None:
                continue
            anchor = "#native-summary-row" if kind == "native_summary" else "#summary"
            url = reverse("compaction_detail", args=[compaction]) + anchor
            position = None
        else:
            url = reverse("message_detail", args=[session.public_id, position])
        text, marked = snippet(body, pattern)
        hits.append(
            Hit(
                kind=kind,
                conversation=session.public_id,
                conversation_title=str(session),
                source=session.source,
                position=position,
                role=role or "",
                compaction=compaction,
                snippet=text,
                snippet_html=marked,
                created_at=_datetime(created),
                url=url,
            )
        )
    return hits


def _datetime(value: Any) -> dt.datetime | None:
    if value is None or isinstance(value, dt.datetime):
        return value
    parsed = dt.datetime.fromisoformat(str(value))
    return timezone.make_aware(parsed, dt.UTC) if timezone.is_naive(parsed) else parsed


def snippet(body: str, pattern: re.Pattern[str]) -> tuple[str, str]:
    """A window of ``body`` around its first match: as plain text, and as escaped HTML with
    every match in ``<mark>``."""
    first = pattern.search(body)
    start = max(0, first.start() - SNIPPET_BEFORE) if first else 0
    end = min(len(body), start + SNIPPET_CHARS)
    if first and first.end() > end:  # a match longer than the window: show all of it
        end = first.end()
    window = body[start:end]
    prefix = "…" if start else ""
    suffix = "…" if end < len(body) else ""
    parts: list[str] = []
    at = 0
    for match in pattern.finditer(window):
        parts.append(html.escape(window[at : match.start()]))
        parts.append(f"<mark>{html.escape(match.group())}</mark>")
        at = match.end()
    parts.append(html.escape(window[at:]))
    flat = " ".join(window.split())
    return prefix + flat + suffix, html.escape(prefix) + "".join(parts) + html.escape(suffix)
