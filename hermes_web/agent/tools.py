"""The agent's tools, run server-side inside one workspace folder.

Every path a model supplies is relative to the workspace. ``resolve_in_workspace`` refuses
absolute paths and anything that resolves outside it (``../``, symlinks pointing out), so a
tool can never read or write beyond the folder. Results are JSON strings shaped like Hermes's
tool outputs (``terminal`` → ``output``/``exit_code``, ``search_files`` → ``total_count``/
``matches``, ``read_file`` → numbered ``content``), which is what the engine's fold lines
parse. A tool never raises: failures come back as ``{"error": "..."}`` for the model to read.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings

READ_DEFAULT_LIMIT = 2_000  # lines
READ_MAX_CHARS = 120_000
SEARCH_MAX_MATCHES = 100
SEARCH_MAX_FILE_BYTES = 2 * 1024 * 1024
LIST_MAX_ENTRIES = 500
WRITE_MAX_BYTES = 1024 * 1024
TERMINAL_DEFAULT_TIMEOUT = 30
TERMINAL_MAX_TIMEOUT = 120
TERMINAL_OUTPUT_CAP = 50_000
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", ".mypy_cache", ".pytest_cache"}


class ToolError(Exception):
    """A tool refused or failed; the message is shown to the model as the tool result."""


def workspace_root() -> Path:
    return Path(settings.HERMES_WORKSPACE).resolve()


def resolve_in_workspace(path: str, workspace: Path) -> Path:
    """The real path of ``path`` inside ``workspace``, or ToolError if it would leave it."""
    if not isinstance(path, str) or path.strip() == "":
        path = "."
    if "\x00" in path:
        raise ToolError("path contains a NUL byte")
    if os.path.isabs(path) or path.startswith("~"):
        raise ToolError(f"path {path!r} is absolute; use a path relative to the workspace")
    root = workspace.resolve()
    # resolve() follows every symlink, so a link that points outside lands outside here.
    target = (root / path).resolve()
    if target != root and not target.is_relative_to(root):
        raise ToolError(f"path {path!r} is outside the workspace")
    return target


def _relative(target: Path, root: Path) -> str:
    rel = target.relative_to(root).as_posix()
    return rel or "."


def _iter_files(start: Path, root: Path) -> Iterator[Path]:
    """Files under start, sorted, skipping junk dirs and anything whose real path leaves root."""
    if start.is_file():
        yield start
        return
    for dirpath, dirnames, filenames in os.walk(
        start
    ):  # followlinks=False: linked dirs not entered
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            candidate = Path(dirpath) / name
            real = candidate.resolve()
            if real.is_relative_to(root) and real.is_file():
                yield candidate


def _ok(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)


# -- tools ------------------------------------------------------------------------------------


def read_file(root: Path, path: str = "", offset: int = 1, limit: int = READ_DEFAULT_LIMIT) -> str:
    target = resolve_in_workspace(path, root)
    if not target.exists():
        raise ToolError(f"file not found: {path}")
    if target.is_dir():
        raise ToolError(f"{path} is a directory; use list_files")
    raw = target.read_bytes()
    if b"\x00" in raw[:8192]:
        raise ToolError(f"{path} looks like a binary file ({len(raw):,} bytes)")
    lines = raw.decode("utf-8", errors="replace").splitlines()
    offset = max(1, int(offset or 1))
    limit = max(1, int(limit or READ_DEFAULT_LIMIT))
    chosen = lines[offset - 1 : offset - 1 + limit]
    numbered = []
    size = 0
    truncated = offset - 1 + limit < len(lines)
    for number, line in enumerate(chosen, start=offset):
        entry = f"{number:6d}|{line}"
        size += len(entry) + 1
        if size > READ_MAX_CHARS:
            truncated = True
            break
        numbered.append(entry)
    return _ok(
        {
            "path": _relative(target, root),
            "content": "\n".join(numbered),
            "total_lines": len(lines),
            "file_size": len(raw),
            "truncated": truncated,
        }
    )


def search_files(
    root: Path,
    pattern: str = "",
    path: str = ".",
    target: str = "content",
    file_glob: str = "",
    limit: int = 50,
) -> str:
    if not pattern:
        raise ToolError("pattern is required")
    start = resolve_in_workspace(path, root)
    if not start.exists():
        raise ToolError(f"path not found: {path}")
    limit = max(1, min(int(limit or 50), SEARCH_MAX_MATCHES))
    if target == "files":
        names = [
            _relative(f, root)
            for f in _iter_files(start, root)
            if fnmatch.fnmatch(f.name, pattern) or fnmatch.fnmatch(_relative(f, root), pattern)
        ]
        return _ok(
            {"total_count": len(names), "files": names[:limit], "truncated": len(names) > limit}
        )
    if target != "content":
        raise ToolError("target must be 'content' or 'files'")
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error:
        regex = re.compile(re.escape(pattern), re.IGNORECASE)
    matches: list[dict[str, Any]] = []
    total = 0
    for file in _iter_files(start, root):
        if file_glob and not fnmatch.fnmatch(file.name, file_glob):
            continue
        if file.stat().st_size > SEARCH_MAX_FILE_BYTES:
            continue
        raw = file.read_bytes()
        if b"\x00" in raw[:8192]:
            continue
        for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
            if regex.search(line[:2_000]):
                total += 1
                if len(matches) < limit:
                    matches.append(
                        {"path": _relative(file, root), "line": number, "content": line[:300]}
                    )
    return _ok({"total_count": total, "matches": matches, "truncated": total > len(matches)})


def list_files(root: Path, path: str = ".", depth: int = 3) -> str:
    start = resolve_in_workspace(path, root)
    if not start.exists():
        raise ToolError(f"path not found: {path}")
    if not start.is_dir():
        raise ToolError(f"{path} is a file; use read_file")
    depth = max(1, min(int(depth or 3), 6))
    entries: list[dict[str, Any]] = []
    truncated = False
    base_depth = len(start.parts)
    for dirpath, dirnames, filenames in os.walk(start):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        level = len(here.parts) - base_depth
        if level >= depth:
            dirnames[:] = []
        for name in dirnames:
            entries.append({"path": _relative(here / name, root) + "/", "type": "dir"})
        for name in sorted(filenames):
            file = here / name
            if not file.resolve().is_relative_to(root):
                entries.append({"path": _relative(file, root), "type": "link outside workspace"})
                continue
            entries.append(
                {"path": _relative(file, root), "type": "file", "size": file.stat().st_size}
            )
        if len(entries) > LIST_MAX_ENTRIES:
            truncated = True
            break
    entries.sort(key=lambda e: e["path"])
    return _ok(
        {
            "path": _relative(start, root),
            "entries": entries[:LIST_MAX_ENTRIES],
            "total_count": len(entries),
            "truncated": truncated,
        }
    )


def write_file(root: Path, path: str = "", content: str = "") -> str:
    if not path:
        raise ToolError("path is required")
    if not isinstance(content, str):
        raise ToolError("content must be a string")
    data = content.encode()
    if len(data) > WRITE_MAX_BYTES:
        raise ToolError(f"content is {len(data):,} bytes; the limit is {WRITE_MAX_BYTES:,}")
    target = resolve_in_workspace(path, root)
    if target.is_dir():
        raise ToolError(f"{path} is a directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return _ok(
        {
            "path": _relative(target, root),
            "bytes_written": len(data),
            "lines": content.count("\n") + (1 if content and not content.endswith("\n") else 0),
        }
    )


def patch(
    root: Path,
    path: str = "",
    old_string: str = "",
    new_string: str = "",
    replace_all: bool = False,
    mode: str = "replace",
) -> str:
    if mode != "replace":
        raise ToolError("only mode 'replace' is supported")
    if not old_string:
        raise ToolError("old_string is required")
    target = resolve_in_workspace(path, root)
    if not target.is_file():
        raise ToolError(f"file not found: {path}")
    before = target.read_text(errors="replace")
    count = before.count(old_string)
    if count == 0:
        raise ToolError(f"old_string not found in {path}")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {path}; make it unique or set replace_all"
        )
    after = (
        before.replace(old_string, new_string)
        if replace_all
        else before.replace(old_string, new_string, 1)
    )
    target.write_text(after)
    rel = _relative(target, root)
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"a/{rel}",
            f"b/{rel}",
        )
    )
    return _ok(
        {"success": True, "path": rel, "replacements": count if replace_all else 1, "diff": diff}
    )


def _cap_output(text: str) -> str:
    if len(text) <= TERMINAL_OUTPUT_CAP:
        return text
    head = TERMINAL_OUTPUT_CAP * 2 // 3
    tail = TERMINAL_OUTPUT_CAP - head
    return f"{text[:head]}\n... [{len(text) - head - tail:,} chars of output omitted] ...\n{text[-tail:]}"


def terminal(root: Path, command: str = "", timeout: int | None = None) -> str:
    if not settings.HERMES_ENABLE_TERMINAL:
        raise ToolError("the terminal tool is disabled (set HERMES_ENABLE_TERMINAL=1 to allow it)")
    if not command.strip():
        raise ToolError("command is required")
    seconds = max(1, min(int(timeout or TERMINAL_DEFAULT_TIMEOUT), TERMINAL_MAX_TIMEOUT))
    # Its own process group, so a timeout kills the command's children too, not just the shell.
    proc = subprocess.Popen(
        command,
        shell=True,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=seconds)
        error = None
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        error = f"command timed out after {seconds} s and was killed"
        code = 124
    payload: dict[str, Any] = {
        "output": _cap_output(out.decode("utf-8", errors="replace")),
        "exit_code": code,
    }
    if error:
        payload["error"] = error
    return _ok(payload)


def recall(
    root: Path,
    ref: int | str | None = None,
    query: str = "",
    message: int | None = None,
    offset: int = 0,
    *,
    session: Any = None,
) -> str:
    """The full text of a message a compaction folded, demoted or summarized.

    ``ref`` is the number of a ``[ref:N]`` written into a fold, stub or summary; ``query``
    searches the whole history of the conversation (archived rows included) and gives
    message ids; ``message`` fetches one of those. ``offset`` pages through a long text.
    """
    from hermes_web.services import recall as service

    if session is None:
        raise ToolError("recall needs a conversation")
    try:
        if ref is not None and str(ref).strip() != "":
            number = int(str(ref).strip().removeprefix("[ref:").removesuffix("]"))
            return _ok(service.recall_ref(session, number, int(offset or 0)))
        if message is not None:
            return _ok(service.recall_message(session, int(message), int(offset or 0)))
        if query:
            return _ok(service.search_history(session, str(query)))
    except LookupError as exc:
        raise ToolError(str(exc)) from None
    raise ToolError("give ref (the N of [ref:N]), or query to search, or message from a search")


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


def parse_arguments(arguments: str | dict | None) -> dict[str, Any]:
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
        args = parse_arguments(arguments)
        if name == "recall":
            return func(root, session=session, **args)
        return func(root, **args)
    except ToolError as exc:
        return _ok({"error": str(exc)})
    except TypeError as exc:
        return _ok({"error": f"bad arguments for {name}: {exc}"})
    except (OSError, ValueError) as exc:
        return _ok({"error": f"{name} failed: {exc.__class__.__name__}: {exc}"})
