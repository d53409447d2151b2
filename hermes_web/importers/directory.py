"""What a directory given to ``import_sessions`` holds: the files to import one by one, the
Claude Code session folders (imported as the tool lays them out, see claude_code_folder),
and what is skipped, and why.

The walk never follows a symbolic link (one pointing at the app's own database was opened
once): links, FIFOs, sockets and devices are skipped and named, never opened.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from hermes_web.importers.claude_code_folder import SessionFolder, folder_of

SUFFIXES = {".jsonl", ".json", ".db", ".sqlite", ".sqlite3"}
SUFFIXES |= {".traj"}  # SWE-agent trajectories
NAMES = (".aider.chat.history.md",)  # logs picked up by name: no other .md file is a session


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words, from its ``st_mode``."""
    for test, words in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return words
    return "a special file"


@dataclass
class DirectoryPlan:
    files: list[Path] = field(default_factory=list)  # imported one by one
    folders: list[SessionFolder] = field(default_factory=list)  # Claude Code session folders
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (path, why)


def plan_directory(root: Path) -> DirectoryPlan:
    """Every regular file under ``root`` (links not followed), sorted by path; the files of
    a Claude Code session folder (``<id>/subagents/``, ``<id>/tool-results/``) are grouped
    with the ``<id>.jsonl`` beside that folder."""
    plan = DirectoryPlan()
    regular: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        for name in sorted(dirnames):
            if os.path.islink(base / name):  # listed by os.walk, never entered
                plan.skipped.append((base / name, "a symbolic link (not followed)"))
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(base / d))
        for name in sorted(filenames):
            path = base / name
            try:
                mode = os.lstat(path).st_mode
            except OSError as error:
                plan.skipped.append((path, f"cannot read: {error.strerror or error}"))
                continue
            if stat.S_ISLNK(mode):
                plan.skipped.append((path, "a symbolic link (not followed)"))
            elif not stat.S_ISREG(mode):
                plan.skipped.append((path, f"{file_kind(mode)}, not a regular file"))
            else:
                regular.append(path)
    folders: dict[Path, SessionFolder] = {}
    owner: dict[Path, Path] = {}  # file -> the session folder it belongs to
    for path in regular:
        if (top := folder_of(path, root)) is not None:
            owner[path] = top
            folders.setdefault(top, SessionFolder(top)).add(path, plan.skipped)
    for path in regular:  # the folder's other files (Claude Code also keeps workflows/ there)
        top = next((p for p in path.parents if p in folders), None)
        if path not in owner and top is not None:
            owner[path] = top
            folders[top].add(path, plan.skipped)
    for path in regular:
        if path.suffix == ".jsonl" and path.with_suffix("") in folders:
            folders[path.with_suffix("")].main = path
        elif path not in owner and (path.suffix.lower() in SUFFIXES or path.name.endswith(NAMES)):
            plan.files.append(path)
    plan.files.sort(key=str)
    plan.folders = [folders[key] for key in sorted(folders, key=str)]
    plan.skipped.sort(key=lambda item: str(item[0]))
    return plan
