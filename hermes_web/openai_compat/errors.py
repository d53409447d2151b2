"""Errors in the shape OpenAI clients expect: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

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

    def response(self) -> JsonResponse:
        return JsonResponse(self.payload(), status=self.status)


def invalid(message: str, *, code: str, param: str | None = None) -> ApiError:
    """A 400 about the request body."""
    return ApiError(400, message, code=code, param=param)
