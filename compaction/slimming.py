"""Slimming: fold tool results, truncate for the summarizer, strip images.

Folds and image placeholders apply to the middle only (what the summarizer sees);
truncation applies to the summarizer input only; ``strip_historical_images`` applies to the
assembled output. Adding a tool's fold format is one entry in ``FOLDERS``.
"""

# Over 450 lines: one module per seed idea: the per-tool fold formats (FOLDERS) are most of its
# length.
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.actions import SlimAction, make_action
from compaction.config import CompactionConfig
from compaction.messages import (
    Message,
    content_text,
    is_data_image,
    is_image_part,
    parse_arguments,
    parse_arguments_text,
    tool_call_id,
    tool_call_name,
)

__all__ = [
    "FOLDERS",
    "IMAGE_PLACEHOLDER",
    "TRUNCATION_MARKER",
    "FoldFunction",
    "SlimAction",
    "make_action",
    "Slimming",
    "CallIndex",
    "build_call_index",
    "fold_tool_result",
    "is_ref_stub",
    "is_stub",
    "slim_middle",
    "slim_range",
    "strip_historical_images",
    "truncate_text",
]

IMAGE_PLACEHOLDER = "[Attached image — stripped after compression]"
TRUNCATION_MARKER = "\n...[truncated]...\n"

FoldFunction = Callable[[str, Mapping[str, Any], str], str]
"""``(tool_name, arguments, result_text) -> one line``."""

_EXIT_RE = re.compile(r'"exit_code"\s*:\s*(-?\d+)')
_TOTAL_RE = re.compile(r'"total_count"\s*:\s*(\d+)')


def _n(content: str) -> str:
    return f"{len(content):,}"


def _lines(content: str) -> int:
    # isspace() stops at the first visible character; strip() would copy the whole result.
    return content.count("\n") + 1 if content and not content.isspace() else 0


def _fold_terminal(tool: str, args: Mapping[str, Any], content: str) -> str:
    command = str(args.get("command") or "")
    if len(command) > 80:
        command = command[:77] + "..."
    # The exit code sits at the end of the usual JSON result: look there before scanning it all.
    match = _EXIT_RE.search(content, max(0, len(content) - 400)) or _EXIT_RE.search(content)
    code = match.group(1) if match else "?"
    return f"[terminal] ran `{command}` -> exit {code}, {_lines(content)} lines output"


def _fold_read_file(tool: str, args: Mapping[str, Any], content: str) -> str:
    path = args.get("path") or "?"
    offset = args.get("offset") or 1
    return f"[read_file] read {path} from line {offset} ({_n(content)} chars)"


def _fold_write_file(tool: str, args: Mapping[str, Any], content: str) -> str:
    path = args.get("path") or "?"
    body = args.get("content")
    lines = str(body).count("\n") + 1 if isinstance(body, str) else "?"
    return f"[write_file] wrote to {path} ({lines} lines)"


def _fold_search_files(tool: str, args: Mapping[str, Any], content: str) -> str:
    target = args.get("target") or "content"
    pattern = args.get("pattern") or "?"
    path = args.get("path") or "."
    # A regex instead of json.loads: search results can be large and this runs per result.
    match = _TOTAL_RE.search(content, 0, 400) or _TOTAL_RE.search(content)
    total: Any = match.group(1) if match else "?"
    return f"[search_files] {target} search for '{pattern}' in {path} -> {total} matches"


def _fold_patch(tool: str, args: Mapping[str, Any], content: str) -> str:
    mode = args.get("mode") or "replace"
    path = args.get("path") or "?"
    return f"[patch] {mode} in {path} ({_n(content)} chars result)"


def _fold_browser(tool: str, args: Mapping[str, Any], content: str) -> str:
    if args.get("url"):
        return f"[{tool}] {args['url']} ({_n(content)} chars)"
    if args.get("ref"):
        return f"[{tool}] ref={args['ref']} ({_n(content)} chars)"
    return f"[{tool}] ({_n(content)} chars)"


def _fold_web_search(tool: str, args: Mapping[str, Any], content: str) -> str:
    return f"[web_search] query='{args.get('query') or '?'}' ({_n(content)} chars result)"


def _fold_web_extract(tool: str, args: Mapping[str, Any], content: str) -> str:
    urls = args.get("urls")
    if not isinstance(urls, list):
        urls = [args["url"]] if args.get("url") else []
    first: Any = urls[0] if urls else "?"
    if isinstance(first, Mapping):
        first = first.get("url") or first.get("href") or "?"
    more = f" (+{len(urls) - 1} more)" if len(urls) > 1 else ""
    return f"[web_extract] {first}{more} ({_n(content)} chars)"


def _fold_delegate(tool: str, args: Mapping[str, Any], content: str) -> str:
    goal = str(args.get("goal") or "")
    if len(goal) > 60:
        goal = goal[:57] + "..."
    return f"[delegate_task] '{goal}' ({_n(content)} chars result)"


def _fold_execute_code(tool: str, args: Mapping[str, Any], content: str) -> str:
    code = str(args.get("code") or "").replace("\n", " ")
    more = "..." if len(code) > 60 else ""
    return f"[execute_code] `{code[:60]}{more}` ({_lines(content)} lines output)"


def _fold_vision(tool: str, args: Mapping[str, Any], content: str) -> str:
    return f"[vision_analyze] '{str(args.get('question') or '')[:50]}' ({_n(content)} chars)"


def _fold_memory(tool: str, args: Mapping[str, Any], content: str) -> str:
    return f"[memory] {args.get('action') or '?'} on {args.get('target') or '?'}"


def _fold_todo(tool: str, args: Mapping[str, Any], content: str) -> str:
    return "[todo] updated task list"


def _fold_list_files(tool: str, args: Mapping[str, Any], content: str) -> str:
    return f"[list_files] listed {args.get('path') or '.'} ({_n(content)} chars)"


def _fold_generic(tool: str, args: Mapping[str, Any], content: str) -> str:
    pairs = "".join(f" {k}={str(v)[:40]}" for k, v in list(args.items())[:2])
    return f"[{tool}]{pairs} ({_n(content)} chars result)"


FOLDERS: dict[str, FoldFunction] = {
    "terminal": _fold_terminal,
    "read_file": _fold_read_file,
    "write_file": _fold_write_file,
    "search_files": _fold_search_files,
    "patch": _fold_patch,
    "browser_navigate": _fold_browser,
    "browser_click": _fold_browser,
    "browser_snapshot": _fold_browser,
    "browser_type": _fold_browser,
    "browser_scroll": _fold_browser,
    "browser_vision": _fold_browser,
    "web_search": _fold_web_search,
    "web_extract": _fold_web_extract,
    "delegate_task": _fold_delegate,
    "execute_code": _fold_execute_code,
    "vision_analyze": _fold_vision,
    "memory": _fold_memory,
    "todo": _fold_todo,
    "todo_list": _fold_todo,
    "list_files": _fold_list_files,
}
"""Tool name → fold function. Unknown tools use the generic ``[tool] k=v (N chars result)``."""


def fold_tool_result(tool: str, args: Mapping[str, Any], content: str) -> str:
    """One line standing for a tool result (formats of Hermes, reference §3.2).

    A fold function that raises falls back to ``[<tool>] (<N> chars result)``.
    """
    folder = FOLDERS.get(tool, _fold_generic)
    try:
        return folder(tool, args, content)
    except Exception:  # a malformed argument must never break compaction
        return f"[{tool}] ({_n(content)} chars result)"


def is_stub(text: str) -> bool:
    """True for text that is already a fold line, placeholder or stub (never re-folded)."""
    return text.startswith("[") and (
        (len(text) < 400 and " chars)" in text)
        or text.startswith(("[Attached image", "[Result from earlier", "[Duplicate tool output"))
    )


def is_ref_stub(text: str) -> bool:
    """True for a line the hermes passes wrote (fold, stub, pointer, each naming a
    ``[ref:N]``): never folded again."""
    return len(text) < 800 and text.startswith("[") and "[ref:" in text


def truncate_text(text: str, config: CompactionConfig) -> str:
    """Summarizer-input truncation: over ``content_max`` → head + marker + tail."""
    if len(text) <= config.content_max:
        return text
    tail = text[-config.content_tail :] if config.content_tail else ""
    return text[: config.content_head] + TRUNCATION_MARKER + tail


CallIndex = dict[str, tuple[str, dict[str, Any]]]
"""Tool call id → (tool name, parsed arguments)."""


def build_call_index(messages: Sequence[Message]) -> CallIndex:
    """Tool call id → (tool name, parsed arguments), over assistant messages."""
    index: CallIndex = {}
    for message in messages:
        if message.get("tool_calls") and message.get("role") == "assistant":
            _index_calls(message, index)
    return index


def _index_calls(message: Message, index: CallIndex) -> None:
    """Add the tool calls of one assistant message to ``index``."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return
    for call in calls:
        if type(call) is not dict and not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        if type(fn) is dict and type(fn.get("arguments")) is str and call.get("id"):
            # The usual OpenAI shape, inlined: this runs once per call of the conversation.
            index[str(call["id"])] = (
                str(fn.get("name") or "unknown"),
                parse_arguments_text(fn["arguments"]),
            )
            continue
        cid = tool_call_id(call)
        if cid:
            index[cid] = (tool_call_name(call), parse_arguments(call))


def _replace_images(content: list[Any], *, data_only: bool) -> tuple[list[Any], int]:
    out: list[Any] = []
    replaced = 0
    for part in content:
        if is_image_part(part) and (not data_only or is_data_image(part)):
            out.append({"type": "text", "text": IMAGE_PLACEHOLDER})
            replaced += 1
        else:
            out.append(part)
    return out, replaced


@dataclass(slots=True)
class Slimming:
    """What slimming did to a middle; ``slim_range`` fills it block by block, in order.

    Attributes:
        messages: the middle with inline images replaced (new dicts there; the list given is
            copied before the first replacement, never written to). Folded tool results stay
            the original dicts: their fold line is in ``folds``, and consumers
            (serialization) read it from there; copying thousands of dicts only to swap one
            value cost more than finding the fold lines.
        actions: the slimming actions, in message order.
        folds: fold line per position in the middle.
        calls: the call index, extended with the calls of the slimmed blocks.
        indexed: ``calls`` already holds every call of the middle (the hermes passes built
            it over the whole conversation): the slimmed blocks are not indexed again.
    """

    messages: Sequence[Message]
    actions: list[SlimAction] = field(default_factory=list)
    folds: dict[int, str] = field(default_factory=dict)
    calls: CallIndex = field(default_factory=dict)
    indexed: bool = False
    _copied: bool = False

    def replace(self, pos: int, message: Message) -> None:
        """Put ``message`` at ``pos`` (copying the given list the first time)."""
        if not self._copied:
            self.messages = list(self.messages)
            self._copied = True
        self.messages[pos] = message  # type: ignore[index]

    def slimmed_messages(self) -> list[Message]:
        """The middle as the summarizer sees it: fold lines in place of the folded results."""
        folds = self.folds
        return [
            {**m, "content": folds[i]} if i in folds else m for i, m in enumerate(self.messages)
        ]


def slim_middle(
    middle: Sequence[Message],
    indices: Sequence[int],
    config: CompactionConfig,
    call_index: Mapping[str, tuple[str, dict[str, Any]]],
) -> Slimming:
    """Fold long tool results and replace inline images in the middle.

    Args:
        middle: the middle messages (never mutated).
        indices: the input index of each middle message (for the report).
        config: ``fold_min_chars``.
        call_index: the calls made before the middle (``build_call_index`` over the head).
            The middle's own calls are indexed during the same walk, each before the
            results that answer it.
    """
    slimming = Slimming(middle, calls=dict(call_index))
    slim_range(slimming, indices, config, 0, len(middle))
    return slimming


def slim_range(
    slimming: Slimming,
    indices: Sequence[int],
    config: CompactionConfig,
    start: int,
    stop: int,
    fold: Callable[[str, Mapping[str, Any], str, int], str] | None = None,
    positions: Sequence[int] | None = None,
) -> None:
    """Slim ``slimming.messages[start:stop]`` (see ``slim_middle``), or only ``positions``
    of it (ascending) when the caller knows the other rows cannot change.

    Ranges must come in order, each after the previous one: a result is folded with the
    call indexed before it. The engine slims a long middle in blocks and measures each
    block's summarizer records right after, while its messages are still in the CPU cache.
    ``fold``, when given, writes the fold lines (``(tool, args, text, input index)``; the
    hermes profile's lines name a recall reference) and lines it wrote are never refolded.
    """
    actions, folds, calls = slimming.actions, slimming.folds, slimming.calls
    fold_min = config.fold_min_chars
    index_calls = not slimming.indexed
    for pos in range(start, stop) if positions is None else positions:
        message = slimming.messages[pos]
        content = message.get("content")
        if type(content) is list and any(is_data_image(p) for p in content):
            before = content_text(content)
            new_content, _ = _replace_images(content, data_only=True)
            message = {**message, "content": new_content}
            slimming.replace(pos, message)
            content = new_content
            actions.append(
                make_action(indices[pos], "image", message, before, content_text(content))
            )
        role = message.get("role")
        if role == "assistant":
            if index_calls and message.get("tool_calls"):
                _index_calls(message, calls)
        elif role == "tool":
            text = content if type(content) is str else content_text(content)
            if len(text) > fold_min and not is_stub(text):
                if fold is not None and is_ref_stub(text):
                    continue
                name, args = calls.get(str(message.get("tool_call_id") or ""), _UNKNOWN)
                line = (
                    fold_tool_result(name, args, text)
                    if fold is None
                    else fold(name, args, text, indices[pos])
                )
                folds[pos] = line
                actions.append(
                    make_action(
                        indices[pos], "fold", message, text, line, tool_name=name, fold_line=line
                    )
                )


_UNKNOWN: tuple[str, dict[str, Any]] = ("unknown", {})


def strip_historical_images(
    messages: Sequence[Message],
) -> tuple[list[Message], list[tuple[int, str, str]]]:
    """Keep only the images of the newest user message that has images.

    Every image part in messages before that one becomes ``IMAGE_PLACEHOLDER``; messages
    after it keep theirs. When no user message has images nothing changes.

    Returns:
        The new list (changed messages are new dicts) and ``(position, before, after)`` texts
        for each changed message.
    """
    anchor = None
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        content = m.get("content")
        if (
            m.get("role") == "user"
            and isinstance(content, list)
            and any(is_image_part(p) for p in content)
        ):
            anchor = i
            break
    out = list(messages)
    changes: list[tuple[int, str, str]] = []
    if anchor is None:
        return out, changes
    for i in range(anchor):
        content = out[i].get("content")
        if isinstance(content, list) and any(is_image_part(p) for p in content):
            new_content, _ = _replace_images(content, data_only=False)
            changes.append((i, content_text(content), content_text(new_content)))
            out[i] = {**out[i], "content": new_content}
    return out, changes
