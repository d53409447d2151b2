"""Claude Code transcripts and Codex rollouts of any length, written line by line.

Every shape the two importers treat specially comes back every few turns: a response split
over records sharing ``message.id`` with its results between them, a call with no result
(stub), a late and an unknown result, meta records and command wrappers, images, thinking,
compaction (Claude Code ``isCompactSummary``, Codex ``compacted`` with replacement
history), inline sidechain records, a title record at the end. Used by the streaming tests
and by bench/bench_memory.py; deterministic for a given seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
_WORDS = ["def", "class", "return", "import", "self", "value", "error", "config", "test", "path"]


def _words(rng: random.Random, size: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(max(1, size // 6)))[:size]


def _stamp(i: int) -> str:
    return f"2026-02-{1 + (i // 86_400) % 27:02d}T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}.000Z"


def claude_code_lines(
    n_messages: int,
    seed: int = 5,
    sid: str = "5e55a1d0-0000-4000-8000-00000000abcd",
    output: tuple[int, int] = (80, 400),
) -> Iterator[str]:
    """JSONL lines of one Claude Code transcript holding about ``n_messages`` stored rows
    (tool outputs of ``output`` characters, now and then 3,000)."""
    rng = random.Random(seed)
    clock = 0
    uuid = 0
    stored = 0

    def record(kind: str, message: dict | None = None, **fields) -> str:
        nonlocal clock, uuid
        clock += 7
        uuid += 1
        line = {
            "parentUuid": f"u-{uuid - 1}" if uuid > 1 else None,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/shop",
            "sessionId": sid,
            "version": "2.1.39",
            "gitBranch": "main",
            "type": kind,
            "uuid": f"u-{uuid}",
            "timestamp": _stamp(clock),
        }
        if message is not None:
            line["message"] = message
        line.update(fields)
        return json.dumps(line)

    yield json.dumps({"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}})
    yield record(
        "user",
        {"role": "user", "content": "<local-command-caveat>Caveat: local.</local-command-caveat>"},
        isMeta=True,
    )
    turn = 0
    while stored < n_messages:
        turn += 1
        ask = f"(turn {turn}) Run the tests and fix what broke. " + _words(rng, 60)
        if turn % 9 == 4:
            content: object = [
                {"type": "text", "text": ask},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ]
        else:
            content = ask
        yield record("user", {"role": "user", "content": content})
        stored += 1
        mid = f"msg_{turn}"
        a, b = f"toolu_{turn}a", f"toolu_{turn}b"
        blocks = [
            {"type": "thinking", "thinking": "Read both files first.", "signature": f"sig{turn}"},
            {"type": "text", "text": "I'll read both files."},
            {
                "type": "tool_use",
                "id": a,
                "name": "Read",
                "input": {"file_path": f"src/m{turn}.py"},
            },
        ]
        model = "claude-opus-4-6"
        yield record(
            "assistant", {"id": mid, "role": "assistant", "model": model, "content": blocks}
        )
        second = [{"type": "tool_use", "id": b, "name": "Bash", "input": {"command": "pytest -q"}}]
        yield record(
            "assistant", {"id": mid, "role": "assistant", "model": model, "content": second}
        )
        stored += 1
        body = _words(rng, 3000 if rng.random() < 0.04 else rng.randint(*output))
        result = {"type": "tool_result", "tool_use_id": a, "content": body}
        yield record("user", {"role": "user", "content": [result]}, toolUseResult={"ok": True})
        stored += 2  # a's result, and b's (recorded or stub)
        if turn % 7 != 3:  # otherwise b keeps no result: a stub is stored
            result = {
                "type": "tool_result",
                "tool_use_id": b,
                "content": [{"type": "text", "text": "2 passed"}],
                "is_error": turn % 5 == 0,
            }
            yield record("user", {"role": "user", "content": [result]})
        if turn % 11 == 6:  # a result for an earlier, closed call, and one for no call at all
            late = {"type": "tool_result", "tool_use_id": f"toolu_{turn - 1}a", "content": "late"}
            unknown = {"type": "tool_result", "tool_use_id": f"toolu_x{turn}", "content": "?"}
            yield record("user", {"role": "user", "content": [late, unknown]})
            stored += 2
        if turn % 5 == 2:
            yield record(
                "user",
                {"role": "user", "content": "<command-name>/model</command-name>"},
            )
            yield record(
                "system", None, subtype="local_command", content="\x1b[1mSet model\x1b[22m"
            )
            stored += 2
        if turn % 13 == 8:  # an older layout's inline sub-agent record
            yield record("user", {"role": "user", "content": "sub-agent prompt"}, isSidechain=True)
            stored += 1
        yield record("progress", None, data={"type": "hook_progress"})
        reply = f"Fixed in turn {turn}: " + _words(rng, 120)
        yield record(
            "assistant",
            {"id": f"{mid}z", "role": "assistant", "model": model, "content": reply},
        )
        stored += 1
        if turn % 40 == 20:
            summary = f"Summary of turns 1-{turn}: the tests pass, src/m{turn}.py was fixed."
            yield record("user", {"role": "user", "content": summary}, isCompactSummary=True)
            stored += 1
    yield json.dumps({"type": "summary", "summary": "Fixing the test suite", "leafUuid": "u-1"})


def codex_lines(
    n_messages: int,
    seed: int = 6,
    sid: str = "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0001",
    output: tuple[int, int] = (80, 400),
) -> Iterator[str]:
    """JSONL lines of one Codex rollout (current wrapped form) holding about ``n_messages``
    stored rows (tool outputs of ``output`` characters, now and then 3,000)."""
    rng = random.Random(seed)
    clock = 0
    stored = 0

    def line(kind: str, payload: dict) -> str:
        nonlocal clock
        clock += 5
        return json.dumps({"timestamp": _stamp(clock), "type": kind, "payload": payload})

    def message(role: str, text: str, part: str = "input_text") -> str:
        return line(
            "response_item",
            {"type": "message", "role": role, "content": [{"type": part, "text": text}]},
        )

    yield line(
        "session_meta",
        {
            "id": sid,
            "timestamp": "2026-02-23T11:40:00.000Z",
            "cwd": "/home/dev/shop",
            "cli_version": "0.104.0",
            "originator": "codex_cli_rs",
            "git": {"branch": "main"},
        },
    )
    yield message(
        "developer", "<permissions instructions>workspace-write</permissions instructions>"
    )
    yield message(
        "user", "<environment_context>\n  <cwd>/home/dev/shop</cwd>\n</environment_context>"
    )
    stored += 2
    turn = 0
    while stored < n_messages:
        turn += 1
        yield line("turn_context", {"cwd": "/home/dev/shop", "model": "gpt-5-codex"})
        ask = f"(turn {turn}) Run the tests and fix what broke. " + _words(rng, 60)
        if turn % 9 == 4:
            yield line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": ask},
                        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
                    ],
                },
            )
        else:
            yield message("user", ask)
        yield line("event_msg", {"type": "user_message", "message": ask})
        stored += 1
        yield line(
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Run pytest first."}],
                "encrypted_content": f"gAAA{turn}",
            },
        )
        a, b = f"call_{turn}a", f"call_{turn}b"
        yield line(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps({"command": ["pytest", "-q"]}),
                "call_id": a,
            },
        )
        yield line(
            "response_item",
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** Begin Patch",
                "call_id": b,
            },
        )
        stored += 1
        body = _words(rng, 3000 if rng.random() < 0.04 else rng.randint(*output))
        yield line(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": a,
                "output": {"output": body, "metadata": {}},
            },
        )
        stored += 2
        if turn % 7 != 3:  # otherwise b keeps no output: a stub is stored
            yield line(
                "response_item",
                {"type": "custom_tool_call_output", "call_id": b, "output": "Success."},
            )
        if turn % 11 == 6:
            yield line(
                "response_item",
                {"type": "function_call_output", "call_id": f"call_x{turn}", "output": "?"},
            )
            stored += 1
        yield message("assistant", f"Fixed in turn {turn}: " + _words(rng, 120), "output_text")
        stored += 1
        if turn % 40 == 20:
            history = [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": ask}],
                }
            ]
            yield line(
                "compacted",
                {
                    "message": f"Summary of turns 1-{turn}: tests pass.",
                    "replacement_history": history,
                },
            )
            stored += 2
