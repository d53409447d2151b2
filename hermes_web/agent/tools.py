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

import contextlib
import difflib
import fnmatch
import json
import logging
import math
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import re2
from django.conf import settings

log = logging.getLogger(__name__)

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
READ_MAX_LINE_CHARS = 20_000  # one line longer than this is cut in the result
WALK_MAX_FILES = 20_000  # a search or a quota count stops after this many files
SEARCH_MAX_BYTES_TOTAL = 64 * 1024 * 1024  # bytes of file content one search reads at most
# Hook and CI files run code on someone else's machine at their next commit or push; the agent
# must not be able to plant them (a prompt injection would become code execution).
PROTECTED_DIRS = {".git", ".github", ".gitlab", ".circleci", ".husky", ".githooks", ".buildkite"}
PROTECTED_FILES = {
    ".gitlab-ci.yml",
    ".travis.yml",
    "jenkinsfile",
    "azure-pipelines.yml",
    "bitbucket-pipelines.yml",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    ".gitmodules",
    ".drone.yml",
    "appveyor.yml",
}


class ToolError(Exception):
    """A tool refused or failed; the message is shown to the model as the tool result."""


def workspace_root() -> Path:
    """The template folder every workspace is copied from (``HERMES_WORKSPACE``)."""
    return Path(settings.HERMES_WORKSPACE).resolve()


def workspace_for(session) -> Path:
    """The workspace of this chat: its owner's, or the chat's own when it asked for one.

    Created on first use as a copy of the template. A rotated chat keeps the workspace of its
    lineage root, so a compaction never moves the agent to another folder.
    """
    base = Path(settings.HERMES_WORKSPACES_DIR)
    name = f"user-{int(session.owner_id)}"
    if (session.extra or {}).get("workspace") == "chat":
        name += f"-chat-{int(session.root_id or session.pk)}"
    return ensure_workspace(base / name)


def ensure_workspace(target: Path) -> Path:
    """``target`` as a copy of the template, created atomically (two workers may race)."""
    if target.is_dir():
        return target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    template = workspace_root()
    if template.is_dir():
        # symlinks=True: a link is copied as a link (never followed out of the template).
        shutil.copytree(template, staging, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    else:
        staging.mkdir()
    try:
        staging.rename(target)
    except OSError:  # another process created it first: theirs wins
        shutil.rmtree(staging, ignore_errors=True)
    return target.resolve()


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
    try:
        target = (root / path).resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop (RuntimeError on 3.11)
        raise ToolError(f"path {path!r} cannot be resolved: {exc}") from None
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
    seen = 0
    for dirpath, dirnames, filenames in os.walk(
        start
    ):  # followlinks=False: linked dirs not entered
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            candidate = Path(dirpath) / name
            real = _real(candidate)
            if real is not None and real.is_relative_to(root) and real.is_file():
                seen += 1
                if seen > WALK_MAX_FILES:
                    return
                yield candidate


def _real(path: Path) -> Path | None:
    """The real path, or None for a link that loops or cannot be followed (skipped, not fatal)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        return None


def _whole(name: str, value: Any, default: int, low: int, high: int) -> int:
    """A whole-number argument, clamped to [low, high]; anything else is a clear ToolError.

    Models send ``1e999``, ``"12"``, ``3.0``, ``true`` or ``null``: the first is infinite, the
    others are forgiven when they mean a whole number.
    """
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ToolError(f"{name} must be a whole number, got {json.dumps(value)}")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:  # "1e3", "2.0", or digits past int()'s 4,300 limit (→ inf below)
            try:
                value = float(text)
            except ValueError:
                raise ToolError(f"{name} must be a whole number, got {text[:40]!r}") from None
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ToolError(
                f"{name} must be a whole number between {low} and {high}, got {value!r}"
            )
        value = int(value)
    if not isinstance(value, int):
        raise ToolError(f"{name} must be a whole number, got {type(value).__name__}")
    return max(low, min(value, high))


def _text_arg(name: str, value: Any, *, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string, got {type(value).__name__}")
    if required and not value:
        raise ToolError(f"{name} is required")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate: not text any file can hold
        raise ToolError(f"{name} contains an invalid character at {exc.start}") from None
    return value


def _ok(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)


# -- tools ------------------------------------------------------------------------------------


def read_file(root: Path, path: str = "", offset: int = 1, limit: int = READ_DEFAULT_LIMIT) -> str:
    path = _text_arg("path", path, required=True)
    offset = _whole("offset", offset, 1, 1, 10**12)
    limit = _whole("limit", limit, READ_DEFAULT_LIMIT, 1, READ_DEFAULT_LIMIT * 10)
    target = resolve_in_workspace(path, root)
    if not target.exists():
        raise ToolError(f"file not found: {path}")
    if target.is_dir():
        raise ToolError(f"{path} is a directory; use list_files")
    file_size = target.stat().st_size
    numbered: list[str] = []
    size = 0
    truncated = False
    total_lines: int | None = None
    # Streamed line by line and left as soon as the range is read: a 300 MB file costs the
    # lines returned, not the file (so its total line count is known only when the range
    # reaches the end).
    with target.open("rb") as handle:
        if b"\x00" in handle.read(8192):
            raise ToolError(f"{path} looks like a binary file ({file_size:,} bytes)")
        handle.seek(0)
        number = 0
        for number, raw in enumerate(_lines(handle), start=1):  # noqa: B007 - used after
            if number < offset:
                continue
            if number >= offset + limit or size > READ_MAX_CHARS:
                truncated = True
                break
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if len(line) > READ_MAX_LINE_CHARS:
                line = line[:READ_MAX_LINE_CHARS] + f" ... [{len(line):,} chars in this line]"
            entry = f"{number:6d}|{line}"
            if size + len(entry) + 1 > READ_MAX_CHARS and numbered:
                truncated = True
                break
            size += len(entry) + 1
            numbered.append(entry)
        else:
            total_lines = number
    payload: dict[str, Any] = {
        "path": _relative(target, root),
        "content": "\n".join(numbered),
        "file_size": file_size,
        "truncated": truncated,
    }
    if total_lines is not None:
        payload["total_lines"] = total_lines
    elif numbered:
        payload["next_offset"] = offset + len(numbered)
    return _ok(payload)


def _lines(handle, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """Lines of a binary file, each at most READ_MAX_LINE_CHARS*4 bytes kept (a 1 GB line
    without a newline must not be held whole)."""
    cap = READ_MAX_LINE_CHARS * 4
    current = bytearray()
    overflow = 0
    while block := handle.read(chunk):
        start = 0
        while (newline := block.find(b"\n", start)) != -1:
            piece = block[start:newline]
            room = cap - len(current)
            current += piece[:room]
            overflow += max(0, len(piece) - room)
            yield bytes(current) + (b" \xe2\x80\xa6" if overflow else b"")
            current, overflow = bytearray(), 0
            start = newline + 1
        piece = block[start:]
        room = cap - len(current)
        current += piece[:room]
        overflow += max(0, len(piece) - room)
    if current or overflow:
        yield bytes(current)


def _compile_search(pattern: str):
    """RE2 (linear time: no pattern can take exponential time), and a note for the model; the
    literal text, with a note saying so, when the pattern is not RE2 syntax (backreferences,
    lookarounds) or too big to compile."""
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    options.max_mem = 8 * 1024 * 1024
    try:
        return re2.compile(pattern, options), ""
    except re2.error as exc:
        reason = (
            exc.args[0].decode(errors="replace")
            if exc.args and isinstance(exc.args[0], bytes)
            else str(exc)
        )
        note = (
            f"the pattern is not RE2 syntax ({reason}; backreferences and lookarounds are not "
            "supported), so it was searched as literal text"
        )
        return re2.compile(re.escape(pattern), options), note


def search_files(
    root: Path,
    pattern: str = "",
    path: str = ".",
    target: str = "content",
    file_glob: str = "",
    limit: int = 50,
) -> str:
    pattern = _text_arg("pattern", pattern, required=True)
    if len(pattern) > 1_000:
        raise ToolError(f"pattern is {len(pattern):,} characters; the limit is 1,000")
    file_glob = _text_arg("file_glob", file_glob)
    target = _text_arg("target", target) or "content"
    start = resolve_in_workspace(_text_arg("path", path) or ".", root)
    if not start.exists():
        raise ToolError(f"path not found: {path}")
    limit = _whole("limit", limit, 50, 1, SEARCH_MAX_MATCHES)
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
    regex, note = _compile_search(pattern)
    matches: list[dict[str, Any]] = []
    total = 0
    budget = SEARCH_MAX_BYTES_TOTAL
    for file in _iter_files(start, root):
        if file_glob and not fnmatch.fnmatch(file.name, file_glob):
            continue
        try:
            size = file.stat().st_size
            if size > SEARCH_MAX_FILE_BYTES or size > budget:
                continue
            budget -= size
            raw = file.read_bytes()
        except OSError:
            continue
        if b"\x00" in raw[:8192]:
            continue
        for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
            if regex.search(line[:2_000]):
                total += 1
                if len(matches) < limit:
                    matches.append(
                        {"path": _relative(file, root), "line": number, "content": line[:300]}
                    )
    payload = {"total_count": total, "matches": matches, "truncated": total > len(matches)}
    if note:
        payload["note"] = note
    return _ok(payload)


def list_files(root: Path, path: str = ".", depth: int = 3) -> str:
    start = resolve_in_workspace(_text_arg("path", path) or ".", root)
    if not start.exists():
        raise ToolError(f"path not found: {path}")
    if not start.is_dir():
        raise ToolError(f"{path} is a file; use read_file")
    depth = _whole("depth", depth, 3, 1, 6)
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
            real = _real(file)
            if real is None:
                entries.append({"path": _relative(file, root), "type": "broken or looping link"})
                continue
            if not real.is_relative_to(root):
                entries.append({"path": _relative(file, root), "type": "link outside workspace"})
                continue
            try:
                entries.append(
                    {"path": _relative(file, root), "type": "file", "size": file.stat().st_size}
                )
            except OSError:
                entries.append({"path": _relative(file, root), "type": "unreadable"})
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


# -- write policy ---------------------------------------------------------------------------


def writable_target(path: str, root: Path) -> Path:
    """Where a write to ``path`` lands, or ToolError if the write policy refuses it.

    Checked on the path as given and on its real path (a link ``x -> .git/hooks`` is refused
    too); names are compared case-insensitively, as a case-insensitive filesystem would.
    """
    path = _text_arg("path", path, required=True)
    target = resolve_in_workspace(path, root)
    for rel in (Path(os.path.normpath(path)), target.relative_to(root)):
        parts = [part.lower() for part in rel.parts]
        if any(part in PROTECTED_DIRS for part in parts) or (
            parts and parts[-1] in PROTECTED_FILES
        ):
            raise ToolError(
                f"writing {path!r} is not allowed: the agent may not write under .git/ or to "
                "hook or CI files (they run code at someone's next commit or push)"
            )
    if target == root or target.is_dir():
        raise ToolError(f"{path} is a directory")
    return target


def workspace_usage(root: Path) -> int:
    """Bytes of the regular files in the workspace (links not followed)."""
    total = 0
    for count, (dirpath, _dirnames, filenames) in enumerate(os.walk(root)):
        if count > WALK_MAX_FILES:
            break
        for name in filenames:
            try:
                stat = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += stat.st_size
    return total


def _store(root: Path, target: Path, data: bytes) -> None:
    """Write ``data`` under the size cap and the workspace quota (one rule for every tool)."""
    if len(data) > WRITE_MAX_BYTES:
        raise ToolError(
            f"the file would be {len(data):,} bytes; the limit for any write is {WRITE_MAX_BYTES:,}"
        )
    quota = settings.HERMES_WORKSPACE_QUOTA_BYTES
    try:
        before = target.stat().st_size if target.is_file() else 0
    except OSError:
        before = 0
    used = workspace_usage(root)
    if used - before + len(data) > quota:
        raise ToolError(
            f"the workspace would hold {used - before + len(data):,} bytes; its quota is "
            f"{quota:,} (delete or shrink files first)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def write_file(root: Path, path: str = "", content: str = "") -> str:
    content = _text_arg("content", content)
    data = content.encode("utf-8", errors="replace")
    if len(data) > WRITE_MAX_BYTES:  # before touching the disk
        raise ToolError(f"content is {len(data):,} bytes; the limit is {WRITE_MAX_BYTES:,}")
    target = writable_target(path, root)
    _store(root, target, data)
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
    old_string = _text_arg("old_string", old_string, required=True)
    new_string = _text_arg("new_string", new_string)
    if not isinstance(replace_all, bool):
        raise ToolError("replace_all must be true or false")
    target = writable_target(path, root)
    if not target.is_file():
        raise ToolError(f"file not found: {path}")
    if target.stat().st_size > WRITE_MAX_BYTES:
        raise ToolError(
            f"{path} is {target.stat().st_size:,} bytes; patch edits files up to "
            f"{WRITE_MAX_BYTES:,} bytes"
        )
    before = target.read_text(errors="replace")
    count = before.count(old_string)
    if count == 0:
        raise ToolError(f"old_string not found in {path}")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {path}; make it unique or set replace_all"
        )
    replacements = count if replace_all else 1
    # The size is known before the new text is built: a replace-all cannot balloon memory.
    growth = (len(new_string.encode()) - len(old_string.encode())) * replacements
    if len(before.encode()) + growth > WRITE_MAX_BYTES:
        raise ToolError(
            f"the patched file would be about {len(before.encode()) + growth:,} bytes; the "
            f"limit for any write is {WRITE_MAX_BYTES:,}"
        )
    after = before.replace(old_string, new_string, -1 if replace_all else 1)
    _store(root, target, after.encode("utf-8", errors="replace"))
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
        {"success": True, "path": rel, "replacements": replacements, "diff": _cap_output(diff)}
    )


def _cap_output(text: str) -> str:
    if len(text) <= TERMINAL_OUTPUT_CAP:
        return text
    head = TERMINAL_OUTPUT_CAP * 2 // 3
    tail = TERMINAL_OUTPUT_CAP - head
    return f"{text[:head]}\n... [{len(text) - head - tail:,} chars of output omitted] ...\n{text[-tail:]}"


def _collect(proc: subprocess.Popen, deadline: float) -> tuple[bytes, int, bool]:
    """Read the command's output until it exits or the deadline passes, holding at most the
    cap's head and tail (a command printing gigabytes costs the cap, not its output)."""
    head_cap = TERMINAL_OUTPUT_CAP * 2 // 3
    tail_cap = TERMINAL_OUTPUT_CAP - head_cap
    head = bytearray()
    tail = bytearray()
    total = 0
    timed_out = False
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if not selector.select(timeout=min(left, 0.5)):
                continue
            block = os.read(proc.stdout.fileno(), 65536)
            if not block:
                break
            total += len(block)
            room = head_cap - len(head)
            head += block[:room]
            tail += block[room:] if room < len(block) else b""
            if len(tail) > tail_cap:
                del tail[: len(tail) - tail_cap]
    if total > len(head) + len(tail):
        omitted = total - len(head) - len(tail)
        head += f"\n... [{omitted:,} bytes of output omitted] ...\n".encode()
    return bytes(head + tail), total, timed_out


def terminal(root: Path, command: str = "", timeout: int | None = None) -> str:
    if not settings.HERMES_ENABLE_TERMINAL:
        raise ToolError("the terminal tool is disabled (set HERMES_ENABLE_TERMINAL=1 to allow it)")
    command = _text_arg("command", command)
    if not command.strip():
        raise ToolError("command is required")
    seconds = _whole("timeout", timeout, TERMINAL_DEFAULT_TIMEOUT, 1, TERMINAL_MAX_TIMEOUT)
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
        out, _total, timed_out = _collect(proc, time.monotonic() + seconds)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    error = f"command timed out after {seconds} s and was killed" if timed_out else None
    payload: dict[str, Any] = {
        "output": out.decode("utf-8", errors="replace"),
        "exit_code": 124 if timed_out else proc.returncode,
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
