"""A slimming action reads as the dict the report stores, but holds no copy of the input text
it shows an excerpt of (the excerpts of thousands of folds were most of a large compaction's
memory)."""

from __future__ import annotations

import json
import pickle
import tracemalloc

from compaction import CompactionConfig, compact, generate_conversation
from compaction.actions import SlimAction, make_action


def _texts(n: int) -> list[str]:
    return [f"{i:05d} " + "result line\n" * 500 for i in range(n)]


def test_actions_on_input_texts_hold_no_copies_of_them() -> None:
    messages = [
        {"role": "tool", "tool_call_id": f"c{i}", "content": t} for i, t in enumerate(_texts(1_000))
    ]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    actions = [
        make_action(
            i, "fold", m, m["content"], f"[fold {i}]", tool_name="x", fold_line=f"[fold {i}]"
        )
        for i, m in enumerate(messages)
    ]
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # 1,000 excerpts of 600 characters would be over 600 KB on their own.
    assert grown < 300_000, grown
    assert actions[7]["before_excerpt"] == messages[7]["content"][:600]


def test_a_text_the_engine_built_is_cut_at_once() -> None:
    message = {"role": "tool", "content": [{"type": "text", "text": "x" * 5_000}]}
    built = "x" * 5_000
    action = make_action(3, "truncate", message, built, "y" * 3_000)
    assert action["before_excerpt"] == "x" * 600
    assert action["chars_before"] == 5_000
    assert action["chars_after"] == 3_000
    assert action["after"] == "y" * 2_000
    assert len(action.as_dict()["before_excerpt"]) == 600


def test_an_action_reads_as_its_dict_and_gains_region_and_line_when_placed() -> None:
    message = {"role": "tool", "content": "out " * 400}
    action = make_action(
        5, "fold", message, message["content"], "[f]", tool_name="t", fold_line="[f]"
    )
    assert list(action) == [
        "index", "kind", "role", "tool_name", "chars_before", "chars_after",
        "fold_line", "before_excerpt", "after",
    ]  # fmt: skip
    assert action.get("region") is None
    assert "line" not in action
    action.place(2, 10)
    assert action["region"] == "middle"
    assert action["line"] == "[f]"
    assert dict(action) == action.as_dict()
    assert action == action.as_dict()
    assert pickle.loads(pickle.dumps(action)) == action.as_dict()


def test_a_report_stores_its_actions_as_plain_dicts() -> None:
    result = compact(
        generate_conversation(400, seed=3),
        config=CompactionConfig(context_length=16_000),
        force=True,
    )
    assert result.report.slimming
    assert all(isinstance(a, SlimAction) for a in result.report.slimming)
    stored = result.report.to_dict()["slimming"]
    assert all(type(a) is dict for a in stored)
    assert json.loads(result.report.to_json())["slimming"] == stored
    assert {a["region"] for a in stored} <= {"head", "middle", "tail"}
