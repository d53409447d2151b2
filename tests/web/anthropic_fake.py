"""A stdlib Anthropic Messages server on 127.0.0.1 for the /v1/messages tests: it records the
bodies (and headers) it gets and answers each request with the next queued reply, as JSON or,
when the request asks for ``stream``, as Anthropic's SSE event sequence (message_start,
content_block_start/delta/stop per block, message_delta, message_stop)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TEXT = "Target 2 failed."
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def message(reply: dict[str, Any]) -> dict[str, Any]:
    """The Messages response body for a queued reply (``content`` blocks, ``input_tokens``,
    ``usage`` extras)."""
    content = reply.get("content") or [{"type": "text", "text": DEFAULT_TEXT}]
    uses_tool = any(block["type"] == "tool_use" for block in content)
    return {
        "id": reply.get("id", "msg_fake"),
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": reply.get("stop_reason") or ("tool_use" if uses_tool else "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.get("input_tokens", 40),
            "output_tokens": 5,
            **reply.get("usage", {}),
        },
    }


def _deltas(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A content block as Anthropic streams it: its start form and its deltas."""
    kind = block["type"]
    if kind == "text":
        text = block["text"]
        half = len(text) // 2
        pieces = [text[:half], text[half:]] if half else [text]
        return {**block, "text": ""}, [{"type": "text_delta", "text": p} for p in pieces]
    if kind == "thinking":
        deltas: list[dict[str, Any]] = [{"type": "thinking_delta", "thinking": block["thinking"]}]
        if block.get("signature"):
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return {**block, "thinking": "", "signature": ""}, deltas
    if kind in ("tool_use", "server_tool_use"):
        arguments = json.dumps(block.get("input", {}))
        cut = len(arguments) // 2
        pieces = [arguments[:cut], arguments[cut:]]
        return {**block, "input": {}}, [
            {"type": "input_json_delta", "partial_json": p} for p in pieces
        ]
    return block, []  # whole in its start event (redacted_thinking, *_tool_result)


def events(reply: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a queued reply, in order (``cut_after``: stop after that many
    events, as a stream the provider broke off)."""
    body = message(reply)
    start = {**body, "content": [], "stop_reason": None, "usage": {**body["usage"]}}
    start["usage"]["output_tokens"] = 1
    sent: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(body["content"]):
        opened, deltas = _deltas(block)
        sent.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        sent += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        sent.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    sent.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": body["usage"]["output_tokens"]},
            },
        )
    )
    sent.append(("message_stop", {"type": "message_stop"}))
    if "cut_after" in reply:
        return sent[: reply["cut_after"]]
    return sent


class FakeAnthropic:
    """The fake server. Queue replies in ``replies`` (dicts with ``content``, ``input_tokens``,
    ``usage``; ``status`` and ``error`` for a refused request; ``cut_after`` for a stream
    broken off; ``delay``: seconds to wait before answering). ``requests`` holds the bodies, ``headers`` their headers.

    ``keep_alive``: answer in HTTP/1.1 and keep the connection for the next request, as a
    real provider does (the benchmarks; the tests' default is one connection a request)."""

    def __init__(self, keep_alive: bool = False) -> None:
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.replies: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
            # Headers and body go out in separate writes; with Nagle on, the body waits for
            # the client's delayed ACK (~40 ms), which a benchmark would take for model time.
            disable_nagle_algorithm = True

            def log_message(self, format, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length))
                reply = fake.next_reply(body, dict(self.headers.items()))
                if reply.get("delay"):  # a model slower than the caller's timeout
                    time.sleep(reply["delay"])
                if reply.get("status"):
                    kind = ERROR_TYPES.get(reply["status"], "api_error")
                    error = {"type": "error", "error": {"type": kind, "message": reply["error"]}}
                    self._send(reply["status"], "application/json", json.dumps(error).encode())
                elif body.get("stream"):
                    self._stream(reply)
                else:
                    self._send(200, "application/json", json.dumps(message(reply)).encode())

            def _send(self, status: int, kind: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, reply: dict) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                # No Content-Length: the end of the connection ends the stream.
                self.send_header("Connection", "close")
                self.end_headers()
                for name, payload in events(reply):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True  # stop() does not wait for a delayed answer
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def next_reply(self, body: dict, headers: dict[str, str]) -> dict:
        """The reply to a request (the next queued one, else the default text), the request
        recorded. Called on the server's threads."""
        self.requests.append(body)
        self.headers.append(headers)
        return self.replies.pop(0) if self.replies else {}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_for(
    settings: Any,
    model: str = "anthropic/claude-sonnet-4-5",
    context_length: int | None = 85_000,
    server: FakeAnthropic | None = None,
) -> FakeAnthropic:
    """A started fake (``server``, or a plain one), with ``settings`` (pytest-django's
    fixture) serving ``model`` from it: no retries, a 5 s timeout, no summary model of its
    own. The caller stops it."""
    server = server or FakeAnthropic()
    settings.HERMES_CHAT_MODEL = model
    settings.HERMES_CHAT_API_BASE = server.base_url
    settings.HERMES_CHAT_API_KEY = "upstream-key"
    settings.HERMES_API_MODELS = []
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_TIMEOUT = 5
    settings.HERMES_SUMMARY_MODEL = ""
    if context_length is not None:
        settings.HERMES_CONTEXT_LENGTH = context_length
    return server
