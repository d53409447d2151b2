"""Where to cut: head, middle and tail.

Head = the system message (when ``messages[0]`` is one) + the first ``protect_first_n``
messages, moved forward past tool rows so the middle never starts with an orphan result.
Tail = the newest messages that fit ``tail_token_budget`` (walked newest → oldest), with the
cut moved back onto an assistant whose tool results would otherwise be split off, and pulled
back further until the latest user message and the latest visible assistant reply are in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.config import CompactionConfig
from compaction.markers import is_summary_message
from compaction.messages import Message, has_visible_text, tool_calls

__all__ = [
    "AlignmentEvent",
    "Boundaries",
    "find_boundaries",
    "find_bounded_boundaries",
    "tail_ceiling",
]


@dataclass(frozen=True, slots=True)
class AlignmentEvent:
    """One move of a cut.

    Attributes:
        kind: ``"tool_group_kept_whole"``, ``"latest_user_pulled_in"``,
            ``"latest_assistant_pulled_in"`` or ``"head_aligned_past_tools"``.
        from_: the index before the move.
        to: the index after it.
    """

    kind: str
    from_: int
    to: int

    def to_dict(self) -> dict[str, Any]:
        """``{"kind", "from", "to"}``."""
        return {"kind": self.kind, "from": self.from_, "to": self.to}


@dataclass(frozen=True, slots=True)
class Boundaries:
    """Half-open index ranges into the input: head ``[0, head_end)``, middle
    ``[head_end, tail_start)``, tail ``[tail_start, n)``.

    Attributes:
        head_end: first index after the head.
        tail_start: first index of the tail.
        n: number of messages.
        events: the alignment moves, in order.
    """

    head_end: int
    tail_start: int
    n: int
    events: tuple[AlignmentEvent, ...] = field(default=())

    @property
    def middle_empty(self) -> bool:
        """True when nothing lies between head and tail."""
        return self.tail_start <= self.head_end

    def to_dict(self) -> dict[str, list[int]]:
        """``{"head": [0, h], "middle": [h, t], "tail": [t, n]}``."""
        return {
            "head": [0, self.head_end],
            "middle": [self.head_end, max(self.head_end, self.tail_start)],
            "tail": [self.tail_start, self.n],
        }


def _is_tool_caller(message: Message) -> bool:
    return message.get("role") == "assistant" and bool(tool_calls(message))


def _align_backward(messages: Sequence[Message], cut: int) -> int:
    """Move a cut that lands on tool rows back onto the assistant that called them."""
    if cut >= len(messages) or messages[cut].get("role") != "tool":
        return cut
    i = cut - 1
    while i >= 0 and messages[i].get("role") == "tool":
        i -= 1
    if i >= 0 and _is_tool_caller(messages[i]):
        return i
    return cut


def _latest(messages: Sequence[Message], role: str, start: int) -> int | None:
    for i in range(len(messages) - 1, start - 1, -1):
        message = messages[i]
        if message.get("role") != role or is_summary_message(message):
            continue
        if role == "user" or has_visible_text(message):
            return i
    return None


def find_boundaries(
    messages: Sequence[Message],
    token_counts: Sequence[int],
    config: CompactionConfig,
    *,
    protect_first_n: int | None = None,
) -> Boundaries:
    """Split ``messages`` into head, middle and tail.

    Args:
        messages: the conversation.
        token_counts: tokens per message (same length).
        config: ``protect_first_n`` and ``tail_token_budget``.
        protect_first_n: overrides ``config.protect_first_n`` (head decay).

    Returns:
        The boundaries and every alignment move made.
    """
    n = len(messages)
    head_end, events = _head_end(messages, config, protect_first_n)

    cut = n
    used = 0
    for i in range(n - 1, head_end - 1, -1):
        if used + token_counts[i] > config.tail_token_budget:
            break
        used += token_counts[i]
        cut = i

    aligned = _align_backward(messages, cut)
    if aligned != cut:
        events.append(AlignmentEvent("tool_group_kept_whole", cut, max(aligned, head_end)))
        cut = max(aligned, head_end)

    user = _latest(messages, "user", head_end)
    if user is not None and user < cut:
        events.append(AlignmentEvent("latest_user_pulled_in", cut, user))
        cut = user

    assistant = _latest(messages, "assistant", head_end)
    if assistant is not None and assistant < cut:
        events.append(AlignmentEvent("latest_assistant_pulled_in", cut, assistant))
        cut = assistant

    return Boundaries(head_end=head_end, tail_start=max(cut, head_end), n=n, events=tuple(events))


def tail_ceiling(config: CompactionConfig) -> int:
    """The hermes tail's soft ceiling (reference §2.3 step 3):
    ``max(budget, min(1.5 × budget, tail_max_fraction × window))``."""
    budget = config.tail_budget_tokens
    return max(
        budget, min(int(1.5 * budget), int(config.tail_max_fraction * config.context_length))
    )


def find_bounded_boundaries(
    messages: Sequence[Message],
    token_counts: Sequence[int],
    config: CompactionConfig,
    *,
    protect_first_n: int | None = None,
    min_tail: int = 3,
) -> Boundaries:
    """The hermes profile's cut: a tail bounded by ``tail_ceiling`` (reference §2.3).

    Like ``find_boundaries`` (same head, same backward tool alignment), except that:

    - the walk keeps newest messages up to the soft ceiling, never fewer than ``min_tail``
      when the conversation has room for a middle;
    - when the whole conversation fits, the walk is redone with the raw budget, the row that
      breaks it included, so a worthwhile middle exists (Hermes #40803);
    - the latest user message and the latest visible assistant reply are pulled into the
      tail only when the tail then still fits the ceiling. Otherwise they are summarized
      (event ``latest_user_summarized`` / ``latest_assistant_summarized``): one user message
      followed by hundreds of tool calls must not make the tail swallow the conversation;
    - the final cut moves forward past tool rows, so no tool group is split.
    """
    n = len(messages)
    head_end, events = _head_end(messages, config, protect_first_n)
    if head_end >= n:
        return Boundaries(head_end=head_end, tail_start=n, n=n, events=tuple(events))

    budget = config.tail_budget_tokens
    soft = tail_ceiling(config)
    available = n - head_end
    floor = min(min_tail, max(1, available - 1))

    def walk(limit: int, include_breaking: bool) -> int:
        cut, used = n, 0
        for i in range(n - 1, head_end - 1, -1):
            if used + token_counts[i] > limit and n - cut >= floor:
                if include_breaking:
                    cut = i
                break
            used += token_counts[i]
            cut = i
        return cut

    cut = walk(soft, False)
    if cut <= head_end:
        cut = walk(budget, True)
        if cut <= head_end:
            cut = max(n - floor, head_end + 1)
    aligned = _align_backward(messages, cut)
    if aligned != cut and aligned > head_end:
        events.append(AlignmentEvent("tool_group_kept_whole", cut, aligned))
        cut = aligned

    for role, pulled, summarized in (
        ("user", "latest_user_pulled_in", "latest_user_summarized"),
        ("assistant", "latest_assistant_pulled_in", "latest_assistant_summarized"),
    ):
        found = _latest(messages, role, head_end)
        if found is None or found >= cut:
            continue
        target = _align_backward(messages, found) if role == "assistant" else found
        target = max(target, head_end + 1) if target <= head_end else target
        # The tail from ``target`` on: summed in C for the (at most two) rows asked about.
        if target > head_end and sum(token_counts[target:]) <= soft:
            events.append(AlignmentEvent(pulled, cut, target))
            cut = target
        else:
            events.append(AlignmentEvent(summarized, cut, cut))

    forward = cut
    while forward < n and messages[forward].get("role") == "tool":
        forward += 1
    if forward == n and forward != cut:
        # Everything after the cut is tool rows: keep the group whole in the tail instead.
        back = _align_backward(messages, cut)
        forward = back if head_end < back < cut else forward
    if forward != cut:
        events.append(AlignmentEvent("cut_moved_past_tools", cut, forward))
        cut = forward
    return Boundaries(head_end=head_end, tail_start=max(cut, head_end), n=n, events=tuple(events))


def _head_end(
    messages: Sequence[Message], config: CompactionConfig, protect_first_n: int | None
) -> tuple[int, list[AlignmentEvent]]:
    """The end of the head (system prompt + the first N), moved past tool rows so that no
    tool group is split; both profiles protect the head the same way."""
    n = len(messages)
    events: list[AlignmentEvent] = []
    first_n = config.protect_first_n if protect_first_n is None else protect_first_n
    system = 1 if n and messages[0].get("role") == "system" else 0
    head_end = min(n, system + first_n)
    aligned = head_end
    while aligned < n and messages[aligned].get("role") == "tool":
        aligned += 1
    if aligned != head_end:
        events.append(AlignmentEvent("head_aligned_past_tools", head_end, aligned))
        head_end = aligned
    return head_end, events
