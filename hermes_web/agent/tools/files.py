"""Reading tools: ``read_file`` (numbered lines), ``search_files`` (RE2 content or name
search) and ``list_files`` (a bounded tree), all inside the workspace."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import re2

from hermes_web.agent.tools.workspace import (
    LIST_MAX_ENTRIES,
    READ_DEFAULT_LIMIT,
    READ_MAX_CHARS,
    READ_MAX_LINE_CHARS,
    SEARCH_MAX_BYTES_TOTAL,
    SEARCH_MAX_FILE_BYTES,
    SEARCH_MAX_MATCHES,
    SKIP_DIRS,
    ToolError,
    _iter_files,
    _ok,
    _real,
    _relative,
    _text_arg,
    _whole,
    resolve_in_workspace,
)


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
