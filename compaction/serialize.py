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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.config import CompactionConfig
from compaction.messages import Message, content_text, raw_arguments, tool_call_name, tool_calls
from compaction.slimming import SlimAction, make_action, truncate_text

__all__ = [
    "ARGS_MAX",
    "ARGS_SHOWN_MAX",
    "ASSISTANT_LABEL_CHARS",
    "CALLS_FRAME_CHARS",
    "CALL_LINE_CHARS",
    "TOOL_LABEL_CHARS",
    "USER_LABEL_CHARS",
    "RecordSizes",
    "measure_records",
    "serialize_message",
    "serialize_middle",
]

_THINK_RE = re.compile(r"<(think|thinking|reasoning)>.*?</\1>\s*", re.DOTALL | re.IGNORECASE)
# Record lengths, for the callers that note them without building a record:
TOOL_LABEL_CHARS = len("[TOOL RESULT ]: ")  # a tool record: this label, its call id, its text
USER_LABEL_CHARS = len("[USER]: ")  # a user record: this label, its text
ASSISTANT_LABEL_CHARS = len("[ASSISTANT]: ")  # an assistant record: this label, its text ...
CALLS_FRAME_CHARS = len("\n[Tool calls:\n") + len("\n]")  # ... then its calls, one per line
CALL_LINE_CHARS = len("  ()")  # "  name(arguments)"
ARGS_MAX = 1_500  # arguments longer than this are shown cut to their head and "..."
_ARGS_HEAD = 1_200
ARGS_SHOWN_MAX = _ARGS_HEAD + len("...")


def _texts(
    message: Message, config: CompactionConfig, fold: str | None = None
) -> tuple[str, str, str]:
    """``(role, text, sent)``: the role label, the text without reasoning, the text sent."""
    role = message.get("role")
    role = role if type(role) is str and role else str(role or "unknown")
    if fold is not None:
        text = fold
    else:
        content = message.get("content")
        text = content if type(content) is str else content_text(content)
    if role == "assistant" and "<" in text:
        text = _THINK_RE.sub("", text)
    sent = text if len(text) <= config.content_max else truncate_text(text, config)
    return role, text, sent


def _call_parts(call: Mapping[str, Any]) -> tuple[str, str]:
    """``(name, arguments)`` of a call as written in its record line."""
    fn = call.get("function")
    # The OpenAI shape inline: this runs once per tool call of the middle.
    if type(fn) is dict and type(fn.get("arguments")) is str:
        name, args = fn.get("name") or "unknown", fn["arguments"]
    else:
        name, args = tool_call_name(call), raw_arguments(call)
    return str(name), args


def serialize_message(
    message: Message, config: CompactionConfig, fold: str | None = None
) -> tuple[str, str, str]:
    """One summarizer record; ``fold``, when given, stands for the content (a folded result).

    Returns:
        ``(record, full_text, sent_text)``: the record, the message text before truncation
        and the text that went into the record (they differ when truncated).
    """
    role, text, sent = _texts(message, config, fold)
    if role == "tool":
        return f"[TOOL RESULT {message.get('tool_call_id') or '?'}]: {sent}", text, sent
    record = f"[{role.upper()}]: {sent}"
    if role == "assistant" and message.get("tool_calls"):
        lines = []
        for call in tool_calls(message):
            name, args = _call_parts(call)
            if len(args) > ARGS_MAX:
                args = args[:_ARGS_HEAD] + "..."
            lines.append(f"  {name}({args})")
        if lines:
            record += "\n[Tool calls:\n" + "\n".join(lines) + "\n]"
    return record, text, sent


def _record_length(
    message: Message, config: CompactionConfig, fold: str | None = None
) -> tuple[int, str, str]:
    """``len(serialize_message(...)[0])`` without building the record, with its texts.

    This runs for nearly every message of a long middle (the records the cap drops are only
    measured), so no label string is built.
    """
    role, text, sent = _texts(message, config, fold)
    if role == "tool":
        call_id = message.get("tool_call_id") or "?"
        return (
            TOOL_LABEL_CHARS + len(call_id if type(call_id) is str else str(call_id)) + len(sent),
            text,
            sent,
        )
    length = len(role) + 4 + len(sent)  # "[ROLE]: "
    if role == "assistant" and message.get("tool_calls"):
        calls = tool_calls(message)
        if calls:
            length += CALLS_FRAME_CHARS + len(calls) - 1
            for call in calls:
                name, args = _call_parts(call)
                shown = len(args) if len(args) <= ARGS_MAX else ARGS_SHOWN_MAX
                length += CALL_LINE_CHARS + len(name) + shown
    return length, text, sent


@dataclass(slots=True)
class RecordSizes:
    """The summed length of a middle's records and its truncations, measured by ranges.

    Attributes:
        chars: the summed record lengths (separators not included).
        truncations: one ``"truncate"`` action per truncated record, by position.
    """

    chars: int = 0
    truncations: dict[int, SlimAction] = field(default_factory=dict)


def measure_records(
    middle: Sequence[Message],
    config: CompactionConfig,
    sizes: RecordSizes,
    start: int,
    stop: int,
    *,
    folds: Mapping[int, str] | None = None,
    indices: Sequence[int] | None = None,
    first_index: int = 0,
    positions: Sequence[int] | None = None,
) -> None:
    """Add the records of ``middle[start:stop]`` to ``sizes`` (lengths only, no record built),
    or of ``positions`` (in that range) only, when the caller knows the others' lengths.

    Args:
        middle: the slimmed middle (folded results may still hold their original content).
        config: truncation sizes.
        sizes: the totals so far.
        start, stop: the range to measure.
        folds: fold line per position, standing for that tool result's content.
        indices: input index of each message (default: consecutive from ``first_index``).
        first_index: input index of ``middle[0]``.
    """
    folds = folds or {}
    chars = 0
    for pos in range(start, stop) if positions is None else positions:
        message = middle[pos]
        length, full, sent = _record_length(message, config, folds.get(pos))
        chars += length
        if sent is not full:
            index = indices[pos] if indices is not None else first_index + pos
            sizes.truncations[pos] = make_action(index, "truncate", message, full, sent)
    sizes.chars += chars


def serialize_middle(
    middle: Sequence[Message],
    first_index: int,
    config: CompactionConfig,
    indices: Sequence[int] | None = None,
    folds: Mapping[int, str] | None = None,
    sizes: RecordSizes | None = None,
) -> tuple[str, list[SlimAction]]:
    """Serialize the slimmed middle and cap it at ``summary_input_max_chars``.

    Args:
        middle: the slimmed middle messages.
        first_index: input index of ``middle[0]``.
        config: truncation sizes and the cap.
        indices: input index of each message (default: consecutive from ``first_index``).
        folds: fold line per position, standing for that tool result's content.
        sizes: ``measure_records`` over the whole middle, when already taken; otherwise the
            records the cap drops are measured here.

    Returns:
        The summarizer input and one ``"truncate"`` action per truncated message. Over the cap,
        45 % of the head and 55 % of the tail are kept around a marker naming the omission.
    """
    cap = config.summary_input_max_chars
    head_chars = int(cap * 0.45)
    tail_chars = cap - head_chars
    n = len(middle)
    folds = folds or {}
    measured = sizes is not None
    if sizes is None:
        sizes = RecordSizes()

    def note(pos: int, message: Message, full: str, sent: str) -> None:
        if sent is not full and not measured:
            index = indices[pos] if indices is not None else first_index + pos
            sizes.truncations[pos] = make_action(index, "truncate", message, full, sent)

    # Records are built from both ends until each end holds its share of the cap (the "+ 2":
    # a joined end is its records plus a separator between each two); when the
    # ends do not meet, the capped input drops everything between, so there only the lengths
    # are needed.
    record_chars = 0
    front: list[str] = []
    front_chars = 0
    pos = 0
    while pos < n and front_chars < head_chars + 2:
        record, full, sent = serialize_message(middle[pos], config, folds.get(pos))
        note(pos, middle[pos], full, sent)
        front.append(record)
        front_chars += len(record) + 2
        record_chars += len(record)
        pos += 1
    back: list[str] = []
    back_chars = 0
    end = n
    while end > pos and back_chars < tail_chars + 2:
        end -= 1
        record, full, sent = serialize_message(middle[end], config, folds.get(end))
        note(end, middle[end], full, sent)
        back.append(record)
        back_chars += len(record) + 2
        record_chars += len(record)
    back.reverse()
    if measured:
        record_chars = sizes.chars
    else:
        measure_records(
            middle,
            config,
            sizes,
            pos,
            end,
            folds=folds,
            indices=indices,
            first_index=first_index,
        )
        record_chars += sizes.chars
    truncated = sizes.truncations
    actions = [truncated[i] for i in sorted(truncated)]
    total = record_chars + 2 * max(n - 1, 0)
    marker = (
        f"\n\n...[summary input truncated: omitted {total - cap:,} chars from the middle to "
        "keep compression prompt bounded]...\n\n"
    )
    if pos == end:
        text = "\n\n".join(front + back)
        if total <= cap:
            return text, actions
        return text[:head_chars] + marker + text[len(text) - tail_chars :], actions
    # Both ends hold at least their share, and the whole is longer than the cap: the first
    # ``head_chars`` of the joined front and the last ``tail_chars`` of the joined back,
    # taken record by record into one join (joining each end whole, then slicing and
    # adding, held the capped input three times over at once).
    pieces = _joined_head(front, head_chars)
    pieces.append(marker)
    pieces.extend(_joined_tail(back, tail_chars))
    return "".join(pieces), actions


def _joined_head(records: list[str], limit: int) -> list[str]:
    """Pieces whose concatenation is ``"\n\n".join(records)[:limit]``."""
    pieces: list[str] = []
    for i, record in enumerate(records):
        for chunk in ("\n\n", record) if i else (record,):
            if len(chunk) >= limit:
                pieces.append(chunk[:limit])
                return pieces
            pieces.append(chunk)
            limit -= len(chunk)
    return pieces


def _joined_tail(records: list[str], limit: int) -> list[str]:
    """Pieces whose concatenation is the last ``limit`` chars of ``"\n\n".join(records)``."""
    pieces: list[str] = []
    last = len(records) - 1
    for i in range(last, -1, -1):
        for chunk in ("\n\n", records[i]) if i < last else (records[i],):
            if len(chunk) >= limit:
                pieces.append(chunk[len(chunk) - limit :])
                pieces.reverse()
                return pieces
            pieces.append(chunk)
            limit -= len(chunk)
    pieces.reverse()
    return pieces
