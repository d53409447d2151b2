import pytest

from compaction import CompactionConfig
from compaction.boundary import find_boundaries

from .builders import assistant, call, result, system, user


def bounds(messages, budget, tokens=None, **cfg):
    tokens = tokens or [10] * len(messages)
    config = CompactionConfig(tail_token_budget=budget, **cfg)
    return find_boundaries(messages, tokens, config)


def kinds(b):
    return [e.kind for e in b.events]


def test_head_is_system_plus_first_three():
    messages = [
        system(),
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant("a2"),
        user("u3"),
        assistant("a3"),
    ]
    b = bounds(messages, budget=20)
    assert b.head_end == 4
    assert b.tail_start == 7
    assert b.to_dict() == {"head": [0, 4], "middle": [4, 7], "tail": [7, 9]}


def test_without_system_prompt_head_is_first_three():
    messages = [
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant("a2"),
    ]
    b = bounds(messages, budget=20)
    assert b.head_end == 3
    assert b.tail_start == 4


def test_head_moves_past_tool_rows():
    messages = [
        system(),
        user("u0"),
        assistant(None, call("c1"), call("c2")),
        result("c1"),
        result("c2"),
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant("a2"),
    ]
    b = bounds(messages, budget=20)
    assert b.head_end == 5
    assert b.events[0].to_dict() == {"kind": "head_aligned_past_tools", "from": 4, "to": 5}


def test_cut_on_tool_result_moves_back_onto_the_assistant():
    # the tail budget alone would start the tail at the second tool result
    messages = [
        system(),
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant(None, call("c1"), call("c2")),
        result("c1"),
        result("c2"),
        assistant("done"),
    ]
    b = bounds(messages, budget=20)
    assert b.tail_start == 5  # then the latest user pulls it to u2
    assert kinds(b) == ["tool_group_kept_whole", "latest_user_pulled_in"]
    assert b.events[0].to_dict() == {"kind": "tool_group_kept_whole", "from": 8, "to": 6}


def test_parallel_tool_calls_are_never_split():
    messages = [
        system(),
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant("a2"),
        assistant(None, call("c1"), call("c2"), call("c3")),
        result("c1"),
        result("c2"),
        result("c3"),
    ]
    for budget in range(0, 120, 10):
        b = bounds(messages, budget=budget, tokens=[10] * len(messages))
        assert messages[b.tail_start]["role"] != "tool"


def test_latest_user_message_is_pulled_into_the_tail():
    big = 1_000
    messages = [
        system(),
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1"),
        user("latest"),
        assistant(None, call("c1")),
        result("c1", "x"),
        assistant("a"),
    ]
    tokens = [10, 10, 10, 10, 10, 10, 10, big, 10]
    b = bounds(messages, budget=50, tokens=tokens)
    assert b.tail_start == 5
    assert "latest_user_pulled_in" in kinds(b)


def test_latest_visible_assistant_reply_is_pulled_in():
    messages = [
        system(),
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant("visible reply"),
        user("latest"),
        assistant("", call("c1")),
        result("c1", "x"),
    ]
    tokens = [10] * 9 + [1_000]
    b = bounds(messages, budget=50, tokens=tokens)
    # nothing fits; the latest user (7) and the latest visible reply (6) are pulled in
    assert b.tail_start == 6
    assert kinds(b)[-2:] == ["latest_user_pulled_in", "latest_assistant_pulled_in"]


def test_assistant_with_only_tool_calls_is_not_a_visible_reply():
    messages = [
        system(),
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1"),
        user("u2"),
        assistant("reply"),
        user("latest"),
        assistant(None, call("c1")),
        result("c1"),
    ]
    b = bounds(messages, budget=1_000)
    assert b.tail_start == 4  # everything fits after the head


def test_huge_single_message_leaves_tail_anchored():
    messages = [
        system(),
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1"),
        user("x" * 10),
        assistant("huge"),
    ]
    tokens = [10, 10, 10, 10, 10, 10, 500_000]
    b = bounds(messages, budget=100, tokens=tokens)
    assert b.tail_start == 5


def test_empty_middle_when_everything_fits():
    messages = [system(), user("u0"), assistant("a0"), user("u1"), assistant("a1")]
    b = bounds(messages, budget=20_000)
    assert b.middle_empty


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_tiny_conversations(n):
    messages = [system(), user("u"), assistant("a")][:n]
    b = bounds(messages, budget=0)
    assert b.middle_empty


def test_tool_result_first_in_the_tail_without_a_caller_stays():
    # an orphan result (its call was lost upstream): nothing to align to
    messages = [
        system(),
        user("u0"),
        assistant("a0"),
        user("u1"),
        assistant("a1"),
        user("u2"),
        result("ghost"),
        assistant("a2"),
    ]
    b = bounds(messages, budget=20)
    assert b.tail_start == 5  # latest user pulled in; sanitize drops the orphan later
