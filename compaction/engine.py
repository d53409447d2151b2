"""``compact()``: the whole pipeline, as one pure function (no I/O besides the summarizer).

tokens → boundaries → slimming (middle) → serialization → summary → assembly → image
stripping → tool-pair sanitization → report.
"""

# Over 450 lines: compact() and the phase functions only it calls (partly split; see below).
from __future__ import annotations

import copy
import functools
import gc
import operator
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from itertools import compress
from typing import Any, ParamSpec, TypeVar, cast

from compaction.assemble import assemble
from compaction.boundary import find_boundaries
from compaction.config import CompactionConfig
from compaction.deterministic import deterministic_summary, gather_middle
from compaction.errors import InputError, SummaryAborted
from compaction.facts import MiddleGathered, SummaryFacts
from compaction.ledger import Ledger, extract, merge, parse, render, split_ledger
from compaction.ledger_render import LayoutMemo
from compaction.markers import (
    SUMMARY_PREFIX,
    is_summary_message,
    is_summary_text,
    split_summary,
    wrap_summary,
)
from compaction.messages import Message, content_text
from compaction.narrative import fit_sections
from compaction.passes import Work, hermes_fold
from compaction.prompt import build_prompt, summary_budget_tokens
from compaction.redact import redact
from compaction.replay import inflight_replay
from compaction.report import CompactionReport
from compaction.room import exact_region, prepare
from compaction.sanitize import sanitize_tool_pairs
from compaction.serialize import RecordSizes, measure_records, serialize_middle
from compaction.slimming import (
    SlimAction,
    Slimming,
    build_call_index,
    make_action,
    slim_range,
    strip_historical_images,
)
from compaction.summarizer import (
    DeterministicSummarizer,
    FallbackError,
    Summarizer,
    SummaryOutcome,
    SummaryRequest,
)
from compaction.tokens import (
    TokenCounter,
    count_appended,
    count_message_tokens,
    count_messages_tokens,
    estimate_message_tokens,
    piecewise_counter,
    tiktoken_counter,
)
from compaction.trigger import compute_threshold

__all__ = ["CompactionResult", "compact"]

_KINDS = ("fold", "truncate", "image")
_HERMES_KINDS = ("dedup", "args_shrink", "image_retire", "demote", "lean_tail")
_BLOCK = 512  # messages of the middle slimmed, measured and gathered together (see compact())
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """The outcome of ``compact()``.

    Attributes:
        messages: the compacted conversation (OpenAI format, provider-valid). When the status
            is ``"skipped"`` or ``"aborted"`` it is a copy of the input.
        report: everything that happened (``report.to_dict()`` is JSON-serializable).
    """

    messages: list[dict[str, Any]]
    report: CompactionReport

    @property
    def summary_index(self) -> int | None:
        """Index of the message holding the summary in ``messages`` (None when not compacted)."""
        return self.report.summary_index

    @property
    def status(self) -> str:
        """``"compacted"``, ``"skipped"`` or ``"aborted"``."""
        return self.report.status


class _Clock:
    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.last = self.start
        self.phases: dict[str, float] = {}

    def lap(self, name: str, *, add: bool = False) -> None:
        """End phase ``name`` now; ``add`` adds to its time (a phase run in several parts)."""
        now = time.perf_counter()
        elapsed = (now - self.last) * 1000
        if add:
            elapsed += self.phases.get(name, 0.0)
        self.phases[name] = round(elapsed, 3)
        self.last = now

    def done(self) -> dict[str, float]:
        self.phases["total"] = round((time.perf_counter() - self.start) * 1000, 3)
        return self.phases


def _scan_input(messages: Sequence[Message], token_counts: Sequence[int] | None) -> list[int]:
    """Validate the input; return the positions of summary-bearing messages (classic; the
    hermes profile does this in ``Work.start``'s walk).

    One pass does both: on large inputs every extra walk over the messages costs as much as
    the work done in it.
    """
    summaries: list[int] = []
    for i, message in enumerate(messages):
        if type(message) is not dict and not isinstance(message, Mapping):
            raise InputError(f"expected a dict, got {type(message).__name__}", i)
        role = message.get("role")
        if type(role) is not str and not isinstance(role, str):
            raise InputError("missing or non-string 'role'", i)
        if role == "user" or role == "assistant":
            content = message.get("content")
            # Plain text is checked directly: this runs for every message of the input.
            if is_summary_text(content) if type(content) is str else is_summary_message(message):
                summaries.append(i)
    _check_token_counts(token_counts, len(messages))
    return summaries


def _check_token_counts(token_counts: Sequence[int] | None, n: int) -> None:
    """``InputError`` unless ``token_counts`` is None or ``n`` non-negative integers."""
    if token_counts is not None:
        if len(token_counts) != n:
            raise InputError(f"token_counts has {len(token_counts)} entries for {n} messages")
        # type() is int excludes bool; both checks run in C, the per-item loop runs only to
        # name the bad entry.
        if token_counts and (set(map(type, token_counts)) != {int} or min(token_counts) < 0):
            for i, value in enumerate(token_counts):
                if type(value) is not int or value < 0:
                    raise InputError(f"token count {value!r} is not a non-negative integer", i)


def _gc_paused(function: Callable[P, R]) -> Callable[P, R]:
    """Run ``function`` with the cyclic garbage collector paused.

    The pipeline allocates tens of thousands of acyclic objects (dicts, strings); on a large
    conversation that triggers full collections that walk the caller's whole heap (the
    messages themselves) and cost more than the compaction: 50k messages ran 25 % faster
    without them. Reference counting still frees everything; the collector resumes after.
    """

    @functools.wraps(function)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


def _totals(actions: Sequence[SlimAction], profile: str = "classic") -> dict[str, dict[str, int]]:
    kinds = _KINDS if profile == "classic" else (*_KINDS, *_HERMES_KINDS)
    totals = {k: {"count": 0, "chars_before": 0, "chars_after": 0} for k in kinds}
    for a in actions:
        t = totals[a.kind]
        t["count"] += 1
        t["chars_before"] += a.chars_before
        t["chars_after"] += a.chars_after
    return totals


_EXACT_BELOW = 200  # conversations this short are counted exactly: it is cheap


def _mostly_estimated(
    msgs: Sequence[Message], cfg: CompactionConfig
) -> tuple[tuple[int, ...], tuple[int, int]]:
    """Token counts estimated at 4 chars a token, except the head and the newest rows the
    tail walk can reach (``exact_region``), which are counted exactly: the cut, the passes'
    protected region and the make-room projection are decided there."""
    counts = [estimate_message_tokens(m, cfg) for m in msgs]
    head, start = exact_region(counts, cfg)
    exact = [*range(head), *range(start, len(msgs))]
    for pos, count in zip(exact, count_messages_tokens([msgs[p] for p in exact], cfg), strict=True):
        counts[pos] = count
    return tuple(counts), (head, start)


def _count_kept(
    original: Sequence[Message],
    tokens: tuple[int, ...],
    work: Any,
    bounds: Any,
    exact_span: tuple[int, int],
    cfg: CompactionConfig,
    counter: TokenCounter,
) -> tuple[tuple[int, ...], int, tuple[str, ...]]:
    """Exact counts for the head and tail rows that were estimated (the tail of slimmed rows
    can reach past the exactly counted region); returns the input counts, their sum and
    the spans (``"head"``, ``"tail"``) whose input counts hold such estimates.

    A row kept verbatim is counted once, for both lists. A row a pass rewrote (a fold
    line, a stub) is counted as rewritten, which is what the result holds; its input count
    stays the estimate (counting a folded 40 KB output only to report the input's tail
    cost most of an uncached compaction)."""
    head_exact, tail_exact = exact_span
    h, t = bounds.head_end, bounds.tail_start
    fix = [*range(head_exact, h), *range(t, min(tail_exact, len(original)))]
    if not fix:
        return tokens, sum(tokens), ()
    counts = list(tokens)
    verbatim = [p for p in fix if work.messages[p] is original[p]]
    exact = count_messages_tokens([original[p] for p in verbatim], cfg)
    for pos, count in zip(verbatim, exact, strict=True):
        counts[pos] = work.tokens[pos] = count
    rewritten = [p for p in fix if work.messages[p] is not original[p]]
    for pos in rewritten:
        work.tokens[pos] = count_message_tokens(work.messages[pos], cfg, counter)
    spans = (("head",) if rewritten and rewritten[0] < h else ()) + (
        ("tail",) if rewritten and rewritten[-1] >= t else ()
    )
    return tuple(counts), sum(counts), spans


def _input_tokens(
    msgs: Sequence[Message],
    cfg: CompactionConfig,
    token_counts: Sequence[int] | None,
    tokenizer: TokenCounter | None,
) -> tuple[tuple[int, ...], tuple[str, ...], tuple[int, int] | None]:
    """Phase "tokens": ``(counts per input message, names of the report's token figures that
    are estimates, the exactly counted span of a mostly estimated list or None)``."""
    if token_counts is not None:
        return tuple(token_counts), (), None  # validated: exact ints
    if cfg.profile != "classic" and tokenizer is None and len(msgs) > _EXACT_BELOW:
        # No cached counts: estimate everything, then count exactly only where a decision
        # depends on it (the head and the rows the tail walk can reach).
        tokens, exact_span = _mostly_estimated(msgs, cfg)
        return tokens, ("before", "middle", "saved", "ratio", "message_tokens"), exact_span
    return tuple(count_messages_tokens(msgs, cfg, tokenizer)), (), None


def _previous_summary_in(msgs: Sequence[Message], summary_positions: Sequence[int]) -> str | None:
    """The body of the newest summary-bearing message's summary, if any."""
    for i in reversed(summary_positions):
        found, _ = split_summary(content_text(msgs[i].get("content"), images=False))
        if found:
            return found
    return None


def _middle_rows(
    msgs: list[Message],
    original: list[Message],
    bounds: tuple[int, int],
    summary_positions: Sequence[int],
    hermes: bool,
) -> tuple[list[Message], list[Message], range | list[int]]:
    """Phase "boundary", its end: ``(middle rows as slimmed, middle rows of the input for the
    facts, input index of each)``. A summary-bearing row keeps only its live text after the
    summary; one without any is dropped."""
    h, t = bounds
    middle = msgs[h:t]
    facts_middle = original[h:t] if hermes else middle
    indices: range | list[int] = range(h, t)
    in_middle = [p for p in summary_positions if h <= p < t]
    if in_middle:
        indices = list(indices)
    for i in reversed(in_middle):
        _, remainder = split_summary(content_text(msgs[i].get("content"), images=False))
        if remainder:
            middle[i - h] = {**msgs[i], "content": remainder}
            if hermes:
                facts_middle[i - h] = {**original[i], "content": remainder}
        else:
            del middle[i - h], indices[i - h]
            if hermes:
                del facts_middle[i - h]
    return middle, facts_middle, indices


def _slim_and_measure(
    middle: list[Message],
    facts_middle: list[Message],
    indices: range | list[int],
    head: list[Message],
    cfg: CompactionConfig,
    prepared: Any,
    clock: _Clock,
) -> tuple[Slimming, RecordSizes, MiddleGathered | None]:
    """Phases "slimming", "serialize" (measuring) and, for classic, "summarize" (gathering):
    ``(the slimmed middle, its summarizer record sizes, what the classic deterministic
    summary gathered)``.

    Results in the middle answer calls in the head or earlier in the middle, never in the
    tail: the head's calls are indexed here, the middle's during slimming. Everything that
    reads the whole middle runs block by block: slimming, measuring the summarizer records,
    gathering the files and call count for the deterministic summary (also the fallback of
    an LLM). On a conversation that does not fit the CPU cache, a block read right after
    slimming it is still cached, where separate walks over the whole middle would fetch
    every message from memory again (50k messages: 15-20 % of the pipeline).

    hermes: the passes already folded most of the middle's results, so only the rows that
    slimming can still change are visited, and only the records not noted by the fold pass
    are measured (``_Settled``).
    """
    hermes = prepared is not None
    if hermes:  # the passes indexed every call of the input
        slimming = Slimming(middle, calls=prepared.work.calls, indexed=True)
    else:
        slimming = Slimming(middle, calls=build_call_index(head))
    sizes = RecordSizes()
    # What the classic deterministic summary needs from the whole middle; the hermes summary
    # (resume.py) takes its facts in its own walk and never reads it.
    gathered = None if hermes else MiddleGathered()
    fold = hermes_fold if hermes else None
    settled = _settled(prepared, indices) if hermes else None
    if settled is not None:
        sizes.chars += settled.known_chars
    for start in range(0, len(middle), _BLOCK):
        stop = min(start + _BLOCK, len(middle))
        slimmed = measured = None  # every row of the block
        if settled is not None:
            slimmed = _within(settled.slimmable, start, stop)
            measured = _within(settled.measured, start, stop)
        slim_range(slimming, indices, cfg, start, stop, fold, positions=slimmed)
        clock.lap("slimming", add=True)
        measure_records(
            slimming.messages,
            cfg,
            sizes,
            start,
            stop,
            folds=slimming.folds,
            indices=indices,
            positions=measured,
        )
        clock.lap("serialize", add=True)
        if gathered is not None:
            gather_middle(facts_middle, start, stop, slimming.calls, gathered)
            clock.lap("summarize", add=True)
    return slimming, sizes, gathered


@dataclass(slots=True)
class _Settled:
    """hermes: what the passes settled in the middle, by middle position (ascending).

    Attributes:
        slimmable: the rows ``slim_range`` can still change: the tool results no pass
            folded and the rows whose content is a list of parts (images). A folded result's
            line is a stub, and the passes indexed every call already.
        measured: the rows whose summarizer record is measured: all but those whose record
            length the passes noted (``Work.record_chars``).
        known_chars: the summed record length of the others.
    """

    slimmable: list[int]
    measured: list[int]
    known_chars: int


def _within(rows: Sequence[int], start: int, stop: int) -> Sequence[int]:
    """The positions of ascending ``rows`` in ``[start, stop)``."""
    return rows[bisect_left(rows, start) : bisect_left(rows, stop)]


def _settled(prepared: Any, indices: range | list[int]) -> _Settled | None:
    """hermes: the middle's ``_Settled``, or None to visit every row (a summary-bearing row
    left the middle, so positions shifted)."""
    if type(indices) is not range:
        return None
    h, t = indices.start, indices.stop
    work = prepared.work
    folded, tool_rows = work.folded, work.tool_rows
    slimmable = [p - h for p in _within(tool_rows, h, t) if not folded[p]]
    slimmable.extend(p - h for p in _within(work.parted_rows, h, t))
    slimmable.sort()
    known = work.record_chars[h:t]
    # The rows with no noted length, picked in C (this runs over the whole middle).
    measured = list(compress(range(t - h), map(operator.not_, known)))
    return _Settled(slimmable, measured, sum(known))


def _first_user_text(msgs: Sequence[Message], summary_positions: Sequence[int]) -> str | None:
    """The text of the first user message that carries no summary, if any."""
    summary_set = set(summary_positions)
    first_user = next(
        (m for i, m in enumerate(msgs) if m.get("role") == "user" and i not in summary_set),
        None,
    )
    return content_text(first_user.get("content"), images=False) if first_user else None


_LEDGER_SHARE = 0.90  # of the summary budget the ledger may take before the narrative is written
_NARRATIVE_FLOOR = 400  # chars of narrative kept however full the ledger is


# Summary size ceiling in tokens (hermes, with the ledger): Claude Code's own summaries of the
# same sessions measure 2-5K tokens and Hermes caps its summary at 10-12K.
_SUMMARY_TOKEN_CAP = 8_000


def _narrative_target(target: int, narrative_chars: int | None) -> int:
    """The "Target ~N tokens" of the LLM prompt: with the ledger appended, the narrative's
    room (4 chars a token), so the model is not told to write what would be cut."""
    if narrative_chars is None:
        return target
    return max(200, min(target, narrative_chars // 4))


def _with_ledger(
    body: str, ledger: Ledger, budget: int, cap: int, counter: TokenCounter, memo: LayoutMemo
) -> tuple[str, Ledger]:
    """``body`` with the ledger appended, in at most ``budget`` chars and ``cap`` tokens (the
    char budget shrinks in proportion while the tokens are over: paths and commands take
    fewer chars per token than prose). ``memo``: shared by every render of the ledger."""
    text, written = _fit_ledger(body, ledger, budget, memo)
    tokens = counter(text)
    if tokens <= cap:
        return text, written
    # Over the ceiling: the largest char budget whose text fits, found between a budget
    # that fits and one that does not (the first guess scales by tokens; then halving).
    # Guesses scale the text's length, not the budget: a ledger that fits the char budget
    # with room to spare comes out the same under any budget above its length.
    floor = _NARRATIVE_FLOOR * 2
    over, fits = min(budget, len(text)), None
    budget = max(floor, int(over * cap / tokens * 0.97))
    best: tuple[str, Ledger] | None = None
    most = -1
    for _ in range(7):
        text, written = _fit_ledger(body, ledger, budget, memo)
        tokens = counter(text)
        if tokens <= cap:
            fits = budget
            # The fullest text that fits, not the last: a larger budget can choose other
            # facts and come out shorter (a long command left out, two short ones in).
            if tokens > most:
                most, best = tokens, (text, written)
        else:
            over = min(budget, len(text))
        if fits is None:
            if budget <= floor:
                break
            budget = max(floor, int(over * cap / tokens * 0.97))
        elif over - fits <= max(40, over // 100):
            break
        else:
            budget = (fits + over) // 2
    return best if best is not None else (text, written)


def _fit_ledger(body: str, ledger: Ledger, budget: int, memo: LayoutMemo) -> tuple[str, Ledger]:
    """``body`` (any summarizer's narrative; a ledger it echoed is dropped) with the ledger
    appended, within ``budget`` chars: the ledger takes what the narrative leaves, at most
    ``_LEDGER_SHARE`` of the budget unless the narrative is shorter; a narrative longer than
    its room is cut at a line."""
    narrative = split_ledger(body)[0].rstrip()
    room = max(int(budget * _LEDGER_SHARE), budget - len(narrative) - 2)
    text, written = render(ledger, room, memo)
    keep = max(_NARRATIVE_FLOOR, budget - len(text) - 2)
    narrative = fit_sections(narrative, keep)
    return (f"{narrative}\n\n{text}" if narrative else text), written


def _run_summarizer(summarizer: Summarizer, request: SummaryRequest) -> SummaryOutcome:
    """Phase "summarize": the summarizer's outcome; an empty body falls back to the
    deterministic summary (recorded as a fallback). ``SummaryAborted`` propagates."""
    outcome = summarizer.summarize(request)
    if outcome.body.strip():
        return outcome
    empty = FallbackError(
        outcome.source,
        outcome.model or "",
        "empty_content",
        None,
        "the summarizer returned an empty body",
    )
    return SummaryOutcome(
        deterministic_summary(request.facts),
        "deterministic",
        None,
        outcome.prompt,
        (*outcome.fallbacks, empty),
    )


def _assemble_output(
    msgs: list[Message],
    bounds: tuple[int, int],
    body: str,
    work_tokens: Sequence[int],
    actions: list[SlimAction],
) -> tuple[list[Message], int, dict[int, int], bool]:
    """Phase "assemble": head + summary + tail with historical images stripped (each strip
    appended to ``actions``). Returns the list, the summary's position in it, the known
    token count of every row that is an unchanged input row (by ``id``), and whether the
    summary was merged into a kept row."""
    h, t = bounds
    n = len(msgs)
    assembly = assemble(msgs[:h], range(h), f"{SUMMARY_PREFIX}\n{body}", msgs[t:], range(t, n))
    stripped, image_changes = strip_historical_images(assembly.messages)
    changed = set(assembly.changed)
    for pos, before_text, after_text in image_changes:
        changed.add(pos)
        source = assembly.sources[pos]
        actions.append(
            make_action(
                source if source is not None else -1,
                "image",
                stripped[pos],
                before_text,
                after_text,
            )
        )
    counts_by_id: dict[int, int] = {}
    for pos, message in enumerate(stripped):
        source = assembly.sources[pos]
        if source is not None and pos not in changed and pos != assembly.summary_index:
            counts_by_id[id(message)] = work_tokens[source]
    return stripped, assembly.summary_index, counts_by_id, assembly.merged


def _noted_count(
    stripped: Sequence[Message],
    msgs: Sequence[Message],
    work_tokens: Sequence[int],
    counts_by_id: Mapping[int, int],
    cfg: CompactionConfig,
) -> tuple[Message, int] | None:
    """The output's system prompt with the compaction note appended (a new row) and its
    token count, from the input prompt's exact count (``count_appended``: tiktoken only);
    None when the first row is not such a prompt."""
    if not stripped or not msgs or id(stripped[0]) in counts_by_id:
        return None
    row, source = stripped[0], msgs[0]
    before, after = source.get("content"), row.get("content")
    if (
        row.get("role") != "system"
        or source.get("role") != "system"
        or type(before) is not str
        or type(after) is not str
        or not after.startswith(before)
        or row.get("tool_calls")
        or row.get("tool_call_id")
        or source.get("tool_calls")
        or source.get("tool_call_id")
    ):
        return None
    overhead = cfg.per_message_overhead
    text = count_appended(cfg.model, before, work_tokens[0] - overhead, after[len(before) :])
    return row, text + overhead


def _with_regions(actions: Sequence[SlimAction], bounds: Sequence[int]) -> tuple[Any, ...]:
    """Each action with its ``region`` (head/middle/tail of the input) and so its ``line``
    (the text it wrote: the fold line, else the slimmed text)."""
    h, t = bounds
    # The actions are this compaction's own: completed in place, not copied.
    for a in actions:
        a.place(h, t)
    return tuple(actions)


def _warnings(
    cfg: CompactionConfig,
    before: int,
    after: int | None,
    info: Mapping[str, Any],
    prepared: Any,
    fallbacks: Sequence[Any] | None,
) -> tuple[dict[str, str], ...]:
    """Why the result is not what the budgets ask for (``{"code", "message"}`` each)."""
    out: list[dict[str, str]] = []
    threshold, window = cfg.threshold_tokens, cfg.context_length
    if cfg.threshold_lowered:
        raw = max(int(cfg.effective_threshold_percent * window), cfg.min_threshold_tokens)
        out.append(
            {
                "code": "threshold_at_window",
                "message": f"the configured threshold ({raw:,} tokens) is at or above the "
                f"{window:,}-token window; it was lowered to {threshold:,}.",
            }
        )
    result = before if after is None else after
    if result > threshold and before > threshold:
        what = "the conversation" if after is None else "the compacted conversation"
        out.append(
            {
                "code": "over_threshold",
                "message": f"{what} is {result:,} tokens, over the {threshold:,}-token threshold.",
            }
        )
    if result > window:
        out.append(
            {
                "code": "over_window",
                "message": f"the result is {result:,} tokens, over the {window:,}-token window.",
            }
        )
    tail = info.get("tail_slimmed", info.get("tail"))
    if isinstance(tail, int) and tail > threshold:
        out.append(
            {
                "code": "tail_over_threshold",
                "message": f"the protected tail alone is {tail:,} tokens, over the "
                f"{threshold:,}-token threshold.",
            }
        )
    stuck = getattr(prepared, "stuck", None)
    if stuck is not None and result > threshold:
        index, size = stuck
        out.append(
            {
                "code": "cannot_make_room",
                "message": f"message {index} alone is {size:,} tokens and cannot be folded or "
                f"summarized (it is the newest message or a user/assistant text kept verbatim); "
                f"with the system prompt and the summary it does not fit the {threshold:,}-token "
                "threshold.",
            }
        )
    if fallbacks:
        stages = ", ".join(str(f.get("stage", "?")) for f in fallbacks if isinstance(f, Mapping))
        out.append(
            {
                "code": "summarizer_fallback",
                "message": f"a fallback wrote the summary (failed: {stages or 'summarizer'}).",
            }
        )
    return tuple(out)


@_gc_paused
def compact(
    messages: Sequence[Message],
    config: CompactionConfig | None = None,
    summarizer: Summarizer | None = None,
    now: date | None = None,
    previous_summary: str | None = None,
    focus: str | None = None,
    force: bool = False,
    token_counts: Sequence[int] | None = None,
    provider_prompt_tokens: int | None = None,
    tokenizer: TokenCounter | None = None,
) -> CompactionResult:
    """Compact a conversation: head + summary of the middle + tail.

    ``compact`` always attempts the compaction; gating (threshold, anti-thrash) is
    ``should_compact``'s job. The input is never mutated.

    Args:
        messages: OpenAI-format message dicts.
        config: the settings (default ``CompactionConfig()``).
        summarizer: a ``Summarizer``; None means ``DeterministicSummarizer()``.
        now: the date for temporal anchoring (default today; a datetime is reduced to its date).
        previous_summary: body of the previous summary to update. Default: the newest
            summary message found in ``messages`` (current or legacy prefix).
        focus: a topic to preserve in detail (``/compress <topic>``).
        force: a manual run; recorded in the report as ``trigger="forced"``.
        token_counts: precomputed tokens per message (same length as ``messages``), so
            nothing is tokenized twice.
        provider_prompt_tokens: the provider's ``usage.prompt_tokens``, recorded next to the
            estimate.
        tokenizer: a ``str -> int`` counter replacing tiktoken (for counts and recounts).

    Returns:
        A ``CompactionResult``. Status ``"skipped"`` (reason ``"nothing_to_compact"`` or
        ``"summary_not_smaller"``) and ``"aborted"`` (``"summary_auth_error"``,
        ``"summary_failed"``) return a copy of the input.

    Raises:
        InputError: malformed messages or token counts.
    """
    clock = _Clock()
    cfg = config or CompactionConfig()
    # The input is only read: a list is used as it is (copying 50k references costs a walk
    # over every message object, once to copy and once to free).
    msgs = messages if type(messages) is list else list(messages)
    original = msgs  # the input; the hermes passes replace ``msgs`` with a slimmed copy
    hermes = cfg.profile != "classic"
    counter = tokenizer or tiktoken_counter(cfg.model)
    # The summary is counted up to 8 times while the ledger is fitted, then once more in its
    # message: line by line, each distinct line once (exact; see ``piecewise_counter``).
    summary_counter = tokenizer or piecewise_counter(cfg.model)
    work = None
    if hermes:
        # The passes' list is started here: its walk validates the input as ``_scan_input``
        # does (one walk over the messages, not two).
        work = Work.start(
            msgs,
            lambda m: count_message_tokens(m, cfg, counter),
            cfg,
            # Changed rows are mostly one-line folds: counted one by one (a thread-pool batch
            # costs more per short text than the encoding itself).
            lambda batch: [count_message_tokens(m, cfg, counter) for m in batch],
        )
        summary_positions = work.summary_rows
        _check_token_counts(token_counts, len(msgs))
    else:
        summary_positions = _scan_input(msgs, token_counts)
    if isinstance(now, datetime):
        now = now.date()
    day = now or date.today()
    tokens, estimated, exact_span = _input_tokens(msgs, cfg, token_counts, tokenizer)
    before = sum(tokens)
    clock.lap("tokens")

    base: dict[str, Any] = {
        "tokens_estimated": estimated,
        "profile": cfg.profile,
        "config": cfg.to_dict(),
        "focus": focus,
        "now": day.isoformat(),
        "trigger": "forced" if force else "auto",
        "message_tokens": tokens,
    }
    token_info: dict[str, Any] = {
        "before": before,
        "threshold": compute_threshold(cfg),
        "provider_prompt_tokens": provider_prompt_tokens,
    }

    def unchanged(status: str, reason: str, **extra: Any) -> CompactionResult:
        phases = clock.done()
        info = {**token_info, "after": before, "saved": 0, "ratio": 1.0 if before else None}
        info.update(extra.pop("tokens", {}))
        if "slimming" in extra:
            extra["slimming"] = _with_regions(extra["slimming"], bounds_now)
        report = CompactionReport(
            status=status,
            reason=reason,
            counts={"messages_before": len(original), "messages_after": len(original)},
            tokens=info,
            output_message_tokens=tokens,
            timings_ms=phases,
            warnings=_warnings(cfg, before, None, info, prepared_now[0], extra.get("fallbacks")),
            **base,
            **extra,
        )
        return CompactionResult(copy.deepcopy(original), report)

    bounds_now: list[int] = [0, 0]
    prepared_now: list[Any] = [None]

    # The newest summary-bearing message gives the previous summary; the middle drops the
    # summary part of each one below.
    previous_body = previous_summary or _previous_summary_in(msgs, summary_positions) or None
    first_n = 0 if cfg.decay_head_after_first and previous_body else cfg.protect_first_n
    prepared = None
    work_tokens: Sequence[int]
    if work is not None:
        prepared = prepare(work, tokens, first_n)
        msgs, work_tokens = prepared.work.messages, prepared.work.tokens
        bounds = prepared.bounds
        if exact_span is not None:
            # The cut was taken on estimates where they were; what stays verbatim is counted.
            tokens, before, estimated_spans = _count_kept(
                original, tokens, prepared.work, bounds, exact_span, cfg, counter
            )
            base["message_tokens"] = tokens
            token_info["before"] = before
            # The input's head/tail spans hold estimates of the rows the passes rewrote there.
            base["tokens_estimated"] = (*estimated, *estimated_spans)
        clock.lap("passes")
    else:
        work_tokens = tokens
        bounds = find_boundaries(msgs, tokens, cfg, protect_first_n=first_n)
    h, t, n = bounds.head_end, bounds.tail_start, len(msgs)
    bounds_now[:] = [h, t]
    prepared_now[0] = prepared
    head_tokens, tail_tokens = sum(tokens[:h]), sum(tokens[t:])
    span_info = {
        "head": head_tokens,
        "middle": before - head_tokens - tail_tokens if t > h else 0,
        "tail": tail_tokens,
    }
    if hermes:  # the input's spans above; these are after the passes slimmed head and tail
        span_info["head_slimmed"] = sum(work_tokens[:h])
        span_info["tail_slimmed"] = sum(work_tokens[t:])
    base.update(
        boundaries=bounds.to_dict(),
        alignment=tuple(e.to_dict() for e in bounds.events),
        previous_summary_used=bool(previous_body),
    )
    clock.lap("boundary")

    middle, facts_middle, indices = _middle_rows(msgs, original, (h, t), summary_positions, hermes)
    pre_actions = prepared.work.actions if prepared is not None else []
    # hermes: a middle holding only the previous summary is still worth a compaction when the
    # passes slimmed head or tail by at least the anti-thrash saving (the summary is carried
    # forward, the slimming committed).
    passes_saved = before - sum(work_tokens) if hermes else 0
    worth = passes_saved >= cfg.anti_thrash_min_saving * before
    if not middle and not (hermes and pre_actions and t > h and worth):
        return unchanged(
            "skipped", "nothing_to_compact", tokens=span_info, slimming=tuple(pre_actions)
        )

    slimming, sizes, gathered = _slim_and_measure(
        middle, facts_middle, indices, msgs[:h], cfg, prepared, clock
    )
    actions, folds = slimming.actions, slimming.folds
    if pre_actions:
        actions = [*pre_actions, *actions]
    summarizer_input, truncations = serialize_middle(
        slimming.messages, h, cfg, indices=indices, folds=folds, sizes=sizes
    )
    actions.extend(truncations)
    clock.lap("serialize", add=True)
    redactions = 0
    if hermes:
        summarizer_input, redactions = redact(summarizer_input)
        clock.lap("redact", add=True)

    # hermes: the fact ledger of the compacted rows and the previous summary's ledger takes
    # its share of the summary budget first; the narrative (any summarizer's) gets the rest.
    ledger: Ledger | None = None
    narrative_previous, narrative_chars = previous_body, cfg.summary_chars
    if hermes:
        ledger = merge(parse(previous_body), extract(facts_middle, slimming.calls))
        ledger_text, _ = render(ledger, int(cfg.summary_chars * _LEDGER_SHARE))
        # The floor never exceeds half the bound: a bound set below the defaults' 1,000
        # characters (a replay aimed at an agent's small budget) is not overrun by it.
        floor = min(_NARRATIVE_FLOOR, cfg.summary_chars // 2)
        narrative_chars = max(floor, cfg.summary_chars - len(ledger_text) - 2)
        if previous_body:
            narrative_previous = split_ledger(previous_body)[0] or None
        clock.lap("ledger", add=True)
    facts = SummaryFacts(
        middle=facts_middle,
        fold_lines=folds,
        first_user_text=_first_user_text(msgs, summary_positions),
        previous_summary=narrative_previous,
        focus=focus,
        now=day,
        max_chars=narrative_chars,
        calls=slimming.calls,
        gathered=gathered,
        profile=cfg.profile,
        indices=indices,
        with_ledger=ledger is not None,
    )
    budget_tokens = _narrative_target(
        summary_budget_tokens(span_info["middle"], cfg.context_length),
        narrative_chars if ledger is not None else None,
    )
    # Built once, and only if a summarizer reads it (an LLM does; the deterministic summary
    # does not): it is the serialized middle again, the largest string of a small compaction.
    make_prompt = functools.cache(
        functools.partial(
            build_prompt,
            summarizer_input,
            now=day,
            previous_summary=narrative_previous,
            focus=focus,
            budget_tokens=budget_tokens,
            ledger=ledger is not None,
        )
    )
    request = SummaryRequest(make_prompt, summarizer_input, facts, cfg.abort_on_summary_failure)
    try:
        outcome = _run_summarizer(summarizer or DeterministicSummarizer(), request)
    except SummaryAborted as aborted:
        clock.lap("summarize", add=True)
        return unchanged(
            "aborted",
            aborted.reason,
            tokens=span_info,
            fallbacks=tuple(aborted.fallbacks),
            summarizer_input=summarizer_input,
            summarizer_prompt=aborted.prompt,
            slimming=tuple(actions),
            slimming_totals=_totals(actions, cfg.profile),
            redactions=redactions,
        )
    body = outcome.body.strip()
    clock.lap("summarize", add=True)
    written: Ledger | None = None
    if ledger is not None:
        # The ceiling holds for the whole summary message: its prefix and end marker count.
        cap = min(int(cfg.summary_window_fraction * cfg.context_length), _SUMMARY_TOKEN_CAP)
        cap -= count_message_tokens({"role": "user", "content": wrap_summary("")}, cfg, counter)
        # The fit's renders share a memo that dies with the call: one kept from the render
        # above on lived to the end and raised the peak (+0.19 MB, a 443-row Codex rollout).
        body, written = _with_ledger(
            body, ledger, cfg.summary_chars, cap, summary_counter, LayoutMemo()
        )
        clock.lap("ledger", add=True)
    if hermes:
        body, found = redact(body)
        redactions += found
        clock.lap("redact", add=True)

    stripped, summary_at, counts_by_id, summary_merged = _assemble_output(
        msgs, (h, t), body, work_tokens, actions
    )
    clock.lap("assemble")

    final, repairs = sanitize_tool_pairs(stripped, cfg.sanitize_mode)
    summary_message = stripped[summary_at]
    summary_index = next(i for i, m in enumerate(final) if m is summary_message)
    replay = None
    if hermes:  # the unfinished newest request, restated after the boundary (§7.5)
        final, replay = inflight_replay(original, final, summary_index)
    # The summary's row is counted with the summary's own memo of lines; another new row (the
    # system prompt with the compaction note, a restated request) is counted plainly: its
    # lines would only fill the memo with a copy of a long system prompt.
    noted = _noted_count(stripped, msgs, work_tokens, counts_by_id, cfg) if not tokenizer else None
    out_tokens = [
        counts_by_id[id(m)]
        if id(m) in counts_by_id
        else noted[1]
        if noted is not None and m is noted[0]
        else count_message_tokens(m, cfg, summary_counter if m is summary_message else counter)
        for m in final
    ]
    clock.lap("sanitize")

    after = sum(out_tokens)
    summary_tokens = out_tokens[summary_index]
    info = {
        **span_info,
        "after": after,
        "summary": summary_tokens,
        "saved": before - after,
        "ratio": round(after / before, 4) if before else None,
    }
    wrapped = wrap_summary(body)
    if not summary_merged and summary_message.get("content") == wrapped:
        wrapped = summary_message["content"]  # the row's own text: one copy, not two
    if summary_merged:
        # The summary's row also holds a kept message (role alternation): "summary" is the
        # row as sent; this is the kept message's share of it, so a page can tell them apart.
        alone = {"role": summary_message.get("role"), "content": wrapped}
        info["summary_merged"] = max(
            0, summary_tokens - count_message_tokens(alone, cfg, summary_counter)
        )
    details: dict[str, Any] = {
        "slimming": tuple(actions),
        "slimming_totals": _totals(actions, cfg.profile),
        "summarizer_input": summarizer_input,
        "summarizer_prompt": outcome.prompt,
        "summary": wrapped,
        "summary_body": body,
        "summarizer": outcome.source,
        "summarizer_model": outcome.model,
        "fallbacks": tuple(f.to_dict() for f in outcome.fallbacks),
        "redactions": redactions,
        "ledger": written.to_dict() if written is not None else None,
    }
    if after >= before:
        attempted = {**span_info, "summary": summary_tokens, "attempted_after": after}
        return unchanged("skipped", "summary_not_smaller", tokens=attempted, **details)
    if hermes:
        details["inflight_replay"] = replay
    details["slimming"] = _with_regions(details["slimming"], bounds_now)
    report = CompactionReport(
        warnings=_warnings(cfg, before, after, info, prepared, details["fallbacks"]),
        status="compacted",
        reason=None,
        counts={"messages_before": n, "messages_after": len(final)},
        tokens={**token_info, **info},
        summary_role=str(final[summary_index].get("role")),
        summary_index=summary_index,
        sanitization=tuple(a.to_dict() for a in repairs),
        output_message_tokens=tuple(out_tokens),
        timings_ms=clock.done(),
        **base,
        **details,
    )
    # Output rows are the input's own rows (dicts by the contract) and new dicts.
    return CompactionResult(cast(list[dict[str, Any]], final), report)
