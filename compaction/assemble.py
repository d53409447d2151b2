"""Assembly: head + summary message + tail.

The summary's role follows Hermes (reference §7.3). Visible roles exclude ``tool`` rows and
assistant rows with ``tool_calls``. The summary is a ``user`` message when the head's last
visible role is assistant/tool/none or when a user-leading summary is forced (empty head,
head ending on the system prompt, or no user text anywhere); otherwise ``assistant``. When
that collides with the first visible tail role the role flips if it can; otherwise the
summary is merged into a tail row.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compaction.markers import (
    COMPACTION_NOTE,
    END_MARKER,
    MERGED_CLOSE,
    MERGED_OPEN,
    is_summary_message,
    split_summary,
)
from compaction.messages import Message, content_text, has_visible_text, tool_calls

__all__ = ["Assembly", "add_compaction_note", "assemble", "choose_summary_role", "unwrap_summaries"]


@dataclass(frozen=True, slots=True)
class Assembly:
    """The assembled list before sanitization.

    Attributes:
        messages: head + summary + tail.
        summary_index: index of the message that holds the summary.
        summary_role: its role.
        merged: True when the summary was merged into a tail row.
        sources: for each message, its input index (None for the summary row).
        changed: positions whose content differs from the input message.
    """

    messages: list[dict[str, Any]]
    summary_index: int
    summary_role: str
    merged: bool
    sources: list[int | None]
    changed: frozenset[int]


def _visible_role(message: Message) -> str | None:
    role = message.get("role")
    if role == "tool" or (role == "assistant" and tool_calls(message)):
        return None
    return str(role) if role else None


def choose_summary_role(
    head: Sequence[Message], tail: Sequence[Message]
) -> tuple[str, int | None, bool]:
    """Choose the summary role.

    Returns:
        ``(role, merge_at, forced)``: the role, the tail position to merge into (None for a
        standalone row) and whether a user-leading summary was forced.
    """
    if not head:
        last_head: str | None = "user"
    else:
        visible = [r for r in (_visible_role(m) for m in head) if r]
        last_head = visible[-1] if visible else None
    has_user = any(m.get("role") == "user" and has_visible_text(m) for m in [*head, *tail])
    forced = not head or last_head == "system" or not has_user
    role = "user" if forced or last_head in (None, "assistant", "tool") else "assistant"
    first_visible = next(
        ((i, r) for i, r in ((i, _visible_role(m)) for i, m in enumerate(tail)) if r), None
    )
    if first_visible is None or first_visible[1] != role:
        return role, None, forced
    flipped = "assistant" if role == "user" else "user"
    if not forced and last_head is not None and flipped != last_head:
        return flipped, None, forced
    if forced:
        return role, first_visible[0], forced
    target = 0 if tail[0].get("role") != "tool" else first_visible[0]
    return str(tail[target].get("role")), target, forced


def add_compaction_note(system: Message) -> dict[str, Any]:
    """A copy of the system message with ``COMPACTION_NOTE`` appended once."""
    message = copy.deepcopy(dict(system))
    content = message.get("content")
    if isinstance(content, list):
        if COMPACTION_NOTE not in content_text(content):
            message["content"] = [*content, {"type": "text", "text": COMPACTION_NOTE}]
    elif COMPACTION_NOTE not in (content or ""):
        message["content"] = f"{content}\n\n{COMPACTION_NOTE}" if content else COMPACTION_NOTE
    return message


_ATOMS = (str, int, float, bool, type(None))


def copy_message(value: Any) -> Any:
    """A deep copy of JSON-shaped message data: plain dicts, lists and scalars copied
    directly (``copy.deepcopy`` spends most of its time on its memo and dispatch); anything
    else (tuples, subclasses, objects) goes through ``copy.deepcopy``. The result is equal
    to ``copy.deepcopy(value)``."""
    kind = type(value)
    if kind is dict:
        return {k: copy_message(v) for k, v in value.items()}
    if kind is list:
        return [copy_message(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def unwrap_summaries(
    messages: Sequence[Message], sources: Sequence[int]
) -> tuple[list[dict[str, Any]], list[int], set[int]]:
    """Remove earlier summary rows; a merged carrier keeps only its original content.

    Returns the kept messages (deep copies), their input indices, and the positions changed.
    """
    out: list[dict[str, Any]] = []
    kept: list[int] = []
    changed: set[int] = set()
    for message, source in zip(messages, sources, strict=True):
        if is_summary_message(message):
            _, remainder = split_summary(content_text(message.get("content"), images=False))
            if not remainder.strip():
                continue
            copied = copy_message(dict(message))
            copied["content"] = remainder
            changed.add(len(out))
            out.append(copied)
        else:
            out.append(copy_message(dict(message)))
        kept.append(source)
    return out, kept, changed


def _merge(message: dict[str, Any], summary: str, *, leading: bool) -> dict[str, Any]:
    content = message.get("content")
    if leading:
        prefix = f"{summary}\n\n{END_MARKER}\n\n"
        if isinstance(content, list):
            message["content"] = [{"type": "text", "text": prefix.rstrip()}, *content]
        else:
            message["content"] = prefix + (content or "")
        return message
    before = f"{MERGED_OPEN}\n"
    after = f"\n\n{MERGED_CLOSE}\n\n{summary}\n\n{END_MARKER}"
    if isinstance(content, list):
        message["content"] = [
            {"type": "text", "text": before.strip()},
            *content,
            {"type": "text", "text": after.strip()},
        ]
    else:
        message["content"] = before + (content or "") + after
    return message


def assemble(
    head: Sequence[Message],
    head_sources: Sequence[int],
    summary_content: str,
    tail: Sequence[Message],
    tail_sources: Sequence[int],
) -> Assembly:
    """Join head, summary and tail.

    Earlier summaries in head and tail are dropped (their body is already carried into the
    new summary), the compaction note is appended to the system prompt once, and the new
    summary is placed as a standalone row or merged into a tail row.

    Args:
        head: head messages; head_sources: their input indices.
        summary_content: prefix + body (the end marker is added here).
        tail: tail messages; tail_sources: their input indices.
    """
    new_head, h_src, h_changed = unwrap_summaries(head, head_sources)
    new_tail, t_src, t_changed = unwrap_summaries(tail, tail_sources)
    if new_head and new_head[0].get("role") == "system":
        noted = add_compaction_note(new_head[0])
        if noted.get("content") != new_head[0].get("content"):
            h_changed.add(0)
        new_head[0] = noted
    role, merge_at, forced = choose_summary_role(new_head, new_tail)
    sources: list[int | None] = [*h_src]
    changed = set(h_changed)
    offset = len(new_head)
    if merge_at is None:
        summary_row = {"role": role, "content": f"{summary_content}\n\n{END_MARKER}"}
        messages = [*new_head, summary_row, *new_tail]
        sources += [None, *t_src]
        changed.update(offset + 1 + p for p in t_changed)
        return Assembly(messages, offset, role, False, sources, frozenset(changed))
    # Merging into a user row puts the summary first so the live request follows the marker.
    leading = forced or new_tail[merge_at].get("role") == "user"
    new_tail[merge_at] = _merge(new_tail[merge_at], summary_content, leading=leading)
    messages = [*new_head, *new_tail]
    sources += t_src
    changed.update(offset + p for p in t_changed)
    changed.add(offset + merge_at)
    return Assembly(
        messages,
        offset + merge_at,
        str(new_tail[merge_at].get("role")),
        True,
        sources,
        frozenset(changed),
    )
