"""Writing tools and their one policy: nothing under ``.git/`` or into hook/CI files, one
size cap for every writing tool, a quota per workspace (``write_file``, ``patch``)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from django.conf import settings

from hermes_web.agent.tools.terminal import _cap_output
from hermes_web.agent.tools.workspace import (
    PROTECTED_DIRS,
    PROTECTED_FILES,
    WALK_MAX_FILES,
    WRITE_MAX_BYTES,
    ToolError,
    _ok,
    _relative,
    _text_arg,
    resolve_in_workspace,
)


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
