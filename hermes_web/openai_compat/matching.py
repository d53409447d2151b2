"""Conversation identity: which stored session a request continues.

A client sends its whole history every time. A session made through the endpoint remembers
how many of the client's messages it holds (``client_messages``) and the chained hash of
them (``prefix_hash``, over role, content, tool calls and tool_call_id only, so the fields an
SDK adds or drops on the way back, like ``refusal: null`` or a null content, do not matter).
A request continues the session whose hash equals the hash of one of its own prefixes,
among the sessions of the same API key; the longest such prefix wins.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from hermes_web.models import ApiKey, Session
from hermes_web.openai_compat.bounded import BoundedCache
from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.translations import shared_prefix
from hermes_web.services.sessions import resolve_tip

# How many of the newest prefixes the first lookup tries (see find_session).
RECENT_PREFIXES = 32


def canonical(message: dict) -> bytes:
    """The parts of a message that identify it in a history, as unambiguous bytes (each part
    length-prefixed; a plain join, as json.dumps per message cost more than the hashing).

    What clients rewrite between requests without changing the conversation is
    canonicalised first (see ``canonical_content`` and ``canonical_arguments``)."""
    role = message.get("role")
    role = "system" if role == "developer" else str(role)
    parts = [role, canonical_content(message.get("content"), role)]
    parts.append(message.get("tool_call_id") or "")
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function") or {}
            parts += [
                call.get("id") or "",
                function.get("name") or "",
                canonical_arguments(function.get("arguments")),
            ]
    return "".join(f"{len(part)}:{part}" for part in parts).encode("utf-8", "surrogatepass")


# Claude Code adds or drops this in its system prompt between runs of one conversation.
VOLATILE_SYSTEM_TEXT = (" (1M context)",)
# Claude Code's reminders inside user turns (todo state, file changes, mode notes): it
# re-words or drops them between requests, so they are no part of a message's identity.
SYSTEM_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.DOTALL)
TEXT_TYPES = frozenset(("text", "input_text", "output_text"))
# Keys of a content part that say how to send it, not what it says.
TRANSPORT_KEYS = frozenset(("cache_control", "citations", "annotations", "logprobs"))


def _canonical_text(text: str, role: str) -> str:
    if role == "system":
        for volatile in VOLATILE_SYSTEM_TEXT:
            text = text.replace(volatile, "")
    elif "<system-reminder>" in text:
        text = SYSTEM_REMINDER.sub("", text)
    return text


def canonical_content(content: object, role: str) -> str:
    """Content as compared: a single text part equals the same string; part types
    ``input_text``/``output_text`` are ``text``; transport-only keys (``cache_control``…) and
    system reminders are left out; volatile system-prompt text is removed."""
    if content is None:
        return ""
    if isinstance(content, str):
        return _canonical_text(content, role)
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    parts: list[object] = []
    for part in content:
        if isinstance(part, dict):
            part = {k: v for k, v in part.items() if k not in TRANSPORT_KEYS}
            if part.get("type") in TEXT_TYPES and isinstance(part.get("text"), str):
                text = _canonical_text(part["text"], role)
                if not text and part["text"]:
                    continue  # a part that was only reminders
                part = {**part, "type": "text", "text": text}
        parts.append(part)
    only = parts[0] if len(parts) == 1 else None
    if isinstance(only, dict) and set(only) == {"type", "text"} and only["type"] == "text":
        return str(only["text"])
    if not parts:
        return ""
    return "\x00list" + json.dumps(parts, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def canonical_arguments(arguments: object) -> str:
    """Tool-call arguments parsed and re-dumped (sorted keys, compact), so ``{"a": 1}`` from
    one client's ``json.dumps`` equals ``{"a":1}`` from a model; text that is not JSON is
    compared as it is."""
    if arguments is None:
        return ""
    value = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return "\x00json" + json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def prefix_hashes(messages: list[dict]) -> list[str]:
    """``hashes[k]`` is the chained hash of ``messages[: k + 1]``."""
    digest = b""
    hashes = []
    for message in messages:
        digest = hashlib.sha256(digest + canonical(message)).digest()
        hashes.append(digest.hex())
    return hashes


class RecentHistories:
    """The histories this process served last, with their prefix hashes.

    An agent resends its whole history with every request. What the previous request of the
    same conversation already checked and hashed is found again by comparing the message
    dicts (equal dicts have equal canonical forms; the comparison runs in C), so a request's
    Python work per message (validation, canonicalisation, hashing) is for the messages it
    added, not for the whole history: it does not grow with the conversation.

    Keyed by the first two messages (system prompt and opening request), the newest
    conversations are kept, at most ``size`` of them and ``max_chars`` characters of content
    in all (the memory it may hold). Only the reuse of work is cached, never a decision: a
    history that differs anywhere from the remembered one is checked and hashed anew from
    the first message that differs.
    """

    def __init__(self, size: int = 64, max_chars: int = 32_000_000) -> None:
        # remembered history, its prefix hashes, its characters of content
        self._entries: BoundedCache[bytes, tuple[list[dict], list[str], int]] = BoundedCache(
            size, max_chars
        )

    @staticmethod
    def _key(messages: list[dict]) -> bytes | None:
        # Called before the messages are checked: one that canonical() cannot read is no key.
        try:
            return b"".join(canonical(message) for message in messages[:2])
        except (TypeError, ValueError, AttributeError, RecursionError):
            return None

    def lookup(self, messages: list[dict]) -> Known:
        """What is known of ``messages``: how many leading messages equal the remembered
        history's, and the prefix hashes of those already computed (possibly fewer)."""
        key = self._key(messages) if messages else None
        entry = self._entries.get(key) if key is not None else None
        if entry is None:
            return Known()
        remembered, hashes, chars = entry
        try:
            count = shared_prefix(messages, remembered)
        except RecursionError:  # nested beyond the interpreter's limit: nothing is known
            return Known()
        whole = count == len(remembered)
        return Known(count, hashes[:count], whole, chars if whole else 0)

    def known(self, messages: list[dict]) -> tuple[int, list[str]]:
        """``lookup``'s count and hashes."""
        known = self.lookup(messages)
        return known.count, known.hashes

    def remember(
        self, messages: list[dict], hashes: list[str] | None = None, known: Known | None = None
    ) -> None:
        """Keep ``messages`` (checked) and, when given, their prefix hashes; hashes already
        known for the same leading messages are kept. ``known``, this history's ``lookup``,
        spares comparing it again."""
        key = self._key(messages) if messages else None
        if key is None:
            return
        known = known if known is not None else self.lookup(messages)
        if hashes is None:
            hashes = known.hashes
        if known.whole:  # the remembered history, grown: count only what it added
            chars = known.chars + sum(_size(m.get("content")) for m in messages[known.count :])
        else:
            chars = sum(_size(message.get("content")) for message in messages)
        self._entries.put(key, (list(messages), hashes, chars), chars)

    def prefix_hashes(self, messages: list[dict], known: Known | None = None) -> list[str]:
        """``prefix_hashes(messages)``, computing only what the remembered history lacks
        (``known``: this history's ``lookup``, when the caller made it)."""
        known = known if known is not None else self.lookup(messages)
        hashes = list(known.hashes)
        for message in messages[len(hashes) :]:
            hashes.append(extend_hash(hashes[-1] if hashes else "", message))
        self.remember(messages, hashes, known)
        return hashes


@dataclass(frozen=True)
class Known:
    """What ``RecentHistories.lookup`` found of a history: ``count`` leading messages equal
    the remembered history's, whose first prefix hashes are ``hashes``; ``whole`` when that
    is all of the remembered history (then checked as a whole: its tool calls all have
    their results), which held ``chars`` characters of content."""

    count: int = 0
    hashes: list[str] = field(default_factory=list)
    whole: bool = False
    chars: int = 0


def _size(content: object) -> int:
    return len(content) if isinstance(content, str) else len(repr(content)) if content else 0


RECENT = RecentHistories()


def extend_hash(previous: str, message: dict) -> str:
    """The chained hash after one more message (``previous`` empty for the first)."""
    return hashlib.sha256(bytes.fromhex(previous) + canonical(message)).hexdigest()


@dataclass(frozen=True)
class Match:
    """The live session a request continues and how many of its messages it already holds."""

    session: Session
    covered: int
    prefix_hash: str


def bookkeeping(session: Session) -> tuple[int, str]:
    """(client messages held, their hash) of ``session``, else of its nearest ancestor that
    has them: a rotation's child holds what its parent held until a request writes its own."""
    seen = set()
    current: Session | None = session
    while current is not None and current.pk not in seen:
        if current.prefix_hash:
            return current.client_messages, current.prefix_hash
        seen.add(current.pk)
        current = current.parent
    return 0, ""


def find_session(key: ApiKey, hashes: list[str], *, named: str = "") -> Match | None:
    """The match for a request whose prefix hashes are ``hashes``, or None (a new session).

    ``named`` (the ``X-Hermes-Session`` header) picks the session outright; ApiError 404 if
    the key's owner has no such session, 409 if the request's history does not start with
    the messages that session holds.
    """
    if named:
        session = Session.objects.filter(owner_id=key.owner_id, public_id=named).first()
        if session is None:
            raise ApiError(
                404,
                f"No session {named!r} (X-Hermes-Session) for this API key's user.",
                code="session_not_found",
            )
        tip = resolve_tip(session)
        covered, expected = bookkeeping(tip)
        if not covered or covered > len(hashes) or hashes[covered - 1] != expected:
            raise ApiError(
                409,
                f"The messages do not continue session {named!r}: it holds {covered} of the "
                "client's messages and this request's history does not start with them. "
                "Send the full history, or drop X-Hermes-Session to start a new session.",
                type="invalid_request_error",
                code="session_history_mismatch",
            )
        return Match(tip, covered, expected)
    if not hashes:
        return None
    position = {digest: index + 1 for index, digest in enumerate(hashes)}
    # A client adds a few messages per request: the newest prefixes are tried first, so the
    # usual lookup binds a few dozen hashes rather than one per message of a long history.
    recent, older = hashes[-RECENT_PREFIXES:], hashes[:-RECENT_PREFIXES]
    for window in (recent, older):
        match = _best(key, window, position)
        if match is not None or not older:
            return match
    return None


def _best(key: ApiKey, hashes: list[str], position: dict[str, int]) -> Match | None:
    if not hashes:
        return None
    candidates = Session.objects.filter(api_key_id=key.pk, prefix_hash__in=hashes).order_by(
        "-client_messages", "-updated_at"
    )
    for candidate in candidates:
        if position.get(candidate.prefix_hash) == candidate.client_messages:
            tip = resolve_tip(candidate)
            # A continuation that has since taken other messages is not this history's.
            if tip.pk == candidate.pk or bookkeeping(tip) == (
                candidate.client_messages,
                candidate.prefix_hash,
            ):
                return Match(tip, candidate.client_messages, candidate.prefix_hash)
    return None
