"""Transcripts of our own in the shapes real agents write when they compact (issue #25):
Claude Code's ``compact_boundary`` + ``isCompactSummary`` pairs, Codex's ``compacted``
records with a replacement history (readable or encrypted summary), a Hermes rotation."""

import json
from pathlib import Path

SID = "3f2a9c10-5d7e-4b8a-9e21-0c4d6f8a1b2c"
TRIGGERS = ("manual", "auto", "manual")
PRE_TOKENS = (41_000, 152_300, 97_777)
POST_TOKENS = (None, 8_125, None)


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cc(kind: str, n: int, when: int, **fields) -> dict:
    return {
        "type": kind,
        "uuid": f"{kind[0]}{n}",
        "sessionId": SID,
        "timestamp": f"2026-07-23T10:{when // 60:02d}:{when % 60:02d}.000Z",
        "cwd": "/work/app",
        "version": "2.1.39",
        **fields,
    }


def claude_code_lines(compacts: int = 3, rounds: int = 1) -> list[str]:
    """Blocks of ``rounds`` x four turns (a user request, a Bash call, its failing result,
    a reply), each block followed by a /compact: its boundary, its summary and the command
    wrapper."""
    records = []
    clock = 0
    for k in range(compacts):
        records += _cc_block(k, rounds, clock)
        clock += 4 * rounds
        records += _cc_compact(k, clock)
        clock += 3
    clock += 1
    records.append(_cc("user", clock, clock, message={"role": "user", "content": "continue"}))
    clock += 1
    records.append(
        _cc(
            "assistant",
            clock,
            clock,
            message={"id": "msg_end", "role": "assistant", "content": "Done."},
        )
    )
    return [json.dumps(r) for r in records]


def _cc_block(k: int, rounds: int, clock: int) -> list[dict]:
    """``rounds`` x (a user request, a Bash call, its failing result, a reply)."""
    records = []
    for r in range(rounds):
        n = f"{k}_{r}" if rounds > 1 else str(k)
        log = "\n".join(f"tests/test_app_{n}.py::test_case_{i} PASSED" for i in range(30 * r))
        text = f"Block {k}: edit src/app_{n}.py; never touch config/prod.yaml"
        call = {"command": f"pytest -q tests/test_app_{n}.py"}
        result = (
            f"{log}\nFAILED tests/test_app_{n}.py::test_total\n"
            f"AssertionError: expected 12 rows, got {k}\n1 failed in 0.42s"
        )
        turns = [
            ("user", {"role": "user", "content": text}),
            (
                "assistant",
                {
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [
                        {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": call}
                    ],
                },
            ),
            (
                "user",
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"toolu_{n}",
                            "content": result,
                            "is_error": True,
                        }
                    ],
                },
            ),
            (
                "assistant",
                {
                    "id": f"msg_{n}b",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": f"The total in src/app_{n}.py is off."}],
                },
            ),
        ]
        for kind, message in turns:
            clock += 1
            records.append(_cc(kind, clock, clock, message=message))
    return records


def _cc_compact(k: int, clock: int) -> list[dict]:
    """One /compact: its boundary, its summary, the command wrapper."""
    meta = {"trigger": TRIGGERS[k % 3], "preTokens": PRE_TOKENS[k % 3]}
    if POST_TOKENS[k % 3] is not None:
        meta["postTokens"] = POST_TOKENS[k % 3]
        meta["durationMs"] = 1234
    summary = (
        f"Summary {k + 1}: This session is being continued from a previous conversation "
        "that ran out of context.\nAnalysis:\nThe user asked for edits.\n\nSummary:\n"
        f"1. Primary Request and Intent:\n   Edit src/app_{k}.py.\n2. Errors and fixes:\n"
        "   A test failed.\n3. Pending Tasks:\n   None."
    )
    wrapper = "<command-name>/compact</command-name>\n<command-message>compact</command-message>"
    return [
        _cc(
            "system",
            clock + 1,
            clock + 1,
            subtype="compact_boundary",
            content="Conversation compacted",
            level="info",
            parentUuid=None,
            logicalParentUuid=f"a{clock}",
            compactMetadata=meta,
        ),
        _cc(
            "user",
            clock + 2,
            clock + 2,
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
            message={"role": "user", "content": summary},
        ),
        _cc("user", clock + 3, clock + 3, message={"role": "user", "content": wrapper}),
    ]


def _cx(kind: str, second: int, payload: dict) -> str:
    stamp = f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}.000Z"
    return json.dumps({"timestamp": stamp, "type": kind, "payload": payload})


def _text(role: str, text: str) -> dict:
    part = "input_text" if role == "user" else "output_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


def _usage(total: int) -> dict:
    return {
        "type": "token_count",
        "info": {
            "total_token_usage": {"input_tokens": total * 3, "total_tokens": total * 3},
            "last_token_usage": {"input_tokens": total - 500, "total_tokens": total},
            "model_context_window": 272_000,
        },
    }


def codex_lines() -> list[str]:
    """Four turns, a compaction with a readable summary keeping the user's request, two
    more turns, a compaction whose summary is encrypted, one more turn."""
    return [
        _cx(
            "session_meta",
            0,
            {"id": "0199a1b2-codex-native", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"},
        ),
        _cx("turn_context", 1, {"model": "gpt-5-codex", "cwd": "/w"}),
        _cx("response_item", 2, _text("user", "please fix src/app.py")),
        _cx(
            "response_item",
            3,
            {
                "type": "function_call",
                "name": "shell",
                "call_id": "call_1",
                "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q tests/"]}),
            },
        ),
        _cx(
            "response_item",
            4,
            {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": "FAILED tests/test_app.py - KeyError: 'total'\n1 failed in 2.5s",
            },
        ),
        _cx("response_item", 5, _text("assistant", "Fixed the KeyError in src/app.py.")),
        _cx("event_msg", 6, _usage(61_500)),
        _cx(
            "compacted",
            7,
            {
                "message": "Codex summary: fixed src/app.py",
                "replacement_history": [_text("user", "please fix src/app.py")],
            },
        ),
        _cx("response_item", 8, _text("user", "now run lint")),
        _cx("response_item", 9, _text("assistant", "lint clean")),
        _cx("event_msg", 10, _usage(23_456)),
        _cx(
            "compacted",
            11,
            {
                "message": "",
                "replacement_history": [
                    _text("user", "now run lint"),
                    {"type": "compaction", "encrypted_content": "gAAAAB-opaque"},
                ],
            },
        ),
        _cx("response_item", 12, _text("assistant", "after both compactions")),
    ]


def hermes_rotation_lines() -> list[str]:
    """A Hermes JSONL export: a parent that rotated (end_reason compression) and the child
    that opens with its compressed summary."""
    parent = {
        "id": "h-parent",
        "started_at": 1_760_000_000,
        "ended_at": 1_760_000_100,
        "end_reason": "compression",
        "model": "gpt-4o",
        "messages": [
            {"id": 1, "role": "user", "content": "run the tests in /srv/app; never push"},
            {"id": 2, "role": "assistant", "content": "Running pytest -q now."},
            {"id": 3, "role": "user", "content": "and check docs/index.md"},
            {"id": 4, "role": "assistant", "content": "docs/index.md is fine; 14 tests pass."},
        ],
    }
    child = {
        "id": "h-child",
        "parent_session_id": "h-parent",
        "started_at": 1_760_000_101,
        "model": "gpt-4o",
        "messages": [
            {
                "id": 1,
                "role": "user",
                "content": "[CONTEXT SUMMARY]: parent work: tests pass",
                "_compressed_summary": 1,
            },
            {"id": 2, "role": "user", "content": "next step"},
            {"id": 3, "role": "assistant", "content": "ok"},
        ],
    }
    return [json.dumps(parent), json.dumps(child)]


def gemini_tool_turn(n: int, output: str, *, hour: str = "2026-03-02T10") -> list[dict]:
    """Turn ``n`` of a Gemini CLI chat as the CLI records it: a user message and a gemini
    reply whose ``read_file`` call carries its own ``functionResponse`` (``output``)."""
    stamp = f"{hour}:{n // 60 % 60:02d}:{n % 60:02d}Z"
    call_id = f"read_file-{n}"
    response = {"id": call_id, "name": "read_file", "response": {"output": output}}
    return [
        {"id": f"u-{n}", "timestamp": stamp, "type": "user", "content": f"Turn {n}: why?"},
        {
            "id": f"g-{n}",
            "timestamp": stamp,
            "type": "gemini",
            "content": "Reading it.",
            "toolCalls": [
                {
                    "id": call_id,
                    "name": "read_file",
                    "args": {"absolute_path": f"/src/module_{n}.py"},
                    "result": [{"functionResponse": response}],
                    "status": "success",
                }
            ],
        },
    ]
