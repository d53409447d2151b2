"""A fake OpenAI-compatible chat server for tests (stdlib only, real HTTP on 127.0.0.1).

    server = FakeOpenAIServer().start()
    server.enqueue({"content": "hello", "prompt_tokens": 12, "completion_tokens": 3})
    server.enqueue({"status": 429})            # an error reply
    server.enqueue({"sleep": 2, "content": "late"})   # a slow reply (timeouts)
    litellm.completion(model="openai/fake", api_base=server.base_url, api_key="x", ...)
    server.requests                              # every request body, as dicts
    server.stop()

Each reply is a dict with any of: ``content`` (str), ``tool_calls`` (list, OpenAI format),
``reasoning_content``, ``finish_reason``, ``prompt_tokens``, ``completion_tokens``,
``status`` (an HTTP error status; ``error`` sets its message), ``sleep`` (seconds before
answering), ``chunk_sleep`` (seconds after each streamed piece), ``break_after`` (a stream
closes after that many content pieces, with no finish and no ``[DONE]``). When the queue is
empty ``default_reply`` is used. ``stream: true`` requests get SSE chunks (content in a few
pieces, then a usage chunk when ``stream_options.include_usage`` is set, then ``[DONE]``).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer"]

_PATHS = ("/v1/chat/completions", "/chat/completions")


class FakeOpenAIServer:
    """A scripted OpenAI-compatible server on 127.0.0.1 with a random port."""

    def __init__(self, default_reply: dict[str, Any] | None = None) -> None:
        self.default_reply: dict[str, Any] = default_reply or {
            "content": "## Active Task\nNone.\n\n## Goal\nFake summary.",
        }
        self.requests: list[dict[str, Any]] = []
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control -------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        """Bind to a free port and serve in a daemon thread."""
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Shut the server down."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (use as litellm's ``api_base``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *replies: dict[str, Any]) -> None:
        """Queue replies, answered in order, one per request."""
        with self._lock:
            self._queue.extend(replies)

    def clear(self) -> None:
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            return self._queue.popleft() if self._queue else dict(self.default_reply)


def _make_handler(fake: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes; with Nagle on, the body waits for the
        # client's delayed ACK (~40 ms), which a benchmark would mistake for model time.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def _send_json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send_json(
                    200, {"object": "list", "data": [{"id": "fake", "object": "model"}]}
                )
            else:
                self._send_json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if path not in _PATHS:
                self._send_json(404, {"error": {"message": f"no route {path}"}})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send_json(400, {"error": {"message": "invalid JSON"}})
                return
            reply = fake._next(body)
            if reply.get("sleep"):
                time.sleep(float(reply["sleep"]))
            status = int(reply.get("status") or 200)
            if status >= 400:
                message = reply.get("error") or f"fake error {status}"
                self._send_json(
                    status, {"error": {"message": message, "type": "fake_error", "code": status}}
                )
                return
            if body.get("stream"):
                self._stream(body, reply)
            else:
                self._send_json(200, _completion(body, reply))

        def _stream(self, body: dict[str, Any], reply: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            model = body.get("model", "fake")
            created = int(time.time())

            def send(payload: dict[str, Any] | str) -> None:
                data = payload if isinstance(payload, str) else json.dumps(payload)
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()

            def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
                return {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }

            content = str(reply.get("content") or "")
            send(chunk({"role": "assistant", "content": ""}))
            if reply.get("reasoning_content"):  # a thinking model streams its reasoning first
                send(chunk({"reasoning_content": reply["reasoning_content"]}))
            size = max(1, len(content) // 3)
            for number, start in enumerate(range(0, len(content), size)):
                if reply.get("break_after") is not None and number >= reply["break_after"]:
                    self.close_connection = True  # the connection drops mid-reply
                    return
                send(chunk({"content": content[start : start + size]}))
                if reply.get("chunk_sleep"):  # a slow stream (Stop, streaming display)
                    time.sleep(float(reply["chunk_sleep"]))
            if reply.get("tool_calls"):
                calls = [{**c, "index": i} for i, c in enumerate(reply["tool_calls"])]
                send(chunk({"tool_calls": calls}))
            finish = reply.get("finish_reason") or (
                "tool_calls" if reply.get("tool_calls") else "stop"
            )
            send(chunk({}, finish))
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = _usage(body, reply)
                send(
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": usage,
                    }
                )
            send("[DONE]")
            self.close_connection = True

    return Handler


def _usage(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, int]:
    prompt_chars = sum(len(json.dumps(m.get("content"))) for m in body.get("messages", []))
    prompt = int(reply.get("prompt_tokens") or max(1, prompt_chars // 4))
    completion = int(
        reply.get("completion_tokens") or max(1, len(str(reply.get("content") or "")) // 4)
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _completion(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if reply.get("tool_calls"):
        message["tool_calls"] = reply["tool_calls"]
    if reply.get("reasoning_content"):
        message["reasoning_content"] = reply["reasoning_content"]
    finish = reply.get("finish_reason") or ("tool_calls" if reply.get("tool_calls") else "stop")
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(body, reply),
    }
