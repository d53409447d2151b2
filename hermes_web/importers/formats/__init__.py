"""The formats an import reads: one module per agent (or file format), and their registry.

Each module here parses one agent's files into ``ParsedSession`` objects and knows nothing
of storing them; the pipeline around it (detection, checks, the store, parent links, the
budget, archives and directories) lives one level up in ``hermes_web.importers``.

``READERS`` is the one list of formats: the name a user passes as ``--format`` (and the
import page offers, in this order) and how its file is read. Adding an agent is a module
here, a line below, a rule in ``agent_detect`` (text) or ``sqlite_detect`` (SQLite) so
``auto`` finds it, and fixtures (docs/layout.md, "How to add an agent").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from hermes_web.importers.base import ImportProblem, ParsedSession
from hermes_web.importers.formats import (
    aider,
    claude_code,
    cline,
    codex,
    continue_dev,
    copilot_cli,
    crush,
    cursor,
    gemini_cli,
    goose,
    hermes,
    kimi_cli,
    openai,
    opencode,
    openhands,
    pi,
    qwen_code,
    swe_agent,
)

Parsed = Iterator[ParsedSession | ImportProblem]


@dataclass(frozen=True)
class Reader:
    """How one format's file is read: ``parse(stream, file)`` from the open file, or
    ``parse_path(path, file)`` from its path (a SQLite database and its ``-wal``, a storage
    folder). ``streamed``: its sessions come with ``stream`` set, reading the file while they
    are stored (so they are parsed on the storing thread); a callable decides per file."""

    parse: Callable[[IO[bytes], str], Parsed] | None = None
    parse_path: Callable[[Path, str], Parsed] | None = None
    streamed: bool | Callable[[Path], bool] = False

    def is_streamed(self, path: Path) -> bool:
        return self.streamed(path) if callable(self.streamed) else self.streamed


# Streamed: Claude Code and Codex replay a spool file written by a first pass, as Gemini CLI
# does for a chat recording; a state.db session reads its rows from one ordered scan of the file.
READERS: dict[str, Reader] = {
    # A Hermes transcript (one message a line) is streamed; the JSONL export is not.
    "hermes-jsonl": Reader(hermes.parse_jsonl, streamed=hermes.is_transcript),
    "hermes-db": Reader(parse_path=hermes.parse_db, streamed=True),
    "openai": Reader(openai.parse, streamed=True),
    "claude-code": Reader(claude_code.parse, streamed=True),
    "codex": Reader(codex.parse, streamed=True),
    # Other agents' files: one parser each, paired and checked as usual.
    "gemini-cli": Reader(gemini_cli.parse, streamed=True),
    "aider": Reader(aider.parse),
    "openhands": Reader(openhands.parse),
    "cline": Reader(cline.parse),
    "continue": Reader(continue_dev.parse),
    "pi": Reader(pi.parse),
    "copilot-cli": Reader(copilot_cli.parse),
    "swe-agent": Reader(swe_agent.parse),
    "cursor": Reader(cursor.parse),
    "qwen-code": Reader(qwen_code.parse),
    "kimi-cli": Reader(kimi_cli.parse),
    "goose": Reader(goose.parse),
    # Read from their path (a SQLite database and its -wal, a storage folder).
    "opencode": Reader(parse_path=opencode.parse_path),
    "crush": Reader(parse_path=crush.parse_path),
    "goose-db": Reader(parse_path=goose.parse_path),
}
FORMATS: tuple[str, ...] = tuple(READERS)
