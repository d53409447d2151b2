"""Compacting a very long session without loading it: the bounded-middle path.

A session over ``HERMES_BOUNDED_COMPACTION_ABOVE`` active messages is not read whole. The
engine gets a reduced list that holds everything its decisions and its summarizer input
depend on, in the session's order:

- the first rows: the head (system prompt + ``protect_first_n``, a margin for tool rows) and
  the middle's front, until its text reaches twice the share of ``summary_input_max_chars``
  the summarizer input keeps from the front (45 %, ``compaction.serialize``);
- single rows of the omitted span the engine looks for: the newest summary (the previous
  summary), and the latest user message and latest visible assistant reply when the loaded
  end of the session has none (the tail pulls them in);
- the end: the rows the tail walk can reach (newest rows until twice the tail's ceiling, as
  low bounds of what the slimming passes leave of each), then the middle's back, until its
  text reaches twice the back's share (55 %).

Front and back end on tool-round boundaries (a call and its results stay together). After
the engine ran, the cut is checked to lie inside the loaded end (and the head inside the
first rows); otherwise more is loaded and the engine runs again, so head and tail are the
ones the whole session would give. The report is then moved to the session's real indices
(boundaries, actions, ``[ref:N]``, counts and token figures with the omitted span added)
and says which messages the summarizer did not read. The commit is the normal one: it
archives or keeps rows by position range, never by a list of ids.
"""

# Over 450 lines: loading the bounded input and mapping the report back to real positions are
# two halves of one contract (every index the first shifts, the second must shift back).

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from sys import intern
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Sum

from compaction import CompactionConfig, CompactionResult
from compaction.boundary import tail_ceiling
from compaction.messages import content_text, has_visible_text
from compaction.summary import is_summary_message
from hermes_web.models import Message
from hermes_web.services.dbretry import db_retry

__all__ = [
    "BoundedInput",
    "BoundedRun",
    "active_span",
    "compact_bounded",
    "is_bounded",
    "load_bounded",
    "remap_report",
]

_CHUNK = 500
_HEAD_MARGIN = 64  # rows past system + protect_first_n: the head moves past tool rows
_FRONT_SHARE, _BACK_SHARE = 0.45, 0.55  # compaction.serialize's split of the capped input
_RECORD_OVERHEAD = 40  # "[TOOL RESULT call_…]: " and the blank line between records
# Low bounds of what the hermes passes leave of a row (a fold line, a dedup or lean-tail stub,
# shrunk arguments): the tail walk over slimmed counts reaches at most this far.
_SLIMMED_TOOL_TOKENS = 12
_SLIMMED_CALL_TOKENS = 24
_MAX_ROUNDS = 12
_REF_RE = re.compile(r"\[ref:(\d+)\]")
# values_list columns of one row, in ``_engine_row``'s order.
_COLUMNS = (
    "position",
    *Message.ENGINE_COLUMNS,
    "token_count",
    "provider_prompt_tokens",
    "is_summary",
)

Row = tuple[Any, ...]
Engine = Callable[[list[dict[str, Any]], list[int], int | None, bool], CompactionResult]


def is_bounded(active_count: int) -> bool:
    """True when a session of this many active messages takes the bounded-middle path."""
    return active_count > settings.HERMES_BOUNDED_COMPACTION_ABOVE


@db_retry
def active_span(session_id: int) -> tuple[int, int]:
    """``(active messages, last active position)`` in one aggregate query."""
    found = Message.objects.filter(session_id=session_id, active=True).aggregate(
        n=Count("pk"), top=Max("position")
    )
    return int(found["n"] or 0), int(found["top"] or 0)


@dataclass(slots=True)
class BoundedInput:
    """The reduced list and where each of its rows really is.

    Attributes:
        messages: the reduced list in engine format, in the session's order.
        token_counts: their stored token counts.
        ordinals: reduced index → index in the session's active list (what reports index).
        positions: reduced index → stored position.
        total: active messages up to the snapshot.
        front: rows loaded from the start (``messages[:front]``).
        tail_offset: reduced index of the first row the tail walk was loaded for.
        omitted: messages not loaded.
        omitted_tokens: their stored tokens.
        provider_prompt: the newest provider prompt count of the session.
    """

    messages: list[dict[str, Any]]
    token_counts: list[int]
    ordinals: list[int]
    positions: list[int]
    total: int
    front: int
    tail_offset: int
    omitted: int
    omitted_tokens: int
    provider_prompt: int | None

    def real(self, index: int) -> int:
        """The session index of reduced index ``index`` (``len`` maps to ``total``)."""
        if 0 <= index < len(self.ordinals):
            return self.ordinals[index]
        return self.total if index >= len(self.ordinals) else index


@dataclass(slots=True)
class BoundedRun:
    """A bounded compaction: the result (``[ref:N]`` moved to real indices) and its report."""

    result: CompactionResult
    report: dict[str, Any]
    loaded: int
    rounds: int


def _engine_row(row: Row) -> dict[str, Any]:
    _, role, content, calls, call_id, tool_name, reasoning, _, prompt, is_summary, *_ = row
    message = Message.engine_dict(
        role=intern(role),
        content=content,
        tool_calls=calls,
        tool_call_id=call_id,
        tool_name=intern(tool_name) if tool_name else tool_name,
        reasoning=reasoning,
        is_summary=is_summary,  # an agent's summary wrapped as the engine reads one
    )
    if prompt is not None:
        message["provider_prompt_tokens"] = prompt
    return message


def _record_chars(row: Row) -> int:
    """About the length of the row's summarizer record (its text and calls, no reasoning)."""
    chars = _RECORD_OVERHEAD + len(content_text(row[2], images=False))
    calls = row[3]
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                chars += len(str(function.get("name") or "")) + len(
                    str(function.get("arguments") or "")
                )
    return chars


def _slimmed_low(row: Row) -> int:
    tokens = int(row[7] or 0)
    if row[1] == "tool":
        return min(tokens, _SLIMMED_TOOL_TOKENS)
    if row[3]:
        return min(tokens, _SLIMMED_CALL_TOKENS)
    return tokens


def _rows(session_id: int, snapshot: int) -> Any:
    return Message.objects.filter(session_id=session_id, active=True, position__lte=snapshot)


def _ascending(session_id: int, snapshot: int, after: int, before: int) -> Iterator[Row]:
    """Rows with ``after < position < before``, oldest first, a chunk per query."""
    cursor = after
    while True:
        chunk = list(
            _rows(session_id, snapshot)
            .filter(position__gt=cursor, position__lt=before)
            .order_by("position")
            .values_list(*_COLUMNS)[:_CHUNK]
        )
        yield from chunk
        if len(chunk) < _CHUNK:
            return
        cursor = chunk[-1][0]


def _descending(session_id: int, snapshot: int, after: int) -> Iterator[Row]:
    """Rows with ``after < position <= snapshot``, newest first, a chunk per query."""
    cursor = snapshot + 1
    while True:
        chunk = list(
            _rows(session_id, snapshot)
            .filter(position__gt=after, position__lt=cursor)
            .order_by("-position")
            .values_list(*_COLUMNS)[:_CHUNK]
        )
        yield from chunk
        if len(chunk) < _CHUNK:
            return
        cursor = chunk[-1][0]


def _load_front(
    session_id: int, snapshot: int, config: CompactionConfig, head_rows: int
) -> list[Row]:
    """The head and the middle's front, ending before a row that is not a tool result."""
    cap = config.summary_input_max_chars
    target = 2 * _FRONT_SHARE * cap
    skip = 1 + config.protect_first_n  # text of the head itself is not summarized
    front: list[Row] = []
    chars = 0
    for row in _ascending(session_id, snapshot, -1, snapshot + 1):
        if len(front) >= head_rows and chars >= target and row[1] != "tool":
            break
        front.append(row)
        if len(front) > skip:
            chars += _record_chars(row)
    return front


def _load_end(
    session_id: int, snapshot: int, config: CompactionConfig, after: int, tail_factor: int
) -> tuple[list[Row], int]:
    """The rows the tail walk can reach, then the middle's back (newest first), and how many
    of them were loaded for the tail walk. Stops at position ``after`` (the front's end)."""
    reach = tail_factor * tail_ceiling(config)
    min_rows = config.prune_floor_messages + 3 + 16
    back_target = 2 * _BACK_SHARE * config.summary_input_max_chars
    end: list[Row] = []
    walked, tail_rows, chars = 0, 0, 0
    for row in _descending(session_id, snapshot, after):
        if tail_rows:  # the back: until its text is enough, starting on a non-tool row
            if chars >= back_target and end[-1][1] != "tool":
                break
            chars += _record_chars(row)
        end.append(row)
        if not tail_rows:
            walked += _slimmed_low(row)
            if walked >= reach and len(end) >= min_rows:
                tail_rows = len(end)
    return end, tail_rows or len(end)


def _latest_in(
    session_id: int, snapshot: int, after: int, before: int, role: str, test: Callable
) -> Row | None:
    """The newest row of ``role`` with ``after < position < before`` that passes ``test``."""
    cursor = before
    while True:
        chunk = list(
            _rows(session_id, snapshot)
            .filter(role=role, position__gt=after, position__lt=cursor)
            .order_by("-position")
            .values_list(*_COLUMNS)[:_CHUNK]
        )
        for row in chunk:
            if test(row):
                return row
        if len(chunk) < _CHUNK:
            return None
        cursor = chunk[-1][0]


@db_retry
def load_bounded(
    session_id: int,
    config: CompactionConfig,
    snapshot: int,
    total: int,
    *,
    head_rows: int | None = None,
    tail_factor: int = 2,
) -> BoundedInput:
    """Load the reduced list of a session's active rows up to ``snapshot`` (see module doc).

    Args:
        session_id: the session.
        config: the run's settings (head size, tail budget, summarizer input cap).
        snapshot: the last position compacted.
        total: active rows up to ``snapshot``.
        head_rows: rows loaded from the start at least (default: system + protect_first_n
            + a margin).
        tail_factor: the tail walk is loaded until this many tail ceilings (low bounds).
    """
    head_rows = head_rows or 1 + config.protect_first_n + _HEAD_MARGIN
    front = _load_front(session_id, snapshot, config, head_rows)
    front_end = front[-1][0] if front else -1
    end, tail_rows = _load_end(session_id, snapshot, config, front_end, tail_factor)
    end.reverse()
    loaded = len(front) + len(end)
    specials: list[Row] = []
    if end and loaded < total:  # an omitted span lies between front and end
        lo, hi = front_end, end[0][0]

        def engine_test(test: Callable[[dict[str, Any]], bool]) -> Callable[[Row], bool]:
            return lambda row: test(_engine_row(row))

        summary = (
            _rows(session_id, snapshot)
            .filter(is_summary=True, position__gt=lo, position__lt=hi)
            .order_by("-position")
            .values_list(*_COLUMNS)
            .first()
        )
        if summary is not None:
            specials.append(summary)
        kept = [_engine_row(r) for r in end]
        if not any(m["role"] == "user" and not is_summary_message(m) for m in kept):
            user = _latest_in(
                session_id,
                snapshot,
                lo,
                hi,
                "user",
                engine_test(lambda m: not is_summary_message(m)),
            )
            if user is not None:
                specials.append(user)
        if not any(
            m["role"] == "assistant" and has_visible_text(m) and not is_summary_message(m)
            for m in kept
        ):
            reply = _latest_in(
                session_id,
                snapshot,
                lo,
                hi,
                "assistant",
                engine_test(lambda m: has_visible_text(m) and not is_summary_message(m)),
            )
            if reply is not None:
                specials.append(reply)
        del kept
    specials = sorted({row[0]: row for row in specials}.values(), key=lambda r: r[0])
    ordinals = list(range(len(front)))
    for row in specials:
        ordinals.append(_rows(session_id, snapshot).filter(position__lt=row[0]).count())
    ordinals.extend(range(total - len(end), total))
    rows = [*front, *specials, *end]
    omitted, omitted_tokens = 0, 0
    if end and len(rows) < total:
        omitted = total - len(rows)
        span = _rows(session_id, snapshot).filter(position__gt=front_end, position__lt=end[0][0])
        span_tokens = span.aggregate(t=Sum("token_count"))["t"] or 0
        omitted_tokens = int(span_tokens) - sum(int(r[7] or 0) for r in specials)
    prompt = (
        _rows(session_id, snapshot)
        .filter(provider_prompt_tokens__isnull=False)
        .order_by("-position")
        .values_list("provider_prompt_tokens", flat=True)
        .first()
    )
    return BoundedInput(
        messages=[_engine_row(r) for r in rows],
        token_counts=[int(r[7] or 0) for r in rows],
        ordinals=ordinals,
        positions=[r[0] for r in rows],
        total=total,
        front=len(front),
        tail_offset=len(rows) - tail_rows,
        omitted=omitted,
        omitted_tokens=omitted_tokens,
        provider_prompt=prompt,
    )


def _cut_fits(report: Mapping[str, Any], bounded: BoundedInput) -> tuple[bool, bool]:
    """``(head fits, tail fits)``: the head ends inside the first rows, and the tail starts
    past the first row loaded for the tail walk (so the walk stopped where the whole
    session would have stopped it)."""
    if not bounded.omitted:
        return True, True
    bounds = report.get("boundaries") or {}
    head_end = (list(bounds.get("head") or [0, 0]) + [0, 0])[1]
    tail_start = (list(bounds.get("tail") or [0, 0]) + [0, 0])[0]
    return head_end < bounded.front, tail_start > bounded.tail_offset


def compact_bounded(
    session_id: int,
    config: CompactionConfig,
    snapshot: int,
    total: int,
    engine: Engine,
    *,
    probe_first: bool,
) -> BoundedRun:
    """Run the engine on the reduced list until its cut lies inside what was loaded.

    Args:
        session_id, config, snapshot, total: what to load (``load_bounded``).
        engine: ``engine(messages, token_counts, provider_prompt, probe)`` runs ``compact``;
            with ``probe`` it uses the deterministic summarizer (only the cut is needed).
        probe_first: the real summarizer costs something (a model): find the cut with the
            deterministic one first, then run the real one once.
    """
    head_rows, tail_factor, rounds = None, 2, 0
    while True:
        rounds += 1
        bounded = load_bounded(
            session_id, config, snapshot, total, head_rows=head_rows, tail_factor=tail_factor
        )
        result = engine(
            bounded.messages, bounded.token_counts, bounded.provider_prompt, probe_first
        )
        head_ok, tail_ok = _cut_fits(result.report.to_dict(), bounded)
        if (head_ok and tail_ok) or rounds >= _MAX_ROUNDS:
            break
        # The cut fell outside what was loaded: load more (the whole session at worst).
        if not head_ok:
            head_rows = 4 * (head_rows or 1 + config.protect_first_n + _HEAD_MARGIN)
        if not tail_ok:
            tail_factor *= 4
        del result, bounded
    if probe_first:
        result = engine(bounded.messages, bounded.token_counts, bounded.provider_prompt, False)
    report = remap_report(result.report.to_dict(), bounded)
    messages = [_remap_message(m, bounded) for m in result.messages]
    result = dataclasses.replace(result, messages=messages)
    return BoundedRun(result=result, report=report, loaded=len(bounded.messages), rounds=rounds)


def _remap_refs(text: str, bounded: BoundedInput) -> str:
    if "[ref:" not in text:
        return text
    return _REF_RE.sub(lambda m: f"[ref:{bounded.real(int(m.group(1)))}]", text)


def _remap_value(value: Any, bounded: BoundedInput) -> Any:
    if isinstance(value, str):
        return _remap_refs(value, bounded)
    if isinstance(value, list):
        return [_remap_value(v, bounded) for v in value]
    if isinstance(value, dict):
        return {k: _remap_value(v, bounded) for k, v in value.items()}
    return value


def _remap_message(message: dict[str, Any], bounded: BoundedInput) -> dict[str, Any]:
    """The message with its ``[ref:N]`` moved to real indices (a copy only when changed)."""
    content = message.get("content")
    moved = _remap_value(content, bounded)
    return message if moved == content else {**message, "content": moved}


def remap_report(report: dict[str, Any], bounded: BoundedInput) -> dict[str, Any]:
    """The engine's report on the reduced list, moved to the session's real indices.

    Boundaries, alignment moves and action indices become session indices; ``[ref:N]`` in
    every text likewise; ``counts.messages_before`` is the session's count; the token
    figures add the omitted span to ``before`` and ``middle`` (and ``saved``/``ratio``
    follow); the per-input-message token list is dropped (it would describe only the loaded
    rows). A warning says how much the summarizer did not read.
    """
    out = _remap_value(report, bounded)
    real = bounded.real
    bounds = out.get("boundaries") or {}
    if bounds:
        head_end = real(bounds["head"][1])
        tail_start = real(bounds["tail"][0])
        out["boundaries"] = {
            "head": [0, head_end],
            "middle": [head_end, max(head_end, tail_start)],
            "tail": [tail_start, bounded.total],
        }
    out["alignment"] = [
        {**event, "from": real(event["from"]), "to": real(event["to"])}
        if isinstance(event.get("from"), int) and isinstance(event.get("to"), int)
        else event
        for event in out.get("alignment") or []
    ]
    for action in out.get("slimming") or []:
        index = action.get("index")
        if isinstance(index, int) and index >= 0:
            action["index"] = real(index)
    replay = out.get("inflight_replay")
    if isinstance(replay, dict) and isinstance(replay.get("source_index"), int):
        replay["source_index"] = real(replay["source_index"])
    counts = dict(out.get("counts") or {})
    counts["messages_before"] = bounded.total
    if out.get("status") != "compacted":
        counts["messages_after"] = bounded.total
    counts["messages_loaded"] = len(bounded.messages)
    out["counts"] = counts
    out["message_tokens"] = []
    if out.get("status") != "compacted":
        out["output_message_tokens"] = []
    tokens = dict(out.get("tokens") or {})
    extra = bounded.omitted_tokens
    if isinstance(tokens.get("before"), int):
        tokens["before"] += extra
        if isinstance(tokens.get("middle"), int):
            tokens["middle"] += extra
        after = tokens.get("after")
        if out.get("status") != "compacted":
            tokens["after"] = tokens["before"]
        elif isinstance(after, int):
            tokens["saved"] = tokens["before"] - after
            tokens["ratio"] = round(after / tokens["before"], 4) if tokens["before"] else None
    out["tokens"] = tokens
    out["bounded"] = {
        "loaded": len(bounded.messages),
        "omitted_messages": bounded.omitted,
        "omitted_tokens": bounded.omitted_tokens,
        "threshold": settings.HERMES_BOUNDED_COMPACTION_ABOVE,
    }
    if bounded.omitted:
        out["warnings"] = [
            *(out.get("warnings") or []),
            {
                "code": "bounded_middle",
                "message": f"{bounded.omitted:,} middle messages ({bounded.omitted_tokens:,} "
                "tokens) were not read by the summarizer in bounded mode (a session over "
                f"{settings.HERMES_BOUNDED_COMPACTION_ABOVE:,} messages); they are archived "
                "and the recall tool can fetch them.",
            },
        ]
    return out
