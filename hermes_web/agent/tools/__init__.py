"""The agent's tools, run server-side inside one workspace folder.

Every path a model supplies is relative to the workspace. ``resolve_in_workspace`` refuses
absolute paths and anything that resolves outside it (``../``, symlinks pointing out), so a
tool can never read or write beyond the folder. Results are JSON strings shaped like Hermes's
tool outputs (``terminal`` → ``output``/``exit_code``, ``search_files`` → ``total_count``/
``matches``, ``read_file`` → numbered ``content``), which is what the engine's fold lines
parse. A tool never raises: failures come back as ``{"error": "..."}`` for the model to read.

Each user gets a workspace of their own (and each chat one, when the user asks), copied from the
template folder ``HERMES_WORKSPACE`` on first use into ``HERMES_WORKSPACES_DIR``. Writes follow
one policy: nothing under ``.git/`` or into hook/CI files, one size cap for every writing tool,
and a quota per workspace. Content search runs on RE2 (linear time), so no pattern can hang a
turn; the terminal tool (off by default) has a timeout and never holds more than its output cap.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import re2
from django.conf import settings

from hermes_web.agent.tools.files import list_files, read_file, search_files
from hermes_web.agent.tools.recall import recall
from hermes_web.agent.tools.terminal import terminal
from hermes_web.agent.tools.workspace import (
    READ_DEFAULT_LIMIT,
    TERMINAL_MAX_TIMEOUT,
    WRITE_MAX_BYTES,
    ToolError,
    _ok,
    workspace_for,
    workspace_root,
)
from hermes_web.agent.tools.writes import patch, write_file

__all__ = [
    "TOOLS",
    "WRITE_MAX_BYTES",
    "ToolError",
    "parse_tool_arguments",
    "run_tool",
    "tool_schemas",
    "workspace_for",
]

log = logging.getLogger(__name__)


TOOLS: dict[str, Callable[..., str]] = {
    "read_file": read_file,
    "search_files": search_files,
    "list_files": list_files,
    "write_file": write_file,
    "patch": patch,
    "terminal": terminal,
    "recall": recall,
}


def _schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_SCHEMAS = [
    _schema(
        "read_file",
        "Read a text file of the workspace; lines come back numbered as 'N|text'.",
        {
            "path": {"type": "string", "description": "Path relative to the workspace."},
            "offset": {
                "type": "integer",
                "description": "First line to read (1-based).",
                "default": 1,
            },
            "limit": {
                "type": "integer",
                "description": "How many lines to read.",
                "default": READ_DEFAULT_LIMIT,
            },
        },
        ["path"],
    ),
    _schema(
        "search_files",
        "Search file contents with a regular expression (target 'content'), "
        "or file names with a glob (target 'files').",
        {
            "pattern": {"type": "string"},
            "path": {
                "type": "string",
                "description": "Folder to search, relative to the workspace.",
                "default": ".",
            },
            "target": {"type": "string", "enum": ["content", "files"], "default": "content"},
            "file_glob": {
                "type": "string",
                "description": "Only search files whose name matches, e.g. '*.py'.",
            },
            "limit": {"type": "integer", "default": 50},
        },
        ["pattern"],
    ),
    _schema(
        "list_files",
        "List files and folders of the workspace with their sizes.",
        {
            "path": {"type": "string", "default": "."},
            "depth": {"type": "integer", "default": 3},
        },
        [],
    ),
    _schema(
        "write_file",
        "Create or overwrite a text file in the workspace.",
        {
            "path": {"type": "string"},
            "content": {"type": "string"},
        },
        ["path", "content"],
    ),
    _schema(
        "patch",
        "Replace an exact string in a workspace file (unique unless replace_all).",
        {
            "path": {"type": "string"},
            "old_string": {"type": "string"},
            "new_string": {"type": "string"},
            "replace_all": {"type": "boolean", "default": False},
        },
        ["path", "old_string", "new_string"],
    ),
    _schema(
        "terminal",
        "Run a shell command with the workspace as the working directory.",
        {
            "command": {"type": "string"},
            "timeout": {
                "type": "integer",
                "description": f"Seconds, at most {TERMINAL_MAX_TIMEOUT}.",
            },
        },
        ["command"],
    ),
]


_SCHEMAS.append(
    _schema(
        "recall",
        "Fetch the full, original text of a message that a context compaction folded, "
        "demoted or summarized: pass ref=N for a '[ref:N]' you see in a fold line, stub or "
        "summary. Or search the conversation's whole history with query, then fetch a hit "
        "with message=<id>.",
        {
            "ref": {"type": "integer", "description": "The N of a [ref:N] reference."},
            "query": {"type": "string", "description": "Text to search for in the history."},
            "message": {"type": "integer", "description": "A message id from a search."},
            "offset": {
                "type": "integer",
                "description": "Character offset, to page through a long text.",
                "default": 0,
            },
        },
        [],
    )
)


def tool_schemas() -> list[dict]:
    """OpenAI tool schemas for the tools enabled now (terminal only when allowed)."""
    return [
        s
        for s in _SCHEMAS
        if s["function"]["name"] != "terminal" or settings.HERMES_ENABLE_TERMINAL
    ]


def parse_tool_arguments(arguments: str | dict | None) -> dict[str, Any]:
    """A tool call's arguments as a dict, or ToolError saying what is wrong with them.

    Stricter than ``compaction.messages.parse_arguments`` (which reads bad JSON as ``{}``) on
    purpose: the model gets told its arguments were not JSON instead of a call run without them.
    """
    if isinstance(arguments, dict):
        return arguments
    if not arguments:
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise ToolError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ToolError("arguments must be a JSON object")
    return parsed


def run_tool(
    name: str,
    arguments: str | dict | None,
    *,
    workspace: Path | None = None,
    session: Any = None,
) -> str:
    """Run one tool call; always returns the result text (an ``{"error": ...}`` on failure).

    ``session`` is the conversation (the ``recall`` tool reads its history)."""
    root = (workspace or workspace_root()).resolve()
    func = TOOLS.get(name)
    if func is None or (name == "terminal" and not settings.HERMES_ENABLE_TERMINAL):
        known = ", ".join(s["function"]["name"] for s in tool_schemas())
        reason = "is disabled" if name == "terminal" else "does not exist"
        return _ok({"error": f"tool {name!r} {reason}; available tools: {known}"})
    try:
        args = parse_tool_arguments(arguments)
        if name == "recall":
            return func(root, session=session, **args)
        return func(root, **args)
    except ToolError as exc:
        return _ok({"error": str(exc)})
    except TypeError as exc:
        return _ok({"error": f"bad arguments for {name}: {exc}"})
    except (OSError, ValueError, RuntimeError, OverflowError, re2.error) as exc:
        return _ok({"error": f"{name} failed: {exc.__class__.__name__}: {exc}"})
    except Exception as exc:  # a tool bug must cost one tool result, never the whole turn
        log.exception("tool %s crashed", name)
        return _ok({"error": f"{name} failed on an internal error ({exc.__class__.__name__})"})
