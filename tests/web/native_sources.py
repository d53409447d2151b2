"""One transcript per agent whose importer keeps the agent's own compaction (issue #37): the
fixtures of the importer tests, written or located here, and every string their source
files hold, so a test can check a stored summary against the bytes the agent wrote."""

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.web.agent_import_helpers import AGENTS
from tests.web.native_fixtures import claude_code_lines, codex_lines, write_lines


def _crush(tmp: Path) -> Path:
    from tests.web.test_import_crush import build

    path = tmp / "crush.db"
    build(path)
    return path


def _opencode(tmp: Path) -> Path:
    from tests.web.test_import_opencode import build

    path = tmp / "opencode.db"
    build(path)
    return path


def _goose(tmp: Path) -> Path:
    from tests.web.test_import_goose import conversation, write_jsonl

    return write_jsonl(tmp / "20250807_1.jsonl", conversation(compacted=True))


def _kimi(tmp: Path) -> Path:
    from tests.web.test_import_kimi import _rows, _write

    return _write(tmp, _rows())


def _qwen(tmp: Path) -> Path:
    from tests.web.test_import_qwen import SESSION_ID, _rows

    path = tmp / f"{SESSION_ID}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    return path


def _fixed(*parts: str) -> Callable[[Path], Path]:
    return lambda _tmp: AGENTS.joinpath(*parts)


# agent -> a function of a scratch folder giving the transcript to import.
NATIVE_SOURCES: dict[str, Callable[[Path], Path]] = {
    "claude-code": lambda tmp: write_lines(tmp / "cc.jsonl", claude_code_lines(compacts=2)),
    "codex": lambda tmp: write_lines(tmp / "codex.jsonl", codex_lines()),
    "pi": lambda _tmp: next((AGENTS / "pi").glob("*.jsonl")),
    "copilot-cli": _fixed("copilot_cli", "3c9d2f14-8e6a-4b7c-a1d5-0f2e4c6b8a90", "events.jsonl"),
    "roo-code": _fixed(
        "cline",
        "roo",
        "tasks",
        "0f6b2c1e-8d4a-4c7e-9b1a-3e5d7f9a1c2b",
        "api_conversation_history.json",
    ),  # fmt: skip
    "continue": _fixed("continue", "2f9c4e1a-7b3d-4c8e-a5f6-0d1e2b3c4a5f.json"),
    "openhands": _fixed("openhands", "trajectory-queue-fix.json"),
    "gemini-cli": _fixed("gemini_cli", "session-2026-03-05T08-00-9a2d4c61.jsonl"),
    "crush": _crush,
    "opencode": _opencode,
    "goose": _goose,
    "kimi-cli": _kimi,
    "qwen-code": _qwen,
}


def _strings(value) -> Iterator[str]:
    """Every string of a decoded JSON value, and of JSON documents held in its strings."""
    if isinstance(value, str):
        yield value
        if value[:1] in "[{":
            try:
                inner = json.loads(value)
            except ValueError:
                return
            yield from _strings(inner)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def source_strings(path: Path) -> set[str]:
    """The strings the agent wrote in ``path``: a JSON document, JSON lines, or every text
    cell of an SQLite database (and the JSON inside them)."""
    raw = path.read_bytes()
    if raw.startswith(b"SQLite format 3\x00"):
        db = sqlite3.connect(path)
        try:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            cells = [
                cell
                for table in tables
                for row in db.execute(f'SELECT * FROM "{table}"')  # noqa: S608  (own fixture)
                for cell in row
                if isinstance(cell, str)
            ]
        finally:
            db.close()
        return {s for cell in cells for s in _strings(cell)}
    text = raw.decode("utf-8")
    try:
        return set(_strings(json.loads(text)))
    except ValueError:
        values = (json.loads(line) for line in text.splitlines() if line.strip())
        return {s for value in values for s in _strings(value)}
