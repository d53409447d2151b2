"""A protocol adapter's translation of a conversation, kept per process between requests.

A Messages client (Claude Code) or a Responses client with ``store: false`` (Codex) resends its whole history with every request, and the
adapter checked and translated all of it each time: work that grew with the conversation.
What the same conversation's previous request sent is found again by comparing the raw
message dicts (in C, as ``RecentHistories`` does for chat messages); when the request
starts with all of it, the messages it translated to are reused and only the messages the
client added are checked and translated.

That is exact because the translation is message by message: each raw message becomes its
chat messages whatever comes before or after it (litellm's Anthropic adapter with
mid-conversation system messages kept); for Responses input items only where
``responses.extendable`` says so. The key holds everything else in the body (model,
system, tools, thinking…) and the first message, so a request that differs in anything but
its later messages is translated whole. Only the reuse of work is cached, never a decision.
"""

from __future__ import annotations

from typing import Any

import orjson

from hermes_web.openai_compat.bounded import BoundedCache


def conversation_key(data: dict[str, Any], history: str) -> bytes | None:
    """What must be equal for a request's ``data[history]`` translation to be reused: the
    rest of the body and the first message (None when there is nothing to key on)."""
    messages = data.get(history)
    if not isinstance(messages, list) or not messages:
        return None
    rest = {name: value for name, value in data.items() if name != history}
    try:
        return (
            orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)
            + b"\x00"
            + orjson.dumps(messages[0], option=orjson.OPT_SORT_KEYS)
        )
    except (TypeError, orjson.JSONEncodeError):  # a value orjson cannot write: no key
        return None


def shared_prefix(new: list[Any], remembered: list[Any]) -> int:
    """How many leading items of ``new`` equal ``remembered``'s: all of ``remembered`` in one
    C-level comparison when ``new`` continues it (a client's usual next request), else item
    by item. Items nested beyond the interpreter's limit raise RecursionError."""
    count = len(remembered)
    if len(new) >= count and new[:count] == remembered:
        return count
    count = 0
    for mine, theirs in zip(new, remembered, strict=False):
        if mine != theirs:
            break
        count += 1
    return count


class Translations:
    """The newest conversations' raw history and its translation, at most ``size`` of them
    and ``max_chars`` characters of request body in all."""

    def __init__(self, size: int = 64, max_chars: int = 32_000_000) -> None:
        # raw history, its translation, and where each raw message's translation ends in it
        # (ends[i]: len of the translation of raw[:i]; -1 where translated in one piece).
        self._entries: BoundedCache[bytes, tuple[list[Any], list[dict], list[int]]] = BoundedCache(
            size, max_chars
        )

    def known(self, key: bytes | None, raw: list[Any]) -> tuple[int, list[dict], list[int]]:
        """How many leading raw messages were checked and translated before, what they
        translated to, and where each one's translation ends in that: the longest prefix
        equal to the remembered history's that ends where a raw message's translation is
        known to end (all of it, or none, at least)."""
        entry = self._entries.get(key) if key is not None else None
        if entry is None:
            return 0, [], [0]
        remembered, translated, ends = entry
        try:
            count = shared_prefix(raw, remembered)
        except RecursionError:
            return 0, [], [0]
        while count and ends[count] < 0:
            count -= 1
        return count, translated[: ends[count]], ends[: count + 1]

    def remember(
        self,
        key: bytes | None,
        raw: list[Any],
        translated: list[dict],
        chars: int,
        ends: list[int] | None = None,
    ) -> None:
        """Keep ``raw`` (checked), its ``translated`` messages and, when known, where each
        raw message's translation ends (``ends``, as in ``known``); ``chars``: the body's
        size."""
        if key is None:
            return
        if ends is None:
            ends = [0] + [-1] * (len(raw) - 1) + [len(translated)] if raw else [0]
        self._entries.put(key, (list(raw), list(translated), ends), chars)


MESSAGES = Translations()
RESPONSES = Translations()
