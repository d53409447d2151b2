"""The ``/v1`` model endpoints in the API's OpenAPI document (``/api/docs``).

They are plain Django views (``views``, ``responses``, ``anthropic``): they speak the
providers' own protocols, stream SSE and answer errors in each protocol's JSON shape, which
ninja's operations would reshape. So the generated schema is extended instead: each path with
its request and reply summarized (the fields hermes-web reads or adds; every other field is
passed on, hence ``additionalProperties``), the bearer API key, and the statuses it answers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    # The protocols carry many more fields than summarized here; all are accepted.
    model_config = ConfigDict(extra="allow")


class ChatMessageIn(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = Field(
        description="text, or content parts (text, image_url…)"
    )
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class ChatCompletionIn(_Open):
    """OpenAI chat completions: the client's whole history each turn; hermes-web stores it,
    compacts it when it nears the model's window and sends the upstream the compacted one."""

    model: str = Field(description="the upstream model, as configured (litellm names)")
    messages: list[ChatMessageIn]
    stream: bool = Field(False, description="true: text/event-stream of chunks, then [DONE]")
    tools: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    temperature: float | None = None


class ChatChoice(_Open):
    index: int
    message: dict[str, Any] = Field(description="role 'assistant', content, tool_calls")
    finish_reason: str | None


class Usage(_Open):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletionOut(_Open):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage | None = None


class ResponsesIn(_Open):
    """OpenAI Responses: ``input`` is a string or a list of items; ``previous_response_id``
    continues a stored response."""

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    previous_response_id: str | None = None
    stream: bool = Field(False, description="true: text/event-stream of response.* events")
    tools: list[dict[str, Any]] | None = None


class ResponsesOut(_Open):
    id: str
    object: Literal["response"]
    created_at: int
    model: str
    status: str
    output: list[dict[str, Any]] = Field(description="message and function_call items")
    usage: dict[str, Any] | None = None


class MessagesIn(_Open):
    """Anthropic Messages (Claude Code and the Anthropic SDKs)."""

    model: str
    max_tokens: int = Field(4096, description="4096 when absent")
    messages: list[dict[str, Any]] = Field(description="role 'user' / 'assistant', content blocks")
    system: str | list[dict[str, Any]] | None = None
    stream: bool = Field(False, description="true: text/event-stream of message_* events")
    tools: list[dict[str, Any]] | None = None


class MessagesOut(_Open):
    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[dict[str, Any]] = Field(description="text and tool_use blocks")
    stop_reason: str | None
    usage: dict[str, Any]


class OpenAIErrorBody(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIError(BaseModel):
    """An error of the OpenAI endpoints."""

    error: OpenAIErrorBody


class AnthropicErrorBody(BaseModel):
    type: str
    message: str


class AnthropicError(BaseModel):
    """An error of the Anthropic endpoint."""

    type: Literal["error"]
    error: AnthropicErrorBody


# What each status means on /v1 (the same on every endpoint).
STATUSES = {
    "400": "A malformed or invalid request (the field is named)",
    "401": "No API key, or not a usable one",
    "404": "An unknown session or previous response, or a model the upstream does not have",
    "405": "Only POST",
    "409": "The history does not continue the session named by X-Hermes-Session",
    "413": "The body is larger than the limit",
    "429": "The upstream's rate limit",
    "502": "The upstream failed or is unreachable",
    "503": "The database is busy for a moment; retry after Retry-After seconds",
    "504": "The upstream timed out",
}

SECURITY_SCHEME = "V1ApiKey"

_ENDPOINTS = (
    (
        "/v1/chat/completions",
        "openai_chat_completions",
        "OpenAI chat completions",
        ChatCompletionIn,
        ChatCompletionOut,
        OpenAIError,
    ),
    (
        "/v1/responses",
        "openai_responses",
        "OpenAI Responses",
        ResponsesIn,
        ResponsesOut,
        OpenAIError,
    ),
    (
        "/v1/messages",
        "anthropic_messages",
        "Anthropic Messages",
        MessagesIn,
        MessagesOut,
        AnthropicError,
    ),
)

_HEADERS_NOTE = (
    " Replies carry X-Hermes-Session (the stored session) and, when this turn compacted it, "
    "X-Hermes-Compaction; a request may name its session with X-Hermes-Session and choose "
    "X-Hermes-Compaction-Mode."
)


def _ref(model: type[BaseModel], schemas: dict[str, Any]) -> dict[str, str]:
    # Named V1…: never overwriting a schema of the ninja API (its MessageOut, say).
    body = model.model_json_schema(ref_template="#/components/schemas/V1{model}")
    schemas.update({f"V1{name}": nested for name, nested in body.pop("$defs", {}).items()})
    schemas[f"V1{model.__name__}"] = body
    return {"$ref": f"#/components/schemas/V1{model.__name__}"}


def extend(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the ``/v1`` endpoints, their schemas and the bearer key's scheme to ``schema``
    (ninja's generated document), in place; returns it."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    components.setdefault("securitySchemes", {})[SECURITY_SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key of hermes-web (hk_…): 'Authorization: Bearer hk_…', or "
        "'x-api-key: hk_…' as Anthropic clients send it.",
    }
    for path, operation_id, summary, request, reply, error in _ENDPOINTS:
        error_ref = _ref(error, schemas)
        responses: dict[str, Any] = {
            "200": {
                "description": "The model's reply (JSON), or its SSE stream when stream is true",
                "content": {
                    "application/json": {"schema": _ref(reply, schemas)},
                    "text/event-stream": {"schema": {"type": "string"}},
                },
            }
        }
        for status, meaning in STATUSES.items():
            responses[status] = {
                "description": meaning,
                "content": {"application/json": {"schema": error_ref}},
            }
        schema.setdefault("paths", {})[path] = {
            "post": {
                "operationId": operation_id,
                "summary": summary,
                "description": (request.__doc__ or "").strip() + _HEADERS_NOTE,
                "tags": ["model endpoints (/v1)"],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(request, schemas)}},
                },
                "responses": responses,
                "security": [{SECURITY_SCHEME: []}],
            }
        }
    return schema
