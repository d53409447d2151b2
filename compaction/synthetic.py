"""Deterministic, seeded generator of realistic agent conversations.

Used by benchmarks, demo data and tests. A conversation has a system prompt, user asks
(some with base64 PNG screenshots), assistant turns with reasoning and tool calls
(``terminal``, ``read_file`` with 5–50 KB bodies, ``search_files``, ``web_extract``,
``write_file``, ``patch``, ``list_files``), terminal errors, and text replies. It is always
provider-valid: every tool call is answered right after its assistant message.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import struct
import zlib
from typing import Any

__all__ = ["generate_conversation", "png_data_url"]

SYSTEM_PROMPT = (
    "You are Hermes, a careful coding agent. You work in /srv/app (git branch main). Use the "
    "tools to inspect and change files, run commands and browse documentation. Prefer small, "
    "tested changes and explain what you did."
)
_FILES = [
    "src/app/models.py",
    "src/app/views.py",
    "src/app/parser.py",
    "src/app/cli.py",
    "src/app/storage/sqlite.py",
    "tests/test_parser.py",
    "tests/test_views.py",
    "README.md",
    "pyproject.toml",
    "docs/usage.md",
    "src/app/utils/dates.py",
    "config/settings.yaml",
]
_ASKS = [
    "The parser crashes on empty input. Can you find out why and fix it?",
    "Please add a --json flag to the CLI so it prints machine-readable output.",
    "Why are the view tests failing on CI but not locally?",
    "Refactor the storage layer so it never opens more than one sqlite connection.",
    "Here is a screenshot of the broken page. What is wrong with the layout?",
    "Look up how the upstream library handles timezone-aware dates and adapt our code.",
    "Run the whole test suite and tell me what still fails.",
    "Never touch config/settings.yaml without asking me first. Now update the docs for the new flag.",
    "Can you make the date parsing accept ISO week dates too?",
    "Please write a migration note in docs/usage.md and keep it short.",
]
_REPLIES = [
    "Done. I fixed the empty-input case in src/app/parser.py and added a regression test; all "
    "parser tests pass now.",
    "I decided to use a single shared connection because sqlite serializes writes anyway. The "
    "storage tests pass.",
    "The CI failure comes from a timezone difference: CI runs in UTC. I pinned the timezone in "
    "the test fixtures.",
    "I added the --json flag and documented it in docs/usage.md.",
    "The layout breaks because the sidebar has a fixed width of 480px. I switched to a flexible "
    "grid instead of the fixed width.",
    "Three tests still fail, all in tests/test_views.py; they need the new fixture.",
]
_COMMANDS = [
    "pytest -q tests/",
    "git status --short",
    "python -m app.cli --help",
    "ls -la src/app",
    "git diff --stat",
    "ruff check src",
    "python -m pytest tests/test_parser.py -x",
    "grep -rn 'TODO' src/",
    "git log --oneline -5",
]


@functools.cache
def _corpus() -> str:
    rng = random.Random(1234)
    names = ["parse", "load", "store", "render", "validate", "connect", "format", "resolve"]
    lines: list[str] = []
    for i in range(2_600):
        name = rng.choice(names)
        kind = i % 7
        if kind == 0:
            lines.append(f"def {name}_{i}(value: str, *, strict: bool = False) -> dict:")
        elif kind == 1:
            lines.append(f'    """{name.capitalize()} the value and return a mapping."""')
        elif kind == 2:
            lines.append(f"    result = {{'value': value, 'index': {i}, 'ok': True}}")
        elif kind == 3:
            lines.append(f"    if strict and not value:  # line {i}")
        elif kind == 4:
            lines.append(f"        raise ValueError('empty value in {name}_{i}')")
        elif kind == 5:
            lines.append("    return result")
        else:
            lines.append("")
    return "\n".join(lines)


def _body(rng: random.Random, size: int) -> str:
    corpus = _corpus()
    start = rng.randrange(0, max(1, len(corpus) - size))
    # A tool shows whole lines: the body starts at a line, never inside a word (a summary
    # quoting its first words then quotes words).
    line = corpus.rfind("\n", 0, start) + 1
    return corpus[line : line + size]


@functools.cache
def png_data_url(width: int, height: int, seed: int = 0) -> str:
    """A valid PNG (noisy RGB pixels) as a ``data:image/png;base64,`` URL."""
    rng = random.Random(seed)
    raw = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _tool_call(rng: random.Random, call_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One tool call and its result message."""
    tool = rng.choices(
        [
            "terminal",
            "read_file",
            "search_files",
            "patch",
            "write_file",
            "web_extract",
            "list_files",
        ],
        weights=[30, 14, 14, 12, 8, 8, 4],
    )[0]
    path = rng.choice(_FILES)
    args: dict[str, Any]
    if tool == "terminal":
        command = rng.choice(_COMMANDS)
        args = {"command": command, "workdir": "/srv/app"}
        if rng.random() < 0.2:
            output = (
                'Traceback (most recent call last):\n  File "/srv/app/src/app/parser.py", '
                f"line {rng.randint(10, 400)}, in parse\n    return tokens[0]\n"
                "IndexError: list index out of range\n" + _body(rng, rng.randint(100, 1_500))
            )
            code = 1
        else:
            output = _body(rng, rng.randint(40, 2_500))
            code = 0
        result = json.dumps({"output": output, "exit_code": code})
    elif tool == "read_file":
        args = {"path": path, "offset": rng.choice([1, 1, 1, 120, 400])}
        result = _body(rng, int(5_000 * 10 ** rng.random()))
    elif tool == "search_files":
        pattern = rng.choice(["def parse", "TODO", "sqlite3.connect", "timezone", "--json"])
        count = rng.randint(0, 40)
        matches = [
            {"path": rng.choice(_FILES), "line": rng.randint(1, 500), "text": pattern + " ..."}
            for _ in range(min(count, 12))
        ]
        args = {"pattern": pattern, "path": "src/", "target": "content"}
        result = json.dumps({"total_count": count, "matches": matches})
    elif tool == "patch":
        args = {
            "path": path,
            "mode": "replace",
            "old_string": "return tokens[0]",
            "new_string": "return tokens[0] if tokens else None",
        }
        result = json.dumps({"success": True, "diff": _body(rng, rng.randint(150, 900))})
    elif tool == "write_file":
        args = {"path": path, "content": _body(rng, rng.randint(200, 2_000))}
        result = json.dumps({"success": True, "bytes_written": len(args["content"])})
    elif tool == "web_extract":
        url = f"https://docs.example.org/{rng.choice(['dates', 'sqlite', 'cli', 'layout'])}.html"
        args = {"urls": [url]}
        result = "# Documentation\n\n" + _body(rng, rng.randint(2_000, 10_000))
    else:
        args = {"path": rng.choice(["src/app", "tests", "."])}
        result = "\n".join(rng.sample(_FILES, 6))
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps(args)},
    }
    return call, {"role": "tool", "tool_call_id": call_id, "content": result}


def generate_conversation(n_messages: int, seed: int = 0) -> list[dict[str, Any]]:
    """A provider-valid agent conversation of exactly ``n_messages`` messages.

    Args:
        n_messages: how many messages (the first is the system prompt).
        seed: same seed, same conversation.
    """
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = []
    if n_messages <= 0:
        return messages
    messages.append({"role": "system", "content": SYSTEM_PROMPT})
    turn = 0
    while len(messages) < n_messages:
        turn += 1
        ask = rng.choice(_ASKS)
        if rng.random() < 0.15:
            url = png_data_url(rng.choice([64, 96, 128]), rng.choice([48, 72]), rng.randrange(4))
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": f"(turn {turn}) {ask}"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            )
        else:
            messages.append({"role": "user", "content": f"(turn {turn}) {ask}"})
        for _ in range(rng.randint(1, 5)):
            remaining = n_messages - len(messages)
            if remaining < 3:
                break
            k = min(rng.choice([1, 1, 1, 2, 3]), remaining - 2)
            pairs = [_tool_call(rng, f"call_{len(messages):06d}_{j}") for j in range(k)]
            thought = (
                f"(private reasoning) Turn {turn}: I should inspect {rng.choice(_FILES)} "
                "before changing anything."
            )
            messages.append(
                {
                    "role": "assistant",
                    "content": rng.choice(["", "", "Let me check that.", "Looking into it."]),
                    "reasoning_content": thought,
                    "tool_calls": [call for call, _ in pairs],
                }
            )
            messages.extend(result for _, result in pairs)
        if len(messages) < n_messages:
            messages.append(
                {
                    "role": "assistant",
                    "content": f"(turn {turn}) {rng.choice(_REPLIES)}",
                    "reasoning": "(private reasoning) summarize the outcome for the user.",
                }
            )
    return messages
