import pytest

from compaction.sanitize import STUB_RESULT, sanitize_tool_pairs, validate_tool_pairs

from .builders import assistant, call, result, user


def kinds(actions):
    return [(a.kind, a.tool_call_id) for a in actions]


def test_orphan_results_are_dropped():
    messages = [user("u"), result("ghost"), assistant("a")]
    out, actions = sanitize_tool_pairs(messages)
    assert out == [user("u"), assistant("a")]
    assert [a.to_dict() for a in actions] == [
        {"kind": "dropped_orphan_result", "tool_call_id": "ghost", "index": 1}
    ]


def test_stub_is_inserted_right_after_a_call_whose_result_is_gone():
    messages = [assistant(None, call("c1"), call("c2")), result("c2"), user("next")]
    out, actions = sanitize_tool_pairs(messages)
    assert out[:3] == [
        messages[0],
        result("c2"),
        {"role": "tool", "tool_call_id": "c1", "content": STUB_RESULT},
    ]
    assert out[3] == user("next")
    assert kinds(actions) == [("inserted_stub", "c1")]
    assert validate_tool_pairs(out) == []


def test_strip_mode_removes_the_call_instead():
    messages = [assistant(None, call("c1")), user("next")]
    out, actions = sanitize_tool_pairs(messages, mode="strip")
    assert out[0] == {"role": "assistant", "content": "(tool call removed)"}
    assert kinds(actions) == [("stripped_call", "c1")]
    assert "tool_calls" in messages[0]  # input untouched


def test_strip_keeps_answered_calls():
    messages = [assistant("text", call("c1"), call("c2")), result("c2")]
    out, _ = sanitize_tool_pairs(messages, mode="strip")
    assert [c["id"] for c in out[0]["tool_calls"]] == ["c2"]
    assert out[0]["content"] == "text"


@pytest.mark.parametrize("mode", ["stub", "strip"])
def test_missing_ids_are_tolerated(mode):
    messages = [assistant(None, call(None)), result(None), user("u")]
    out, actions = sanitize_tool_pairs(messages, mode=mode)
    assert validate_tool_pairs(out) == []
    assert ("stripped_call", None) in kinds(actions)
    assert ("dropped_orphan_result", None) in kinds(actions)


def test_duplicate_results_and_results_after_a_gap_are_dropped():
    messages = [assistant(None, call("c1")), result("c1"), result("c1"), user("u"), result("c1")]
    out, actions = sanitize_tool_pairs(messages)
    assert out == messages[:2] + [user("u")]
    assert [a.index for a in actions] == [2, 4]


def test_id_variants_match():
    messages = [
        assistant(None, {"call_id": "x|item", "function": {"name": "t", "arguments": "{}"}}),
        result("item"),
    ]
    out, actions = sanitize_tool_pairs(messages)
    assert actions == []
    assert out == messages


def test_valid_lists_are_left_alone():
    messages = [
        user("u"),
        assistant(None, call("a"), call("b")),
        result("b"),
        result("a"),
        assistant("x"),
    ]
    out, actions = sanitize_tool_pairs(messages)
    assert out == messages
    assert actions == []
    assert all(o is m for o, m in zip(out, messages, strict=True))
