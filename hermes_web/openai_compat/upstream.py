"""The model behind the endpoint: which names a client may use, and the litellm call.

litellm is imported lazily (seconds to import); the demo model is a litellm custom provider
registered on first use, so the endpoint works offline too.
"""

from __future__ import annotations

import functools
import gc
import itertools
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from hermes_web.agent.provider import chat_provider_kwargs
from hermes_web.llm_models import (
    DEMO_MODEL,
    chat_model,
    is_demo_model,
    litellm_module,
    unlogged_calls,
)
from hermes_web.openai_compat.errors import ApiError, scrub

log = logging.getLogger(__name__)


def allowed_models() -> list[str]:
    """Model names a client may ask for: HERMES_CHAT_MODEL (or the demo model when none is
    configured), HERMES_API_MODELS, and the offline demo model."""
    names = [chat_model(), *settings.HERMES_API_MODELS, DEMO_MODEL]
    return list(dict.fromkeys(name for name in names if name))


def resolve_model(name: str) -> str:
    """The litellm model for a requested name; ApiError 404 when it is not allowed here.

    A name without the provider prefix also works (``gpt-4o-mini`` for an allowed
    ``openai/gpt-4o-mini``): agents written for OpenAI send bare names, and changing only
    the base URL and key must be enough. A ``claude-*`` name that is not served as such
    reaches the first served ``anthropic/`` model, else the default one (HERMES_CHAT_MODEL).
    """
    allowed = allowed_models()
    if name in allowed:
        return name
    for model in allowed:
        if "/" in model and model.split("/", 1)[1] == name:
            return model
    if name.startswith("claude-"):
        # Claude Code names its own models (a main one, a small one for titles); they reach
        # the served Anthropic model if there is one, else the default served model.
        anthropic = [model for model in allowed if model.startswith("anthropic/")]
        return (anthropic or allowed)[0]
    raise ApiError(
        404,
        f"The model `{name}` does not exist or you do not have access to it. "
        f"This server serves: {', '.join(allowed_models())}.",
        code="model_not_found",
        param="model",
    )


def completion_kwargs(
    model: str, messages: list[dict], params: dict[str, Any], *, stream: bool
) -> dict[str, Any]:
    """litellm.completion arguments: the client's parameters, our timeout and credentials."""
    kwargs: dict[str, Any] = {
        **params,
        "model": model,
        "messages": messages,
        "timeout": settings.HERMES_LLM_TIMEOUT,
        "max_retries": settings.HERMES_LLM_MAX_RETRIES,
        "num_retries": 0,
    }
    if stream:
        # Always asked for: the prompt count is what decides a compaction.
        kwargs.update(stream=True, stream_options={"include_usage": True})
    kwargs.update(chat_provider_kwargs(model))
    if is_demo_model(model) and not params.get("tools"):
        kwargs["tool_choice"] = "none"  # the demo model plans tool calls only when offered
    # Fields we keep with a message for storage only: the client's Responses reasoning items
    # (a chat-completions model cannot take them back), and Anthropic's is_error on a failed
    # tool result, for an upstream other than Anthropic (an OpenAI-compatible server may
    # refuse the unknown field, and the result's text says what failed anyway).
    stored_only = {"reasoning_items"}
    if not model.startswith(TOOL_ERROR_PROVIDERS):
        stored_only.add("is_error")
    if any(not stored_only.isdisjoint(message) for message in messages):
        kwargs["messages"] = [
            {k: v for k, v in message.items() if k not in stored_only} for message in messages
        ]
    return kwargs


# Upstreams that take Anthropic's tool_result ``is_error`` (through litellm's Anthropic
# translation, see ``_keep_tool_errors``).
TOOL_ERROR_PROVIDERS = ("anthropic/",)


@dataclass
class Reply:
    """The model's answer, whole (non-streaming) or as gathered from a stream."""

    # Not uuid4: os.urandom was measured at ~1 ms a call on a loaded VM; an id needs no secrecy.
    id: str = field(default_factory=lambda: f"chatcmpl-{random.getrandbits(96):024x}")
    created: int = field(default_factory=lambda: int(time.time()))
    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)

    def message(self) -> dict:
        """The assistant message as stored and as the client will send it back."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.content if (self.content or not self.tool_calls) else None,
        }
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


@functools.cache
def _import_litellm():
    litellm = litellm_module()
    _keep_tool_errors()
    # litellm's import leaves ~400k long-lived objects; every full collection scanned them
    # again (330 ms measured on the loaded dev VM). Frozen, collections skip them.
    gc.freeze()
    return litellm


def preload_litellm() -> None:
    """Import litellm now (the web warm-up, when HERMES_WEB_PRELOAD_LITELLM is on), with
    its native Messages stream when a model this server serves is Anthropic's: 0.6 s and
    ~27 MB of a process that the first streamed request would pay otherwise (shared with the
    forked workers when preloaded)."""
    _import_litellm()
    if any(model.startswith("anthropic/") for model in allowed_models()):
        streams_natively()


@functools.cache
def streams_natively() -> bool:
    """Whether litellm's native Messages stream can run here (``anthropic_native``): it
    imports part of litellm's proxy (fastapi, soundfile, numpy, backoff), pinned in
    pyproject.toml. Without them a streamed request is translated, as before."""
    try:
        import litellm.llms.anthropic.messages.native.streaming_iterator  # noqa: F401
    except ImportError:
        log.warning("litellm's native Messages stream is not importable: streams are translated")
        return False
    return True


def warm_calls() -> None:
    """One offline completion, plain and streamed (litellm's ``mock_response``: no network),
    so that what litellm imports and builds on its first call (its proxy types, ~1 s of
    pydantic classes, the HTTP client stack) is done before a request waits for it.

    Run in each web worker after the fork (``hermes_web.gunicorn_hooks``), never in the
    --preload master: the call starts litellm's logging thread, which a fork would not copy.
    """
    litellm = _import_litellm()
    import h11  # noqa: F401  (the HTTP client stack of a real call, which a mock skips)
    import httpcore  # noqa: F401

    messages = [{"role": "user", "content": "warm up"}]
    litellm.completion(model="openai/warm-up", messages=messages, mock_response="ok")
    for _ in litellm.completion(
        model="openai/warm-up",
        messages=messages,
        mock_response="ok",
        stream=True,
        stream_options={"include_usage": True},
    ):
        pass


def _keep_tool_errors() -> None:
    """litellm turns a chat ``tool`` message into an Anthropic ``tool_result`` without its
    ``is_error`` (the chat format has no such flag; its comment says so). A tool message that
    carries it (an Anthropic client sent it, ``ChatCompletionToolMessage`` types it) keeps it
    on the way to an Anthropic upstream."""
    from litellm.litellm_core_utils.prompt_templates import factory

    convert = factory.convert_to_anthropic_tool_result
    if getattr(convert, "keeps_is_error", False):
        return

    @functools.wraps(convert)
    def with_is_error(message, *args, **kwargs):
        result = convert(message, *args, **kwargs)
        if message.get("is_error") is True:
            result["is_error"] = True
        return result

    with_is_error.keeps_is_error = True  # type: ignore[attr-defined]
    factory.convert_to_anthropic_tool_result = with_is_error


def complete(kwargs: dict[str, Any]) -> Reply:
    """One non-streaming call; ApiError for a provider failure."""
    litellm = _import_litellm()
    try:
        with unlogged_calls():
            response = litellm.completion(**kwargs)
    except Exception as error:
        raise upstream_error(error, kwargs["model"]) from error
    choice = response.choices[0]
    message = choice.message
    reply = Reply(finish_reason=choice.finish_reason)
    reply.content = message.content or ""
    reply.reasoning = getattr(message, "reasoning_content", None) or ""
    reply.tool_calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.function.name, "arguments": call.function.arguments or ""},
        }
        for call in message.tool_calls or ()
    ]
    reply.usage = _usage(getattr(response, "usage", None))
    return reply


def open_stream(kwargs: dict[str, Any]) -> Iterator[Any]:
    """Start a streaming call and read its first chunk, so that a refused call (401, 429,
    timeout, unreachable) raises ApiError here, before any byte goes to the client."""
    litellm = _import_litellm()
    try:
        with unlogged_calls():
            stream = litellm.completion(**kwargs)
            chunks = iter(stream)
            first = next(chunks, None)
    except Exception as error:
        raise upstream_error(error, kwargs["model"]) from error
    if first is None:
        return iter(())
    return _guarded(stream, itertools.chain([first], chunks), kwargs["model"])


def _guarded(stream: Any, chunks: Iterator[Any], model: str) -> Iterator[Any]:
    try:
        for chunk in chunks:
            yield chunk
            if getattr(stream, "sent_stream_usage", False) is True:
                # litellm's usage chunk (we always ask for usage) is the last one. Asking
                # for another makes litellm build the whole reply from its chunks, work
                # out its cost and run its success logging a second time before it stops
                # (1-2 ms of a streamed request's ~15 ms of CPU, bench_v1_cpu.py).
                break
    except Exception as error:
        raise upstream_error(error, model) from error
    finally:
        close = getattr(stream, "close", None)
        if callable(close):
            close()


class StreamGatherer:
    """Turns upstream stream chunks into OpenAI chunk dicts for the client, and keeps the
    whole reply for storage."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.reply = Reply()

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.reply.id,
            "object": "chat.completion.chunk",
            "created": self.reply.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    def usage_chunk(self) -> dict[str, Any]:
        return {
            "id": self.reply.id,
            "object": "chat.completion.chunk",
            "created": self.reply.created,
            "model": self.model,
            "choices": [],
            "usage": self.reply.usage,
        }

    def feed(self, upstream_chunk: Any) -> dict[str, Any] | None:
        """The chunk to send for one upstream chunk (None when it carries nothing to send)."""
        usage = getattr(upstream_chunk, "usage", None)
        if usage:
            self.reply.usage = _usage(usage)
        choices = getattr(upstream_chunk, "choices", None) or []
        if not choices:
            return None
        choice = choices[0]
        delta = getattr(choice, "delta", None)
        out: dict[str, Any] = {}
        if delta is not None:
            if getattr(delta, "role", None):
                out["role"] = "assistant"
            if delta.content:
                self.reply.content += delta.content
                out["content"] = delta.content
            thinking = getattr(delta, "reasoning_content", None)
            if thinking:
                self.reply.reasoning += thinking
            pieces = [self._merge(piece) for piece in getattr(delta, "tool_calls", None) or ()]
            if pieces:
                out["tool_calls"] = pieces
        finish = getattr(choice, "finish_reason", None)
        if finish:
            self.reply.finish_reason = finish
        if not out and not finish:
            return None
        return self.chunk(out, finish)

    def _merge(self, piece: Any) -> dict[str, Any]:
        index = getattr(piece, "index", None) or 0
        calls = self.reply.tool_calls
        while len(calls) <= index:
            calls.append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
        slot = calls[index]
        sent: dict[str, Any] = {"index": index}
        if getattr(piece, "id", None):
            slot["id"] = piece.id
            sent["id"] = piece.id
            sent["type"] = "function"
        function = getattr(piece, "function", None)
        if function is not None:
            part: dict[str, Any] = {}
            if getattr(function, "name", None) and not slot["function"]["name"]:
                slot["function"]["name"] = function.name
                part["name"] = function.name
            if getattr(function, "arguments", None):
                slot["function"]["arguments"] += function.arguments
                part["arguments"] = function.arguments
            if part:
                sent["function"] = part
        return sent

    def finish(self) -> Reply:
        """The gathered reply (tool calls without an id get one, so the pairs stay valid)."""
        for number, call in enumerate(self.reply.tool_calls):
            call["id"] = call["id"] or f"call_{self.reply.id[-12:]}_{number}"
        return self.reply


def _usage(usage: Any) -> dict[str, int]:
    if not usage:
        return {}
    values = {
        name: getattr(usage, name, None)
        for name in ("prompt_tokens", "completion_tokens", "total_tokens")
    }
    return {name: int(value) for name, value in values.items() if value is not None}


def upstream_error(error: Exception, model: str) -> ApiError:
    """The OpenAI-shaped error a client gets for a provider failure; the provider's status
    is passed on (401, 403, 429, 400…), a timeout is 504 and an unreachable provider 502.
    Anything that is not a provider error is re-raised (our own bug: a 500)."""
    litellm = _import_litellm()
    text = scrub(str(getattr(error, "message", None) or error))
    status = getattr(error, "status_code", None)
    if isinstance(error, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return ApiError(
            int(status or 401),
            f"The model provider refused the server's credentials for {model}: {text}",
            type="authentication_error",
            code="upstream_authentication_failed",
        )
    if isinstance(error, litellm.RateLimitError):
        return ApiError(
            429,
            f"The model provider is rate limiting {model}: {text}",
            type="rate_limit_error",
            code="upstream_rate_limited",
        )
    if isinstance(error, litellm.Timeout):
        return ApiError(
            504,
            f"{model} did not answer within {settings.HERMES_LLM_TIMEOUT} s.",
            type="timeout_error",
            code="upstream_timeout",
        )
    if isinstance(error, litellm.ContextWindowExceededError):
        return ApiError(400, text, code="context_length_exceeded")
    if isinstance(
        error, litellm.BadRequestError | litellm.NotFoundError | litellm.UnprocessableEntityError
    ):
        return ApiError(
            int(status or 400), f"{model} rejected the request: {text}", code="upstream_bad_request"
        )
    if isinstance(error, litellm.APIConnectionError) or "connection error" in text.lower():
        return ApiError(
            502, f"Could not reach {model}: {text}", type="api_error", code="upstream_unreachable"
        )
    if isinstance(error, litellm.APIError) or type(error).__module__.startswith(
        ("litellm", "openai", "httpx")
    ):
        return ApiError(502, f"{model} failed: {text}", type="api_error", code="upstream_error")
    raise error
