"""Tiny message builders for the engine tests."""

from __future__ import annotations

import json
from typing import Any

WORDS = lambda text: len(text.split())  # noqa: E731  (a fake token counter)


def system(text: str = "You are a helpful agent.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str | None = None, *calls: dict[str, Any], **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, **extra}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def call(call_id: str | None, name: str = "terminal", **args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }
    if call_id is not None:
        out["id"] = call_id
    return out


def result(call_id: str | None, content: str = "ok") -> dict[str, Any]:
    out: dict[str, Any] = {"role": "tool", "content": content}
    if call_id is not None:
        out["tool_call_id"] = call_id
    return out


def image_part(data: str = "iVBORw0KGgo=") -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}


def long_conversation(turns: int = 12, filler: int = 60) -> list[dict[str, Any]]:
    """system + turns × (user, assistant call, tool result, assistant reply)."""
    messages = [system()]
    for i in range(turns):
        messages.append(user(f"question {i} " + "word " * filler))
        messages.append(assistant(None, call(f"c{i}", "terminal", command=f"run {i}")))
        messages.append(result(f"c{i}", json.dumps({"output": "line\n" * filler, "exit_code": 0})))
        messages.append(assistant(f"answer {i} " + "word " * filler))
    return messages
