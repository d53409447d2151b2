"""In-flight task replay (hermes profile; reference §7.5).

When the newest real user request was summarized away and the conversation did not end with
the assistant's answer to it, the compacted conversation would otherwise hand the agent a
summary and no live request. The request is restated after the compaction boundary:

- as a copy of that user row right after the summary, with ``REPLAY_PREFIX`` before its
  text, when the summary sits in an assistant row;
- appended to the summary carrier after its end marker when the carrier is a user row (a
  second user row there would collide with it).

No replay happens when the conversation ends with a text-bearing assistant reply without
pending tool calls (the request was answered), when a real user message already follows the
summary, or when the carrier already holds live text after its end marker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compaction.markers import is_summary_message, split_summary
from compaction.messages import Message, content_text
from compaction.resume import is_wrapper

__all__ = ["REPLAY_PREFIX", "inflight_replay"]

REPLAY_PREFIX = (
    "[STILL IN PROGRESS — this is the active request, restated after the compaction boundary "
    "because it was not finished yet. Continue it; do not start over.]"
)


def _real_user_text(message: Message) -> str | None:
    """The text of a real user request (not a summary, wrapper or empty row), else None."""
    if message.get("role") != "user" or is_summary_message(message):
        return None
    text = content_text(message.get("content"), images=False).strip()
    return None if is_wrapper(text) else text


def _answered(messages: Sequence[Message]) -> bool:
    """The conversation ends with a text-bearing assistant reply with no pending calls."""
    if not messages:
        return True
    last = messages[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return False
    return bool(content_text(last.get("content"), images=False).strip())


def inflight_replay(
    original: Sequence[Message], final: list[Message], summary_index: int
) -> tuple[list[Message], dict[str, Any] | None]:
    """``(messages, what was done)``: ``final`` with the unfinished newest request restated
    after the summary at ``summary_index`` (see the module docstring), or unchanged with
    None. ``final`` is not mutated; a changed list is a new one.

    The description is ``{"source_index", "mode": "row" | "merged", "index"}``: the input
    index of the restated request, how it was restated, and the output row holding it.
    """
    if _answered(original):
        return final, None
    source = None
    task = ""
    for i in range(len(original) - 1, -1, -1):
        text = _real_user_text(original[i])
        if text is not None:
            source, task = i, text
            break
    if source is None:
        return final, None
    if any(_real_user_text(m) is not None for m in final[summary_index + 1 :]):
        return final, None
    carrier = final[summary_index]
    carried = content_text(carrier.get("content"), images=False)
    _, live = split_summary(carried)
    if live.strip():
        return final, None
    restated = f"{REPLAY_PREFIX}\n{task}"
    out = list(final)
    if carrier.get("role") == "assistant":
        out.insert(summary_index + 1, {**original[source], "content": restated})
        return out, {"source_index": source, "mode": "row", "index": summary_index + 1}
    out[summary_index] = {**carrier, "content": f"{carried}\n\n{restated}"}
    return out, {"source_index": source, "mode": "merged", "index": summary_index}
