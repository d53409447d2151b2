"""What a summarizer works from: ``SummaryFacts`` and the whole-middle gathering it may carry.

A leaf module: the deterministic summaries (``compaction.deterministic``,
``compaction.resume``) and the summarizers import it, it imports neither.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from compaction.messages import Message

__all__ = ["MiddleGathered", "SummaryFacts"]


@dataclass(slots=True)
class MiddleGathered:
    """What the summary needs from the whole middle (files, calls, newest reply), gathered
    front to back by ``gather_middle``.

    Attributes:
        paths: every path named (tool arguments, paths in user and assistant text), ordered
            by its last mention, oldest first; the newest ones are the summary's.
        call_count: the tool calls made in the middle.
        last_reply_pos: position of the newest assistant message with visible text, or -1.
    """

    paths: dict[str, None] = field(default_factory=dict)
    call_count: int = 0
    last_reply_pos: int = -1

    def newest(self, count: int) -> list[str]:
        """The ``count`` most recently named paths, oldest first."""
        paths = self.paths
        if len(paths) <= count:
            return list(paths)
        return list(itertools.islice(reversed(paths), count))[::-1]


@dataclass(frozen=True, slots=True)
class SummaryFacts:
    """What the deterministic summarizer works from.

    Attributes:
        middle: the compacted messages (original content, no earlier summaries).
        fold_lines: position in ``middle`` → one-line fold of that tool result.
        first_user_text: the conversation's first user message (for the goal).
        previous_summary: body of the previous summary, carried forward.
        focus: the focus topic, if any.
        now: the date for temporal anchoring.
        max_chars: size bound of the body.
        calls: tool call id → (name, parsed arguments), when already known (saves parsing).
        gathered: ``gather_middle`` over the whole middle, when already taken (the engine
            gathers it block by block with slimming); otherwise it is gathered here.
        profile: ``"hermes"`` writes the fact-keeping summary of ``compaction.resume``.
        indices: the input index of each middle message (for ``[ref:N]``).
        with_ledger: the engine appends the fact ledger (``compaction.ledger``) to the
            summary: the hermes summary then writes no fact sections of its own.

    A middle message may carry an optional ``timestamp`` (ISO 8601 string or epoch seconds or
    milliseconds; ``created_at`` is read too): the summary dates its actions with it instead
    of ``now``. Importers keep the agent's own times there.
    """

    middle: Sequence[Message]
    fold_lines: Mapping[int, str]
    first_user_text: str | None
    previous_summary: str | None
    focus: str | None
    now: date
    max_chars: int = 12_000
    calls: Mapping[str, tuple[str, dict[str, Any]]] | None = None
    gathered: MiddleGathered | None = None
    profile: str = "classic"
    indices: Sequence[int] | None = None
    with_ledger: bool = False
