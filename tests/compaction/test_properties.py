"""Invariants over generated conversations (hypothesis)."""

import copy
import json
from datetime import date

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact, validate_tool_pairs
from compaction.summary import END_MARKER, is_summary_message

from .builders import WORDS

CONFIG = CompactionConfig(
    tail_token_budget=120, fold_min_chars=40, protect_first_n=3, profile="classic"
)
REASONING = "PRIVATE-REASONING-MARKER"
TOOLS = ["terminal", "read_file", "search_files", "write_file", "patch", "web_extract", "mystery"]

text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=40
)
words = st.lists(
    st.sampled_from(["alpha", "beta", "gamma", "delta", "päth/ü.py", "error", "😀"]),
    min_size=3,
    max_size=60,
).map(" ".join)


@st.composite
def conversations(draw):
    messages = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": "system " + draw(text)})
    counter = 0
    for _ in range(draw(st.integers(min_value=1, max_value=9))):
        content = draw(words)
        if draw(st.integers(0, 5)) == 0:
            content = [
                {"type": "text", "text": content},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            ]
        messages.append({"role": "user", "content": content})
        for _ in range(draw(st.integers(0, 3))):
            k = draw(st.integers(1, 3))
            calls = []
            for _ in range(k):
                counter += 1
                args = {"path": draw(words)[:30], "command": draw(text)}
                calls.append(
                    {
                        "id": f"call_{counter}",
                        "type": "function",
                        "function": {
                            "name": draw(st.sampled_from(TOOLS)),
                            "arguments": json.dumps(args),
                        },
                    }
                )
            messages.append(
                {
                    "role": "assistant",
                    "content": draw(st.sampled_from([None, "", "checking"])),
                    "reasoning_content": REASONING,
                    "tool_calls": calls,
                }
            )
            for c in calls:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": c["id"],
                        "content": draw(words) * draw(st.integers(1, 4)),
                    }
                )
        if draw(st.booleans()):
            messages.append({"role": "assistant", "content": draw(words), "reasoning": REASONING})
    return messages


PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run(messages):
    return compact(messages, config=CONFIG, tokenizer=WORDS, now=date(2026, 1, 1))


@PROPS
@given(conversations())
def test_output_is_always_provider_valid_and_input_untouched(messages):
    snapshot = copy.deepcopy(messages)
    result = run(messages)
    assert messages == snapshot
    assert validate_tool_pairs(result.messages) == []
    json.dumps(result.report.to_dict())
    for m in result.messages:
        assert set(m) <= {
            "role",
            "content",
            "tool_calls",
            "tool_call_id",
            "name",
            "reasoning",
            "reasoning_content",
        }


@PROPS
@given(conversations())
def test_head_is_unchanged_and_latest_user_is_after_the_summary(messages):
    result = run(messages)
    if result.report.status != "compacted":
        assert result.messages == messages
        return
    head_end = result.report.boundaries["head"][1]
    out = result.messages
    images = "[Attached image — stripped after compression]"
    for i in range(head_end):
        original, new = messages[i], out[i]
        if i == 0 and original["role"] == "system":
            assert new["content"].startswith(original["content"])
        elif isinstance(original["content"], list):
            assert [p.get("text") for p in original["content"] if p["type"] == "text"] == [
                p["text"] for p in new["content"] if p["type"] == "text" and p["text"] != images
            ]
        else:
            assert new == original
    users = [i for i, m in enumerate(messages) if m["role"] == "user" and not is_summary_message(m)]
    latest = users[-1]
    if latest >= head_end:
        wanted = messages[latest]["content"]
        wanted_text = wanted if isinstance(wanted, str) else wanted[0]["text"]
        idx = result.summary_index
        after = []
        for j, m in enumerate(out[idx:], start=idx):
            c = m["content"]
            c = c if isinstance(c, str) else " ".join(p.get("text", "") for p in c or [])
            after.append(
                c.split(END_MARKER, 1)[1]
                if j == idx and END_MARKER in c
                else (c if j != idx else "")
            )
        assert any(wanted_text in c for c in after)


@PROPS
@given(conversations())
def test_reasoning_never_reaches_the_summarizer(messages):
    result = run(messages)
    assert REASONING not in (result.report.summarizer_input or "")
    assert REASONING not in (result.report.summarizer_prompt or "")
    assert REASONING not in (result.report.summary or "")


@PROPS
@given(conversations())
def test_token_count_never_increases(messages):
    result = run(messages)
    tokens = result.report.tokens
    if result.report.boundaries["middle"][0] < result.report.boundaries["middle"][1]:
        assert tokens["after"] <= tokens["before"]
    assert sum(result.report.output_message_tokens) <= sum(result.report.message_tokens)
