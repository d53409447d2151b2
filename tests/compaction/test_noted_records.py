"""The hermes passes note the summarizer record length of the rows they see (``Work.record_chars``)
so the middle is measured without a second look at them; every noted length must be what
``measure_records`` computes for the row as it stands after the passes."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact, engine, generate_conversation
from compaction.passes import Work
from compaction.room import prepare
from compaction.serialize import RecordSizes, _record_length, measure_records

DAY = date(2026, 1, 2)
_TEXTS = st.one_of(
    st.none(),
    st.just(""),
    st.text(max_size=40),
    st.just("<think>plan</think>then act"),  # a reasoning block the record strips
    st.just("x" * 7_000),  # longer than content_max: truncated in the record
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)})),
)
_NAMES = st.one_of(st.sampled_from(["terminal", "read_file", "é工具"]), st.just(""), st.none())
_ARGS = st.one_of(
    st.builds(lambda n: json.dumps({"path": "a" * n}), st.integers(0, 2_000)),
    st.just("{not json"),
    st.builds(dict),  # arguments as an object, not a string
)


@st.composite
def _call(draw: Any, index: int) -> Any:
    shape = draw(st.sampled_from(["openai", "openai", "no_id", "no_function", "not_a_dict"]))
    if shape == "not_a_dict":
        return "call"
    fn = {"name": draw(_NAMES), "arguments": draw(_ARGS)}
    if shape == "no_function":
        return {"id": f"c{index}", "name": "terminal", "input": {"command": "ls"}}
    return {"function": fn, "type": "function"} | ({} if shape == "no_id" else {"id": f"c{index}"})


@st.composite
def _conversation(draw: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for turn in range(draw(st.integers(1, 12))):
        messages.append({"role": "user", "content": draw(_TEXTS)})
        calls = [draw(_call(turn * 10 + k)) for k in range(draw(st.integers(0, 3)))]
        row: dict[str, Any] = {"role": "assistant", "content": draw(_TEXTS)}
        if calls:
            row["tool_calls"] = calls
        messages.append(row)
        for k, one in enumerate(calls):
            if isinstance(one, dict) and "id" in one:
                output = draw(st.sampled_from(["ok", "line\n" * 200, "y" * 7_000]))
                messages.append(
                    {"role": "tool", "tool_call_id": f"c{turn * 10 + k}", "content": output}
                )
    return messages


def _noted_rows_match(messages: list[dict[str, Any]], config: CompactionConfig) -> int:
    work = Work.start(messages, lambda m: 1, config)
    prepared = prepare(work, [50] * len(messages), config.protect_first_n)
    noted = 0
    for pos, chars in enumerate(prepared.work.record_chars):
        if chars:
            message = prepared.work.messages[pos]
            assert chars == _record_length(message, config)[0], (pos, message)
            sizes = RecordSizes()
            measure_records([message], config, sizes, 0, 1)
            assert not sizes.truncations  # a noted record is sent whole
            noted += 1
    return noted


@settings(max_examples=300, deadline=None)
@given(_conversation())
def test_every_noted_record_length_is_the_measured_one(messages):
    _noted_rows_match(messages, CompactionConfig(tail_token_budget=100, args_shrink_min_chars=300))


@pytest.mark.parametrize("size", [600, 3_000])
def test_noting_changes_nothing_in_the_result(size, monkeypatch):
    messages = generate_conversation(size, seed=7)
    assert _noted_rows_match(messages, CompactionConfig()) > size // 4
    config = CompactionConfig(context_length=16_000)
    noted = compact(messages, config=config, force=True, now=DAY)
    # Every row visited and measured, as before the passes noted anything.
    monkeypatch.setattr(engine, "_settled", lambda *args: None)
    measured = compact(messages, config=config, force=True, now=DAY)
    assert noted.report.status == "compacted"
    assert noted.report.summarizer_input == measured.report.summarizer_input
    assert noted.report.slimming == measured.report.slimming
    assert noted.messages == measured.messages


def test_every_summary_opening_starts_with_a_bracket():
    # Work.start calls is_summary_text only for texts starting with "[" or a blank.
    from compaction.markers import _OPENINGS

    assert _OPENINGS
    assert all(opening.startswith("[") for opening in _OPENINGS)


@pytest.mark.parametrize("lead", ["", "  \n", "\u3000"])
def test_a_summary_in_the_input_is_found_by_the_hermes_walk(lead):
    from compaction.markers import wrap_summary

    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    messages.append({"role": "user", "content": lead + wrap_summary("## Goal\nport the parser")})
    messages += generate_conversation(300, seed=3)[1:]
    work = Work.start(messages, lambda m: 1, CompactionConfig())
    assert work.summary_rows == [2]
