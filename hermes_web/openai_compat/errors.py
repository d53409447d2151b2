"""Errors in the shape each protocol's clients expect.

OpenAI (chat completions, Responses): ``{"error": {"message", "type", "param", "code"}}``;
Anthropic Messages: ``{"type": "error", "error": {"type", "message"}}`` with Anthropic's
error types, which follow the status (and ``details.error_code`` for a compaction error).
"""

from __future__ import annotations

import re

from django.http import JsonResponse


class ApiError(Exception):
    """A request the endpoint answers with an OpenAI-shaped error (nothing is stored)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param

    def payload(self) -> dict:
        """The JSON body (also sent as an SSE ``data:`` line when a stream breaks)."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def anthropic_payload(self) -> dict:
        """The body an Anthropic SDK parses (also an SSE ``error`` event's data)."""
        kind = ANTHROPIC_TYPES.get(self.status, "api_error" if self.status >= 500 else "")
        if not kind:
            kind = "invalid_request_error"
        error: dict = {"type": kind, "message": self.message}
        if self.code and self.code.startswith("compaction_"):
            # The compaction betas name the cause in ``details.error_code`` (the SDK's
            # ``error_code``); other errors have no code in Anthropic's shape.
            error["details"] = {"error_code": self.code}
        return {"type": "error", "error": error}

    def response(self, shape: str = "openai") -> JsonResponse:
        """The JSON response in ``shape`` ("openai" or "anthropic")."""
        payload = self.anthropic_payload() if shape == "anthropic" else self.payload()
        return JsonResponse(payload, status=self.status)


# https://docs.anthropic.com/en/api/errors: the type a status has.
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def invalid(message: str, *, code: str, param: str | None = None) -> ApiError:
    """A 400 about the request body."""
    return ApiError(400, message, code=code, param=param)


# What an exception's text may carry that a client must never see: Python's traceback (and
# everything after its header: frames, source lines, carets), a frame line, and file-system
# paths (POSIX ones that start a word, not a URL's path; Windows drive paths).
_TRACEBACK = re.compile(r"Traceback \(most recent call last\).*", re.DOTALL)
_FRAME = re.compile(r'File "[^"]*", line \d+(?:, in \S+)?')
_POSIX_PATH = re.compile(r"(?<![\w:/.~-])/(?:[\w.@+~-]+/)+[\w.@+~-]*")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\(?:[^\s\\\"']+\\)*[^\s\\\"']*")
MAX_UPSTREAM_TEXT = 400


def scrub(text: str) -> str:
    """``text`` (an upstream or litellm exception's message) as a client may see it: no
    traceback, no frame, no server path, whitespace collapsed, at most 400 characters."""
    text = _TRACEBACK.sub(" ", text)
    text = _FRAME.sub("…", text)
    text = _POSIX_PATH.sub("…", text)
    text = _WINDOWS_PATH.sub("…", text)
    return " ".join(text.split())[:MAX_UPSTREAM_TEXT]
