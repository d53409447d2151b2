"""Summarizers: the protocol, the deterministic one, and the litellm chain.

``LLMSummarizer`` tries the aux model, then the main model, then the deterministic summary:

- auth failures (HTTP 401/403) abort at once: ``SummaryAborted("summary_auth_error")``;
- timeouts, 429, 5xx, connection errors, empty content, truncated output and any other
  provider error fall through to the next stage, and are recorded as fallbacks;
- with ``abort_on_summary_failure`` the chain aborts (``"summary_failed"``) instead of
  using the deterministic summary.

This is the only module that imports litellm, lazily, on the first LLM call.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol

from compaction.deterministic import deterministic_summary
from compaction.errors import SummaryAborted, SummaryError
from compaction.facts import SummaryFacts
from compaction.messages import Message

__all__ = [
    "DeterministicSummarizer",
    "FallbackError",
    "LLMSummarizer",
    "Summarizer",
    "SummaryOutcome",
    "SummaryRequest",
    "classify_summary_error",
]

_THINK_RE = re.compile(r"<(think|thinking|reasoning)>.*?</\1>\s*", re.DOTALL | re.IGNORECASE)
_REASONING_MAX = 8_000


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """Everything a summarizer may use.

    Attributes:
        make_prompt: builds the full prompt for an LLM (see ``summary.build_prompt``); read
            it as ``prompt``. Built only when read: the prompt holds the whole serialized
            middle again, which the deterministic summary never reads.
        serialized_input: the serialized slimmed middle (inside the prompt too).
        facts: the data for the deterministic summary.
        abort_on_failure: abort instead of falling back to the deterministic summary.
    """

    make_prompt: Callable[[], str]
    serialized_input: str
    facts: SummaryFacts
    abort_on_failure: bool = False

    @property
    def prompt(self) -> str:
        """The full prompt for an LLM (built on the first read, then the same string)."""
        return self.make_prompt()

    @property
    def middle(self) -> Sequence[Message]:
        """The compacted messages."""
        return self.facts.middle

    @property
    def now(self) -> date:
        """The date used for temporal anchoring."""
        return self.facts.now


@dataclass(frozen=True, slots=True)
class FallbackError:
    """One failed stage of the chain.

    Attributes:
        stage: ``"aux"`` or ``"main"``.
        model: the model that failed.
        kind: ``auth``, ``timeout``, ``rate_limit``, ``server_error``, ``connection``,
            ``empty_content``, ``truncated``, ``bad_request``, ``not_found`` or ``error``.
        status_code: HTTP status when known.
        message: the error text (≤ 500 chars).
    """

    stage: str
    model: str
    kind: str
    status_code: int | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        """The error as a JSON-serializable dict."""
        return {
            "stage": self.stage,
            "model": self.model,
            "kind": self.kind,
            "status_code": self.status_code,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class SummaryOutcome:
    """What a summarizer produced.

    Attributes:
        body: the summary body (no prefix, no end marker).
        source: ``"aux"``, ``"main"`` or ``"deterministic"``.
        model: the model that wrote it (None for the deterministic summary).
        prompt: the prompt sent to an LLM (None when no LLM was called).
        fallbacks: errors met before this outcome.
        usage: token usage reported by the provider, when any.
    """

    body: str
    source: str
    model: str | None = None
    prompt: str | None = None
    fallbacks: tuple[FallbackError, ...] = ()
    usage: Mapping[str, int] = field(default_factory=dict)


class Summarizer(Protocol):
    """Turns a ``SummaryRequest`` into a ``SummaryOutcome`` (or raises ``SummaryAborted``)."""

    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        """Write the summary body."""
        ...


class DeterministicSummarizer:
    """Fills the template from the data alone; no LLM, never fails."""

    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        """Return ``deterministic_summary(request.facts)``."""
        return SummaryOutcome(body=deterministic_summary(request.facts), source="deterministic")


class _EmptyContent(SummaryError):
    pass


class _Truncated(SummaryError):
    pass


def classify_summary_error(error: BaseException) -> tuple[str, int | None]:
    """A summary model call's failure as ``(kind, status_code)`` (kind: auth, timeout, rate_limit…)."""
    if isinstance(error, _EmptyContent):
        return "empty_content", None
    if isinstance(error, _Truncated):
        return "truncated", None
    status = getattr(error, "status_code", None)
    status = status if isinstance(status, int) else None
    name = type(error).__name__
    text = str(error).lower()
    if status in (401, 403) or name in ("AuthenticationError", "PermissionDeniedError"):
        return "auth", status
    if name in ("Timeout", "APITimeoutError") or status == 408 or "timed out" in text:
        return "timeout", status
    if status == 429 or name == "RateLimitError":
        return "rate_limit", status
    if "connection error" in text or name in ("APIConnectionError",):
        return "connection", status
    if status is not None and status >= 500:
        return "server_error", status
    if status == 404 or name == "NotFoundError":
        return "not_found", status
    if status == 400 or name == "BadRequestError":
        return "bad_request", status
    return "error", status


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LLMSummarizer:
    """The aux → main → deterministic chain over ``litellm.completion``.

    Example::

        LLMSummarizer("openai/gpt-4o-mini", "openai/gpt-4o",
                      api_base="http://127.0.0.1:8000/v1", api_key="x", timeout=60)

    Args:
        aux_model: the summary model (any litellm model string).
        main_model: the conversation's model, tried when the aux model fails (skipped when
            None or equal to ``aux_model``).
        api_base / api_key: passed to litellm for both models unless ``main_api_base`` /
            ``main_api_key`` are given for the main model.
        timeout: seconds per call.
        max_retries: SDK retries per call (0 keeps failures fast).
        extra: more keyword arguments for ``litellm.completion`` (e.g. ``temperature``).
    """

    def __init__(
        self,
        aux_model: str,
        main_model: str | None = None,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        main_api_base: str | None = None,
        main_api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 0,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.aux_model = aux_model
        self.main_model = main_model
        self.api_base = api_base
        self.api_key = api_key
        self.main_api_base = main_api_base if main_api_base is not None else api_base
        self.main_api_key = main_api_key if main_api_key is not None else api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.extra = dict(extra or {})

    def _stages(self) -> list[tuple[str, str, str | None, str | None]]:
        stages = [("aux", self.aux_model, self.api_base, self.api_key)]
        if self.main_model and self.main_model != self.aux_model:
            stages.append(("main", self.main_model, self.main_api_base, self.main_api_key))
        return stages

    def _call(
        self, model: str, api_base: str | None, api_key: str | None, prompt: str
    ) -> tuple[str, dict[str, int]]:
        litellm = _litellm()
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            **self.extra,
        }
        if api_base:
            kwargs["api_base"] = api_base
        if api_key:
            kwargs["api_key"] = api_key
        response = litellm.completion(**kwargs)
        choice = response.choices[0]
        message = choice.message
        text = message.content or ""
        if not text.strip():
            reasoning = getattr(message, "reasoning_content", None) or ""
            text = str(reasoning)[:_REASONING_MAX]
        text = _THINK_RE.sub("", text).strip()
        if not text:
            raise _EmptyContent("the summarizer returned empty content")
        if getattr(choice, "finish_reason", None) == "length":
            raise _Truncated("the summary was cut off (finish_reason=length)")
        usage_obj = getattr(response, "usage", None)
        usage = (
            {
                key: int(getattr(usage_obj, key, 0) or 0)
                for key in ("prompt_tokens", "completion_tokens", "total_tokens")
            }
            if usage_obj is not None
            else {}
        )
        return text, usage

    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        """Run the chain.

        Raises:
            SummaryAborted: on an auth failure, or when every LLM stage failed and
                ``request.abort_on_failure`` is set.
        """
        fallbacks: list[FallbackError] = []
        for stage, model, api_base, api_key in self._stages():
            try:
                body, usage = self._call(model, api_base, api_key, request.prompt)
            except Exception as error:  # every provider error is classified below
                kind, status = classify_summary_error(error)
                fallbacks.append(FallbackError(stage, model, kind, status, str(error)[:500]))
                if kind == "auth":
                    raise SummaryAborted(
                        "summary_auth_error", [f.to_dict() for f in fallbacks], request.prompt
                    ) from error
                continue
            return SummaryOutcome(body, stage, model, request.prompt, tuple(fallbacks), usage)
        if request.abort_on_failure:
            raise SummaryAborted("summary_failed", [f.to_dict() for f in fallbacks], request.prompt)
        body = deterministic_summary(request.facts)
        return SummaryOutcome(body, "deterministic", None, request.prompt, tuple(fallbacks))
