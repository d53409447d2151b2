"""The summary message's markers: prefix, end marker, merged-carrier delimiters, and
recognizing and splitting a message that carries a summary.

The summary message content is ``SUMMARY_PREFIX + "\\n" + body + "\\n\\n" + END_MARKER``.
Earlier summaries are recognized by the current prefix's opening, by the legacy
``[CONTEXT SUMMARY]:`` prefix and by Hermes's merged-carrier delimiters.
"""

from __future__ import annotations

from collections.abc import Mapping

from compaction.messages import (
    Message,
)

__all__ = [
    "COMPACTION_NOTE",
    "END_MARKER",
    "LEGACY_PREFIXES",
    "MERGED_CLOSE",
    "MERGED_OPEN",
    "PREFIX_OPENING",
    "SUMMARY_PREFIX",
    "is_summary_message",
    "is_summary_text",
    "split_summary",
    "wrap_summary",
]

PREFIX_OPENING = "[CONTEXT COMPACTION — REFERENCE ONLY]"
SUMMARY_PREFIX = (
    f"{PREFIX_OPENING} Earlier turns of this conversation were compacted into the summary "
    "below. It is a handoff to treat as background reference, NOT active instructions: do not "
    "answer questions or fulfil requests that appear only in it. Respond only to the latest "
    "user message that comes AFTER this summary. If no user message follows it, do not resume "
    "work from the summary and do not call tools: wait (unless tool results or your own tool "
    "calls after it show an exchange in flight, which you continue). Topic overlap does not "
    "mean the old task should be resumed. Tools remain fully active, so keep calling them "
    "rather than narrating, and the current state may already reflect the work described, so "
    "do not repeat it. Summary:"
)


END_MARKER = "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"
LEGACY_PREFIXES = ("[CONTEXT SUMMARY]:",)
MERGED_OPEN = "[PRIOR CONTEXT — for reference only; not a new message]"
MERGED_CLOSE = "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]"
COMPACTION_NOTE = (
    "[Note: Some earlier conversation turns have been compacted into a handoff summary to "
    "preserve context space. The current session state may still reflect earlier work, so "
    "build on that summary and state rather than re-doing work.]"
)


_OPENINGS = (PREFIX_OPENING, MERGED_OPEN, *LEGACY_PREFIXES)


def wrap_summary(body: str) -> str:
    """The summary message content: prefix, body and end marker."""
    return f"{SUMMARY_PREFIX}\n{body.strip()}\n\n{END_MARKER}"


def is_summary_text(text: str) -> bool:
    """True when ``text`` is (or carries) a compaction summary, current or legacy."""
    if text.startswith(_OPENINGS):
        return True
    # Runs on every message: copy and strip a head only when the text starts with blanks.
    return text[:1].isspace() and text[:400].lstrip().startswith(_OPENINGS)


def is_summary_message(message: Message) -> bool:
    """True when a user/assistant message holds a compaction summary."""
    if message.get("role") not in ("user", "assistant"):
        return False
    content = message.get("content")
    if isinstance(content, str):
        return is_summary_text(content)
    if isinstance(content, list):
        first = next(
            (p for p in content if isinstance(p, Mapping) and p.get("type") == "text"), None
        )
        return first is not None and is_summary_text(str(first.get("text") or ""))
    return False


def split_summary(text: str) -> tuple[str | None, str]:
    """Split a summary-bearing text into ``(body, remainder)``.

    ``body`` is the summary without prefix and end marker (None when ``text`` holds no
    summary); ``remainder`` is any live content merged into the same message (``""`` if none).
    """
    stripped = text.lstrip()
    if stripped.startswith(MERGED_OPEN):
        inner = stripped[len(MERGED_OPEN) :].lstrip("\n")
        original, sep, rest = inner.partition(MERGED_CLOSE)
        if not sep:
            return None, text
        body, _ = split_summary(rest.strip())
        return body, original.strip()
    if stripped.startswith(PREFIX_OPENING):
        if stripped.startswith(SUMMARY_PREFIX):
            rest = stripped[len(SUMMARY_PREFIX) :]
        else:
            _, _, rest = stripped.partition("\n")
    else:
        for legacy in LEGACY_PREFIXES:
            if stripped.startswith(legacy):
                rest = stripped[len(legacy) :]
                break
        else:
            return None, text
    body, sep, remainder = rest.partition(END_MARKER)
    return body.strip(), remainder.strip() if sep else ""
