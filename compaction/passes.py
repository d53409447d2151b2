"""The hermes profile's slimming passes over the whole conversation (reference §3.1, §3.3).

Each pass is a small function over a ``Work`` (the list being slimmed, copy-on-write per
row, with its token counts) and reports every change as a ``SlimAction`` like the classic
folds. Every line a pass writes names its source as ``[ref:N]``: N is the index of the
message in the compaction's input list, so the web layer can fetch the full text back
(the ``recall`` tool).

Passes, in the order the engine runs them:

1. ``dedup``: byte-identical tool outputs, newest kept, older copies point at it.
2. ``fold_before``: every tool result before the prune boundary, head included.
3. ``shrink_args``: long tool-call arguments before the prune boundary.
4. ``retire_tool_images``: only the newest N image-bearing tool results keep images.
5. ``pressure_demote``: the protected region is over its ceiling: fold/shrink there too.
6. ``lean_tail``: old tool rounds of the tail become recovery stubs.
"""

# Over 450 lines: the six hermes passes share the Work list and its copy-on-write rules; each pass
# is a short function.
from __future__ import annotations

import functools
import json
import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from compaction.config import CompactionConfig
from compaction.errors import InputError
from compaction.markers import is_summary_message, is_summary_text
from compaction.messages import (
    Message,
    content_text,
    is_image_part,
    parse_arguments_text,
    tool_call_id,
)
from compaction.serialize import (
    ARGS_MAX,
    ARGS_SHOWN_MAX,
    ASSISTANT_LABEL_CHARS,
    CALL_LINE_CHARS,
    CALLS_FRAME_CHARS,
    TOOL_LABEL_CHARS,
    USER_LABEL_CHARS,
)
from compaction.slimming import (
    FOLDERS,
    CallIndex,
    SlimAction,
    _fold_generic,
    _index_calls,
    is_ref_stub,
    is_stub,
    make_action,
)
from compaction.tokens import estimate_message_tokens

__all__ = [
    "ARGS_MARKER",
    "DEDUP_MARKER",
    "REF_RE",
    "Work",
    "dedup",
    "fold_before",
    "hermes_fold",
    "is_ref_stub",
    "lean_tail",
    "output_lines",
    "pressure_demote",
    "prune_boundary",
    "ref",
    "retire_tool_images",
    "shrink_args",
]

DEDUP_MARKER = "[Duplicate tool output — same content as a more recent call]"
ARGS_MARKER = (
    "⟪HERMES-CONTEXT-COMPRESSION: {omitted:,} of {total:,} chars omitted here by the context "
    "compressor (full call: {ref}). This is NOT part of the original tool call and must never "
    "be reproduced in new output — always write full, untruncated content.⟫"
)
SCREENSHOT_PLACEHOLDER = "[screenshot removed to save context]"
REF_RE = re.compile(r"\[ref:(\d+)\]")
_MARKER_OPEN = "⟪HERMES-CONTEXT-COMPRESSION:"


def ref(index: int) -> str:
    """The recall reference of input message ``index``: ``[ref:N]``."""
    return f"[ref:{index}]"


def _done(text: str) -> bool:
    return is_stub(text) or is_ref_stub(text)


# ---------------------------------------------------------------------------------------
# Fold lines


def _plural(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def output_lines(content: str) -> tuple[int, str | None]:
    """``(lines of output, exit code)`` of a terminal/code result.

    A JSON envelope (``{"output": …, "exit_code": …}``, ``stdout``/``stderr``) counts the
    lines of the output it carries, not of the JSON; plain text counts its own lines.
    """
    code: str | None = None
    body = content
    stripped = content.lstrip()
    if stripped.startswith("{") and len(stripped) > 64_000:
        # A large envelope: its output's newlines are the escaped ones (no parse needed).
        match = re.search(r'"(?:exit_code|returncode)"\s*:\s*(-?\d+)', content[-400:])
        escaped = stripped.count("\\n")
        trailing = stripped.count('\\n"')  # values ending in a newline add no line
        return escaped - trailing + 1, (match.group(1) if match else None)
    if stripped.startswith("{"):
        try:
            data = _orjson_loads(stripped)
        except _OrjsonError:
            data = _json_object(stripped)
        else:
            if type(data) is dict and len(data) == 2:
                # The terminal tool's own envelope, {"output": str, "exit_code": int}: what
                # the general branch below computes for it (an int exit code is exactly what
                # json gives, so orjson's value is used as it is).
                output, exit_code = data.get("output"), data.get("exit_code")
                if type(output) is str and type(exit_code) is int:
                    if not output or output.isspace():
                        return 0, str(exit_code)
                    if output[-1] != "\n":  # no trailing newline: no stripped copy
                        return output.count("\n") + 1, str(exit_code)
                    trailing = len(output) - len(output.rstrip("\n"))
                    return output.count("\n") - trailing + 1, str(exit_code)
            if type(data) is dict and _float_code(data):
                data = _json_object(stripped)  # an integer past 64 bits: json's int
        if isinstance(data, Mapping):
            get = data.get
            for key in _CODE_KEYS:
                value = get(key)
                # Decoded JSON: an int is exactly an int (bool is its own type).
                if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
                    code = str(value)
                    break
            # The lines of "\n".join(texts), each text a non-blank value without its
            # trailing newlines, counted without building the joined copy.
            texts = 0
            newlines = 0
            for key in _TEXT_KEYS:
                part = get(key)
                if type(part) is str and part and not part.isspace():
                    texts += 1
                    newlines += part.count("\n") - (len(part) - len(part.rstrip("\n")))
            if texts or "output" in data or "stdout" in data or "stderr" in data:
                if code is None:
                    code = _code_at_end(content)
                return (newlines + texts if texts else 0), code
    if code is None:
        end = content[-400:]
        match = _EXIT_JSON.search(end) or _EXIT_TEXT.search(end)
        if match:
            code = match.group(1)
    body = body.rstrip("\n")
    lines = body.count("\n") + 1 if body and not body.isspace() else 0
    return lines, code


_CODE_KEYS = ("exit_code", "returncode", "exit_status", "status_code")
_TEXT_KEYS = ("output", "stdout", "stderr", "result")


def _code_at_end(content: str) -> str | None:
    end = content[-400:]
    match = _EXIT_JSON.search(end) or _EXIT_TEXT.search(end)
    return match.group(1) if match else None


_EXIT_JSON = re.compile(r'"exit_code"\s*:\s*(-?\d+)')
_EXIT_TEXT = re.compile(r"(?:exit code|exit status|Exit code)[:\s]+(-?\d+)")
_scan_json: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_orjson_loads = orjson.loads
_OrjsonError = orjson.JSONDecodeError


def _float_code(data: dict[str, Any]) -> bool:
    """True when one of ``_CODE_KEYS`` holds a float: orjson's value of an integer past 64
    bits, where json gives an int."""
    get = data.get  # ``_CODE_KEYS``, spelled out: this runs once per terminal fold
    return (
        type(get("exit_code")) is float
        or type(get("returncode")) is float
        or type(get("exit_status")) is float
        or type(get("status_code")) is float
    )


def _json_object(text: str) -> Any:
    """``json.loads(text)``, or None when it is not JSON.

    orjson decodes an envelope about 3× faster than json's C scanner and agrees with it on
    every document it accepts, except integers beyond 64 bits (orjson: a float) where only
    the exit code's type is read here; what orjson rejects (NaN, lone surrogates, deep
    nesting) goes through json's scanner, called directly (json.loads's Python wrapper costs
    as much as scanning a small envelope)."""
    try:
        value = _orjson_loads(text)
    except _OrjsonError:
        pass
    else:
        if type(value) is not dict or not _float_code(value):
            return value
    try:
        value, end = _scan_json(text, 0)
    except (StopIteration, ValueError):
        end = -1
    except RecursionError:
        return None
    if end != len(text):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return None
    return value


def _short_command(command: str) -> str:
    """The command on one line, cut to 77 chars + "..." past 80."""
    command = " ".join(command.split())
    return command[:77] + "..." if len(command) > 80 else command


# Agents rerun a handful of commands: each short one is shortened once.
_short_command_cached = functools.lru_cache(maxsize=1_024)(_short_command)


def _fold_terminal(tool: str, args: Mapping[str, Any], content: str) -> str:
    command = str(args.get("command") or args.get("cmd") or "")
    command = _short_command_cached(command) if len(command) <= 2_000 else _short_command(command)
    lines, code = output_lines(content)
    return f"[{tool}] ran `{command}` -> exit {code or '?'}, {_plural(lines)} output"


def _fold_execute_code(tool: str, args: Mapping[str, Any], content: str) -> str:
    code = " ".join(str(args.get("code") or "").split())
    more = "..." if len(code) > 60 else ""
    lines, _ = output_lines(content)
    return f"[{tool}] `{code[:60]}{more}` ({_plural(lines)} output)"


_HERMES_FOLDERS = {
    **FOLDERS,
    "terminal": _fold_terminal,
    "bash": _fold_terminal,
    "shell": _fold_terminal,
    "exec_command": _fold_terminal,
    "execute_code": _fold_execute_code,
}


def hermes_fold(tool: str, args: Mapping[str, Any], content: str, index: int) -> str:
    """The hermes fold line: the classic per-tool line (terminal/code lines counted inside
    JSON envelopes, "1 line"), followed by the recall reference."""
    folder = _HERMES_FOLDERS.get(tool, _fold_generic)
    try:
        line = folder(tool, args, content)
    except Exception:  # a malformed argument must never break compaction
        line = f"[{tool}] ({len(content):,} chars result)"
    return f"{line} [ref:{index}]"  # ref(index)


# ---------------------------------------------------------------------------------------
# The list being slimmed


@dataclass(slots=True)
class Work:
    """The conversation being slimmed by the passes.

    Attributes:
        messages: the list (a copy of the input's references; changed rows are new dicts).
        tokens: tokens per message, recounted for changed rows.
        count: counts one message's tokens (used for changed rows only).
        config: the settings.
        actions: every change, in the order made.
        folded: per position, 1 when its content is now a pass-written line (a byte each:
            a set of the positions took 2 MB at 50k messages).
        calls: call id → (tool name, arguments) over the whole list.
        tool_rows: positions of the tool rows, in order (roles never change).
        call_rows: positions of the assistant rows with tool calls, in order.
        long_rows: those of them with a call whose arguments ``shrink_args`` may shrink.
        other_tool_rows: the tool rows whose content is not a string (only these can hold
            images: a pass only ever writes string content over a string).
        record_chars: per row, 0 or the length of its summarizer record (``measure_records``)
            as noted by the walk that saw it: an assistant row whose calls all have the
            OpenAI shape and whose text is sent whole, a user or plain assistant row whose
            text is, a folded row whose line is. The middle's records are then measured
            without a second look at those rows; ``put`` clears the note of a row it replaces.
        long_outputs: the string tool outputs of at least ``dedup_min_chars`` at the start.
        summary_rows: the user and assistant rows that bear a summary.
        parted_rows: the rows other than tool rows whose content is a list of parts (which
            may hold images).
        parsed_args: argument string → its dict (``parse_arguments_text``), per distinct string.
        exact_head, exact_from: rows before ``exact_head`` or from ``exact_from`` on have
            exact token counts (recounted by ``flush``); the rows between are estimated.
    """

    messages: list[Message]
    tokens: list[int]
    count: Callable[[Message], int]
    config: CompactionConfig
    actions: list[SlimAction] = field(default_factory=list)
    folded: bytearray = field(default_factory=bytearray)
    calls: CallIndex = field(default_factory=dict)
    count_many: Callable[[list[Message]], list[int]] | None = None
    immediate: bool = False
    dirty: list[int] = field(default_factory=list)
    exact_head: int = 0
    exact_from: int = 0
    # Positions as 8-byte values, not lists of int objects (28 bytes more each).
    tool_rows: array[int] = field(default_factory=lambda: array("q"))
    call_rows: array[int] = field(default_factory=lambda: array("q"))
    long_rows: array[int] = field(default_factory=lambda: array("q"))
    other_tool_rows: list[int] = field(default_factory=list)
    record_chars: list[int] = field(default_factory=list)
    long_outputs: list[str] = field(default_factory=list)
    summary_rows: list[int] = field(default_factory=list)
    parted_rows: list[int] = field(default_factory=list)
    parsed_args: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        messages: Sequence[Message],
        count: Callable[[Message], int],
        config: CompactionConfig,
        count_many: Callable[[list[Message]], list[int]] | None = None,
    ) -> Work:
        """A work list over ``messages`` (never mutated), validated as the engine's input
        scan does (``InputError`` naming the first bad message) and with its summary-bearing
        and parted rows listed; ``tokens`` are set by the caller.

        The hermes profile's one walk over the whole input: on large inputs every extra walk
        costs as much as the work done in it.
        """
        work = cls(list(messages), [], count, config)
        work.record_chars = [0] * len(work.messages)
        work.folded = bytearray(len(work.messages))
        work.count_many = count_many or (lambda batch: [count(m) for m in batch])
        # One walk indexes every call (as ``build_call_index``) and finds the rows each pass
        # visits: the passes then skip the rows they never change.
        calls, tool_rows, call_rows = work.calls, work.tool_rows, work.call_rows
        long_rows, minimum = work.long_rows, config.args_shrink_min_chars
        # Agents repeat calls (the same file read, the same command run): each distinct
        # argument string is parsed once and its dict shared (no consumer mutates one).
        parsed = work.parsed_args
        other_rows = work.other_tool_rows
        summaries, parted = work.summary_rows, work.parted_rows
        outputs, dedup_min = work.long_outputs, config.dedup_min_chars
        record_chars, sent_whole = work.record_chars, config.content_max
        user_label, assistant_label, calls_frame, call_line = (
            USER_LABEL_CHARS,
            ASSISTANT_LABEL_CHARS,
            CALLS_FRAME_CHARS,
            CALL_LINE_CHARS,
        )
        args_max, args_shown_max = ARGS_MAX, ARGS_SHOWN_MAX
        for pos, message in enumerate(work.messages):
            if type(message) is not dict and not isinstance(message, Mapping):
                raise InputError(f"expected a dict, got {type(message).__name__}", pos)
            role = message.get("role")
            if role == "tool":
                tool_rows.append(pos)
                content = message.get("content")
                if type(content) is not str:
                    other_rows.append(pos)
                elif len(content) >= dedup_min:
                    outputs.append(content)
                continue
            if role == "assistant" or role == "user":
                # The engine's summary and parts check (``_scan_input``), in this walk.
                content = message.get("content")
                if type(content) is str:
                    # Every summary opening starts with "[" (or follows blanks): the other
                    # texts skip the call.
                    first = content[:1]
                    if (first == "[" or first.isspace()) and is_summary_text(content):
                        summaries.append(pos)
                    # The record of a plain-text row, noted when sent whole (an assistant
                    # row's calls, if any, are added below).
                    if len(content) <= sent_whole:
                        if role == "user":
                            record_chars[pos] = user_label + len(content)
                        elif "<" not in content:
                            record_chars[pos] = assistant_label + len(content)
                else:
                    if type(content) is list:
                        parted.append(pos)
                    if is_summary_message(message):
                        summaries.append(pos)
            elif type(role) is not str and not isinstance(role, str):
                raise InputError("missing or non-string 'role'", pos)
            elif type(message.get("content")) is list:
                parted.append(pos)
            if role == "assistant":
                row_calls = message.get("tool_calls")
                if not row_calls:
                    continue
                call_rows.append(pos)
                if type(row_calls) is not list:
                    if _has_long_args(row_calls, minimum):
                        long_rows.append(pos)
                    _index_calls(message, calls)
                    continue
                # ``_has_long_args(row_calls, minimum)``, decided in the same loop.
                long = False
                # The row's summarizer record length, noted when its text is sent whole (no
                # reasoning block to strip, not truncated) and every call has the OpenAI shape
                # (-1: measured later).
                chars = -1
                if content is None:
                    chars = assistant_label + calls_frame + len(row_calls) - 1
                elif record_chars[pos]:
                    chars = record_chars[pos] + calls_frame + len(row_calls) - 1
                    record_chars[pos] = 0  # until every call is known to have the shape
                for call in row_calls:
                    fn = call.get("function") if type(call) is dict else None
                    if type(fn) is dict:
                        raw = fn.get("arguments")
                        if type(raw) is str:
                            if len(raw) > minimum:
                                long = True
                            # str(x) of an exact str is x: called only for other types.
                            name = fn.get("name")
                            if type(name) is not str or not name:
                                name = str(name or "unknown")
                            if chars >= 0:
                                shown = len(raw) if len(raw) <= args_max else args_shown_max
                                chars += call_line + len(name) + shown
                            cid = call.get("id")
                            if cid:
                                args = parsed.get(raw)
                                if args is None:
                                    args = parsed[raw] = parse_arguments_text(raw)
                                calls[cid if type(cid) is str else str(cid)] = (name, args)
                                continue
                        else:
                            chars = -1
                    else:
                        long = True  # an unusual shape: let ``shrink_args`` decide
                        chars = -1
                    _index_calls({"tool_calls": [call]}, calls)  # the general shapes
                if long:
                    long_rows.append(pos)
                if chars >= 0:
                    record_chars[pos] = chars
        return work

    def put(self, pos: int, message: dict[str, Any]) -> None:
        """Replace row ``pos``; its count is refreshed by ``flush`` (in one batch) or at once
        when ``immediate`` is set (a pass that decides row by row)."""
        self.messages[pos] = message
        self.record_chars[pos] = 0
        if self.immediate:
            self.tokens[pos] = self.count(message)
        elif self.exact_head <= pos < self.exact_from:
            # Summarized whatever its size: estimated now (what ``flush`` would write; no
            # pass reads a replaced row's count before the next flush).
            self.tokens[pos] = self._estimate(message)
        else:
            self.dirty.append(pos)

    def _estimate(self, message: Message) -> int:
        content = message.get("content")
        if type(content) is str and not message.get("tool_calls"):
            # ``estimate_message_tokens`` of a plain-text row (most of these are one-line
            # folds), without its general walk.
            cid = message.get("tool_call_id")
            chars = len(content) + (len(str(cid)) if cid else 0)
            return (chars + 3) // 4 + self.config.per_message_overhead
        return estimate_message_tokens(message, self.config)

    def flush(self) -> None:
        """Recount the rows replaced since the last flush (one tokenizer batch)."""
        if not self.dirty:
            return
        positions, self.dirty = self.dirty, []
        # Rows between the head and the reach of the tail walk are summarized whatever their
        # size: an estimate is enough there (their count decides nothing).
        exact = [p for p in positions if p < self.exact_head or p >= self.exact_from]
        count_many = self.count_many or (lambda batch: [self.count(m) for m in batch])
        counts = count_many([self.messages[p] for p in exact])
        for pos, count in zip(exact, counts, strict=True):
            self.tokens[pos] = count
        if len(exact) != len(positions):
            for pos in positions:
                if self.exact_head <= pos < self.exact_from:
                    self.tokens[pos] = self._estimate(self.messages[pos])

    def text(self, pos: int) -> str:
        content = self.messages[pos].get("content")
        return content if type(content) is str else content_text(content)

    def tool_of(self, pos: int) -> tuple[str, dict[str, Any]]:
        cid = str(self.messages[pos].get("tool_call_id") or "")
        return self.calls.get(cid, ("unknown", {}))

    def fold(self, pos: int, kind: str) -> bool:
        """Fold tool row ``pos`` to its one-line form; False when it is not foldable."""
        return self.fold_rows((pos,), kind) == 1

    def fold_rows(self, positions: Iterable[int], kind: str) -> int:
        """``fold`` of each of ``positions``, in order; returns how many were folded. One
        loop with its lookups hoisted: the fold pass runs it over most tool rows."""
        messages, tokens, folded, actions = self.messages, self.tokens, self.folded, self.actions
        calls_get = self.calls.get
        minimum = self.config.fold_min_chars
        sent_whole = self.config.content_max
        record_chars, tool_label = self.record_chars, TOOL_LABEL_CHARS
        overhead = self.config.per_message_overhead
        low, high, immediate = self.exact_head, self.exact_from, self.immediate
        done = 0
        for pos in positions:
            if folded[pos]:
                continue
            message = messages[pos]
            if message.get("role") != "tool":
                continue
            content = message.get("content")
            text = content if type(content) is str else content_text(content)
            # Every line a pass wrote starts with "[": the other texts skip both stub checks.
            if len(text) <= minimum or (text[:1] == "[" and _done(text)):
                continue
            cid = message.get("tool_call_id")
            if type(cid) is not str:
                cid = str(cid or "")
            name, args = calls_get(cid, _UNKNOWN)
            line = hermes_fold(name, args, text, pos)
            new = {**message, "content": line}
            if immediate or not (low <= pos < high):
                self.put(pos, new)
            else:  # ``put`` of a row only estimated, inlined: this runs for most tool rows
                messages[pos] = new
                if "tool_calls" in message and message["tool_calls"]:
                    tokens[pos] = self._estimate(new)
                else:
                    # ``len(str(cid))`` of the row's own id ("" when it has none).
                    tokens[pos] = (len(line) + len(cid) + 3) // 4 + overhead
            folded[pos] = 1
            if len(line) <= sent_whole:
                record_chars[pos] = tool_label + len(line) + (len(cid) or 1)
            # ``make_action(…)`` inlined: the fold pass writes thousands of these.
            actions.append(SlimAction(pos, kind, "tool", name, text, line, line, source=content))
            done += 1
        return done


_UNKNOWN: tuple[str, dict[str, Any]] = ("unknown", {})


# ---------------------------------------------------------------------------------------
# Passes


def dedup(work: Work) -> None:
    """Replace older byte-identical tool outputs (≥ ``dedup_min_chars``) with a pointer to the
    newest copy, over the whole list (reference §3.1 item 1)."""
    # Keyed by the text itself: str hashes are computed once and cached on the object, and
    # equal hashes are confirmed by comparing the texts (no digest, no encoded copy).
    seen: dict[str, int] = {}
    minimum = work.config.dedup_min_chars
    messages = work.messages
    # Most conversations have no two equal outputs: one set of the candidate texts (listed by
    # ``Work.start``; built in C, the hashes cached on the strings) finds that without the
    # loop below. Passes only ever write lines the loop skips, so the list found at the start
    # stays a sound check whenever this runs.
    texts = work.long_outputs
    if len(set(texts)) == len(texts):
        return
    for pos in reversed(work.tool_rows):
        message = messages[pos]
        content = message.get("content")
        if type(content) is not str or len(content) < minimum:
            continue
        if content[:1] == "[" and _done(content):
            continue
        newest = seen.setdefault(content, pos)
        if newest == pos:
            continue
        name, _ = work.tool_of(pos)
        line = f"{DEDUP_MARKER} {ref(newest)}"
        work.put(pos, {**message, "content": line})
        work.folded[pos] = 1
        work.actions.append(
            make_action(pos, "dedup", message, content, line, tool_name=name, fold_line=line)
        )


def prune_boundary(tokens: Sequence[int], budget: int, floor: int, start: int = 0) -> int:
    """The first protected index (reference §2.5): walk newest → oldest within ``budget``
    tokens, the row that breaks it included, and never fewer than ``floor`` rows."""
    n = len(tokens)
    used = 0
    boundary = n
    for i in range(n - 1, start - 1, -1):
        used += tokens[i]
        boundary = i
        if used > budget:
            break
    return max(start, min(boundary, n - min(floor, n)))


def fold_before(work: Work, boundary: int) -> None:
    """Fold every tool result before ``boundary``, head included (§3.1 item 2)."""
    rows = work.tool_rows
    work.fold_rows(rows[: bisect_left(rows, boundary)], "fold")


def _shrink_text(value: str, keep: int, ref_text: str) -> tuple[str, int]:
    """``(value, chars removed)``: a string leaf longer than ``keep`` cut to it + marker."""
    if len(value) <= keep or _MARKER_OPEN in value:
        return value, 0
    marker = ARGS_MARKER.format(omitted=len(value) - keep, total=len(value), ref=ref_text)
    if keep + len(marker) >= len(value):
        return value, 0
    return value[:keep] + marker, len(value) - keep - len(marker)


def _shrink_leaves(value: Any, keep: int, ref_text: str) -> tuple[Any, int]:
    """``(value, chars removed)`` with every long string leaf cut to ``keep`` + marker."""
    if isinstance(value, str):
        return _shrink_text(value, keep, ref_text)
    if isinstance(value, list):
        out, saved = [], 0
        for item in value:
            new, s = _shrink_leaves(item, keep, ref_text)
            out.append(new)
            saved += s
        return out, saved
    if isinstance(value, dict):
        out_d, saved = {}, 0
        for k, item in value.items():
            # Most arguments are a flat object of strings: a short one is kept as it is
            # without a call, a long one is cut here.
            if type(item) is str:
                if len(item) <= keep:
                    out_d[k] = item
                    continue
                new, s = _shrink_text(item, keep, ref_text)
            else:
                new, s = _shrink_leaves(item, keep, ref_text)
            out_d[k] = new
            saved += s
        return out_d, saved
    return value, 0


def shrink_args(work: Work, pos: int, kind: str = "args_shrink") -> bool:
    """Shrink the long tool-call arguments of assistant row ``pos`` (§3.1 item 3).

    Arguments that are not valid JSON are left alone (providers reject malformed ones).
    """
    message = work.messages[pos]
    calls = message.get("tool_calls")
    if message.get("role") != "assistant" or not isinstance(calls, list):
        return False
    cfg = work.config
    new_calls: list[Any] = []
    before: list[str] = []
    after: list[str] = []
    changed = False
    for call in calls:
        fn = call.get("function") if isinstance(call, Mapping) else None
        raw = fn.get("arguments") if isinstance(fn, Mapping) else None
        if not isinstance(raw, str) or len(raw) <= cfg.args_shrink_min_chars:
            new_calls.append(call)
            continue
        # A non-empty dict parsed by ``Work.start`` is what json.loads returns (an empty one
        # may stand for a parse failure or a non-object: parsed again).
        parsed: Any = work.parsed_args.get(raw)
        if not parsed:
            try:
                parsed = json.loads(raw)
            except ValueError:
                new_calls.append(call)
                continue
        shrunk, saved = _shrink_leaves(parsed, cfg.args_leaf_chars, ref(pos))
        if saved <= 0:
            new_calls.append(call)
            continue
        text = _dumps(shrunk)  # json.dumps(shrunk, ensure_ascii=False)
        before.append(raw)
        after.append(text)
        new_calls.append({**call, "function": {**(fn or {}), "arguments": text}})
        changed = True
    if not changed:
        return False
    work.put(pos, {**message, "tool_calls": new_calls})
    line = "\n".join(after)
    work.actions.append(make_action(pos, kind, message, "\n".join(before), line, fold_line=line))
    return True


_dumps = json.JSONEncoder(ensure_ascii=False).encode


def _has_long_args(calls: Any, minimum: int) -> bool:
    """True when one of ``calls`` has string arguments longer than ``minimum`` chars."""
    if type(calls) is not list:
        return isinstance(calls, list)  # a list subclass: let ``shrink_args`` decide
    for call in calls:
        fn = call.get("function") if type(call) is dict else None
        if fn is None or type(fn) is not dict:
            return True  # an unusual shape: let ``shrink_args`` decide
        raw = fn.get("arguments")
        if type(raw) is str and len(raw) > minimum:
            return True
    return False


def shrink_args_before(work: Work, boundary: int) -> None:
    """``shrink_args`` over every assistant row before ``boundary``."""
    # Only assistant rows with calls can shrink (``shrink_args`` leaves any other row alone),
    # and most calls have short arguments: ``Work.start`` listed the rows that have long ones.
    for pos in work.long_rows:
        if pos >= boundary:
            break
        shrink_args(work, pos)


def _has_image(content: Any) -> bool:
    if isinstance(content, list):
        return any(is_image_part(p) for p in content)
    if isinstance(content, Mapping) and content.get("_multimodal"):
        return _has_image(content.get("content"))
    return False


def retire_tool_images(work: Work) -> None:
    """Keep images only in the newest ``keep_tool_images`` image-bearing tool results (§3.5 b)."""
    kept = 0
    for pos in reversed(work.other_tool_rows):
        message = work.messages[pos]
        content = message.get("content")
        if type(content) is str or not _has_image(content):
            continue
        if kept < work.config.keep_tool_images:
            kept += 1
            continue
        before = content_text(content)
        if isinstance(content, Mapping):
            summary = str(content.get("text_summary") or "")[:200]
            new: Any = f"[screenshot removed] {summary}".rstrip() + f" {ref(pos)}"
        else:
            new = [
                {"type": "text", "text": f"{SCREENSHOT_PLACEHOLDER} {ref(pos)}"}
                if is_image_part(p)
                else p
                for p in (content or ())
            ]
        work.put(pos, {**message, "content": new})
        after = content_text(new)
        name, _ = work.tool_of(pos)
        work.actions.append(
            make_action(
                pos, "image_retire", message, before, after, tool_name=name, fold_line=after
            )
        )


def pressure_demote(work: Work, boundary: int, ceiling: int) -> None:
    """The protected region ``[boundary, n)`` is over ``ceiling`` tokens: fold and shrink
    there too (§3.1 item 5), oldest first, stopping once under; then every tool row but the
    newest; then that one too."""
    work.flush()
    messages, tokens = work.messages, work.tokens
    n = len(messages)
    total = sum(tokens[boundary:])
    if total <= ceiling:
        return
    work.immediate = True  # each fold's saving decides whether to go on
    for pos in range(boundary, max(boundary, n - work.config.pressure_keep_recent)):
        role = messages[pos].get("role")
        old = tokens[pos]
        if role == "tool":
            work.fold(pos, "demote")
        elif role == "assistant" and messages[pos].get("tool_calls"):
            shrink_args(work, pos, "demote")
        total += tokens[pos] - old
        if total <= ceiling:
            work.immediate = False
            return
    tool_rows = [p for p in range(boundary, n) if messages[p].get("role") == "tool"]
    for pos in tool_rows[:-1] + tool_rows[-1:]:
        old = tokens[pos]
        work.fold(pos, "demote")
        total += tokens[pos] - old
        if total <= ceiling:
            break
    work.immediate = False


def lean_tail(work: Work, tail_start: int) -> None:
    """Old tool rounds of the tail become recovery stubs (§3.3).

    A round is a run of consecutive tool rows; the newest ``lean_tail_keep_rounds`` stay.
    Older tool results of at least ``lean_tail_min_chars`` chars become a stub naming the
    reference the ``recall`` tool takes.
    """
    messages = work.messages
    rounds = 0
    previous_tool = False
    for pos in range(len(messages) - 1, tail_start - 1, -1):
        is_tool = messages[pos].get("role") == "tool"
        if is_tool and not previous_tool:
            rounds += 1
        previous_tool = is_tool
        if not is_tool or rounds <= work.config.lean_tail_keep_rounds or work.folded[pos]:
            continue
        text = work.text(pos)
        if len(text) < work.config.lean_tail_min_chars or _done(text):
            continue
        name, _ = work.tool_of(pos)
        line = (
            f"[{name} output demoted at compaction — {len(text):,} chars preserved in session "
            f"history. Recover it with the recall tool: {ref(pos)}]"
        )
        message = messages[pos]
        work.put(pos, {**message, "content": line})
        work.folded[pos] = 1
        work.actions.append(
            make_action(pos, "lean_tail", message, text, line, tool_name=name, fold_line=line)
        )


def call_ids(message: Message) -> list[str]:
    """The ids of an assistant message's tool calls."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [cid for cid in (tool_call_id(c) for c in calls if isinstance(c, Mapping)) if cid]
