"""Anthropic's on-demand compaction (beta ``compact-2026-09-04``) served by our engine for any
model: a ``/v1/messages`` request with ``"compaction": {"type": "summarize"}`` stores and
compacts the conversation (``compacting.compact_conversation``) and answers with one signed
``compaction`` block and ``stop_reason: "compaction"``; a later request that sends the block
back first, byte-exact, continues from it (the model reads our head + summary + tail).

A block anywhere but first is ``compaction_block_misplaced``, two blocks
``compaction_block_ambiguous``, a changed signature ``compaction_signature_invalid``, changed
content ``compaction_content_mismatch`` (in ``error.details.error_code``, as the SDK reads it).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator
from typing import Any

from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse

from compaction import CompactionConfig
from compaction.tokens import count_text_tokens, message_token_text
from hermes_web.models import ApiKey, Compaction
from hermes_web.openai_compat import compacting, views
from hermes_web.openai_compat.anthropic_sse import event
from hermes_web.openai_compat.bounded import BoundedCache
from hermes_web.openai_compat.errors import ApiError, invalid
from hermes_web.openai_compat.upstream import resolve_model

INSTRUCTIONS_MAX = 16_384


def after_block(
    data: dict[str, Any], owner_id: int, *, anywhere: bool = False
) -> tuple[dict[str, Any], list[dict] | None, dict[str, Any]]:
    """A body that sends a compaction block back: the body without the block (and, with
    ``anywhere``, without everything before it: threshold compaction's clients append the
    reply that opened with the block to their history), the history the block stands for,
    and what the request carries for the conversation service (the compaction it
    continues). A body without one is returned as it is (history None)."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        return data, None, {}
    found = [
        (index, number)
        for index, message in enumerate(messages)
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for number, part in enumerate(message["content"])
        if isinstance(part, dict) and part.get("type") == "compaction"
    ]
    if not found:
        return data, None, {}
    if len(found) > 1:
        index, number = found[1]
        raise ApiError(
            400,
            f"messages holds {len(found)} compaction blocks; send only the block the "
            "conversation returned last.",
            code="compaction_block_ambiguous",
            param=f"messages.{index}.content.{number}",
        )
    index, number = found[0]
    where = f"messages.{index}.content.{number}"
    if messages[index].get("role") == "system" or ((index, number) != (0, 0) and not anywhere):
        raise ApiError(
            400,
            f"{where}: a compaction block must be the first block of the first message.",
            code="compaction_block_misplaced",
            param=where,
        )
    compaction = compacting.open_block(messages[index]["content"][number], owner_id, where)
    after = messages[index]["content"][number + 1 :]
    rest = ([{**messages[index], "content": after}] if after else []) + messages[index + 1 :]
    history = compacting.history_of(compaction)
    carried = {"compaction": compaction, "compaction_covers": len(history)}
    return {**data, "messages": rest}, history, carried


def _instructions(config: Any) -> str:
    if not isinstance(config, dict):
        raise invalid("compaction: must be an object.", code="invalid_type", param="compaction")
    if config.get("type") != "summarize":
        raise invalid(
            "compaction.type: must be summarize.", code="invalid_value", param="compaction.type"
        )
    instructions = config.get("instructions")
    if instructions is None:
        return ""
    if not isinstance(instructions, str) or len(instructions) > INSTRUCTIONS_MAX:
        raise invalid(
            f"compaction.instructions: must be a string of at most {INSTRUCTIONS_MAX:,} "
            "characters.",
            code="invalid_value",
            param="compaction.instructions",
        )
    return instructions.strip()  # empty or whitespace only: the default prompt


def _ends_in_pending_call(messages: list[Any]) -> bool:
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "assistant":
        return False
    content = last.get("content")
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "tool_use" for part in content
    )


def on_demand(
    request: HttpRequest,
    key: ApiKey,
    data: dict[str, Any],
    history: list[dict] | None,
    carried: dict[str, Any],
    parse_data: Callable[..., Any],
) -> HttpResponseBase:
    """Compact the conversation now; answer with the signed block alone. ``parse_data``: the
    Messages adapter's body parser (passed in: the adapter imports this module, not the
    other way round)."""
    instructions = _instructions(data.get("compaction"))
    if data.get("context_management") is not None:
        raise invalid(
            "compaction and context_management cannot be combined in one request.",
            code="invalid_value",
            param="compaction",
        )
    messages = data.get("messages") or []
    if not any(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in messages):
        raise ApiError(
            400,
            "messages holds no user or assistant content to summarize after the compaction block.",
            code="compaction_nothing_to_summarize",
            param="messages",
        )
    if _ends_in_pending_call(messages):
        raise ApiError(
            400,
            f"messages.{len(messages) - 1}: the last assistant turn ends in a tool call with "
            "no result; send its tool_result (or leave that turn out) before compacting.",
            code="compaction_incomplete_turn",
            param=f"messages.{len(messages) - 1}",
        )
    body = {name: value for name, value in data.items() if name != "compaction"}
    chat = parse_data(body, history=history, carried=carried)
    run = compacting.compact_conversation(
        key,
        chat,
        asked=("anthropic", request.path, "compaction summarize (on demand)"),
        instructions=instructions,
        user_agent=request.headers.get("User-Agent", ""),
    )
    spent = compacting.usage(run)
    usage = {
        # What the compaction cost is reported only in its iteration, as Anthropic does.
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "iterations": [
            {
                "type": "compaction",
                "input_tokens": spent["input_tokens"],
                "output_tokens": spent["output_tokens"],
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        ],
    }
    message = {
        "id": chat.extra["id"],
        "type": "message",
        "role": "assistant",
        "model": chat.model,
        "content": [compacting.block(run, key.owner_id)],
        "stop_reason": "compaction",
        "stop_sequence": None,
        "usage": usage,
    }
    response: HttpResponseBase
    if data.get("stream"):
        response = StreamingHttpResponse(_events(message), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
    else:
        response = JsonResponse(message)
    _headers(request, response, run)
    return response


def _events(message: dict[str, Any]) -> Iterator[bytes]:
    """The block streamed as Anthropic streams one: its start (with the signature), one
    ``compaction_delta`` carrying the whole summary, its stop."""
    block = message["content"][0]
    yield event("message_start", {"message": {**message, "content": [], "stop_reason": None}})
    yield event(
        "content_block_start",
        {"index": 0, "content_block": {**block, "content": None}},
    )
    yield event(
        "content_block_delta",
        {"index": 0, "delta": {"type": "compaction_delta", "content": block["content"]}},
    )
    yield event("content_block_stop", {"index": 0})
    yield event(
        "message_delta",
        {
            "delta": {"stop_reason": "compaction", "stop_sequence": None},
            "usage": message["usage"],
        },
    )
    yield event("message_stop", {})


def _headers(request: HttpRequest, response: HttpResponseBase, run: Compaction) -> None:
    response[views.SESSION_HEADER] = (run.result_session or run.session).public_id
    response[views.COMPACTION_HEADER] = request.build_absolute_uri(
        reverse("compaction_detail", args=[run.public_id])
    )


# -- threshold compaction: context_management edit compact_20260112 (beta compact-2026-01-12) -

THRESHOLD_EDIT = "compact_20260112"
THRESHOLD_BETA = "compact-2026-01-12"


def threshold_blocks(request: HttpRequest, data: dict[str, Any]) -> bool:
    """Whether a compaction block may come back after the history it replaced (threshold
    compaction's way: the beta header, or the edit in the request)."""
    if THRESHOLD_BETA in request.headers.get("anthropic-beta", ""):
        return True
    management = data.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    return any(isinstance(e, dict) and e.get("type") == THRESHOLD_EDIT for e in edits or ())


TRIGGER_DEFAULT = 150_000
TRIGGER_MIN = 50_000


def _threshold_edit(management: Any) -> dict[str, Any] | None:
    """The request's ``compact_20260112`` edit, checked (trigger, pause, instructions), or
    None. Other edits pass as before (not applied yet)."""
    if management is None:
        return None
    if not isinstance(management, dict) or not isinstance(management.get("edits", []), list):
        raise invalid(
            "context_management: must be an object with an edits array.",
            code="invalid_type",
            param="context_management",
        )
    for number, edit in enumerate(management.get("edits") or ()):
        where = f"context_management.edits.{number}"
        if not isinstance(edit, dict) or edit.get("type") != THRESHOLD_EDIT:
            continue
        trigger = edit.get("trigger") or {"type": "input_tokens", "value": TRIGGER_DEFAULT}
        value = trigger.get("value") if isinstance(trigger, dict) else None
        if (
            not isinstance(trigger, dict)
            or trigger.get("type") != "input_tokens"
            or isinstance(value, bool)
            or not isinstance(value, int)
            or value < TRIGGER_MIN
        ):
            raise invalid(
                f"{where}.trigger: must be {{type: input_tokens, value: an integer of at least "
                f"{TRIGGER_MIN:,}}}.",
                code="invalid_value",
                param=f"{where}.trigger",
            )
        pause = edit.get("pause_after_compaction", False)
        if not isinstance(pause, bool):
            raise invalid(
                f"{where}.pause_after_compaction: must be a boolean.",
                code="invalid_type",
                param=f"{where}.pause_after_compaction",
            )
        instructions = edit.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise invalid(
                f"{where}.instructions: must be a string.",
                code="invalid_type",
                param=f"{where}.instructions",
            )
        return {"trigger": value, "pause": pause, "instructions": (instructions or "").strip()}
    return None


def threshold_first(request: HttpRequest, key: ApiKey, chat: Any, data: dict[str, Any]) -> Any:
    """``compact_20260112``: when the request's input tokens reach the edit's trigger, the
    conversation is stored and compacted before the model call, which reads the compacted
    context; the reply opens with the (signed) compaction block, or is that block alone with
    ``pause_after_compaction``. Under the trigger (or too short to compact): as it is."""
    edit = _threshold_edit(data.get("context_management"))
    if edit is None:
        return chat
    config = CompactionConfig(model=resolve_model(chat.model))
    if sum(_counts(compacting.rendered(chat), config)) < edit["trigger"]:
        return chat
    try:
        run = compacting.compact_conversation(
            key,
            chat,
            asked=(
                "anthropic",
                request.path,
                f"context_management {THRESHOLD_EDIT} trigger {edit['trigger']:,}",
            ),
            instructions=edit["instructions"],
            user_agent=request.headers.get("User-Agent", ""),
        )
    except ApiError as error:
        if error.code != "compaction_nothing_to_summarize":
            raise
        return chat
    spent = compacting.usage(run)
    iteration = {
        "type": "compaction",
        "input_tokens": spent["input_tokens"],
        "output_tokens": spent["output_tokens"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    extra = {
        **chat.extra,
        "compaction": None,
        "compaction_block": compacting.block(run, key.owner_id),
        "compaction_iteration": iteration,
        "compaction_run": run,
        "paused": edit["pause"],
    }
    return dataclasses.replace(chat, extra=extra)


def paused(request: HttpRequest, chat: Any) -> HttpResponseBase:
    """``pause_after_compaction``: the compaction block alone, ``stop_reason: compaction``."""
    message = {
        "id": chat.extra["id"],
        "type": "message",
        "role": "assistant",
        "model": chat.model,
        "content": [chat.extra["compaction_block"]],
        "stop_reason": "compaction",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "iterations": [chat.extra["compaction_iteration"]],
        },
    }
    response: HttpResponseBase
    if chat.stream:
        response = StreamingHttpResponse(_events(message), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
    else:
        response = JsonResponse(message)
    _headers(request, response, chat.extra["compaction_run"])
    return response


# -- context editing: clear_tool_uses_20250919 (beta context-management-2025-06-27) ------------

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEARED = "[Old tool result content cleared]"


def _amount(edit: dict[str, Any], name: str, kind: str, default: int, where: str) -> int:
    value = edit.get(name)
    if value is None:
        return default
    amount = value.get("value") if isinstance(value, dict) else None
    if (
        not isinstance(value, dict)
        or value.get("type") != kind
        or isinstance(amount, bool)
        or not isinstance(amount, int)
        or amount < 0
    ):
        raise invalid(
            f"{where}.{name}: must be {{type: {kind}, value: a non-negative integer}}.",
            code="invalid_value",
            param=f"{where}.{name}",
        )
    return amount


def _trigger(edit: dict[str, Any], where: str) -> dict[str, Any]:
    """The edit's trigger: ``{type: input_tokens, value}`` (the default, 100k) or
    ``{type: tool_uses, value}`` (what Claude Code sends: clear once the context holds that
    many tool uses), as ``trigger`` (tokens) or ``trigger_tool_uses``."""
    value = edit.get("trigger")
    if isinstance(value, dict) and value.get("type") == "tool_uses":
        return {"trigger": 0, "trigger_tool_uses": _amount(edit, "trigger", "tool_uses", 0, where)}
    try:
        return {"trigger": _amount(edit, "trigger", "input_tokens", 100_000, where)}
    except ApiError:
        raise invalid(
            f"{where}.trigger: must be {{type: input_tokens or tool_uses, value: a "
            "non-negative integer}.",
            code="invalid_value",
            param=f"{where}.trigger",
        ) from None


def _clearing_edit(management: Any) -> dict[str, Any] | None:
    if not isinstance(management, dict):
        return None
    for number, edit in enumerate(management.get("edits") or ()):
        if not isinstance(edit, dict) or edit.get("type") != CLEAR_TOOL_USES:
            continue
        where = f"context_management.edits.{number}"
        excluded = edit.get("exclude_tools") or []
        if not isinstance(excluded, list) or not all(isinstance(n, str) for n in excluded):
            raise invalid(
                f"{where}.exclude_tools: must be an array of tool names.",
                code="invalid_value",
                param=f"{where}.exclude_tools",
            )
        return {
            **_trigger(edit, where),
            "keep": _amount(edit, "keep", "tool_uses", 3, where),
            "clear_at_least": _amount(edit, "clear_at_least", "input_tokens", 0, where),
            "exclude": frozenset(excluded),
            "inputs": edit.get("clear_tool_inputs") is True,
        }
    return None


# Token counts of messages already seen, by model and text digest: an agent sends its whole
# history again every turn, and the trigger of its edits is checked on all of it each time.
COUNTED: BoundedCache[tuple[str, bytes, int], int] = BoundedCache(200_000, 200_000 * 64)


def _counts(messages: list[dict], config: CompactionConfig) -> list[int]:
    """``count_messages_tokens``, remembering each message's count across requests."""
    counts = []
    for message in messages:
        text, images = message_token_text(message)
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16)
        key = (config.model, digest.digest(), images)
        count = COUNTED.get(key)
        if count is None:
            count = (
                count_text_tokens(text, config.model)
                + config.per_message_overhead
                + images * config.image_tokens
            )
            COUNTED.put(key, count, 64)
        counts.append(count)
    return counts


def clear_tool_uses(
    messages: list[dict], edit: dict[str, Any], model: str
) -> tuple[list[dict], dict[str, Any] | None]:
    """Anthropic's tool-use clearing on what the model reads: past the trigger, every tool
    result but the newest ``keep`` (excluded tools aside) becomes a placeholder (and its
    call's input ``{}`` with ``clear_tool_inputs``), when that frees at least
    ``clear_at_least`` tokens. The messages and the applied edit (or None)."""
    uses = edit.get("trigger_tool_uses")
    if uses is not None and sum(len(m.get("tool_calls") or ()) for m in messages) < uses:
        return messages, None  # (counted before any token: the cheap trigger first)
    config = CompactionConfig(model=model)
    counts = _counts(messages, config)
    if sum(counts) < edit["trigger"]:
        return messages, None
    names = {
        call.get("id"): (call.get("function") or {}).get("name")
        for message in messages
        for call in message.get("tool_calls") or ()
    }
    results = [
        index
        for index, message in enumerate(messages)
        if message.get("role") == "tool"
        and names.get(message.get("tool_call_id")) not in edit["exclude"]
        and message.get("content") != CLEARED
    ]
    chosen = results[: max(len(results) - edit["keep"], 0)]
    if not chosen:
        return messages, None
    edited = list(messages)
    cleared_ids = set()
    changed = list(chosen)
    for index in chosen:
        edited[index] = {**messages[index], "content": CLEARED}
        cleared_ids.add(messages[index].get("tool_call_id"))
    if edit["inputs"]:
        for index, message in enumerate(edited):
            calls = message.get("tool_calls") or ()
            if any(call.get("id") in cleared_ids for call in calls):
                changed.append(index)
                edited[index] = {
                    **message,
                    "tool_calls": [
                        {**call, "function": {**call["function"], "arguments": "{}"}}
                        if call.get("id") in cleared_ids
                        else call
                        for call in calls
                    ],
                }
    # Only the changed messages are counted again (every request past the trigger pays this).
    after = _counts([edited[index] for index in changed], config)
    saved = sum(counts[index] for index in changed) - sum(after)
    if saved < edit["clear_at_least"]:
        return messages, None
    applied = {
        "type": CLEAR_TOOL_USES,
        "cleared_tool_uses": len(chosen),
        "cleared_input_tokens": saved,
    }
    return edited, applied


# -- context editing: clear_thinking_20251015 (beta context-management-2025-06-27) -------------

CLEAR_THINKING = "clear_thinking_20251015"
THINKING_KEEP_DEFAULT = 1  # Anthropic's default: the last thinking turn's blocks stay
# The fields litellm's translation keeps a turn's thinking in (anthropic.THINKING_FIELDS; not
# imported: that module imports this one).
THINKING_FIELDS = frozenset(("thinking_blocks", "reasoning_content"))


def _thinking_edit(management: Any) -> dict[str, Any] | None:
    """The request's ``clear_thinking_20251015`` edit, checked: ``{"keep": n}`` (None for
    ``keep: "all"``), or None when there is none. Anthropic wants it listed first."""
    if not isinstance(management, dict):
        return None
    for number, edit in enumerate(management.get("edits") or ()):
        if not isinstance(edit, dict) or edit.get("type") != CLEAR_THINKING:
            continue
        where = f"context_management.edits.{number}"
        if number != 0:
            raise invalid(
                f"{where}: {CLEAR_THINKING} must be listed first among the edits.",
                code="invalid_value",
                param=where,
            )
        keep = edit.get("keep")
        if keep == "all":
            return {"keep": None}
        if keep is not None and not isinstance(keep, dict):
            raise invalid(
                f'{where}.keep: must be "all" or {{type: thinking_turns, value: a non-negative '
                "integer}.",
                code="invalid_value",
                param=f"{where}.keep",
            )
        return {"keep": _amount(edit, "keep", "thinking_turns", THINKING_KEEP_DEFAULT, where)}
    return None


def _thinking_text(message: dict) -> str:
    """The thinking a message carries to the model (signed blocks, redacted blocks' data, or
    the plain reasoning text litellm keeps beside them)."""
    texts = [
        str(block.get("thinking") or block.get("data") or "")
        for block in message.get("thinking_blocks") or ()
        if isinstance(block, dict)
    ]
    if not texts and message.get("reasoning_content"):
        texts.append(str(message["reasoning_content"]))
    return "\n".join(texts)


def clear_thinking(
    messages: list[dict], keep: int | None, model: str
) -> tuple[list[dict], dict[str, Any] | None]:
    """Anthropic's thinking clearing on what the model reads: the thinking of every assistant
    turn but the newest ``keep`` that have some is left out (``keep`` None: all stay). The
    messages and the applied edit (or None when nothing was cleared). A model that never
    takes thinking back (not served as Claude) has none here to clear."""
    turns = [
        index
        for index, message in enumerate(messages)
        if message.get("role") == "assistant" and _thinking_text(message)
    ]
    chosen = [] if keep is None else turns[: max(len(turns) - keep, 0)]
    if not chosen:
        return messages, None
    edited = list(messages)
    freed = 0
    for index in chosen:
        freed += count_text_tokens(_thinking_text(messages[index]), model)
        edited[index] = {
            name: value for name, value in messages[index].items() if name not in THINKING_FIELDS
        }
    applied = {
        "type": CLEAR_THINKING,
        "cleared_thinking_turns": len(chosen),
        "cleared_input_tokens": freed,
    }
    return edited, applied


def with_clearing(chat: Any, data: dict[str, Any]) -> Any:
    """The request with its context edits (``clear_thinking`` first, then
    ``clear_tool_uses``) to apply to what the model reads (after the conversation service
    put in a stored compacted context), and ``applied_edits`` to report, in that order
    (empty when nothing was cleared)."""
    management = data.get("context_management")
    thinking = _thinking_edit(management)
    edit = _clearing_edit(management)
    if thinking is None and edit is None:
        return chat
    applied: list[dict[str, Any]] = []
    model = resolve_model(chat.model)

    def edit_upstream(messages: list[dict]) -> list[dict]:
        if thinking is not None:
            messages, done = clear_thinking(messages, thinking["keep"], model)
            if done is not None:
                applied.append(done)
        if edit is not None:
            messages, done = clear_tool_uses(messages, edit, model)
            if done is not None:
                applied.append(done)
        return messages

    extra = {**chat.extra, "edit_upstream": edit_upstream, "applied_edits": applied}
    return dataclasses.replace(chat, extra=extra)
