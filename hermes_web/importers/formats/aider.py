"""Aider's chat log ``.aider.chat.history.md`` (checked against Aider 0.5x–0.86 files).

Aider appends every run to the same Markdown file: a run starts with
``# aider chat started at YYYY-MM-DD HH:MM:SS`` and becomes one session (one file → several
sessions, ``aider-<start time>``). Inside a run:

- ``#### text`` lines are what the user typed (consecutive lines are one message); a
  ``#### /command`` is a slash command, kept as a meta row, never a turn;
- ``> text`` lines are Aider's own output (startup banner, "Applied edit to …", commit
  notes, command output, ``Tokens: … sent, … received``): after a reply they are kept in
  that assistant message (its edits' outcome), before any reply they are a meta row; the
  banner's ``Model:`` / ``Main model:`` line names the session's model;
- every other line is the assistant's reply, SEARCH/REPLACE edit blocks included.

Aider writes its own lines with a trailing Markdown line break (two spaces), which tells a
``#### heading`` or a ``> quote`` inside a reply from a user line or Aider's output;
inside a fenced code block every line is the reply's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import IO

from hermes_web.importers.agent_common import clip_title, read_text
from hermes_web.importers.base import (
    ImportProblem,
    ParsedMessage,
    ParsedSession,
    epoch,
    safe_id,
    strip_ansi,
)
from hermes_web.models import Session

SOURCE = Session.Source.IMPORT_AIDER
HEADER = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)\s*$")
MODEL = re.compile(r"^(?:Main model|Model):\s+(\S+)")
VERSION = re.compile(r"^Aider v(\S+)")
TOKENS = re.compile(r"^Tokens: ([\d.,]+k?) sent, ([\d.,]+k?) received")


def parse(stream: IO[bytes], file: str) -> Iterator[ParsedSession | ImportProblem]:
    """One session per ``# aider chat started at`` header; runs with no turn are skipped."""
    text = read_text(stream, file)
    if not text.strip():
        raise ImportProblem(file, 0, "the file is empty")
    runs = _runs(text.splitlines())
    if not runs:
        raise ImportProblem(file, 1, "no '# aider chat started at' header: not an Aider chat log")
    seen: dict[str, int] = {}
    found = 0
    for start, line, body in runs:
        session = _session(start, line, body)
        if not any(not m.meta for m in session.messages):
            continue  # aider started and quit: a banner, no conversation
        found += 1
        stamp = re.sub(r"\D", "", start)
        seen[stamp] = seen.get(stamp, 0) + 1
        suffix = f"-{seen[stamp]}" if seen[stamp] > 1 else ""
        session.public_id = safe_id(f"aider-{stamp[:8]}-{stamp[8:]}{suffix}")
        yield session
    if not found:
        raise ImportProblem(file, 0, "the chat log holds no user or assistant turn")


def _runs(lines: list[str]) -> list[tuple[str, int, list[tuple[int, str]]]]:
    """(start time, header line, numbered lines) per run."""
    runs: list[tuple[str, int, list[tuple[int, str]]]] = []
    for number, line in enumerate(lines, 1):
        found = HEADER.match(line)
        if found:
            runs.append((found.group(1), number, []))
        elif runs:
            runs[-1][2].append((number, line))
    return runs


def _kind(line: str, in_reply: bool, fenced: bool) -> str:
    """ "user", "output" or "reply" for one line."""
    if fenced:
        return "reply"
    aiders = line.endswith("  ") or not in_reply  # Aider's own lines end in a line break
    if line.startswith("#### ") and aiders or line.rstrip() == "####":
        return "user"
    if (line.startswith("> ") and aiders) or line.rstrip() == ">":
        return "output"
    return "reply"


class _Run:
    def __init__(self, session: ParsedSession) -> None:
        self.session = session
        self.kind = ""  # of the block being read
        self.lines: list[str] = []
        self.line = 0
        self.reply: ParsedMessage | None = None  # the last assistant message

    def flush(self) -> None:
        text = "\n".join(self.lines).strip("\n")
        kind, self.lines = self.kind, []
        if not text.strip():
            return
        session, extra = self.session, {"line": self.line}
        if kind == "user":
            command = text.lstrip().startswith("/")
            message = ParsedMessage(role="user", content=text, extra=extra)
            if command:
                message.meta = "command"
                session.skip("slash command (kept as a meta row)")
            else:
                session.title = session.title or clip_title(text)
            session.messages.append(message)
            self.reply = None
        elif kind == "reply" and self.reply is not None:
            # Aider went on without a user turn (files added, a lint fixed): one reply
            self.reply.content = f"{self.reply.content}\n\n{text}"
        elif kind == "reply":
            self.reply = ParsedMessage(role="assistant", content=text, extra=extra)
            session.messages.append(self.reply)
        elif kind == "output":
            self._output(text, extra)

    def _output(self, text: str, extra: dict) -> None:
        text = strip_ansi(text)
        for line in text.splitlines():
            found = MODEL.match(line)
            if found and not self.session.model:
                self.session.model = found.group(1)
            found = VERSION.match(line)
            if found:
                self.session.extra["aider"].setdefault("version", found.group(1))
        tokens = next(
            (TOKENS.match(line) for line in text.splitlines() if TOKENS.match(line)), None
        )
        if self.reply is not None:
            # what Aider did with the reply (edits applied, commits, tokens): part of it
            self.reply.content = f"{self.reply.content}\n\n{_quoted(text)}"
            self.reply.extra.setdefault("aider_output_lines", []).append(extra["line"])
            if tokens:
                self.reply.extra["tokens"] = {"sent": tokens.group(1), "received": tokens.group(2)}
            return
        self.session.messages.append(
            ParsedMessage(role="user", content=text, meta="aider_output", extra=extra)
        )
        self.session.skip("Aider output before any reply (kept as a meta row)")


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


def _session(start: str, line: int, body: list[tuple[int, str]]) -> ParsedSession:
    session = ParsedSession(source=SOURCE, line=line, created_at=epoch(start.replace(" ", "T")))
    session.extra = {"aider": {"started_at": start}}
    run = _Run(session)
    fenced = False
    for number, raw in body:
        session.records += 1
        kind = _kind(raw, run.kind == "reply", fenced)
        if kind == "reply" and raw.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if kind != run.kind:
            run.flush()
            run.kind, run.line = kind, number
        if kind == "user":
            run.lines.append(raw[5:].rstrip() if raw.startswith("#### ") else "")
        elif kind == "output":
            run.lines.append(raw[2:].rstrip() if raw.startswith("> ") else "")
        else:
            run.lines.append(raw.rstrip() if not fenced else raw)
    run.flush()
    return session
