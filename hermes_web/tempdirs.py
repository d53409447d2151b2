"""Temporary files of uploads and imports: one folder per process under ``DATA_DIR/tmp``, and
a sweep that removes what dead processes left there.

Django spools an upload over 2 MB to a temporary file, an archive is unpacked into a temporary
folder, a ``state.db`` is copied into one: all are removed when the request ends, but a killed
process (gunicorn's timeout, an out-of-memory kill, a SIGKILL) left them in /tmp for good
(58 + 8 MB per killed import in the probe). Each web and worker process now points Python's
``tempfile`` (which Django's upload handler and the importers use) at a folder named after its
pid and start time, ``DATA_DIR/tmp/p<pid>-<start>``; ``sweep`` removes every such folder whose
process is gone, and in a live one what is older than ``HERMES_TEMP_MAX_AGE_SECONDS`` (past
every import's deadline). It runs when the web and the worker start and from Celery beat.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from django.conf import settings

log = logging.getLogger(__name__)

PREFIX = "p"


def temp_root() -> Path:
    """The folder every process's temporary folder lives in."""
    return Path(settings.DATA_DIR) / "tmp"


def start_time(pid: int) -> str | None:
    """The start time of ``pid`` (clock ticks since boot, from /proc), or None when no such
    process runs; with the pid it names one process even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return fields[19]  # field 22 of proc(5), counted after the command's closing parenthesis


def process_dir_name(pid: int) -> str:
    return f"{PREFIX}{pid}-{start_time(pid) or 0}"


def use_process_dir() -> Path:
    """Point ``tempfile`` at this process's own folder (created if needed) and return it.
    Also registered to run again in every forked child (gunicorn's workers fork from a
    preloaded master), so that each process's files are its own."""
    folder = temp_root() / process_dir_name(os.getpid())
    folder.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = str(folder)
    return folder


def _owner_alive(name: str) -> bool:
    pid_text, _, started = name[len(PREFIX) :].partition("-")
    if not pid_text.isdigit():
        return False
    return start_time(int(pid_text)) == started


def sweep(now: float | None = None) -> int:
    """Remove what is stale under ``temp_root()``: the folder of every process that is gone,
    and in a live process's folder every entry older than HERMES_TEMP_MAX_AGE_SECONDS (as
    anything else found there). The number of entries removed."""
    root = temp_root()
    if not root.is_dir():
        return 0
    now = time.time() if now is None else now
    oldest = now - settings.HERMES_TEMP_MAX_AGE_SECONDS
    removed = 0
    for entry in root.iterdir():
        if entry.name.startswith(PREFIX) and entry.is_dir() and _owner_alive(entry.name):
            for item in entry.iterdir():
                removed += _remove_if_older(item, oldest)
        elif entry.name.startswith(PREFIX) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
        else:
            removed += _remove_if_older(entry, oldest)
    if removed:
        log.info("removed %d stale temporary upload or import entries under %s", removed, root)
    return removed


def _remove_if_older(path: Path, oldest: float) -> int:
    try:
        if path.lstat().st_mtime >= oldest:
            return 0
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        return 0
    return 1


_started = False


def start_process() -> None:
    """At a web or worker process's start: sweep, then use a folder of this process's own;
    the same again in each forked child (a gunicorn worker that replaces a killed one sweeps
    what the killed one left)."""
    global _started
    _sweep_quietly()
    use_process_dir()
    if not _started:
        _started = True
        os.register_at_fork(after_in_child=_after_fork)


def _after_fork() -> None:
    _sweep_quietly()
    use_process_dir()


def _sweep_quietly() -> None:
    try:
        sweep()
    except OSError as error:  # a sweep that fails must not keep a server from starting
        log.warning("could not sweep temporary folders: %s", error)
