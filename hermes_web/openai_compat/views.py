"""``POST /v1/chat/completions`` and ``GET /v1/models``, as the OpenAI SDK calls them.

Authenticated with our API keys (``Authorization: Bearer hk_…``); errors are OpenAI-shaped.
Responses carry ``X-Hermes-Session`` (the stored session) and, when the model received a
compacted context, ``X-Hermes-Compaction`` (the inspector page of that compaction).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
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
    StreamGatherer,
    allowed_models,
    complete,
    completion_kwargs,
    open_stream,
)
from hermes_web.openai_compat.validation import parse_request

log = logging.getLogger(__name__)

SESSION_HEADER = "X-Hermes-Session"
COMPACTION_HEADER = "X-Hermes-Compaction"
MODE_HEADER = "X-Hermes-Compaction-Mode"


def _authenticate(request: HttpRequest) -> ApiKey:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    key = authenticate_api_key(token.strip()) if scheme.lower() == "bearer" and token else None
    if key is None:
        raise ApiError(
            401,
            "Incorrect or missing API key. Create one on the API keys page of hermes-web and "
            "send it as 'Authorization: Bearer hk_…'.",
            code="invalid_api_key",
        )
    return key


def _method_not_allowed(allowed: str) -> HttpResponse:
    response = ApiError(405, f"Use {allowed} here.", code="method_not_allowed").response()
    response["Allow"] = allowed
    return response


@csrf_exempt
def chat_completions(request: HttpRequest) -> HttpResponseBase:
    """One chat completion for the client's full history (streamed as SSE on ``stream``)."""
    if request.method != "POST":
        return _method_not_allowed("POST")
    started, cpu_started = time.perf_counter(), time.thread_time()
    timings: list[tuple[str, float]] = []

    def lap(name: str) -> None:
        timings.append((name, time.perf_counter()))

    try:
        key = _authenticate(request)
        try:
            body = request.body
        except RequestDataTooBig:
            raise ApiError(
                413,
                "The request is larger than this server accepts (DATA_UPLOAD_MAX_MEMORY_SIZE).",
                code="request_too_large",
            ) from None
        chat = parse_request(body)
        lap("parse")
        prepared = service.prepare(
            key,
            chat,
            session_header=request.headers.get(SESSION_HEADER, ""),
            mode_header=request.headers.get(MODE_HEADER, ""),
            user_agent=request.headers.get("User-Agent", ""),
        )
        lap("prepare")
        kwargs = completion_kwargs(
            prepared.upstream_model, prepared.upstream_messages, chat.params, stream=chat.stream
        )
        if chat.stream:
            chunks = open_stream(kwargs)
            lap("upstream-first-chunk")
            response: HttpResponseBase = StreamingHttpResponse(
                _events(prepared, chunks), content_type="text/event-stream"
            )
            response["Cache-Control"] = "no-cache"
            response["X-Accel-Buffering"] = "no"  # let a proxy pass chunks as they come
        else:
            reply = complete(kwargs)
            lap("upstream")
            session, _ = service.store(prepared, reply)
            lap("store")
            prepared.public_id = session.public_id
            response = JsonResponse(_completion(chat.model, reply))
    except ApiError as error:
        return error.response()
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


def _completion(model: str, reply) -> dict[str, Any]:
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
        if gatherer.reply.finish_reason is None:
            # A stream cut off mid-reply (litellm usually raises first): nothing is stored.
            raise ApiError(
                502,
                "The model's stream ended before the reply was finished.",
                type="api_error",
                code="upstream_stream_incomplete",
            )
        reply = gatherer.finish()
        service.store(prepared, reply)
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
        return _method_not_allowed("GET")
    try:
        _authenticate(request)
    except ApiError as error:
        return error.response()
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "hermes-web"}
        for name in allowed_models()
    ]
    return JsonResponse({"object": "list", "data": data})
