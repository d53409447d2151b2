"""Golden hashes of the default ``hermes`` profile's output, taken before the speed work.

The speed work on issue #13 must not change what the hermes profile produces. Each case
hashes the output messages and the whole report except its timings. A changed hash means the
hermes output changed: a speed change that does this is a bug. (A deliberate behaviour change
to the profile refreshes these hashes in its own commit, saying why.)
"""

from __future__ import annotations

import hashlib
import json
from datetime import date
from typing import Any

import pytest

from compaction import CompactionConfig, compact, count_messages_tokens, generate_conversation
from tests.compaction.builders import (
    WORDS,
    assistant,
    call,
    long_conversation,
    result,
    system,
    user,
)


def _digest(messages: list[dict[str, Any]], config: CompactionConfig, **kwargs: Any) -> str:
    out = compact(messages, config=config, now=date(2026, 1, 15), **kwargs)
    report = out.report.to_dict()
    report.pop("timings_ms")
    blob = json.dumps([out.messages, report], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _secrets_and_failures() -> list[dict[str, Any]]:
    # Secrets for every redaction family, dated messages, real-looking failures, repeated
    # identical outputs (dedup) and a JSON terminal envelope.
    messages = [system(), user("deploy it; never touch prod; keep the API stable")]
    secrets = [
        "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "password = 'hunter2hunter2'",
        "curl https://bob:s3cr3tpass@example.com/x",
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789",
        "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAABCDEFGHIJKLMNOP in the env",
    ]
    for i in range(12):
        stamp = f"2025-06-{i + 1:02d}T10:00:00Z"
        messages.append(
            {"role": "user", "content": f"step {i}: fix tests/test_m{i}.py", "timestamp": stamp}
        )
        messages.append(
            assistant(None, call(f"t{i}", "terminal", command=f"pytest tests/test_m{i}.py"))
        )
        body = (
            f"FAILED tests/test_m{i}.py::test_parse - ValueError: bad input {i}\n"
            f"{secrets[i % len(secrets)]}\n"
            "Traceback (most recent call last):\n  File \"src/m.py\", line 3\nKeyError: 'x'\n"
            + "log line\n"
            * 30
        )
        messages.append(result(f"t{i}", json.dumps({"output": body, "exit_code": 1})))
        messages.append(assistant(None, call(f"r{i}", "read_file", path="src/same.py")))
        messages.append(result(f"r{i}", "def same():\n    return 42\n" * 200))
        messages.append(assistant(f"tried fix {i}; 3 passed, 1 failed in 0.{i}s"))
    messages.append(user("now make it green"))
    messages.append(assistant("working on it"))
    return messages


def _capped_tail() -> list[dict[str, Any]]:
    messages = [system(), user("first ask"), assistant("sure")]
    for i in range(4):
        messages.append(user(f"earlier ask {i} " + "word " * 30))
        messages.append(assistant(None, call(f"e{i}", "read_file", path=f"a{i}.py")))
        messages.append(result(f"e{i}", "content " * 300))
        messages.append(assistant(f"read a{i}.py " + "word " * 30))
    messages.append(user("fix everything"))
    for i in range(30):
        messages.append(assistant(None, call(f"t{i}", "terminal", command=f"make step{i}")))
        out = json.dumps({"output": "line\n" * (i + 1), "exit_code": i % 3})
        messages.append(result(f"t{i}", out))
    messages.append(assistant("all steps done"))
    return messages


CASES = {
    "synthetic_300": (lambda: generate_conversation(300, seed=1), {}, {}),
    "synthetic_2000": (lambda: generate_conversation(2_000, seed=7), {}, {}),
    "synthetic_2000_cached": (lambda: generate_conversation(2_000, seed=7), {}, {"cached": 1}),
    "synthetic_10000_cached": (
        lambda: generate_conversation(10_000, seed=42),
        {},
        {"cached": 1, "unforced": 1},
    ),
    "synthetic_small_window": (
        lambda: generate_conversation(400, seed=3),
        {"context_length": 32_000},
        {},
    ),
    "synthetic_8k_window": (
        lambda: generate_conversation(120, seed=5),
        {"context_length": 8_000},
        {},
    ),
    "long_words": (lambda: long_conversation(12, 60), {"tail_token_budget": 300}, {"tok": 1}),
    "secrets_failures": (_secrets_and_failures, {}, {}),
    "secrets_failures_small": (
        _secrets_and_failures,
        {"context_length": 16_000},
        {"focus": "tests"},
    ),
    "capped_tail": (_capped_tail, {"tail_token_budget": 50}, {"tok": 1}),
}

GOLDEN = {
    "capped_tail": "4c73bac8e99add8e",
    "long_words": "915e7b6b8f052f74",
    "secrets_failures": "fa701f7bd7f3419e",
    "secrets_failures_small": "d5243620440d084e",
    "synthetic_10000_cached": "60088a55deb8c5bc",
    "synthetic_2000": "3f5e2365452b80b6",
    "synthetic_2000_cached": "2119b0f42e244a96",
    "synthetic_300": "2e4630430154d2c9",
    "synthetic_8k_window": "4e6903cbf32af10d",
    "synthetic_small_window": "f142c5ddbf4c4b05",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hermes_output_is_unchanged(name: str) -> None:
    build, overrides, extra = CASES[name]
    config = CompactionConfig(profile="hermes", **overrides)
    messages = build()
    kwargs: dict[str, Any] = {} if extra.get("unforced") else {"force": True}
    if extra.get("tok"):
        kwargs["tokenizer"] = WORDS
    if extra.get("focus"):
        kwargs["focus"] = extra["focus"]
    if extra.get("cached"):
        kwargs["token_counts"] = count_messages_tokens(messages, config)
    assert _digest(messages, config, **kwargs) == GOLDEN[name]
