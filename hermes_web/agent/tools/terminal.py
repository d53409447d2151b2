"""The ``terminal`` tool (off unless HERMES_ENABLE_TERMINAL): a command in the workspace
with a timeout, never holding more than its output cap."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from django.conf import settings

from hermes_web.agent.tools.workspace import (
    TERMINAL_DEFAULT_TIMEOUT,
    TERMINAL_MAX_TIMEOUT,
    TERMINAL_OUTPUT_CAP,
    ToolError,
    _ok,
    _text_arg,
    _whole,
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
    stdout = proc.stdout
    assert stdout is not None  # started with stdout=PIPE
    head = bytearray()
    tail = bytearray()
    total = 0
    timed_out = False
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if not selector.select(timeout=min(left, 0.5)):
                continue
            block = os.read(stdout.fileno(), 65536)
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
        if proc.stdout is not None:
            proc.stdout.close()
    error = f"command timed out after {seconds} s and was killed" if timed_out else None
    payload: dict[str, Any] = {
        "output": out.decode("utf-8", errors="replace"),
        "exit_code": 124 if timed_out else proc.returncode,
    }
    if error:
        payload["error"] = error
    return _ok(payload)
