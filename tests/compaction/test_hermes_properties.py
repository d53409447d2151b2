"""Invariants of the hermes profile over generated agent conversations (hypothesis).

The default profile must end under the threshold whenever that is possible: here every
user and assistant text is small next to the window, so it always is, whatever the tool
outputs (huge, duplicated, in the head or after one user message) and the window.
"""

from __future__ import annotations

import json
from datetime import date

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact, validate_tool_pairs

from .builders import WORDS

TOOLS = ["terminal", "read_file", "search_files", "write_file", "patch", "web_extract"]
WINDOWS = [8_000, 16_000, 32_000, 64_000, 200_000]


@st.composite
def agent_conversations(draw):
    messages = [{"role": "system", "content": "You are an agent. " * draw(st.integers(1, 20))}]
    bodies = ["same output " * 300, "another shared body " * 50]
    n = 0
    for turn in range(draw(st.integers(1, 12))):
        messages.append(
            {"role": "user", "content": f"ask {turn} " + "word " * draw(st.integers(1, 60))}
        )
        for _ in range(draw(st.integers(0, 25))):
            n += 1
            name = draw(st.sampled_from(TOOLS))
            args = {"path": f"src/f{n}.py", "command": f"make {n}"}
            if draw(st.integers(0, 6)) == 0:
                args["content"] = "x" * draw(st.integers(600, 5_000))
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{n}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                    ],
                }
            )
            kind = draw(st.integers(0, 4))
            if kind == 0:
                body = draw(st.sampled_from(bodies))
            elif kind == 1:
                body = json.dumps(
                    {"output": "line\n" * draw(st.integers(0, 3_000)), "exit_code": 0}
                )
            else:
                body = f"result {n} " * draw(st.integers(0, 4_000))
            messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": body})
        if draw(st.booleans()):
            messages.append({"role": "assistant", "content": "reply " * draw(st.integers(1, 80))})
    return messages


@given(agent_conversations(), st.sampled_from(WINDOWS), st.booleans())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_default_profile_ends_under_the_threshold(messages, window, force):
    config = CompactionConfig(context_length=window)
    threshold = config.threshold_tokens
    assert threshold < window
    out = compact(messages, config=config, tokenizer=WORDS, force=force, now=date(2026, 1, 1))
    report = out.report.to_dict()
    before = report["tokens"]["before"]
    if out.status == "compacted":
        assert report["tokens"]["after"] < threshold, report["warnings"]
        assert validate_tool_pairs(out.messages) == []
        assert not {w["code"] for w in report["warnings"]} & {"over_threshold", "over_window"}
    else:
        # Nothing to summarize: only possible when the conversation already fits.
        assert before < threshold or len(messages) <= 3, (report["reason"], before, threshold)
    for action in report["slimming"]:
        assert action["region"] in ("head", "middle", "tail")
