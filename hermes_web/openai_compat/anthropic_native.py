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
a compacted or edited context (what the model reads is then ours, in chat messages), the
Anthropic compaction and ``context_management`` requests (``anthropic.messages`` sends them
elsewhere before this module sees them), other providers, and streamed requests. litellm
1.110.2 has no synchronous native Messages call ("not implemented for sync calls"), and its
asynchronous streaming imports litellm's proxy server (fastapi, soundfile with numpy,
backoff: about 95 MB this app does not install); a non-streamed call under a stream would
hold the client's first byte until the whole reply was written, and a long reply would
meet the call's timeout. So only JSON requests pass through, on an event loop of this
process (``_loop``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import os
import threading
from collections.abc import Coroutine
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from hermes_web.agent.provider import chat_provider_kwargs
from hermes_web.llm_models import unlogged_calls
from hermes_web.openai_compat import service
from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.upstream import Reply, _import_litellm, resolve_model, upstream_error
from hermes_web.openai_compat.validation import ChatRequest

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
    if data.get("stream") or not resolve_model(chat.model).startswith(PROVIDER):
        return chat
    chat.extra[BODY] = data
    return chat


def passes_through(prepared: service.Prepared) -> bool:
    """Whether the client's own body goes to the model (see the module docstring): an
    Anthropic model, not streamed, and the model reads the client's messages as sent."""
    chat = prepared.request
    return (
        isinstance(chat.extra.get(BODY), dict)
        and not chat.stream
        and prepared.upstream_model.startswith(PROVIDER)
        and prepared.compaction is None
        # The service substituted nothing (a compacted or replaced prefix, a context edit).
        and prepared.upstream_messages is chat.messages
        and not any(chat.extra.get(name) for name in ("compaction_block", "edit_upstream"))
    )


def call(prepared: service.Prepared, request: HttpRequest) -> tuple[Reply, dict[str, Any]] | None:
    """The native call for a request that ``passes_through``: the reply as stored, and the
    upstream's message as the client gets it. None when the request is to be translated."""
    if not passes_through(prepared):
        return None
    beta = request.headers.get(BETA_HEADER, "")
    data: dict[str, Any] = prepared.request.extra[BODY]
    model = prepared.upstream_model
    kwargs: dict[str, Any] = {name: data[name] for name in FIELDS if data.get(name) is not None}
    kwargs.setdefault("max_tokens", 4096)  # required by Anthropic; the translation's default
    kwargs.update(
        model=model,
        stream=False,
        timeout=settings.HERMES_LLM_TIMEOUT,
        max_retries=settings.HERMES_LLM_MAX_RETRIES,
        num_retries=0,
        **chat_provider_kwargs(model),
    )
    if beta:
        kwargs["extra_headers"] = {BETA_HEADER: beta}
    litellm = _import_litellm()
    try:
        message = _run(_unlogged(litellm.anthropic_interface.messages.acreate(**kwargs)))
    except concurrent.futures.TimeoutError:
        raise ApiError(
            504,
            f"{model} did not answer within {settings.HERMES_LLM_TIMEOUT} s.",
            type="timeout_error",
            code="upstream_timeout",
        ) from None
    except Exception as error:
        raise upstream_error(error, model) from error
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise ApiError(502, f"{model} sent no message.", type="api_error", code="upstream_error")
    return reply_of(message), dict(message)


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
