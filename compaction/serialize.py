"""Serialization of the slimmed middle into the summarizer input.

Only ``content`` and ``tool_calls`` (name + arguments) are written; reasoning fields
(``reasoning``, ``reasoning_content``, ``reasoning_details``, ``thinking``) and ``<think>``
blocks never are. Records are role-labelled and joined with a blank line::

    [USER]: …
    [ASSISTANT]: …
    [Tool calls:
      terminal({"command": "ls"})
    ]
    [TOOL RESULT call_1]: …
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from compaction.config import CompactionConfig
from compaction.messages import Message, content_text, raw_arguments, tool_call_name, tool_calls
from compaction.slimming import SlimAction, make_action, truncate_text

__all__ = ["serialize_message", "serialize_middle"]

_THINK_RE = re.compile(r"<(think|thinking|reasoning)>.*?</\1>\s*", re.DOTALL | re.IGNORECASE)
_ARGS_MAX = 1_500
_ARGS_HEAD = 1_200


def serialize_message(message: Message, config: CompactionConfig) -> tuple[str, str, str]:
    """One summarizer record.

    Returns:
        ``(record, full_text, sent_text)``: the record, the message text before truncation
        and the text that went into the record (they differ when truncated).
    """
    role = str(message.get("role") or "unknown")
    text = content_text(message.get("content"))
    if role == "assistant" and "<" in text:
        text = _THINK_RE.sub("", text)
    sent = truncate_text(text, config)
    if role == "tool":
        return f"[TOOL RESULT {message.get('tool_call_id') or '?'}]: {sent}", text, sent
    record = f"[{role.upper()}]: {sent}"
    calls = tool_calls(message) if role == "assistant" else []
    if calls:
        lines = []
        for call in calls:
            args = raw_arguments(call)
            if len(args) > _ARGS_MAX:
                args = args[:_ARGS_HEAD] + "..."
            lines.append(f"  {tool_call_name(call)}({args})")
        record += "\n[Tool calls:\n" + "\n".join(lines) + "\n]"
    return record, text, sent


def serialize_middle(
    middle: Sequence[Message],
    first_index: int,
    config: CompactionConfig,
    indices: Sequence[int] | None = None,
) -> tuple[str, list[SlimAction]]:
    """Serialize the slimmed middle and cap it at ``summary_input_max_chars``.

    Args:
        middle: the slimmed middle messages.
        first_index: input index of ``middle[0]``.
        config: truncation sizes and the cap.
        indices: input index of each message (default: consecutive from ``first_index``).

    Returns:
        The summarizer input and one ``"truncate"`` action per truncated message. Over the cap,
        45 % of the head and 55 % of the tail are kept around a marker naming the omission.
    """
    records: list[str] = []
    actions: list[SlimAction] = []
    for pos, message in enumerate(middle):
        record, full, sent = serialize_message(message, config)
        records.append(record)
        if sent is not full:
            index = indices[pos] if indices is not None else first_index + pos
            actions.append(make_action(index, "truncate", message, full, sent))
    text = "\n\n".join(records)
    cap = config.summary_input_max_chars
    if len(text) > cap:
        omitted = len(text) - cap
        marker = (
            f"\n\n...[summary input truncated: omitted {omitted:,} chars from the middle to "
            "keep compression prompt bounded]...\n\n"
        )
        head = int(cap * 0.45)
        text = text[:head] + marker + text[len(text) - (cap - head) :]
    return text, actions
