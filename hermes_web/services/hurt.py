"""Where compaction hurt, across every stored session of a user (issue #36 item 4).

Every committed compaction that was meant to change a conversation (ours, an agent's own found
in an import, a /v1 client's; never a what-if) is counted, by agent and by project, and checked
for the pains people report about many sessions:

- **loops**: a compaction that follows the previous one of its chain after at most
  ``LOOP_TURNS`` model replies ("quick"); a chain loops when it has ``LOOP_REPEAT`` quick ones.
  A compaction that freed less than ``FREED_LITTLE`` of the recorded tokens is listed too.
- **summary growth**: the ratio of each summary's tokens to the previous summary's in the
  same chain (``report.tokens.summary``), with the chains whose summaries grew the most.
- **trigger miscounts**: an agent's recorded tokens-before above the session's window, or far
  from our count of the prompt it replaced (more than ``FAR`` times it plus ``SLACK`` for the
  system prompt and tool definitions a transcript does not record, or less than a ``FAR``-th).
- **rules lost**: a user constraint sentence in the compacted rows (the fact ledger's
  ``constraints``) found nowhere in the context the model saw right after the compaction
  (``services.fate.context_after``).
- **re-reads**: files read in the compacted rows and read again within ``REREAD_TURNS`` model
  replies after the compaction, with the tokens of those reads' results.

Counts, chains and token figures come from one query over the user's sessions (each one's
project read out of its JSON once) and one over the compaction rows: numbers read out of the
JSON report in SQL, a window for each compaction's previous one in its chain, a count of the
model replies in between on the (session, role, created_at) message index, times as text. Both
are read through a plain cursor (no model or datetime per row) and public ids and titles are
read for the rows listed only: at 10k sessions the first view costs about 300 ms of CPU
(``bench/bench_hurt.py``). Rules lost and re-reads read message rows, so they are checked on
the newest ``DEEP_LIMIT`` compactions only (the page says so). The whole result is cached per
user, keyed by the newest ``updated_at`` of the user's sessions and their count: every writer of
a session's rows touches it.
"""

from __future__ import annotations

import gc
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from itertools import groupby
from operator import attrgetter
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import Count, IntegerField, Max, Q, TextField, Value
from django.db.models.fields.json import KT, KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce, NullIf

from compaction.ledger import extract
from compaction.probes import message_text, normalize
from hermes_web.caching import HURT_SECONDS, hurt_key
from hermes_web.models import Compaction, Message, Session

__all__ = [
    "DEEP_LIMIT",
    "FAR",
    "FREED_LITTLE",
    "LOOP_REPEAT",
    "LOOP_TURNS",
    "REREAD_TURNS",
    "SLACK",
    "HurtReport",
    "hurt_report",
]

LOOP_TURNS = 3  # model replies between two compactions of a chain at most, for "quick"
LOOP_REPEAT = 2  # quick compactions that make a chain a loop
FREED_LITTLE = 0.10  # a compaction that freed less than this share of tokens-before
FAR = 2.0
SLACK = 20_000  # tokens of a system prompt and tool definitions no transcript records
REREAD_TURNS = 5  # model replies after a compaction searched for re-reads
REREAD_ROWS = 80  # rows after a compaction read at most, for re-reads
DEEP_LIMIT = 100  # newest compactions checked for rules lost and re-reads
WORST = 10  # rows of each "worst" table
LISTED = 50  # rows of the other tables (their counts are whole)
HOURS = 48  # bars of the per-hour chart: the newest hours that had compactions

# Where an importer keeps the working directory of a session: ``extra[<agent>]["cwd"]``.
PROJECT_KEYS = (
    "cwd",
    "claude_code__cwd",
    "codex__cwd",
    "copilot_cli__cwd",
    "pi__cwd",
    "hermes__cwd",
    "gemini_cli__cwd",
    "cline__cwd",
    "aider__cwd",
    "continue__cwd",
    "openhands__cwd",
    "swe_agent__cwd",
)
NO_PROJECT = "(not recorded)"


@dataclass(frozen=True, slots=True)
class Group:
    """Compactions of one agent or project."""

    name: str
    sessions: int
    compactions: int
    per_session: float | None
    peak_hour: str  # "2026-07-23 10:00" of its busiest hour, "" when none
    peak_hour_count: int
    native: int  # of them the agent's own (found in an import), the rest ran our engine
    compaction_ids: list[str]  # the newest few, to link to


@dataclass(frozen=True, slots=True)
class Item:
    """One finding, with the compactions behind it (public ids, oldest first)."""

    session: str
    session_title: str
    compactions: list[str]
    value: float
    detail: str


@dataclass(slots=True)
class HurtReport:
    """Everything the page and the API show (see the module docstring)."""

    sessions: int = 0
    compactions: int = 0
    hours: list[tuple[str, int, list[str]]] = field(default_factory=list)
    by_agent: list[Group] = field(default_factory=list)
    by_project: list[Group] = field(default_factory=list)
    quick: int = 0
    loop_chains: int = 0
    loops: list[Item] = field(default_factory=list)
    freed_little_count: int = 0
    freed_little: list[Item] = field(default_factory=list)
    ratios: int = 0
    grown: int = 0
    median_ratio: float | None = None
    max_ratio: float | None = None
    growth: list[Item] = field(default_factory=list)
    miscount_count: int = 0
    miscounts: list[Item] = field(default_factory=list)
    deep_checked: int = 0
    rules_lost: list[Item] = field(default_factory=list)
    rereads: list[Item] = field(default_factory=list)
    reread_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (the API's body)."""
        return asdict(self)


@dataclass(slots=True)
class _Row:
    """One counted compaction, as plain numbers and words read in one query (no model)."""

    pk: int
    session_id: int
    chain: int
    agent: str
    project: str
    hour: str  # "2026-07-23 10:00" (UTC): sorts as time does
    native: bool
    tokens_before: int | None
    tokens_after: int | None
    window: int
    summary_tokens: int | None
    counted_before: int | None
    at: tuple[str, int]  # its time as sortable text, and its id: the user's newest sort last
    turns: int | None  # model replies since the previous compaction of its chain, if any


# A finding before its public ids and title are read: its rows, value and words.
_Pending = tuple[Sequence[_Row], float, str]


def _int(name: str) -> Cast:
    return Cast(KT(name), IntegerField())


def _key_text(path: str, column: str) -> KeyTextTransform:
    """``column``'s JSON value at ``path`` ("a__b") as text; ``column`` may cross a relation
    ("session__extra"), which ``KT`` cannot."""
    *outer, last = path.split("__")
    inner: Any = column
    for key in outer:
        inner = KeyTransform(key, inner)
    return KeyTextTransform(last, inner)


def _project(extra: str) -> Coalesce:
    """The session's recorded working directory, in SQL (NULL when none was recorded)."""
    return Coalesce(
        *(
            NullIf(_key_text(key, extra), Value("", output_field=TextField()))
            for key in PROJECT_KEYS
        )
    )


AGENTS = {value: str(label) for value, label in Session.Source.choices}


@dataclass(slots=True)
class _Sessions:
    """Every session of the user: how many, how many per agent and per project, and each one's
    project (one query; the project is read out of the JSON once per session, in SQL)."""

    total: int
    count: dict[str, dict[str, int]]
    project: dict[int, str]

    @classmethod
    def of(cls, user) -> _Sessions:
        found = cls(0, {"agent": defaultdict(int), "project": defaultdict(int)}, {})
        rows = (
            Session.objects.for_user(user)
            .annotate(project=_project("extra"))
            .order_by()
            .values_list("pk", "source", "project")
        )
        agents, by_agent, by_project = AGENTS, found.count["agent"], found.count["project"]
        for pk, source, project in _raw(*rows.query.sql_with_params()):
            found.project[pk] = project = project or NO_PROJECT
            by_agent[agents.get(source, source)] += 1
            by_project[project] += 1
        found.total = len(found.project)
        return found


# Per database: a stored time's hour as "YYYY-MM-DD HH:00" (UTC), and the time as text that
# sorts as the times do. Formats are parameters (no "%" in the SQL text).
_TIME_SQL = {
    "sqlite": ("strftime(%s, c.queued_at)", "%Y-%m-%d %H:00", "CAST(c.queued_at AS TEXT)", None),
    "postgresql": (
        "to_char(c.queued_at AT TIME ZONE 'UTC', %s)",
        "YYYY-MM-DD HH24:00",
        "to_char(c.queued_at AT TIME ZONE 'UTC', %s)",
        "YYYY-MM-DD HH24:MI:SS.US",
    ),
}


def _raw(sql: str, params: Sequence[Any]) -> list[tuple]:
    """Rows of ``sql`` through a plain cursor: no per-row conversion (Django's datetime and
    JSON converters cost more than the query on 20k rows); callers select no such column."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _rows(user, projects: Mapping[int, str]) -> list[_Row]:
    """Every counted compaction of ``user``, by chain then time, in one query.

    The ORM writes the filter and the JSON reads (portable across SQLite and PostgreSQL). Over
    it, a window finds each compaction's previous one in its chain, and a correlated count (a
    range of the message index on session, role and time) the model replies in between. Read
    through a plain cursor, with times as text: no model and no datetime per row.
    """
    base = (
        Compaction.objects.for_user(user)
        .real()
        .committed()
        .order_by()
        .annotate(
            chain=Coalesce("session__root_id", "session_id"),
            summary_tokens=_int("report__tokens__summary"),
            counted_before=_int("report__tokens__counted_before"),
        )
        .values_list(
            "pk",
            "session_id",
            "chain",
            "session__source",
            "source",
            "tokens_before",
            "tokens_after",
            "session__context_length",
            "summary_tokens",
            "counted_before",
            "queued_at",
            "finished_at",
        )
    )
    base_sql, base_params = base.query.sql_with_params()
    hour_sql, hour_format, at_sql, at_format = _TIME_SQL.get(
        connection.vendor, _TIME_SQL["postgresql"]
    )
    msg = Message._meta.db_table
    sql = f"""
        WITH k(id, session_id, chain, session_source, source, tokens_before, tokens_after,
               ctx_len, summary_tokens, counted_before, queued_at, finished_at) AS ({base_sql}),
        c AS (
            SELECT k.*, LAG(COALESCE(k.finished_at, k.queued_at)) OVER (
                PARTITION BY k.chain ORDER BY k.queued_at, k.id
            ) AS prev_at
            FROM k
        )
        SELECT c.id, c.session_id, c.chain, c.session_source, c.source, c.tokens_before,
               c.tokens_after, c.ctx_len, c.summary_tokens, c.counted_before,
               {hour_sql}, {at_sql},
               CASE WHEN c.prev_at IS NULL THEN NULL ELSE (
                   SELECT COUNT(*) FROM {msg} m
                   WHERE m.session_id = c.session_id AND m.role = %s
                     AND m.created_at > c.prev_at AND m.created_at <= c.queued_at
               ) END
        FROM c ORDER BY c.chain, c.queued_at, c.id
    """  # noqa: S608 (the table name is the model's own; every value is a parameter)
    params = [
        *base_params,
        hour_format,
        *([at_format] if at_format else []),
        Message.Role.ASSISTANT,
    ]
    ours = Compaction.Source.OURS
    agents = AGENTS
    return [
        _Row(
            pk,
            session_id,
            chain,
            agents.get(session_source, session_source),
            projects.get(session_id) or NO_PROJECT,
            hour,
            source != ours,
            before,
            after,
            window,
            summary,
            counted,
            (at, pk),
            turns,
        )
        for (
            pk,
            session_id,
            chain,
            session_source,
            source,
            before,
            after,
            window,
            summary,
            counted,
            hour,
            at,
            turns,
        ) in _raw(sql, params)
    ]


def _chains(rows: Iterable[_Row]) -> dict[int, list[_Row]]:
    """``rows`` (in chain order) by chain."""
    return {chain: list(runs) for chain, runs in groupby(rows, key=attrgetter("chain"))}


def _groups(
    timeline: Sequence[_Row], key: str, sessions: Mapping[str, int]
) -> list[tuple[Group, list[_Row]]]:
    """Compactions grouped by ``key`` ("agent" or "project"); ``timeline``: every row, oldest
    first; ``sessions``: every session of each group, compacted or not. Each group with its
    newest few rows (their ids are read later, for these rows only)."""
    by: dict[str, list[_Row]] = defaultdict(list)
    for row in timeline:
        by[getattr(row, key)].append(row)
    groups = []
    for name, members in by.items():
        hours = Counter(map(attrgetter("hour"), members))
        peak, peak_count = max(hours.items(), key=lambda kv: (kv[1], kv[0]))
        n = sessions.get(name, 0)
        group = Group(
            name,
            n,
            len(members),
            round(len(members) / n, 2) if n else None,
            peak,
            peak_count,
            sum(map(attrgetter("native"), members)),
            [],
        )
        groups.append((group, members[-5:]))
    return sorted(groups, key=lambda g: (-g[0].compactions, g[0].name))


def _loops(report: HurtReport, chains: Mapping[int, list[_Row]]) -> dict[str, list[_Pending]]:
    loops: list[_Pending] = []
    freed_little: list[_Pending] = []
    for runs in chains.values():
        quick = [r for r in runs if r.turns is not None and r.turns <= LOOP_TURNS]
        report.quick += len(quick)
        if len(quick) >= LOOP_REPEAT:
            loops.append(
                (quick, len(quick), f"{len(quick)} compactions within {LOOP_TURNS} replies")
            )
        for r in runs:
            if r.tokens_before and r.tokens_after is not None:
                freed = (r.tokens_before - r.tokens_after) / r.tokens_before
                if freed < FREED_LITTLE:
                    freed_little.append(([r], round(freed, 4), ""))
    report.loop_chains, report.freed_little_count = len(loops), len(freed_little)
    loops.sort(key=lambda p: -p[1])
    freed_little.sort(key=lambda p: p[1])
    # Words only for the rows listed.
    return {
        "loops": loops[:LISTED],
        "freed_little": [
            (rows, value, f"{rows[0].tokens_before:,} → {rows[0].tokens_after:,}")
            for rows, value, _ in freed_little[:LISTED]
        ],
    }


def _growth(report: HurtReport, chains: Mapping[int, list[_Row]]) -> list[_Pending]:
    ratios: list[float] = []
    worst: list[tuple[float, list[_Row]]] = []
    for runs in chains.values():
        with_summary = [r for r in runs if r.summary_tokens]
        chain_ratios = [
            (b.summary_tokens or 0) / (a.summary_tokens or 1)
            for a, b in zip(with_summary, with_summary[1:], strict=False)
        ]
        ratios += chain_ratios
        if chain_ratios and (top := max(chain_ratios)) > 1:
            worst.append((top, with_summary))
    report.ratios = len(ratios)
    report.grown = sum(1 for r in ratios if r > 1)
    if ratios:
        report.median_ratio = round(statistics.median(ratios), 2)
        report.max_ratio = round(max(ratios), 2)
    # Words only for the rows listed: a user with 10k grown chains lists ten.
    worst.sort(key=lambda pair: -pair[0])
    return [
        (runs, round(top, 2), " → ".join(f"{r.summary_tokens:,}" for r in runs))
        for top, runs in worst[:WORST]
    ]


def _miscount_words(r: _Row) -> str:
    before, counted = r.tokens_before or 0, r.counted_before
    why = []
    if before > r.window:
        why.append(f"{before:,} recorded, window {r.window:,}")
    if counted and (before > FAR * counted + SLACK or before * FAR < counted):
        why.append(f"{before:,} recorded, {counted:,} counted in the prompt it replaced")
    return "; ".join(why)


def _miscounts(report: HurtReport, rows: Iterable[_Row]) -> list[_Pending]:
    found = [
        r
        for r in rows
        if r.native
        and (before := r.tokens_before) is not None
        and (
            before > r.window
            or (
                (counted := r.counted_before)
                and (before > FAR * counted + SLACK or before * FAR < counted)
            )
        )
    ]
    report.miscount_count = len(found)
    found.sort(key=lambda r: -(r.tokens_before or 0))
    return [([r], r.tokens_before or 0, _miscount_words(r)) for r in found[:LISTED]]


def _window(after: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of ``after`` up to ``REREAD_TURNS`` model replies."""
    out: list[dict[str, Any]] = []
    replies = 0
    for message in after:
        if message["role"] == Message.Role.ASSISTANT:
            if replies == REREAD_TURNS:
                break
            replies += 1
        out.append(message)
    return out


def _rereads(before: set[str], after: Sequence[dict[str, Any]]) -> tuple[list[str], int]:
    """The paths of ``before`` read again in ``after``, and the tokens of those reads' results."""
    paths: set[str] = set()
    call_ids: set[str] = set()
    for message in after:
        for call in message.get("tool_calls") or ():
            one = {"role": "assistant", "content": None, "tool_calls": [call]}
            again = {f.text for f in extract([one]).of("files") if "r" in f.detail} & before
            if again:
                paths |= again
                if isinstance(call, Mapping) and call.get("id"):
                    call_ids.add(str(call["id"]))
    tokens = sum(
        int(m["_tokens"])
        for m in after
        if m["role"] == Message.Role.TOOL and m.get("tool_call_id") in call_ids
    )
    return sorted(paths), tokens


def _load(runs: Sequence[Compaction]) -> tuple[dict[int, list], dict[int, list]]:
    """Each run's input rows and the rows after its snapshot (its context, then what followed),
    as engine dicts with ``_tokens``, in two queries for all the runs.

    The same rows as ``Compaction.input_rows`` and ``final_rows`` of a committed run: an
    in-place run's archived rows and the result session's rows past its snapshot; a rotation's
    parent rows up to its snapshot and the child's rows from the start.
    """
    inputs: dict[int, list] = defaultdict(list)
    after: dict[int, list] = defaultdict(list)
    archived = [r.pk for r in runs if r.mode == Compaction.Mode.IN_PLACE]
    rotated = Q()
    after_q = Q()
    ranges: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # session -> (lo, hi, pk)
    for run in runs:
        count = ((run.report or {}).get("counts") or {}).get("messages_after") or 0
        if run.mode != Compaction.Mode.IN_PLACE:
            snapshot = run.snapshot_position if run.snapshot_position is not None else 10**9
            rotated |= Q(session_id=run.session_id, active=True, position__lte=snapshot)
            low = -1
        else:
            low = run.snapshot_position if run.snapshot_position is not None else -1
        if run.result_session_id is not None:
            high = low + count + REREAD_ROWS
            after_q |= Q(session_id=run.result_session_id, position__gt=low, position__lte=high)
            ranges[run.result_session_id].append((low, high, run.pk))
    columns = ("token_count", *Message.ENGINE_COLUMNS)
    if archived:
        rows = Message.objects.filter(archived_by_id__in=archived).order_by("position")
        for pk, *values in rows.values_list("archived_by_id", *Message.ENGINE_COLUMNS):
            inputs[pk].append(Message.engine_dict(*values))
    if rotated:
        by_session = defaultdict(list)
        for run in runs:
            if run.mode != Compaction.Mode.IN_PLACE:
                by_session[run.session_id].append(run)
        rows = Message.objects.filter(rotated).order_by("position")
        for session_id, position, *values in rows.values_list(
            "session_id", "position", *Message.ENGINE_COLUMNS
        ):
            for run in by_session[session_id]:
                if run.snapshot_position is None or position <= run.snapshot_position:
                    inputs[run.pk].append(Message.engine_dict(*values))
    if after_q:
        rows = Message.objects.filter(after_q).order_by("position")
        for session_id, position, tokens, *values in rows.values_list(
            "session_id", "position", *columns
        ):
            for low, high, pk in ranges[session_id]:
                if low < position <= high:
                    message = Message.engine_dict(*values)
                    message["_tokens"] = tokens
                    after[pk].append(message)
    return inputs, after


def _deep(report: HurtReport, newest: Sequence[_Row]) -> dict[str, list[_Pending]]:
    """Rules lost and re-reads of the ``newest`` compactions (they read message rows)."""
    by_pk = {r.pk: r for r in newest}
    runs = list(
        Compaction.objects.filter(pk__in=by_pk).only(
            "mode", "session_id", "result_session_id", "snapshot_position", "report"
        )
    )
    report.deep_checked = len(runs)
    inputs, afters = _load(runs)
    found: dict[str, list[_Pending]] = {"rules_lost": [], "rereads": []}
    for run in runs:
        row = by_pk[run.pk]
        ledger = extract(inputs[run.pk])
        count = ((run.report or {}).get("counts") or {}).get("messages_after") or 0
        context, following = afters[run.pk][:count], afters[run.pk][count:]
        constraints = [f.text for f in ledger.of("constraints")]
        if constraints:
            final = [normalize(message_text(m)) for m in context]
            lost = [c for c in constraints if not any(normalize(c) in text for text in final)]
            if lost:
                found["rules_lost"].append(([row], len(lost), " | ".join(lost)))
        read = {f.text for f in ledger.of("files") if "r" in f.detail}
        if read:
            paths, tokens = _rereads(read, _window(following))
            if paths:
                found["rereads"].append(([row], tokens, ", ".join(paths)))
                report.reread_tokens += tokens
    return found


def _names(pks: Iterable[int]) -> dict[int, tuple[str, str, str]]:
    """Public id, session public id and session title of the compactions ``pks`` (one query,
    for the few hundred rows a page lists, never for every row)."""
    return {
        pk: (public_id, session, title)
        for pk, public_id, session, title in Compaction.objects.filter(pk__in=set(pks))
        .order_by()
        .values_list("pk", "public_id", "session__public_id", "session__title")
    }


def _item(pending: _Pending, names: Mapping[int, tuple[str, str, str]]) -> Item:
    rows, value, detail = pending
    _, session, title = names[rows[0].pk]
    return Item(session, title, [names[r.pk][0] for r in rows], value, detail)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while the report is built: its 20k short-lived rows set off
    full collections over the whole process's heap (a third of the time at 10k sessions). The
    report makes no cycles of its own; the collector runs again right after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def compute(user) -> HurtReport:
    """The report for ``user``, from the stored rows (uncached; see ``hurt_report``)."""
    with _collector_paused():
        return _compute(user)


def _compute(user) -> HurtReport:
    sessions = _Sessions.of(user)
    counts = sessions.count
    report = HurtReport(sessions=sessions.total)
    rows = _rows(user, sessions.project)
    report.compactions = len(rows)
    if not rows:
        return report
    timeline = sorted(rows, key=attrgetter("at"))  # the user's compactions, oldest first
    hours: dict[str, list[_Row]] = defaultdict(list)
    for r in timeline:
        hours[r.hour].append(r)
    shown_hours = [(hour, len(runs), runs[-5:]) for hour, runs in sorted(hours.items())[-HOURS:]]
    by_agent = _groups(timeline, "agent", counts["agent"])
    by_project = _groups(timeline, "project", counts["project"])
    chains = _chains(rows)
    pending = {
        **_loops(report, chains),
        "growth": _growth(report, chains),
        "miscounts": _miscounts(report, rows),
        **_deep(report, timeline[-DEEP_LIMIT:]),
    }
    # The public ids and titles of what is shown, read once for all of it.
    listed = [r for _, _, runs in shown_hours for r in runs]
    listed += [r for groups in (by_agent, by_project) for _, runs in groups for r in runs]
    listed += [r for items in pending.values() for runs, _, _ in items for r in runs]
    names = _names(r.pk for r in listed)
    report.hours = [(hour, n, [names[r.pk][0] for r in runs]) for hour, n, runs in shown_hours]
    report.by_agent, report.by_project = (
        [replace(group, compaction_ids=[names[r.pk][0] for r in runs]) for group, runs in groups]
        for groups in (by_agent, by_project)
    )
    for name, items in pending.items():
        setattr(report, name, [_item(p, names) for p in items])
    report.rules_lost.sort(key=lambda i: (-i.value, i.compactions))
    report.rereads.sort(key=lambda i: (-i.value, i.compactions))
    return report


def cache_key(user) -> str:
    """The user's report until one of their sessions is touched (or a session is deleted)."""
    stats = Session.objects.for_user(user).aggregate(newest=Max("updated_at"), n=Count("pk"))
    return hurt_key(user.pk, stats["newest"], stats["n"])


def hurt_report(user) -> HurtReport:
    """The report for ``user``, cached until one of their sessions changes."""
    key = cache_key(user)
    found = cache.get(key)
    if isinstance(found, HurtReport):
        return found
    report = compute(user)
    cache.set(key, report, HURT_SECONDS)
    return report
