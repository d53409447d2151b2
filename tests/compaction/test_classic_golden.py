"""Golden hashes of the ``classic`` profile's output, taken before the hermes profile existed.

The classic profile must stay byte-for-byte the seed's engine (the inspector compares against
it). Each case hashes the output messages and the report fields that existed before the
profile work; keys added to every report or action later (``profile``, ``warnings``,
``region``, ``line``, ...) are left out, timings too. A change to any hash means classic
output changed: that is a bug, not a fixture to refresh.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date
from typing import Any

import pytest

from compaction import CompactionConfig, compact, generate_conversation
from tests.compaction.builders import (
    WORDS,
    assistant,
    call,
    image_part,
    long_conversation,
    result,
    system,
    user,
)

_REPORT_KEYS = (
    "status",
    "reason",
    "focus",
    "now",
    "trigger",
    "counts",
    "boundaries",
    "alignment",
    "message_tokens",
    "tokens",
    "slimming_totals",
    "summarizer_input",
    "summarizer_prompt",
    "summary",
    "summary_body",
    "summary_role",
    "summary_index",
    "summarizer",
    "summarizer_model",
    "fallbacks",
    "previous_summary_used",
    "sanitization",
    "output_message_tokens",
)
_ACTION_KEYS = (
    "index",
    "kind",
    "role",
    "tool_name",
    "chars_before",
    "chars_after",
    "fold_line",
    "before_excerpt",
    "after",
)


def _classic(**overrides: Any) -> CompactionConfig:
    return CompactionConfig(profile="classic", **overrides)


def _digest(messages: list[dict[str, Any]], config: CompactionConfig, **kwargs: Any) -> str:
    out = compact(messages, config=config, now=date(2026, 1, 15), **kwargs)
    report = out.report.to_dict()
    kept = {k: report[k] for k in _REPORT_KEYS}
    kept["slimming"] = [{k: a[k] for k in _ACTION_KEYS} for a in report["slimming"]]
    blob = json.dumps([out.messages, kept], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _images_and_truncation() -> list[dict[str, Any]]:
    messages = [system(), user("look at this " + "x " * 50)]
    messages[1] = {"role": "user", "content": [{"type": "text", "text": "see"}, image_part()]}
    for i in range(6):
        messages.append(user(f"step {i}: " + "please check " * 40))
        messages.append(assistant(None, call(f"r{i}", "read_file", path=f"src/m{i}.py")))
        messages.append(result(f"r{i}", "def f():\n    return 1\n" * 400))
        messages.append(assistant("long reply " + "word " * 2_000))
    messages.append({"role": "user", "content": [{"type": "text", "text": "now"}, image_part()]})
    messages.append(assistant("ok, looking"))
    return messages


def _capped_tail() -> list[dict[str, Any]]:
    # One user message followed by a long tool chain: the latest-user anchor pulls the
    # whole chain into the tail.
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
    "synthetic_small_window": (
        lambda: generate_conversation(400, seed=3),
        {"context_length": 32_000, "tail_token_budget": 4_000},
        {},
    ),
    "long_words": (lambda: long_conversation(12, 60), {"tail_token_budget": 300}, {"tok": 1}),
    "images_truncation": (_images_and_truncation, {"tail_token_budget": 2_000}, {}),
    "capped_tail": (_capped_tail, {"tail_token_budget": 50}, {"tok": 1}),
    "strip_mode_focus": (
        lambda: generate_conversation(500, seed=11),
        {"sanitize_mode": "strip", "decay_head_after_first": True},
        {"focus": "the parser"},
    ),
}

GOLDEN = {
    "synthetic_300": "94d8cb3234b1ea58",
    "synthetic_2000": "c726eef57bc1fa9d",
    "synthetic_small_window": "67e27b6fa79df1d4",
    "long_words": "2787102146697de1",
    "images_truncation": "a0a76c44da019887",
    "capped_tail": "68a2fad9dbf51726",
    "strip_mode_focus": "7f40ed4b9802e5c7",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_classic_output_is_unchanged(name: str) -> None:
    build, overrides, extra = CASES[name]
    kwargs: dict[str, Any] = {"force": True}
    if extra.get("tok"):
        kwargs["tokenizer"] = WORDS
    if extra.get("focus"):
        kwargs["focus"] = extra["focus"]
    assert _digest(build(), _classic(**overrides), **kwargs) == GOLDEN[name]
