"""SWE-agent trajectories (``trajectories/<user>/<run>/<instance>/<instance>.traj``), as
written by SWE-agent 0.7 and 1.x.

A ``.traj`` is one JSON object: ``history`` (the messages the model saw: ``role``,
``content`` as text or text parts, ``agent``, ``message_type``; on 1.x with function calling
an assistant step carries ``thought``, ``action`` and OpenAI-shaped ``tool_calls``, and the
observation is a ``tool`` message with ``tool_call_ids``), ``trajectory`` (one step per
action: ``response``, ``thought``, ``action``, ``observation``), ``info`` (``exit_status``,
``submission`` — the final patch —, ``model_stats``) and ``replay_config``. The history is
imported when there is one; a file with only the trajectory gets each step as an assistant
message (the response) and a user message (the observation), as the model saw them.
Demonstrations (``is_demo`` or ``message_type: "demonstration"``) are meta rows: worked
examples of another task, never this run's turns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import PurePath
from typing import IO, Any

from hermes_web.importers.base import (
    ROLES,
    ImportProblem,
    ParsedMessage,
    ParsedSession,
    json_line,
    safe_id,
    text_of,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_SWE_AGENT
# Where the task text sits in SWE-agent's instance templates.
_ISSUE = re.compile(
    r"<pr_description>\s*(.+?)\s*</pr_description>|ISSUE:\s*\n(.+?)(?:\n\s*\n|$)", re.S
)
INFO_KEYS = ("exit_status", "submission", "model_stats", "swe_agent_version", "swe_rex_version")


def _content(value: Any, file: str, where: str) -> Any:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        if not all(isinstance(p, dict) for p in value):
            raise ImportProblem(file, 0, f"{where}: a content part is not an object")
        # cache_control and similar provider hints are not content
        parts = [{k: v for k, v in p.items() if k != "cache_control"} for p in value]
        if all(p.get("type") == "text" and isinstance(p.get("text"), str) for p in parts):
            return "\n".join(p["text"] for p in parts)
        return parts
    raise ImportProblem(file, 0, f"{where}: content is neither text nor a list of parts")


def task_title(text: str) -> str:
    """The issue an SWE-agent run works on, from its instance prompt."""
    match = _ISSUE.search(text)
    if match:
        return (match.group(1) or match.group(2) or "").strip()
    return text


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """One trajectory is one session (a whole-file format: a problem fails the file)."""
    raw = stream.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ImportProblem(file, 0, f"not valid UTF-8 (byte {error.start})") from None
    data = json_line(text, file, 0)
    if not isinstance(data, dict):
        raise ImportProblem(file, 0, "expected a trajectory object")
    history, steps = data.get("history"), data.get("trajectory")
    if not isinstance(history, list) and not isinstance(steps, list):
        raise ImportProblem(file, 0, "no 'history' or 'trajectory' list: not an SWE-agent .traj")
    session = ParsedSession(source=SOURCE, line=1)
    if isinstance(history, list) and history:
        session.messages = [_from_history(item, n, file, session) for n, item in enumerate(history)]
        session.records = len(history)
        if isinstance(steps, list):
            session.skip("trajectory step (the history holds the same turns)", len(steps))
    else:
        session.messages = list(_from_steps(steps or [], file, session))
        session.records = len(steps or [])
    if not session.messages:
        raise ImportProblem(file, 0, "the trajectory holds no messages")
    found = data.get("info")
    info: dict = found if isinstance(found, dict) else {}
    session.public_id = safe_id(PurePath(file).stem)
    session.model = _model(data.get("replay_config"))
    first = next(
        (m for m in session.messages if m.role == "user" and not m.meta and text_of(m.content)),
        None,
    )
    title = task_title(text_of(first.content)) if first is not None else ""
    session.title = " ".join(title.split())[:80]
    session.end_reason = str(info.get("exit_status") or "")[:64]
    session.extra = {"swe_agent": {k: info[k] for k in INFO_KEYS if info.get(k) not in (None, "")}}
    yield session


def _model(config: Any) -> str:
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return ""
    if not isinstance(config, dict):
        return ""
    model = (
        (config.get("agent") or {}).get("model") if isinstance(config.get("agent"), dict) else None
    )
    if isinstance(model, dict):
        name = model.get("name") or model.get("model_name")
        return name if isinstance(name, str) else ""
    return ""


def _from_history(item: Any, index: int, file: str, session: ParsedSession) -> ParsedMessage:
    where = f"history[{index}]"
    if not isinstance(item, dict):
        raise ImportProblem(file, 0, f"{where} is not an object")
    role = item.get("role")
    if role not in ROLES:
        raise ImportProblem(file, 0, f"{where}: unknown role {role!r}")
    extra: dict = {"history_index": index}
    for key in ("agent", "message_type", "thought", "action"):
        if isinstance(item.get(key), str) and item[key]:
            extra[f"swe_{key}"] = item[key]
    message = ParsedMessage(
        role=role, content=_content(item.get("content"), file, where), extra=extra
    )
    if role == "assistant":
        calls = item.get("tool_calls")
        if isinstance(calls, list) and calls:
            message.tool_calls = [
                _call(call, file, f"{where}.tool_calls[{n}]") for n, call in enumerate(calls)
            ]
        blocks = item.get("thinking_blocks")
        if isinstance(blocks, list):
            thinking = [b.get("thinking") for b in blocks if isinstance(b, dict)]
            message.reasoning = "\n".join(t for t in thinking if isinstance(t, str)) or None
    if role == "tool":
        ids = item.get("tool_call_ids")
        call_id = ids[0] if isinstance(ids, list) and ids else item.get("tool_call_id")
        message.tool_call_id = call_id if isinstance(call_id, str) else ""
    if item.get("is_demo") or item.get("message_type") == "demonstration":
        message.meta = "demonstration"
        session.skip("demonstration message (kept as a meta row)")
    return message


def _call(call: Any, file: str, where: str) -> dict:
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        raise ImportProblem(file, 0, f"{where}: not a tool call with a function")
    function = call["function"]
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": str(call.get("id") or ""),
        "type": "function",
        "function": {"name": str(function.get("name") or ""), "arguments": arguments},
    }


def _from_steps(steps: list, file: str, session: ParsedSession) -> Iterator[ParsedMessage]:
    for index, step in enumerate(steps):
        if not isinstance(step, dict):
            raise ImportProblem(file, 0, f"trajectory[{index}] is not an object")
        response = step.get("response")
        if not isinstance(response, str) or not response:
            thought, action = step.get("thought"), step.get("action")
            response = "\n\n".join(t for t in (thought, action) if isinstance(t, str) and t)
        extra = {"trajectory_index": index}
        for key in ("thought", "action"):
            if isinstance(step.get(key), str) and step[key]:
                extra[f"swe_{key}"] = step[key]
        yield ParsedMessage(role="assistant", content=response, extra=extra)
        observation = step.get("observation")
        if isinstance(observation, str):
            yield ParsedMessage(role="user", content=observation, extra={"trajectory_index": index})
        session.skip("trajectory step (no history: read from the step)")
