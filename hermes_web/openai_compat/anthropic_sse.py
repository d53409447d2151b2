"""Anthropic's Messages stream (server-sent events), read as it passes through.

``MessageStream`` cuts the upstream's bytes into whole frames, to relay each unchanged, and
builds from them the message they stream (as the non-streamed call returns it), to store
it. ``event`` writes a frame of our own (an ``error`` at the end of a broken stream).
"""

from __future__ import annotations

import json
import re
from typing import Any

from hermes_web.openai_compat.errors import ApiError

# A frame ends with a blank line; servers may end lines with CRLF.
_FRAME_END = re.compile(rb"\r?\n\r?\n")


def event(name: str, payload: dict[str, Any]) -> bytes:
    """One SSE frame of event ``name`` whose data is ``payload`` with its ``type``."""
    data = json.dumps({"type": name, **payload}, ensure_ascii=False)
    return f"event: {name}\ndata: {data}\n\n".encode()


def frame_data(frame: bytes) -> bytes:
    """The data of a frame: its ``data:`` lines joined by newlines (empty when none)."""
    return b"\n".join(
        line[5:].removeprefix(b" ") for line in frame.splitlines() if line.startswith(b"data:")
    )


class MessageStream:
    """The frames of one streamed message and the message they build.

    ``frames`` takes the bytes as they come (a frame may be cut across reads or share one)
    and returns the frames it completed with their event type; ``message`` is the message so
    far, ``finished`` once ``message_stop`` came; ``error`` is an ``error`` event's error.
    """

    def __init__(self) -> None:
        self._pending = bytearray()
        self._parts: dict[tuple[int, str], list[str]] = {}  # a block's pieces by field
        self.message: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.stopped = False

    def frames(self, chunk: bytes) -> list[tuple[str, bytes]]:
        """The frames ``chunk`` completes, each ``(event type, its bytes)``."""
        self._pending += chunk
        done, start = [], 0
        while (end := _FRAME_END.search(self._pending, start)) is not None:
            frame = bytes(self._pending[start : end.end()])
            start = end.end()
            done.append((self._read(frame), frame))
        del self._pending[:start]
        return done

    def finished(self) -> dict[str, Any]:
        """The whole message; a 502 when the stream ended before ``message_stop``."""
        if self.message is None or not self.stopped:
            raise ApiError(
                502,
                "The model's stream ended before the reply was finished.",
                type="api_error",
                code="upstream_stream_incomplete",
            )
        return self.message

    def _read(self, frame: bytes) -> str:
        name = ""
        for line in frame.splitlines():
            if line.startswith(b"event:"):
                name = line[6:].strip().decode("utf-8", "replace")
        data = frame_data(frame)
        if not data:
            return name
        try:
            payload = json.loads(data)
        except ValueError:
            raise ApiError(
                502, "The model's stream sent data that is not JSON.", type="api_error"
            ) from None
        if not isinstance(payload, dict):
            return name
        name = str(payload.get("type") or name)
        self._apply(name, payload)
        return name

    def _apply(self, name: str, payload: dict[str, Any]) -> None:
        if name == "message_start" and isinstance(payload.get("message"), dict):
            self.message = {**payload["message"], "content": []}
            self.message["usage"] = dict(self.message.get("usage") or {})
            return
        if name == "error":
            error = payload.get("error")
            self.error = error if isinstance(error, dict) else {"message": str(error)}
            return
        message = self.message
        if message is None:
            return
        if name == "message_stop":
            self.stopped = True
        elif name == "message_delta":
            delta = payload.get("delta") or {}
            for field in ("stop_reason", "stop_sequence"):
                if field in delta:
                    message[field] = delta[field]
            message["usage"].update(payload.get("usage") or {})
        elif name == "content_block_start" and isinstance(payload.get("content_block"), dict):
            index = int(payload.get("index", len(message["content"])))
            content: list[dict[str, Any]] = message["content"]
            while len(content) <= index:
                content.append({})
            content[index] = dict(payload["content_block"])
        elif name in ("content_block_delta", "content_block_stop"):
            index = int(payload.get("index", -1))
            if not 0 <= index < len(message["content"]):
                return
            block = message["content"][index]
            if name == "content_block_stop":
                self._stop(index, block)
            else:
                self._delta(index, block, payload.get("delta") or {})

    def _delta(self, index: int, block: dict[str, Any], delta: dict[str, Any]) -> None:
        kind = delta.get("type")
        field = _DELTA_FIELDS.get(str(kind))
        if field is not None:
            self._parts.setdefault((index, field), []).append(str(delta.get(field) or ""))
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))

    def _stop(self, index: int, block: dict[str, Any]) -> None:
        # Pieces are joined once per block: a long reply comes in thousands of deltas.
        for field in ("text", "thinking"):
            parts = self._parts.pop((index, field), None)
            if parts is not None:
                block[field] = (block.get(field) or "") + "".join(parts)
        parts = self._parts.pop((index, "partial_json"), None)
        if parts is not None:  # a tool call's input, streamed as JSON text
            text = "".join(parts)
            try:
                block["input"] = json.loads(text) if text.strip() else {}
            except ValueError:
                raise ApiError(
                    502,
                    "The model streamed tool input that is not JSON.",
                    type="api_error",
                ) from None


# The delta types whose pieces make up one field of their block.
_DELTA_FIELDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
}
