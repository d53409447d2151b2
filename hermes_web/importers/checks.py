"""What is checked and counted per imported session: validation, tool-result pairing, size,
token counts and the fidelity report (whole sessions or one message at a time)."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

from compaction import END_MARKER, SUMMARY_PREFIX, CompactionConfig
from compaction.tokens import get_encoding, message_token_text, token_length
from hermes_web.importers import sizes
from hermes_web.importers.base import (
    ImportProblem,
    ParsedSession,
    damage_report,
    keep_session_controls_visible,
    text_of,
)
from hermes_web.importers.validate import Invalid, check_message, check_parsed
from hermes_web.services.sessions import DEFAULT_TOKEN_MODEL

_TOKEN_THREADS = 2


@functools.lru_cache(maxsize=32)
def _config(model: str) -> CompactionConfig:
    """The engine's configuration for ``model``, built once per model: an import of many
    small sessions counted tokens with a new one (34 checked fields) per session."""
    return CompactionConfig(model=model)


def count_tokens(messages: list, model: str) -> list[int]:
    """``count_message_tokens`` for every message, computed in two threads.

    Same formula as the engine (text + tool_calls JSON + tool_call_id, plus overhead and
    image cost), but each thread loops over its half with ``token_length`` (tiktoken's
    ordinary encoding into a packed buffer, without the GIL and without a list of token ids:
    36 bytes a token); ``encode_ordinary_batch`` pays a future per message instead.
    """
    config = _config(model or DEFAULT_TOKEN_MODEL)
    encoding = get_encoding(config.model)
    pairs = [message_token_text(m.as_openai()) for m in messages]

    def count(chunk):
        return [token_length(encoding, text) for text, _ in chunk]

    half = (len(pairs) + 1) // 2
    if len(pairs) < 64:
        raw = count(pairs)
    else:
        with ThreadPoolExecutor(_TOKEN_THREADS) as pool:
            first, second = pool.map(count, [pairs[:half], pairs[half:]])
        raw = first + second
    return [
        n + config.per_message_overhead + images * config.image_tokens
        for n, (_, images) in zip(raw, pairs, strict=True)
    ]


def previous_summary(parsed: ParsedSession) -> str:
    for message in reversed(parsed.messages):
        if message.is_summary and message.active and not message.meta:
            body = text_of(message.content)
            body = body.split(SUMMARY_PREFIX, 1)[-1].split(END_MARKER, 1)[0]
            return body.strip()
    return ""


def check_session(parsed: ParsedSession, file: str) -> None:
    """Refuse what no provider would accept or no page could show: an invalid role, content
    part, tool call or text (validate.check_parsed), a tool result answering no earlier call
    or without an id, a message larger than HERMES_MAX_MESSAGE_BYTES. A NUL is not refused:
    it is shown as ``␀`` first (``keep_session_controls_visible``) and counted."""
    keep_session_controls_visible(parsed)
    check_parsed(parsed, file)
    checker = Checker(parsed, file)
    for message in parsed.messages:
        checker.pairing(message)
    parsed.stored_chars = checker.stored


class Checker:
    """``check_session`` one message at a time (a streamed session is checked as it is
    stored); keeps only the ids of the calls seen so far."""

    def __init__(self, parsed: ParsedSession, file: str) -> None:
        self.parsed, self.file = parsed, file
        self.number = 0
        self.calls: set[str] = set()
        self.limit = sizes.max_message_bytes()
        self.session_limit = sizes.max_session_bytes()
        self.stored = 0  # characters the session stores so far (sizes.message_size)

    def check(self, message) -> None:
        """Everything ``check_session`` checks, for the next message of the session."""
        try:
            check_message(message)
        except Invalid as error:
            line = message.extra.get("line") if isinstance(message.extra, dict) else None
            raise ImportProblem(
                self.file,
                line if isinstance(line, int) else self.parsed.line,
                f"message {self.number + 1}: {error}",
                self.parsed.public_id,
            ) from None
        self.pairing(message)

    def pairing(self, message) -> None:
        """Size and tool-result checks of the next message (numbered from 1)."""
        self.number += 1
        number, parsed, file = self.number, self.parsed, self.file
        if number == 1:
            self.stored = sizes.session_metadata_size(parsed)
            if self.stored > self.limit:
                raise ImportProblem(
                    file,
                    parsed.line,
                    f"the session's metadata is {_mb(self.stored)}; the limit is {_mb(self.limit)}",
                    parsed.public_id,
                )
        size = sizes.message_size(message)  # every stored field, metadata included
        if size > self.limit:
            raise ImportProblem(
                file,
                parsed.line,
                f"message {number} is {_mb(size)} with its metadata; the limit per message "
                f"is {_mb(self.limit)}",
                parsed.public_id,
            )
        self.stored += size
        if self.stored > self.session_limit:
            raise ImportProblem(
                file,
                parsed.line,
                f"the session stores more than {_mb(self.session_limit)} by message {number} "
                "(HERMES_MAX_SESSION_BYTES)",
                parsed.public_id,
            )
        for call in message.tool_calls or ():
            self.calls.add(call["id"])
        if message.role == "tool" and message.active and not message.meta:
            if not message.tool_call_id:
                raise ImportProblem(
                    file,
                    parsed.line,
                    f"message {number}: a tool result without a tool_call_id",
                    parsed.public_id,
                )
            if message.tool_call_id not in self.calls:
                raise ImportProblem(
                    file,
                    parsed.line,
                    f"message {number}: tool result {message.tool_call_id!r} "
                    "answers no earlier tool call",
                    parsed.public_id,
                )


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def fidelity(parsed: ParsedSession) -> dict:
    """What the import kept and what it did not, for one session (CLI, page, API)."""
    tally = Tally()
    for message in parsed.messages:
        tally.add(message)
    return tally.report(parsed)


_IMAGE_PARTS = ("image_url", "image", "input_image")


class Tally:
    """The counts of ``fidelity``, added one message at a time. Tool-call pairing needs the
    call ids and the answered ids (small strings), never the messages."""

    def __init__(self) -> None:
        self.total = self.active = self.meta = self.archived = self.summaries = 0
        self.stubs = self.images = self.reasoning = 0
        self.calls: list[str] = []
        self.results: set[str] = set()
        self.last_summary = None  # the newest active summary row (previous_summary)

    def add(self, m) -> None:
        self.total += 1
        if m.meta:
            self.meta += 1
        else:
            if m.active:
                self.active += 1
                self.reasoning += bool(m.reasoning)
            else:
                self.archived += 1
            self.calls.extend(c["id"] for c in m.tool_calls or ())
            if m.role == "tool":
                self.results.add(m.tool_call_id)
                self.stubs += bool(m.extra.get("synthetic"))
        self.summaries += bool(m.is_summary)
        if isinstance(m.content, list):
            self.images += sum(
                1 for p in m.content if isinstance(p, dict) and p.get("type") in _IMAGE_PARTS
            )
        if m.is_summary and m.active and not m.meta:
            self.last_summary = m

    def report(self, parsed: ParsedSession) -> dict:
        report = {
            "records": parsed.records or self.total,
            "messages": self.active,
            "meta_rows": self.meta,
            "archived": self.archived,
            "summaries": self.summaries,
            "tool_calls": len(self.calls),
            "tool_results_paired": sum(1 for c in self.calls if c in self.results),
            "stub_results": self.stubs,
            "images": self.images,
            "reasoning": self.reasoning,
            "metadata": sorted(k for v in parsed.extra.values() if isinstance(v, dict) for k in v),
            "skipped": dict(sorted(parsed.skipped.items())),
            "kind": parsed.kind or "session",
            **dict(sorted(parsed.counts.items())),
        }
        report.update(damage_report(parsed))
        if parsed.controls_replaced:  # NUL shown as ␀ (keep_session_controls_visible)
            report["control_characters_replaced"] = parsed.controls_replaced
        return report
