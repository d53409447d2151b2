"""Tool-pair sanitization of the assembled list (the safety net after the cut).

A valid list has, right after each assistant message with ``tool_calls``, exactly one
``tool`` result per call and no tool rows anywhere else. Repairs:

- ``dropped_orphan_result``: a tool row whose call is not the assistant just before it
  (call gone, duplicate, or no ``tool_call_id``) is removed;
- ``inserted_stub`` (mode ``"stub"``, the seed's default): a call whose result is gone gets
  ``{"role": "tool", "tool_call_id": id, "content": STUB_RESULT}`` right after its results;
- ``stripped_call`` (mode ``"strip"``, and always for calls without an id): the call is removed
  from the assistant message; with no calls left the ``tool_calls`` key goes, and empty
  content becomes ``"(tool call removed)"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compaction.messages import Message, call_id_variants, tool_call_id, tool_calls

__all__ = ["STUB_RESULT", "SanitizeAction", "sanitize_tool_pairs", "validate_tool_pairs"]

STUB_RESULT = "[Result from earlier conversation — see context summary above]"


@dataclass(frozen=True, slots=True)
class SanitizeAction:
    """One repair.

    Attributes:
        kind: ``"dropped_orphan_result"``, ``"inserted_stub"`` or ``"stripped_call"``.
        tool_call_id: the id concerned (None when missing).
        index: position in the list given to ``sanitize_tool_pairs`` (for an inserted stub:
            the position of the assistant message it answers).
    """

    kind: str
    tool_call_id: str | None
    index: int

    def to_dict(self) -> dict[str, Any]:
        """``{"kind", "tool_call_id", "index"}``."""
        return {"kind": self.kind, "tool_call_id": self.tool_call_id, "index": self.index}


def sanitize_tool_pairs(
    messages: Sequence[Message], mode: str = "stub"
) -> tuple[list[Message], list[SanitizeAction]]:
    """Repair tool call/result pairing. Messages are never mutated; repaired ones are copies.

    Args:
        messages: the assembled list.
        mode: ``"stub"`` or ``"strip"`` for calls whose result is gone.

    Returns:
        The repaired list and the actions taken.
    """
    out: list[Message] = []
    actions: list[SanitizeAction] = []
    n = len(messages)
    i = 0
    while i < n:
        message = messages[i]
        role = message.get("role")
        if role == "tool":
            actions.append(SanitizeAction("dropped_orphan_result", _result_id(message), i))
            i += 1
            continue
        calls = tool_calls(message) if role == "assistant" else []
        if not calls:
            out.append(message)
            i += 1
            continue
        # Gather the contiguous results after this assistant.
        j = i + 1
        results: list[tuple[int, Message]] = []
        while j < n and messages[j].get("role") == "tool":
            results.append((j, messages[j]))
            j += 1
        wanted: dict[str, int] = {}
        for k, call in enumerate(calls):
            for variant in call_id_variants(call):
                wanted.setdefault(variant, k)
        answered: set[int] = set()
        kept: list[Message] = []
        for index, result in results:
            rid = _result_id(result)
            found = wanted.get(rid) if rid is not None else None
            if found is None or found in answered:
                actions.append(SanitizeAction("dropped_orphan_result", rid, index))
                continue
            answered.add(found)
            kept.append(result)
        keep_calls: list[Any] = []
        stubs: list[Message] = []
        for k, call in enumerate(calls):
            cid = tool_call_id(call)
            if k in answered:
                keep_calls.append(call)
            elif cid is None or mode == "strip":
                actions.append(SanitizeAction("stripped_call", cid, i))
            else:
                keep_calls.append(call)
                stubs.append({"role": "tool", "tool_call_id": cid, "content": STUB_RESULT})
                actions.append(SanitizeAction("inserted_stub", cid, i))
        if len(keep_calls) != len(calls):
            message = dict(message)
            if keep_calls:
                message["tool_calls"] = keep_calls
            else:
                message.pop("tool_calls", None)
                if not message.get("content"):
                    message["content"] = "(tool call removed)"
        out.append(message)
        out.extend(kept)
        out.extend(stubs)
        i = j
    return out, actions


def _result_id(message: Message) -> str | None:
    value = message.get("tool_call_id")
    return str(value) if value else None


def validate_tool_pairs(messages: Sequence[Message]) -> list[str]:
    """Problems that a provider would reject (empty list when the pairing is valid)."""
    problems: list[str] = []
    pending: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            rid = _result_id(message)
            if rid is None or rid not in pending:
                problems.append(f"message {i}: tool result {rid!r} does not follow its call")
            else:
                pending.discard(rid)
            continue
        if pending:
            problems.append(f"message {i}: calls {sorted(pending)} have no result")
            pending = set()
        if role == "assistant":
            for call in tool_calls(message):
                cid = tool_call_id(call)
                if cid is None:
                    problems.append(f"message {i}: a tool call has no id")
                else:
                    pending.add(cid)
    if pending:
        problems.append(f"end: calls {sorted(pending)} have no result")
    return problems
