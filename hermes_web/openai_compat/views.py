"""``POST /v1/chat/completions`` and ``GET /v1/models``, as the OpenAI SDK calls them, and
``serve``: the request flow the Messages and Responses adapters share with them.

Authenticated with our API keys (``Authorization: Bearer hk_…`` or ``x-api-key``); errors are
in the protocol's shape, also for an unknown ``/v1`` path.
Responses carry ``X-Hermes-Session`` (the stored session) and, when the model received a
compacted context, ``X-Hermes-Compaction`` (the inspector page of that compaction).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from hermes_web.auth import authenticate_api_key
from hermes_web.models import ApiKey
from hermes_web.openai_compat import service
from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.upstream import (
    Reply,
    StreamGatherer,
    allowed_models,
    complete,
    completion_kwargs,
    open_stream,
)
from hermes_web.openai_compat.validation import ChatRequest, parse_request

log = logging.getLogger(__name__)

SESSION_HEADER = "X-Hermes-Session"
COMPACTION_HEADER = "X-Hermes-Compaction"
MODE_HEADER = "X-Hermes-Compaction-Mode"


def authenticate(request: HttpRequest) -> ApiKey:
    # OpenAI clients send "Authorization: Bearer"; Anthropic's send "x-api-key" (Claude Code
    # with ANTHROPIC_AUTH_TOKEN sends Bearer too): either carries our key.
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    raw = token.strip() if scheme.lower() == "bearer" else ""
    raw = raw or request.headers.get("X-Api-Key", "").strip()
    key = authenticate_api_key(raw) if raw else None
    if key is None:
        raise ApiError(
            401,
            "Incorrect or missing API key. Create one on the API keys page of hermes-web and "
            "send it as 'Authorization: Bearer hk_…' (or 'x-api-key: hk_…').",
            code="invalid_api_key",
        )
    return key


def method_not_allowed(allowed: str, shape: str = "openai") -> HttpResponse:
    error = ApiError(405, f"Use {allowed} here.", code="method_not_allowed")
    response = error.response(shape)
    response["Allow"] = allowed
    return response


def read_body(request: HttpRequest) -> bytes:
    try:
        return request.body
    except RequestDataTooBig:
        raise ApiError(
            413,
            "The request is larger than this server accepts (DATA_UPLOAD_MAX_MEMORY_SIZE).",
            code="request_too_large",
        ) from None


@dataclass(frozen=True)
class Protocol:
    """How one wire protocol reads a request and writes the reply; everything in between
    (session, compacted context, upstream call, storage) is the shared service."""

    shape: str  # the error shape ("openai" or "anthropic")
    parse: Callable[[bytes], ChatRequest]
    render: Callable[[ChatRequest, Reply], dict[str, Any]]
    events: Callable[[service.Prepared, Iterator[Any]], Iterator[bytes]]
    # A protocol's own model call for a request it can send as the client wrote it: the
    # reply to store and the body to answer with; None sends it through chat completions.
    native: (
        Callable[[service.Prepared, HttpRequest], tuple[Reply, dict[str, Any]] | None] | None
    ) = None
    # The same for a streamed request: the frames to send as they come (the reply stored
    # before the last one); None sends it through chat completions.
    native_stream: Callable[[service.Prepared, HttpRequest], Iterator[bytes] | None] | None = None


def serve(request: HttpRequest, protocol: Protocol) -> HttpResponseBase:
    """One model call for the client's full history, in ``protocol``'s wire format."""
    if request.method != "POST":
        return method_not_allowed("POST", protocol.shape)
    started, cpu_started = time.perf_counter(), time.thread_time()
    timings: list[tuple[str, float]] = []

    def lap(name: str) -> None:
        timings.append((name, time.perf_counter()))

    try:
        key = authenticate(request)
        chat = protocol.parse(read_body(request))
        lap("parse")
        prepared = service.prepare(
            key,
            chat,
            session_header=request.headers.get(SESSION_HEADER, ""),
            mode_header=request.headers.get(MODE_HEADER, ""),
            user_agent=request.headers.get("User-Agent", ""),
        )
        lap("prepare")

        def kwargs() -> dict[str, Any]:  # the chat call's, built only for a chat call
            return completion_kwargs(
                prepared.upstream_model, prepared.upstream_messages, chat.params, stream=chat.stream
            )

        if chat.stream:
            frames = protocol.native_stream(prepared, request) if protocol.native_stream else None
            if frames is None:
                frames = protocol.events(prepared, open_stream(kwargs()))
            lap("upstream-first-chunk")
            response: HttpResponseBase = StreamingHttpResponse(
                frames, content_type="text/event-stream"
            )
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"  # let a proxy pass chunks as they come
        else:
            native = protocol.native(prepared, request) if protocol.native else None
            reply = native[0] if native is not None else complete(kwargs())
            lap("upstream")
            session, _ = service.store(prepared, reply)
            lap("store")
            prepared.public_id = session.public_id
            body = native[1] if native is not None else protocol.render(chat, reply)
            response = JsonResponse(body)
    except ApiError as error:
        return error.response(protocol.shape)
    # Where the time went (W3C Server-Timing; browsers' dev tools and the bench read it).
    marks = [started] + [at for _, at in timings]
    phases = [
        f"{name};dur={(at - before) * 1000:.1f}"
        for (name, at), before in zip(timings, marks, strict=False)
    ]
    # This thread's CPU time so far: what the request cost here, whatever else the machine ran.
    phases.append(f"cpu;dur={(time.thread_time() - cpu_started) * 1000:.1f}")
    response["Server-Timing"] = ", ".join(phases)
    response[SESSION_HEADER] = prepared.public_id
    if prepared.compaction is not None:
        response[COMPACTION_HEADER] = request.build_absolute_uri(
            reverse("compaction_detail", args=[prepared.compaction.public_id])
        )
    return response


@csrf_exempt
def chat_completions(request: HttpRequest) -> HttpResponseBase:
    """``POST /v1/chat/completions`` (streamed as SSE on ``stream``)."""
    return serve(request, CHAT_COMPLETIONS)


def _completion(chat: ChatRequest, reply: Reply) -> dict[str, Any]:
    model = chat.model
    message = {**reply.message(), "refusal": None}
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, **reply.usage}
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
    }


def _data(payload: dict[str, Any] | str) -> bytes:
    text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


def _events(prepared: service.Prepared, chunks: Iterator[Any]) -> Iterator[bytes]:
    """The SSE stream. The reply is stored before ``[DONE]`` (a client that sends its next
    request at once finds its session); a stream that breaks stores nothing and ends with
    an error event."""
    gatherer = StreamGatherer(prepared.request.model)
    try:
        for upstream_chunk in chunks:
            chunk = gatherer.feed(upstream_chunk)
            if chunk is not None:
                yield _data(chunk)
        reply = service.store_streamed(prepared, gatherer)
    except ApiError as error:
        yield _data(error.payload())
        return
    except Exception:
        log.exception("chat completion stream for session %s failed", prepared.public_id)
        yield _data(
            ApiError(500, "The server failed while streaming.", type="server_error").payload()
        )
        return
    if prepared.request.include_usage and reply.usage:
        yield _data(gatherer.usage_chunk())
    yield _data("[DONE]")


@csrf_exempt
def models(request: HttpRequest) -> HttpResponse:
    """The models a client may name in ``model``."""
    if request.method != "GET":
        return method_not_allowed("GET")
    try:
        authenticate(request)
    except ApiError as error:
        return error.response()
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "hermes-web"}
        for name in allowed_models()
    ]
    return JsonResponse({"object": "list", "data": data})


CHAT_COMPLETIONS = Protocol("openai", parse_request, _completion, _events)


@csrf_exempt
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any other ``/v1/…`` path: a JSON 404 in the protocol's shape, never the HTML page."""
    shape = "anthropic" if request.path.startswith("/v1/messages") else "openai"
    return ApiError(
        404,
        f"No endpoint {request.method} {request.path} here. This server answers POST "
        "/v1/chat/completions, /v1/messages, /v1/messages/count_tokens, /v1/responses, "
        "/v1/responses/compact and "
        "GET /v1/models.",
        code="unknown_url",
    ).response(shape)
