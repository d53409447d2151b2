"""The workspace every tool works in: where it lives, how a path is kept inside it, the
limits every tool shares, and the small argument checks and result shape they all use."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
