"""Claude Code session folders, as the tool lays them out in ``~/.claude/projects/<dir>/``:

    <session>.jsonl                                the main transcript
    <session>/subagents/agent-<id>.jsonl           a sub-agent's transcript (Task tool)
    <session>/subagents/agent-<id>.meta.json       its agentType, description, toolUseId
    <session>/subagents/workflows/<run>/agent-…    the same, for a workflow's agents
    <session>/subagents/agent-acompact-<id>.jsonl  the compaction agent's own transcript
    <session>/tool-results/<name>                  an output too large for the transcript;
                                                   its tool_result holds a stub naming it

Sub-agents become sessions linked to the main one as children (``extra["sub_agent"]``
holds their meta), never as rotations. A stub (``<persisted-output>… Full output saved to:
<path> …``) is replaced by the file it names, found by its base name among this folder's
``tool-results/`` files only (the path in the transcript is never opened). The compaction
agent's transcript is attached to the matching compaction of the main transcript as its
summarizer input and output; one matching none is imported as a sub-agent of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from hermes_web.importers import budget
from hermes_web.importers.base import (
    ImportProblem,
    NativeCompaction,
    ParsedMessage,
    ParsedSession,
    max_bytes,
    records_of,
    text_of,
)
from hermes_web.importers.formats import claude_code

LAYOUT_DIRS = ("subagents", "tool-results")
COMPACTION_AGENT = "agent-acompact-"
META_SUFFIX = ".meta.json"
# What the meta file says about a sub-agent, kept on its session (other keys are ignored).
META_KEYS = ("agentType", "description", "toolUseId", "spawnDepth", "model", "workflowPhase")
MAX_META_BYTES = 64 * 1024
# Claude Code's stub for an output written to tool-results/ (2.x): the tag, a size line
# naming the file, then a preview.
STUB = re.compile(r"<persisted-output>.*?saved to:\s*(?P<path>[^\r\n<]+)", re.DOTALL)
# How far apart a compaction agent's last record and the compaction it made may be.
MATCH_SECONDS = 600


def folder_of(path: Path, root: Path) -> Path | None:
    """The session folder ``path`` lies in (the directory holding its ``subagents/`` or
    ``tool-results/``), or None; never above ``root``."""
    parts = path.relative_to(root).parts
    for index, part in enumerate(parts[:-1]):
        if part in LAYOUT_DIRS:
            return root.joinpath(*parts[:index])
    return None


@dataclass
class SessionFolder:
    """One session as Claude Code lays it out: its transcript and the folder beside it."""

    folder: Path
    main: Path | None = None  # <session>.jsonl, when it lies beside the folder
    agents: list[Path] = field(default_factory=list)
    compaction_agents: list[Path] = field(default_factory=list)
    metas: dict[str, Path] = field(default_factory=dict)  # "agent-<id>" -> its meta file
    tool_results: dict[str, Path] = field(default_factory=dict)  # base name -> file
    joined: set[str] = field(default_factory=set)  # tool-results files a stub named

    def add(self, path: Path, skipped: list[tuple[Path, str]]) -> None:
        """File one regular file of the folder by where it lies."""
        area = path.relative_to(self.folder).parts[0]
        name = path.name
        if area == "tool-results":
            self.tool_results.setdefault(name, path)
        elif area != "subagents":
            skipped.append((path, "not a transcript of the session folder"))
        elif name.startswith("agent-") and name.endswith(META_SUFFIX):
            self.metas[name[: -len(META_SUFFIX)]] = path
        elif name.startswith(COMPACTION_AGENT) and name.endswith(".jsonl"):
            self.compaction_agents.append(path)
        elif name.startswith("agent-") and name.endswith(".jsonl"):
            self.agents.append(path)
        else:
            skipped.append((path, "not a sub-agent transcript or its meta"))

    def files(self) -> int:
        return (
            bool(self.main)
            + len(self.agents)
            + len(self.compaction_agents)
            + len(self.metas)
            + len(self.tool_results)
        )


def parse_folder(
    folder: SessionFolder, name: Callable[[Path], str]
) -> Iterator[tuple[str, ParsedSession | ImportProblem]]:
    """The main transcript (with its compaction agents attached), then each sub-agent, then
    the compaction agents no compaction claimed; ``name`` says how a file is named in
    problems. Each is yielded with its file's name, read whole into its spool."""
    compactions: list[tuple[Path, NativeCompaction]] = []
    for path in folder.compaction_agents:
        try:
            with records_of(name(path)):
                compactions.append((path, _summarizer(path, name(path))))
        except ImportProblem as problem:
            yield name(path), problem
    unclaimed = [path for path, _ in compactions]
    if folder.main is not None:
        try:
            main = _read(folder.main, name(folder.main))
        except ImportProblem as problem:
            yield name(folder.main), problem
        else:
            for path in attach_compaction_agents(main, compactions):
                unclaimed.remove(path)
            _join_tool_results(main, folder)
            yield name(folder.main), main
    for path in [*folder.agents, *unclaimed]:
        try:
            agent = _read(path, name(path))
        except ImportProblem as problem:
            yield name(path), problem
            continue
        if agent.kind == "sub-agent":
            agent.extra["sub_agent"] = _meta(folder, path, agent)
        _join_tool_results(agent, folder)
        yield name(path), agent


def unreferenced(folder: SessionFolder) -> list[str]:
    """The tool-results files no stub named (after every session of the folder was read)."""
    return sorted(set(folder.tool_results) - folder.joined)


def _read(path: Path, file: str) -> ParsedSession:
    size = path.stat().st_size
    budget.note_read(path, size)
    if size > max_bytes():
        raise ImportProblem(
            file, 0, f"file is {size // 2**20} MB; the limit is {max_bytes() // 2**20} MB"
        )
    with open(path, "rb") as stream, records_of(file):
        parsed = next(iter(claude_code.parse(stream, file)))  # the spool outlives the file
    if isinstance(parsed, ImportProblem):
        raise parsed
    return parsed


def _meta(folder: SessionFolder, path: Path, agent: ParsedSession) -> dict:
    """What the sub-agent's ``.meta.json`` says (agentType, description, …), or only its id."""
    found: dict = {}
    meta_path = folder.metas.get(path.name[: -len(".jsonl")])
    if path.name.startswith(COMPACTION_AGENT):
        found["agentType"] = "compaction"
        found["description"] = "Claude Code's compaction agent (no compaction matched it)"
    if meta_path is None:
        return found
    try:
        with open(meta_path, "rb") as stream:
            meta = json.loads(stream.read(MAX_META_BYTES + 1)[: MAX_META_BYTES + 1])
    except (OSError, ValueError, RecursionError):
        agent.skip("unreadable sub-agent meta file")
        return found
    if isinstance(meta, dict):
        for key in META_KEYS:
            value = meta.get(key)
            if isinstance(value, str):
                found[key] = value[:500]
            elif isinstance(value, int) and not isinstance(value, bool):
                found[key] = value
    agent.skip("sub-agent meta file (kept as the session's sub-agent metadata)")
    agent.records += 1
    return found


def _summarizer(path: Path, file: str) -> NativeCompaction:
    """A compaction agent's transcript as a compaction's summarizer input and output (its
    ``created_at`` is the time of its last record)."""
    parsed = _read(path, file)
    messages: list[ParsedMessage] = []
    try:
        for message in parsed.stream or ():
            if message.meta:
                continue
            messages.append(message)
    finally:
        close = getattr(parsed.stream, "close", None)
        if close is not None:
            close()
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant":
        raise ImportProblem(file, 0, "the compaction agent's transcript ends without its reply")
    return NativeCompaction(
        source="claude-code",
        created_at=last.created_at,
        summary=text_of(last.content),
        summarizer_input=[m.as_openai() for m in messages[:-1]],
        summarizer_output=text_of(last.content),
        extra={"file": path.name},
    )


def _words(text: str) -> str:
    return " ".join(text.split())


def _summary_body(text: str) -> str:
    """The ``<summary>`` part of the compaction agent's reply (Claude Code drops the
    ``<analysis>`` part before it keeps the summary), whitespace-normalised."""
    match = re.search(r"<summary>(.*?)(?:</summary>|$)", text, re.DOTALL)
    return _words(match.group(1) if match else text)


def attach_compaction_agents(
    session: ParsedSession, agents: list[tuple[Path, NativeCompaction]]
) -> list[Path]:
    """Give each compaction of ``session`` the compaction agent that wrote its summary: the
    one whose summary text the compaction's summary holds, else the one that finished within
    ``MATCH_SECONDS`` before it. Returns the agent files that were attached."""
    claimed: list[Path] = []
    free = list(agents)
    for compaction in session.native_compactions:
        if compaction.summarizer_input is not None:
            continue
        summary = _words(compaction.summary)
        chosen = next(
            (
                item
                for item in free
                if summary and _summary_body(item[1].summarizer_output)[:2000] in summary
            ),
            None,
        )
        if chosen is None and compaction.created_at is not None:
            near = [
                (abs((compaction.created_at - item[1].created_at).total_seconds()), index)
                for index, item in enumerate(free)
                if item[1].created_at is not None
            ]
            near = [pair for pair in near if pair[0] <= MATCH_SECONDS]
            chosen = free[min(near)[1]] if near else None
        if chosen is None:
            continue
        free.remove(chosen)
        compaction.summarizer_input = chosen[1].summarizer_input
        compaction.summarizer_output = chosen[1].summarizer_output
        compaction.extra = {**compaction.extra, "summarizer_file": chosen[0].name}
        session.counts["compaction_agents_attached"] += 1
        claimed.append(chosen[0])
    return claimed


def _join_tool_results(session: ParsedSession, folder: SessionFolder) -> None:
    """Replay ``session``'s messages with every stub replaced by the file it names."""
    if session.stream is not None and folder.tool_results:
        session.stream = _Joined(session.stream, session, folder)


class _Joined:
    """``stream`` with stubs joined, one message at a time; ``close`` closes ``stream`` (a
    spool file) also when the session was refused before it was read."""

    def __init__(
        self, stream: Iterator[ParsedMessage], session: ParsedSession, folder: SessionFolder
    ) -> None:
        self.stream, self.session, self.folder = stream, session, folder

    def __iter__(self) -> _Joined:
        return self

    def __next__(self) -> ParsedMessage:
        message = next(self.stream)
        if message.role == "tool":
            _join(message, self.session, self.folder)
        return message

    def close(self) -> None:
        close = getattr(self.stream, "close", None)
        if close is not None:
            close()


def _join(message: ParsedMessage, session: ParsedSession, folder: SessionFolder) -> None:
    match = STUB.search(text_of(message.content))
    if match is None:
        return
    name = re.split(r"[\\/]", match.group("path").strip())[-1]
    path = folder.tool_results.get(name)
    if path is None:
        session.counts["tool_result_files_missing"] += 1
        message.extra = {**message.extra, "tool_result_file_missing": name}
        return
    folder.joined.add(name)
    limit = settings.HERMES_MAX_MESSAGE_BYTES
    with open(path, "rb") as stream:
        raw = stream.read(limit + 1)
    # Read once however many stubs name it: a file copied into every stub that names it
    # is what the import's amplification budget catches (budget.py).
    budget.note_read(path, len(raw))
    if len(raw) > limit:
        session.counts["tool_result_files_too_large"] += 1
        message.extra = {**message.extra, "tool_result_file_too_large": name}
        return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        session.counts["tool_result_files_not_utf8"] += 1  # kept, with U+FFFD in place
        text = raw.decode("utf-8", errors="replace")
    stub = match.group(0)
    if isinstance(message.content, str):
        message.content = text
    else:  # a list of parts: the part holding the stub becomes the file's text
        message.content = [
            {"type": "text", "text": text}
            if isinstance(part, dict) and stub in str(part.get("text", ""))
            else part
            for part in message.content
        ]
    message.extra = {**message.extra, "tool_result_file": name}
    session.counts["tool_result_files_joined"] += 1
