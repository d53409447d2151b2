"""OpenHands (V0 event stream, 0.2x–0.5x) trajectories and session folders; V1 (SDK 1.x)
conversation folders are read through ``openhands_v1``.

A trajectory is the list of serialized events (``[...]``, ``{"trajectory": [...]}`` as the
UI exports it, or ``{"history": [...]}`` as evaluation output holds it); a session folder
``sessions/<id>/events/<n>.json`` holds one event per file and is read whole when its first
event file is imported (the others then add nothing). Each event has ``id``, ``source``
(user / agent / environment) and either ``action`` + ``args`` or ``observation`` +
``content`` + ``extras``, with ``cause`` (the action an observation answers) and
``tool_call_metadata`` (``tool_call_id``, ``function_name``, ``model_response``):

- ``system`` → the system prompt; ``message`` → a user or assistant turn (``image_urls``
  as image parts); ``finish`` → the assistant's closing text;
- any other agent action → an assistant tool call (its ``thought`` is the text), actions of
  one model response (same ``model_response.id``) one message; its observation, found by
  ``tool_call_id`` or ``cause``, is the tool result;
- ``recall`` actions and observations (workspace context, microagent knowledge) are meta
  rows; ``agent_state_changed``, ``null`` and ``change_agent_state`` are bookkeeping;
- ``condensation`` (``forgotten_event_ids`` or ``forgotten_events_start_id..end_id``, and
  ``summary``) → a ``NativeCompaction`` (source ``openhands``): the forgotten rows are
  archived, the summary is a summary row placed where the condenser put it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from hermes_web.importers import budget
from hermes_web.importers.agent_common import (
    as_text,
    call,
    clip_title,
    compact,
    expect,
    load_json,
    summary_row,
)
from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    epoch,
    image_part,
    safe_id,
)
from hermes_web.importers.formats import openhands_v1
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_OPENHANDS
NATIVE = "openhands"
BOOKKEEPING = {"agent_state_changed", "null", "change_agent_state", "condensation_request"}


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    document = load_json(stream, file)
    # where the file really is (the name shown may be an upload's): a session folder?
    where = Path(stream.name) if isinstance(getattr(stream, "name", None), str) else Path(file)
    events: Any = document
    meta: dict = {}
    if isinstance(document, dict) and isinstance(document.get("trajectory"), list):
        events = document["trajectory"]
    elif isinstance(document, dict) and isinstance(document.get("events"), list):
        events = document["events"]  # the conversation events API's page
    elif isinstance(document, dict) and isinstance(document.get("history"), list):
        events = document["history"]
        meta = {k: document[k] for k in ("instance_id", "instruction") if document.get(k)}
    elif isinstance(document, dict) and (where.parent / "events").is_dir():
        return  # a session folder's metadata.json / base_state.json: read from events/
    elif isinstance(document, dict) and (
        "action" in document or "observation" in document or openhands_v1.is_event(document)
    ):
        folder = _folder_events(where, file)
        if folder is None:
            return  # a later event of a folder: the folder was read from its first event
        events = folder
    if not isinstance(events, list):
        raise ImportProblem(
            file, 0, "not an OpenHands trajectory: expected a list of events or a 'trajectory'"
        )
    if folder_id := (where.parent.parent.name if where.parent.name == "events" else ""):
        meta = {**meta, "session_folder": folder_id}
    if any(openhands_v1.is_event(e) for e in events[:1]):
        events = openhands_v1.as_v0(events)
        meta = {**meta, "sdk": "v1"}
    yield _session(events, file, meta)


def _folder_events(path: Path, file: str) -> list | None:
    """A session folder's events, when ``path`` is the first of them; None for the others."""
    folder = path.parent
    if folder.name != "events" or not folder.is_dir():
        raise ImportProblem(
            file,
            0,
            "a single OpenHands event: import the session's events/ folder or its trajectory",
        )
    numbered = sorted(
        (_number(p.name), p) for p in folder.glob("*.json") if _number(p.name) >= 0 and p.is_file()
    )
    if not numbered or numbered[0][1].name != path.name:
        return None
    events = []
    for _, item in numbered:
        budget.note_read(item)  # what the import read, for its amplification limit
        with open(item, "rb") as stream:
            events.append(load_json(stream, str(item)))
    return events


def _number(name: str) -> int:
    """The place of an event file in its folder: ``<n>.json`` (V0), ``event-<n>-<id>.json``
    (V1); -1 for any other file."""
    stem = name.removesuffix(".json")
    if stem.isdigit():
        return int(stem)
    found = openhands_v1.EVENT_FILE.match(name)
    return int(found.group(1)) if found else -1


class _Builder:
    def __init__(self, session: ParsedSession, file: str) -> None:
        self.session, self.file = session, file
        self.rows: list[ParsedMessage] = []
        self.by_event: dict[int, list[ParsedMessage]] = {}  # event id -> its rows
        self.turn: ParsedMessage | None = None
        self.turn_response = ""
        self.call_of_action: dict[int, str] = {}  # action event id -> call id
        self.answered: set[str] = set()
        # Some providers number calls per response ("toolu_1", "toolu_2", … again in the
        # next one): a call id seen before is made unique, and the model's own id is the
        # latest call that carried it.
        self.latest_call: dict[str, str] = {}

    def add(self, event_id: int | None, message: ParsedMessage) -> None:
        if event_id is not None:
            message.extra.setdefault("event_id", event_id)
            self.by_event.setdefault(event_id, []).append(message)
        self.rows.append(message)

    def action_call(self, event: dict, event_id: int, when) -> None:
        kind, args = event.get("action"), event.get("args") or {}
        expect(args, dict, self.file, f"event {event_id}: args")
        meta = event.get("tool_call_metadata")
        meta = meta if isinstance(meta, dict) else {}
        call_id = meta.get("tool_call_id") if isinstance(meta.get("tool_call_id"), str) else ""
        call_id = call_id or f"openhands-{event_id}"
        name = meta.get("function_name") if isinstance(meta.get("function_name"), str) else ""
        arguments = _arguments(meta, call_id) or {
            k: v for k, v in args.items() if k not in ("thought", "hidden", "confirmation_state")
        }
        model_id = call_id
        if call_id in self.latest_call or call_id in self.answered:
            call_id = f"{model_id}~{event_id}"
        self.latest_call[model_id] = call_id
        response = meta.get("model_response")
        response_id = response.get("id") if isinstance(response, dict) else None
        self.call_of_action[event_id] = call_id
        thought = args.get("thought") if isinstance(args.get("thought"), str) else ""
        entry = call(call_id, name or str(kind), arguments)
        if self.turn is not None and response_id and response_id == self.turn_response:
            self.turn.tool_calls = (self.turn.tool_calls or []) + [entry]
            if thought and thought not in (self.turn.content or ""):
                self.turn.content = "\n".join(t for t in (self.turn.content, thought) if t)
            self.by_event.setdefault(event_id, []).append(self.turn)
            return
        self.turn = ParsedMessage(
            role="assistant",
            content=thought or None,
            tool_calls=[entry],
            extra={"action": kind},
            created_at=when,
        )
        self.turn_response = response_id if isinstance(response_id, str) else ""
        self.add(event_id, self.turn)
        if isinstance(response, dict):
            usage = response.get("usage")
            if isinstance(usage, dict):
                self.turn.extra["usage"] = usage
            model = response.get("model")
            if isinstance(model, str) and not self.session.model:
                self.session.model = model


def _arguments(meta: dict, call_id: str) -> Any:
    """The call's arguments as the model wrote them, from the kept model response."""
    response = meta.get("model_response")
    choices = response.get("choices") if isinstance(response, dict) else None
    for choice in choices if isinstance(choices, list) else ():
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for item in calls if isinstance(calls, list) else ():
            if isinstance(item, dict) and item.get("id") == call_id:
                function = item.get("function")
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    return function["arguments"]
    return None


def _content(text: str, images: Any) -> Any:
    urls = [u for u in images or () if isinstance(u, str) and u]
    if not urls:
        return text
    return [{"type": "text", "text": text}, *(image_part(u) for u in urls)]


def _session(events: list, file: str, meta: dict) -> ParsedSession:
    session = ParsedSession(source=SOURCE, line=1)
    build = _Builder(session, file)
    condensations: list[tuple[int, dict, Any]] = []
    first_id = None
    for number, event in enumerate(events, 1):
        event = expect(event, dict, file, f"event {number}")
        session.records += 1
        event_id = event.get("id")
        if not isinstance(event_id, int):
            raise ImportProblem(file, 0, f"event {number} has no integer 'id'")
        first_id = event_id if first_id is None else first_id
        when = epoch(event.get("timestamp"))
        session.created_at = session.created_at or when
        source = event.get("source")
        if "action" in event:
            kind = event["action"]
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            if kind == "condensation":
                condensations.append((event_id, args, when))
                continue
            if kind in BOOKKEEPING:
                session.skip(f"{kind} event")
                continue
            if kind == "system":
                content = args.get("content") if isinstance(args.get("content"), str) else ""
                build.add(event_id, ParsedMessage(role="system", content=content, created_at=when))
                for key in ("openhands_version", "agent_class"):
                    if args.get(key):
                        session.extra.setdefault("openhands", {})[key] = args[key]
                continue
            if kind == "recall":
                session.skip("recall action (context lookup)")
                continue
            if kind == "message":
                text = args.get("content", event.get("message", ""))
                if not isinstance(text, str):
                    raise ImportProblem(file, 0, f"event {event_id}: message content is not text")
                role = "user" if source == "user" else "assistant"
                build.turn = None
                build.add(
                    event_id,
                    ParsedMessage(
                        role=role, content=_content(text, args.get("image_urls")), created_at=when
                    ),
                )
                if role == "user" and not session.title:
                    session.title = clip_title(text)
                continue
            if kind == "finish":
                text = args.get("final_thought") or args.get("message") or event.get("message")
                build.turn = None
                build.add(
                    event_id,
                    ParsedMessage(
                        role="assistant",
                        content=text if isinstance(text, str) else as_text(text),
                        extra={"action": "finish"},
                        created_at=when,
                    ),
                )
                continue
            if source == "user":  # a command the user ran in the terminal tab
                session.skip(f"user {kind} action")
                build.add(
                    event_id,
                    ParsedMessage(
                        role="user", content=as_text(args), meta=f"user_{kind}", created_at=when
                    ),
                )
                continue
            build.action_call(event, event_id, when)
            continue
        if "observation" in event:
            _observation(build, event, event_id, when)
            continue
        raise ImportProblem(file, 0, f"event {event_id} is neither an action nor an observation")
    for event_id, args, when in condensations:
        _condensation(build, event_id, args, when)
    # A conversation opened and never used (only the system prompt and state changes, as a
    # real session folder can be) is an empty session: left out, never an error.
    has_turns = any(not m.meta and m.role != "system" for m in build.rows)
    session.messages = build.rows if has_turns else []
    if meta.get("instance_id"):
        session.public_id = safe_id(str(meta["instance_id"]))
    elif meta.get("session_folder"):  # sessions/<id>/events/0.json
        session.public_id = safe_id(str(meta["session_folder"]))
    else:
        session.public_id = safe_id(Path(file).stem)
    if meta:
        session.extra.setdefault("openhands", {}).update(meta)
    return session


def _observation(build: _Builder, event: dict, event_id: int, when) -> None:
    session, kind = build.session, event["observation"]
    if kind in BOOKKEEPING:
        session.skip(f"{kind} observation")
        return
    content = event.get("content")
    text = content if isinstance(content, str) else as_text(content)
    meta = event.get("tool_call_metadata")
    call_id = meta.get("tool_call_id") if isinstance(meta, dict) else None
    cause = event.get("cause")
    if isinstance(cause, int) and cause in build.call_of_action:  # the action it answers
        call_id = build.call_of_action[cause]
    elif isinstance(call_id, str) and call_id:
        call_id = build.latest_call.get(call_id, call_id)
    if kind == "recall" or not call_id or call_id in build.answered:
        label = "recall" if kind == "recall" else "observation"
        build.add(event_id, ParsedMessage(role="user", content=text, meta=label, created_at=when))
        session.skip(f"{kind} observation answering no call (kept as a meta row)")
        return
    build.answered.add(call_id)
    extra: dict = {"observation": kind}
    extras = event.get("extras")
    if isinstance(extras, dict) and isinstance(extras.get("metadata"), dict):
        code = extras["metadata"].get("exit_code")
        if isinstance(code, int):
            extra["exit_code"] = code
    name = meta.get("function_name") if isinstance(meta, dict) else ""
    build.add(
        event_id,
        ParsedMessage(
            role="tool",
            content=text,
            tool_call_id=call_id,
            tool_name=name if isinstance(name, str) else "",
            extra=extra,
            created_at=when,
        ),
    )


def _condensation(build: _Builder, event_id: int, args: dict, when) -> None:
    """The condenser forgot some events and (maybe) summarized them."""
    forgotten = args.get("forgotten_event_ids")
    start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
    if isinstance(forgotten, list):
        ids = [i for i in forgotten if isinstance(i, int)]
    elif isinstance(start, int) and isinstance(end, int):
        ids = list(range(start, end + 1))
    else:
        ids = []
    summary = args["summary"] if isinstance(args.get("summary"), str) else ""
    replaced: list[ParsedMessage] = []
    for forgotten_id in ids:
        for row in build.by_event.get(forgotten_id, ()):
            if row not in replaced:
                replaced.append(row)
    # a call and its result leave together: forgetting one half forgets the pair
    calls = {c["id"] for r in replaced for c in r.tool_calls or ()}
    results = {r.tool_call_id for r in replaced if r.role == "tool"}
    for row in build.rows:
        if row not in replaced and (
            (row.role == "tool" and row.tool_call_id in calls)
            or any(c["id"] in results for c in row.tool_calls or ())
        ):
            replaced.append(row)
    compaction = NativeCompaction(
        source=NATIVE,
        created_at=when,
        summary=summary,
        marker="" if summary else f"condensation forgot {len(ids)} event(s)",
        extra={
            "event_id": event_id,
            "forgotten_event_ids": ids,
            **({"summary_offset": args["summary_offset"]} if "summary_offset" in args else {}),
        },
    )
    index = compact(build.session, build.rows, compaction, replaced)
    build.session.skip("condensation event (kept as a native compaction)")
    if not summary:
        return
    row = summary_row(summary, index, {"event_id": event_id}, when)
    build.by_event.setdefault(event_id, []).append(row)  # a later condensation may forget it
    # the condenser puts the summary at summary_offset among the kept events; without one,
    # where the first forgotten event was
    kept = [r for r in build.rows if r.active and not r.meta]
    offset = args.get("summary_offset")
    if isinstance(offset, int) and 0 <= offset <= len(kept):
        anchor = kept[offset] if offset < len(kept) else None
    else:
        anchor = next((r for r in build.rows if r in replaced), None)
    position = build.rows.index(anchor) if anchor is not None else len(build.rows)
    build.rows.insert(position, row)
