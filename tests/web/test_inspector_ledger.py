"""The inspector shows the fact ledger of a hermes summary as its own section."""

from __future__ import annotations

import json
from datetime import date

from compaction import CompactionConfig, compact
from hermes_web.presenters.inspector import summary_sections


def _session() -> list[dict]:
    def call(cid: str, command: str) -> dict:
        arguments = json.dumps({"cmd": ["bash", "-lc", command]})
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": cid,
                    "type": "function",
                    "function": {"name": "exec_command", "arguments": arguments},
                }
            ],
        }

    def output(cid: str, text: str, code: int) -> dict:
        content = json.dumps({"output": text, "metadata": {"exit_code": code}})
        return {"role": "tool", "tool_call_id": cid, "content": content}

    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the cache."},
        {"role": "assistant", "content": "Looking."},
        {"role": "user", "content": "Never commit directly to main."},
        call("c1", "sed -n '1,120p' web/src/lib/cache.ts"),
        output("c1", "export const cache = new Map();\n" * 40, 0),
        call("c2", "npm test -- --run"),
        output("c2", "TypeError: cache.get is not a function\nTests: 1 failed", 1),
        {"role": "assistant", "content": "Found it. " + "word " * 60},
        {"role": "user", "content": "Go on. " + "word " * 60},
        {"role": "assistant", "content": "On it. " + "word " * 60},
    ]


def test_the_ledger_is_its_own_section_of_the_summary():
    config = CompactionConfig(context_length=200_000, tail_token_budget=60, protect_first_n=1)
    report = compact(_session(), config=config, now=date(2026, 12, 4), force=True).report
    sections = {s["heading"]: s["body"] for s in summary_sections(report.summary)["sections"]}
    ledger = sections["Fact Ledger"]
    assert "web/src/lib/cache.ts" in ledger
    assert "npm test -- --run -> exit 1" in ledger
    assert "TypeError: cache.get is not a function" in ledger
    assert "Never commit directly to main." in ledger
    assert "Fact Ledger" not in sections.get("Goal", "")
