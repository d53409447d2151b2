"""OpenHands V1 (the software-agent SDK, 1.x) conversation events, read as the V0 events
``openhands`` already imports.

A V1 conversation folder is ``<conversation id>/base_state.json`` plus
``events/event-<n>-<uuid>.json``, one event each (or the events as a list), every event an
object ``{id (uuid), timestamp, source, ..., kind}``:

- ``SystemPromptEvent`` (``system_prompt.text``) → the system prompt;
- ``MessageEvent`` (``llm_message``: role, content parts) → a user or assistant turn;
- ``ActionEvent`` (``thought`` parts, ``tool_name``, ``tool_call_id``, ``tool_call.arguments``,
  ``llm_response_id``: actions of one response are one assistant message) → a tool call;
  ``finish`` → the assistant's closing text;
- ``ObservationEvent`` (``observation.content`` parts, ``action_id``), ``AgentErrorEvent``
  (``error``) and ``UserRejectObservation`` (``rejection_reason``) → the call's result;
- ``Condensation`` (``forgotten_event_ids``, ``summary``, ``summary_offset``) → a native
  compaction, as V0's condensation action;
- anything else (``ConversationStateUpdateEvent``, ``CondensationRequest``, ``PauseEvent``…)
  is bookkeeping, counted.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_web.importers.agent_common import as_text

KINDS = {
    "SystemPromptEvent",
    "MessageEvent",
    "ActionEvent",
    "ObservationEvent",
    "AgentErrorEvent",
    "UserRejectObservation",
    "Condensation",
    "CondensationRequest",
    "CondensationSummaryEvent",
    "ConversationStateUpdateEvent",
    "PauseEvent",
}
EVENT_FILE = re.compile(r"^event-(\d+)-[^/]*\.json$")


def is_event(value: Any) -> bool:
    """A V1 event: an object whose ``kind`` names an SDK event class and whose id is text."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("kind"), str)
        and (value["kind"] in KINDS or value["kind"].endswith(("Event", "Observation")))
    )


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _texts(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if isinstance(parts, dict):
        parts = [parts]
    if not isinstance(parts, list):
        return ""
    return "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _images(parts: Any) -> list[str]:
    urls: list[str] = []
    for part in parts if isinstance(parts, list) else ():
        if isinstance(part, dict) and isinstance(part.get("image_urls"), list):
            urls += [u for u in part["image_urls"] if isinstance(u, str)]
    return urls


def as_v0(events: list) -> list:
    """The events in V0 form (integer ids in order, ``action``/``observation``); what is
    not a V1 event is passed on as it is, for the V0 reader to name."""
    numbers = {e["id"]: n for n, e in enumerate(events, 1) if is_event(e)}
    return [_event(e, numbers[e["id"]], numbers) if is_event(e) else e for e in events]


def _event(event: dict, number: int, numbers: dict[str, int]) -> dict:
    kind = event["kind"]
    base = {"id": number, "timestamp": event.get("timestamp"), "source": event.get("source")}
    base["v1"] = {"id": event["id"], "kind": kind}
    if kind == "SystemPromptEvent":
        return {**base, "action": "system", "args": {"content": _texts(event.get("system_prompt"))}}
    if kind == "MessageEvent":
        message = _dict(event.get("llm_message"))
        content = message.get("content")
        said = {"content": _texts(content), "image_urls": _images(content)}
        source = "user" if message.get("role", event.get("source")) == "user" else "agent"
        return {**base, "source": source, "action": "message", "args": said}
    if kind == "ActionEvent":
        return _action(event, base)
    if kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
        return _result(event, base, kind, numbers)
    if kind == "Condensation":
        forgotten = event.get("forgotten_event_ids")
        args: dict[str, Any] = {
            "forgotten_event_ids": [
                numbers[i] for i in forgotten or () if isinstance(i, str) and i in numbers
            ],
            "summary": event.get("summary"),
        }
        if isinstance(event.get("summary_offset"), int):
            args["summary_offset"] = event["summary_offset"]
        return {**base, "action": "condensation", "args": args}
    if kind == "CondensationRequest":
        return {**base, "action": "condensation_request", "args": {}}
    return {**base, "action": "null", "args": {}}


def _action(event: dict, base: dict) -> dict:
    name = event.get("tool_name") if isinstance(event.get("tool_name"), str) else ""
    action = _dict(event.get("action"))
    thought = _texts(event.get("thought"))
    if name == "finish":
        message = action.get("message") if isinstance(action.get("message"), str) else thought
        return {**base, "action": "finish", "args": {"final_thought": message}}
    call_id = event.get("tool_call_id") if isinstance(event.get("tool_call_id"), str) else ""
    tool_call = _dict(event.get("tool_call"))
    arguments = tool_call.get("arguments")
    if not isinstance(arguments, str):
        arguments = as_text({k: v for k, v in action.items() if k != "kind"})
    response = {
        "id": event.get("llm_response_id"),
        "choices": [
            {"message": {"tool_calls": [{"id": call_id, "function": {"arguments": arguments}}]}}
        ],
    }
    meta = {"tool_call_id": call_id, "function_name": name, "model_response": response}
    args = {"thought": thought} if thought else {}
    return {**base, "action": str(action.get("kind") or name), "args": args, **_meta(meta)}


def _meta(meta: dict) -> dict:
    return {"tool_call_metadata": meta}


def _result(event: dict, base: dict, kind: str, numbers: dict[str, int]) -> dict:
    if kind == "AgentErrorEvent":
        text, label = as_text(event.get("error")), "error"
    elif kind == "UserRejectObservation":
        text, label = f"Action rejected: {as_text(event.get('rejection_reason'))}", "rejected"
    else:
        observation = _dict(event.get("observation"))
        text = _texts(observation.get("content")) if "content" in observation else ""
        if not text and "content" not in observation:
            text = as_text({k: v for k, v in observation.items() if k != "kind"})
        label = str(observation.get("kind") or "observation")
    action_id = event.get("action_id")
    cause = numbers.get(action_id) if isinstance(action_id, str) else None
    meta = {"tool_call_id": event.get("tool_call_id"), "function_name": event.get("tool_name")}
    return {**base, "observation": label, "content": text, "cause": cause, **_meta(meta)}
