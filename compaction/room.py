"""The hermes profile before summarizing: run the passes, cut, and make room.

``prepare`` runs the passes of ``compaction.passes`` over the whole conversation, cuts it
with the bounded tail, demotes old tail tool rounds and then checks the projected result
(head + tail + the summary allowance) against the threshold. When it would still be over,
it makes room in this order, stopping as soon as the projection fits:

1. fold and shrink every tool row of the tail (pressure demotion to its last stage);
2. shrink the head to the system prompt (its rows are summarized);
3. move the cut forward, one message at a time (those rows are summarized), keeping at least
   the newest message.

What is left over is reported by the engine as warnings; ``cannot_make_room`` names the
single message that does not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction.boundary import AlignmentEvent, Boundaries, find_bounded_boundaries, tail_ceiling
from compaction.config import CompactionConfig
from compaction.passes import (
    Work,
    dedup,
    fold_before,
    lean_tail,
    pressure_demote,
    prune_boundary,
    retire_tool_images,
    shrink_args,
    shrink_args_before,
)

__all__ = ["Prepared", "exact_region", "prepare", "summary_allowance"]

_WRAP_TOKENS = 300  # the summary prefix, end marker and role framing


def exact_region(tokens: Sequence[int], config: CompactionConfig) -> tuple[int, int]:
    """``(head_end, tail_from)``: rows before ``head_end`` or from ``tail_from`` on are the
    ones whose token counts decide the cut (the head, and the newest rows up to 1.25 tail
    ceilings plus the prune floor); the rows between are summarized whatever their size."""
    n = len(tokens)
    head = min(n, 1 + config.protect_first_n + 4)
    reach = tail_ceiling(config) * 5 // 4  # the walk stops at the ceiling; a margin past it
    used, start = 0, n
    while start > head and (used < reach or n - start < config.prune_floor_messages + 3):
        start -= 1
        used += tokens[start]
    return head, start


def summary_allowance(config: CompactionConfig) -> int:
    """Tokens reserved for the summary when projecting the result (about 3 chars a token)."""
    return config.summary_chars // 3 + _WRAP_TOKENS


@dataclass(slots=True)
class Prepared:
    """The slimmed conversation and its cut.

    Attributes:
        work: the slimmed list, its token counts and the actions taken.
        bounds: the cut over ``work.messages`` (same indices as the input).
        prune_boundary: the first index protected from the fold pass.
        projected: head + tail + summary allowance, in tokens, after making room.
        stuck: ``(index, tokens)`` of a message that alone leaves no room, if any.
    """

    work: Work
    bounds: Boundaries
    prune_boundary: int
    projected: int
    stuck: tuple[int, int] | None = None
    events: list[AlignmentEvent] = field(default_factory=list)


def prepare(work: Work, tokens: Sequence[int], protect_first_n: int) -> Prepared:
    """Run the hermes passes over ``work`` (``Work.start``) with the input's ``tokens``, cut,
    and make room (see the module docstring)."""
    config = work.config
    work.tokens = list(tokens)
    work.exact_head, work.exact_from = exact_region(tokens, config)
    budget = config.tail_budget_tokens
    dedup(work)
    work.flush()
    boundary = prune_boundary(work.tokens, budget, config.prune_floor_messages)
    fold_before(work, boundary)
    shrink_args_before(work, boundary)
    retire_tool_images(work)
    pressure_demote(work, boundary, tail_ceiling(config))  # flushes first
    bounds = find_bounded_boundaries(
        work.messages, work.tokens, config, protect_first_n=protect_first_n
    )
    lean_tail(work, bounds.tail_start)
    work.flush()
    work.immediate = True  # making room decides row by row
    return _make_room(work, bounds, boundary, config)


def _make_room(work: Work, bounds: Boundaries, boundary: int, config: CompactionConfig) -> Prepared:
    messages, tokens = work.messages, work.tokens
    n = len(messages)
    h, t = bounds.head_end, bounds.tail_start
    threshold = config.threshold_tokens
    allowance = summary_allowance(config)
    events = list(bounds.events)

    def projected() -> int:
        return sum(tokens[:h]) + sum(tokens[t:]) + allowance

    if projected() > threshold:
        for pos in range(t, n):  # 1. the whole tail to its last demotion stage
            if messages[pos].get("role") == "tool":
                work.fold(pos, "demote")
            elif messages[pos].get("tool_calls"):
                shrink_args(work, pos, "demote")
            if projected() <= threshold:
                break
    system = 1 if n and messages[0].get("role") == "system" else 0
    if projected() > threshold and h > system:  # 2. the head decays
        events.append(AlignmentEvent("head_decayed_for_room", h, system))
        h = system
    if projected() > threshold and t < n - 1:  # 3. the cut moves forward
        start = t
        over = projected() - threshold
        while over > 0 and t < n - 1:
            over -= tokens[t]
            t += 1
        while t < n - 1 and messages[t].get("role") == "tool":
            t += 1
        t = max(t, h + 1)
        events.append(AlignmentEvent("cut_moved_for_room", start, t))
    if t >= n > h + 1:
        # Never summarize everything: the newest message (with its tool group) stays.
        t = n - 1
        while t > h + 1 and messages[t].get("role") == "tool":
            t -= 1
        events.append(AlignmentEvent("newest_message_kept", n, t))
    stuck = None
    final = projected()
    if final > threshold:
        biggest = max(range(t, n), key=tokens.__getitem__, default=None)
        if biggest is not None:
            stuck = (biggest, tokens[biggest])
    new_bounds = Boundaries(head_end=h, tail_start=max(t, h), n=n, events=tuple(events))
    return Prepared(work, new_bounds, boundary, final, stuck, events)
