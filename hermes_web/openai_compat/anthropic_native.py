"""``POST /v1/messages`` to an Anthropic upstream in Anthropic's own protocol.

A Messages request for an ``anthropic/`` model that the service sends as the client wrote it
(no compacted context, no context edits) goes to the model through litellm's native Messages
interface with the client's body, not through the chat-completions translation and back:
``cache_control`` marks, thinking signatures, server tool definitions and the exact usage
(cache read and creation tokens) reach the model and the client unchanged (litellm itself sends
a web search result block that the client sent back on as text). The reply is stored as the
chat path stores it (``reply_of``), so the session, its matching and a later compaction do
not depend on which way a request went.

``passes_through`` is the one place that decides. Everything else stays translated:
a compacted context or one a context edit changed (what the model reads is then ours, in
chat messages), on-demand compaction and a compaction block sent back
(``anthropic_compaction``), and other providers. ``context_management`` is served here, not
by the model: a request whose edits cleared nothing goes on without them (Claude Code asks
for edits with every request), its reply reporting no edit applied. litellm 1.110.2 has no
synchronous native Messages call ("not implemented for sync calls"), so the calls run on an
event loop of this process (``_loop``). A streamed request passes through too (``stream``):
the client gets the model's SSE frames as they come; litellm's native stream imports part of
its proxy (fastapi, soundfile with numpy, backoff: pinned in pyproject.toml for it), and
without them streams are translated (``streams_natively``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from hermes_web.agent.provider import chat_provider_kwargs
from hermes_web.llm_models import unlogged_calls
from hermes_web.openai_compat import service
from hermes_web.openai_compat.anthropic_sse import MessageStream, event, frame_data
from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.upstream import (
    Reply,
    _import_litellm,
    resolve_model,
    streams_natively,
    upstream_error,
)
from hermes_web.openai_compat.validation import ChatRequest

log = logging.getLogger(__name__)

# Where parse keeps the client's body for the native call (only for an anthropic/ model).
BODY = "native_body"
PROVIDER = "anthropic/"
# The Messages fields sent on as the client wrote them (model is ours, stream is decided
# here). A whitelist: litellm reads keys such as api_base or api_key in the same keyword
# arguments, and a client must never choose where the server's credentials go.
FIELDS = (
    "messages",
    "max_tokens",
    "system",
    "metadata",
    "stop_sequences",
    "temperature",
    "thinking",
    "tool_choice",
    "tools",
    "top_k",
    "top_p",
    "container",
    "service_tier",
    "mcp_servers",
    "output_format",
    "output_config",
)
# The client's beta flags are passed on: they switch on what the body asks for.
BETA_HEADER = "anthropic-beta"


def keeping_body(data: dict[str, Any], chat: ChatRequest) -> ChatRequest:
    """``chat`` (the parsed ``data``) with the client's body kept when its model is
    Anthropic's (the service may still decide to translate it: ``passes_through``)."""
    if not resolve_model(chat.model).startswith(PROVIDER):
        return chat
    chat.extra[BODY] = data
    return chat


def passes_through(prepared: service.Prepared) -> bool:
    """Whether the client's own body goes to the model (see the module docstring): an
    Anthropic model that reads the client's messages as sent."""
    chat = prepared.request
    return (
        isinstance(chat.extra.get(BODY), dict)
        and prepared.upstream_model.startswith(PROVIDER)
        and prepared.compaction is None
        # The service substituted nothing (a compacted or replaced prefix, a context edit
        # that cleared something: one that cleared nothing leaves the very same list).
        and prepared.upstream_messages is chat.messages
        and not chat.extra.get("compaction_block")
    )


def call(prepared: service.Prepared, request: HttpRequest) -> tuple[Reply, dict[str, Any]] | None:
    """The native call for a request that ``passes_through``: the reply as stored, and the
    upstream's message as the client gets it. None when the request is to be translated."""
    if not passes_through(prepared):
        return None
    model = prepared.upstream_model
    litellm = _import_litellm()
    message = _calling(
        model, litellm.anthropic_interface.messages.acreate(**_kwargs(prepared, request))
    )
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise ApiError(502, f"{model} sent no message.", type="api_error", code="upstream_error")
    return reply_of(message), {**message, **_edits_reported(prepared)}


def stream(prepared: service.Prepared, request: HttpRequest) -> Iterator[bytes] | None:
    """The native streamed call for a request that ``passes_through``: the upstream's SSE
    frames as they come, ``message_stop`` held until the reply is stored (a client that
    sends its next request at once finds its session). The call is opened and its first
    bytes read here, so a refused call is an error response, not a broken stream. None when
    the request is to be translated."""
    if not passes_through(prepared) or not streams_natively():
        return None
    model = prepared.upstream_model
    litellm = _import_litellm()
    opened = litellm.anthropic_interface.messages.acreate(**_kwargs(prepared, request))
    chunks = _calling(model, opened)
    try:
        first = _calling(model, _next(chunks))
    except ApiError:
        with contextlib.suppress(Exception):  # no connection left open behind the error
            _run(_closing(chunks))
        raise
    return _relay(prepared, chunks, first)


def _edits_reported(prepared: service.Prepared) -> dict[str, Any]:
    """``context_management.applied_edits`` for a request that asked for context edits
    (served here, not by the model: its body goes without them; none was applied, or the
    request would have been translated)."""
    applied = prepared.request.extra.get("applied_edits")
    return {} if applied is None else {"context_management": {"applied_edits": applied}}


def _reporting(frame: bytes, reported: dict[str, Any]) -> bytes:
    """A ``message_delta`` frame with the edits reported in its data (one frame a reply)."""
    return event("message_delta", {**json.loads(frame_data(frame)), **reported})


def _kwargs(prepared: service.Prepared, request: HttpRequest) -> dict[str, Any]:
    data: dict[str, Any] = prepared.request.extra[BODY]
    model = prepared.upstream_model
    kwargs: dict[str, Any] = {name: data[name] for name in FIELDS if data.get(name) is not None}
    kwargs.setdefault("max_tokens", 4096)  # required by Anthropic; the translation's default
    kwargs.update(
        model=model,
        stream=prepared.request.stream,
        timeout=settings.HERMES_LLM_TIMEOUT,
        max_retries=settings.HERMES_LLM_MAX_RETRIES,
        num_retries=0,
        **chat_provider_kwargs(model),
    )
    beta = request.headers.get(BETA_HEADER, "")
    if beta:
        kwargs["extra_headers"] = {BETA_HEADER: beta}
    return kwargs


def _calling(model: str, step: Coroutine[Any, Any, Any]) -> Any:
    """``step`` run on the loop, a provider failure as the ApiError the client gets."""
    try:
        return _run(_unlogged(step))
    except concurrent.futures.TimeoutError:
        raise ApiError(
            504,
            f"{model} did not answer within {settings.HERMES_LLM_TIMEOUT} s.",
            type="timeout_error",
            code="upstream_timeout",
        ) from None
    except Exception as error:
        raise upstream_error(error, model) from error


async def _next(chunks: AsyncIterator[bytes]) -> bytes | None:
    try:
        return await anext(chunks)
    except StopAsyncIteration:
        return None


def _relay(prepared: service.Prepared, chunks: Any, first: bytes | None) -> Iterator[bytes]:
    """The frames of a native stream; the reply stored before ``message_stop``. A stream that
    breaks (or the model's own ``error`` event) stores nothing and ends with an error event."""
    model = prepared.upstream_model
    sse = MessageStream()
    held: list[bytes] = []
    reported = _edits_reported(prepared)
    chunk = first
    try:
        while chunk is not None:
            for kind, frame in sse.frames(bytes(chunk)):
                if kind == "message_stop":
                    held.append(frame)
                elif kind == "message_delta" and reported:
                    yield _reporting(frame, reported)
                else:
                    yield frame
            if sse.error is not None:
                return  # the model's error event went to the client: nothing is stored
            chunk = _calling(model, _next(chunks))
        service.store(prepared, reply_of(sse.finished()))
    except ApiError as error:
        yield event("error", {"error": error.anthropic_payload()["error"]})
        return
    except Exception:
        log.exception("native messages stream for session %s failed", prepared.public_id)
        failure = ApiError(500, "The server failed while streaming.", type="api_error")
        yield event("error", {"error": failure.anthropic_payload()["error"]})
        return
    finally:
        if chunk is not None:  # the client went away, or the stream broke: stop the call
            with contextlib.suppress(Exception):
                _run(_closing(chunks))
    yield from held


async def _closing(chunks: Any) -> None:
    close = getattr(chunks, "aclose", None)
    if close is not None:
        await close()


def reply_of(message: dict[str, Any]) -> Reply:
    """A native message as the chat path's reply: what litellm's translation makes of the
    same message when the client sends it back (text blocks joined, tool_use blocks as tool
    calls, thinking as reasoning; server tool blocks are not chat content), so the stored
    reply hashes as the next request's copy of it and the session is continued."""
    blocks = [block for block in message["content"] if isinstance(block, dict)]
    reply = Reply(finish_reason=message.get("stop_reason") or "end_turn")
    reply.content = "".join(b.get("text") or "" for b in blocks if b.get("type") == "text")
    reply.reasoning = "".join(
        b.get("thinking") or "" for b in blocks if b.get("type") == "thinking"
    )
    reply.tool_calls = [
        {
            "id": b.get("id") or "",
            "type": "function",
            "function": {"name": b.get("name") or "", "arguments": json.dumps(b.get("input", {}))},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    usage = message.get("usage") or {}
    # The prompt as the compaction trigger counts it: cached tokens are context too (the
    # chat path's litellm counts them into prompt_tokens as well).
    prompt = sum(
        int(usage.get(name) or 0)
        for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    output = int(usage.get("output_tokens") or 0)
    reply.usage = {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
    }
    return reply


async def _unlogged(call: Coroutine[Any, Any, Any]) -> Any:
    with unlogged_calls():  # set in the task that runs the call, on the loop's thread
        return await call


def _run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    # The call's CPU is spent on the loop's thread: Server-Timing's ``cpu`` phase (the
    # request thread's) leaves it out for a native call.
    # Beyond litellm's own timeout (per attempt), a last bound so no worker waits forever.
    limit = settings.HERMES_LLM_TIMEOUT * (settings.HERMES_LLM_MAX_RETRIES + 1) + 30
    future = asyncio.run_coroutine_threadsafe(coroutine, _loop(os.getpid()))
    try:
        return future.result(limit)
    except concurrent.futures.TimeoutError:
        future.cancel()  # the call stops on the loop too
        raise


@functools.cache
def _loop(pid: int) -> asyncio.AbstractEventLoop:
    """This process's event loop for litellm's asynchronous calls, in a thread of its own.

    One loop for the process, not one per call: litellm keeps its HTTP sessions and its
    logging worker on the loop they were made on, and a loop per call left a logging task
    behind on each closed one (litellm warned "event loop changed" every call). Keyed by
    process id: a forked child makes its own (the parent's thread is not copied).
    """
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="anthropic-native", daemon=True).start()
    return loop
