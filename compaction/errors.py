"""Exceptions raised by the compaction engine.

The tree::

    CompactionError                  root of everything the engine raises on purpose
    ├── ConfigError (also ValueError)   a CompactionConfig field has a bad type or value
    ├── InputError (also ValueError)    the messages or token counts are malformed
    └── SummaryError                 the summarizer chain could not produce a summary
        └── SummaryAborted           stop: leave the conversation untouched
                                     (auth failure, or abort_on_summary_failure)

``compact()`` never lets ``SummaryAborted`` escape: it returns the input unchanged with
report status ``"aborted"``. ``ConfigError`` is raised by ``CompactionConfig`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CompactionError", "ConfigError", "InputError", "SummaryAborted", "SummaryError"]


class CompactionError(Exception):
    """Root of every exception the engine raises on purpose."""


class ConfigError(CompactionError, ValueError):
    """A configuration field has a bad type or value.

    Attributes:
        field: the name of the offending field.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class InputError(CompactionError, ValueError):
    """The messages (or the precomputed token counts) are malformed.

    Attributes:
        index: the offending message index, when there is one.
    """

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message if index is None else f"message {index}: {message}")
        self.index = index


class SummaryError(CompactionError):
    """The summarizer could not produce a summary."""


class SummaryAborted(SummaryError):
    """The summarizer chain decided to abort the whole compaction.

    Attributes:
        reason: machine-readable reason (``"summary_auth_error"`` or ``"summary_failed"``).
        fallbacks: the errors met on the way, as dicts (stage, model, kind, status_code, message).
        prompt: the prompt that was sent, if any.
    """

    def __init__(
        self,
        reason: str,
        fallbacks: Sequence[dict[str, Any]] = (),
        prompt: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fallbacks = tuple(fallbacks)
        self.prompt = prompt
