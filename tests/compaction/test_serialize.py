import pytest

from compaction import CompactionConfig, generate_conversation
from compaction.serialize import RecordSizes, measure_records, serialize_middle

from .builders import assistant, call, image_part, result, user


def test_records_are_role_labelled_and_reasoning_never_included():
    middle = [
        user("hello"),
        assistant(
            "<think>secret plan</think>visible",
            call("c1", "terminal", command="ls"),
            reasoning_content="SECRET-REASONING",
            reasoning="SECRET-2",
            thinking="SECRET-3",
        ),
        result("c1", "[terminal] ran `ls` -> exit 0, 3 lines output"),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "pic"},
                image_part(),
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
            ],
        },
        {"role": "assistant", "content": None},
    ]
    text, actions = serialize_middle(middle, 0, CompactionConfig())
    assert text == (
        "[USER]: hello\n\n"
        '[ASSISTANT]: visible\n[Tool calls:\n  terminal({"command": "ls"})\n]\n\n'
        "[TOOL RESULT c1]: [terminal] ran `ls` -> exit 0, 3 lines output\n\n"
        "[USER]: pic\n[image]\n[image: https://x/y.png]\n\n"
        "[ASSISTANT]: "
    )
    assert "SECRET" not in text
    assert "secret plan" not in text
    assert actions == []


def test_long_content_is_truncated_and_reported():
    middle = [user("a" * 10_000)]
    text, actions = serialize_middle(middle, 7, CompactionConfig())
    assert text == "[USER]: " + "a" * 4_000 + "\n...[truncated]...\n" + "a" * 1_500
    (action,) = actions
    assert (action["kind"], action["index"], action["chars_before"]) == ("truncate", 7, 10_000)


def test_long_tool_arguments_are_cut():
    middle = [assistant(None, call("c", "write_file", content="z" * 3_000))]
    text, _ = serialize_middle(middle, 0, CompactionConfig())
    line = text.splitlines()[2]
    assert line.endswith("...)")
    assert len(line) < 1_300


def test_whole_input_is_capped_with_a_marker():
    config = CompactionConfig(summary_input_max_chars=10_000)
    middle = [user(f"{i} " + "w" * 1_000) for i in range(40)]
    text, _ = serialize_middle(middle, 0, config)
    assert "...[summary input truncated: omitted" in text
    assert text.startswith("[USER]: 0 ")
    assert text.endswith("w" * 100)
    assert len(text) < 10_200


def _serialize_all_then_cap(middle, config):
    """The plain definition: every record joined, then cut to the cap around a marker."""
    from compaction.serialize import serialize_message

    text = "\n\n".join(serialize_message(m, config)[0] for m in middle)
    cap = config.summary_input_max_chars
    if len(text) <= cap:
        return text
    marker = (
        f"\n\n...[summary input truncated: omitted {len(text) - cap:,} chars from the middle to "
        "keep compression prompt bounded]...\n\n"
    )
    head = int(cap * 0.45)
    return text[:head] + marker + text[len(text) - (cap - head) :]


@pytest.mark.parametrize("cap", [1_000, 7_919, 20_000, 64_000, 10_000_000])
@pytest.mark.parametrize("seed", [1, 2])
def test_capped_input_equals_serializing_everything_then_cutting(cap, seed):
    # serialize_middle builds only the records the cap keeps; the result must not differ.
    config = CompactionConfig(
        summary_input_max_chars=cap, content_max=3_000, content_head=2_000, content_tail=500
    )
    middle = [m for m in generate_conversation(400, seed=seed) if m["role"] != "system"]
    middle.append(user("b" * 9_000))  # a truncated record in the dropped part or the tail
    middle.insert(150, user("c" * 9_000))
    text, actions = serialize_middle(middle, 10, config)
    assert text == _serialize_all_then_cap(middle, config)
    assert [a["index"] for a in actions] == [
        10 + i
        for i, m in enumerate(middle)
        if len(m.get("content") or "") > 3_000
        if isinstance(m.get("content"), str)
    ]


@pytest.mark.parametrize("first", [440, 441, 442, 443])
def test_cap_cut_next_to_a_record_separator(first):
    # head share 450 chars: the first record ends right around it, so the cut may fall on
    # the "\n\n" between records.
    config = CompactionConfig(summary_input_max_chars=1_000)
    middle = [user("x" * first), user("y" * 2_000), user("z" * 2_000), user("w" * 549)]
    text, _ = serialize_middle(middle, 0, config)
    assert text == _serialize_all_then_cap(middle, config)


@pytest.mark.parametrize("cap", [1_000, 64_000, 10_000_000])
@pytest.mark.parametrize("block", [1, 33, 10_000])
def test_fold_lines_and_sizes_measured_in_blocks_give_the_same_input(cap, block):
    # The engine hands the fold lines separately and measures the records block by block;
    # the input must equal serializing the folded messages whole.
    config = CompactionConfig(
        summary_input_max_chars=cap, content_max=3_000, content_head=2_000, content_tail=500
    )
    middle = [m for m in generate_conversation(300, seed=4) if m["role"] != "system"]
    middle.insert(40, user("c" * 9_000))
    middle.insert(200, user("d" * 9_000))
    folds = {i: f"[fold {i}]" for i, m in enumerate(middle) if m["role"] == "tool"}
    folded = [{**m, "content": folds[i]} if i in folds else m for i, m in enumerate(middle)]
    sizes = RecordSizes()
    for start in range(0, len(middle), block):
        stop = min(start + block, len(middle))
        measure_records(middle, config, sizes, start, stop, folds=folds, first_index=10)
    expected = serialize_middle(folded, 10, config)
    assert serialize_middle(middle, 10, config, folds=folds) == expected
    assert serialize_middle(middle, 10, config, folds=folds, sizes=sizes) == expected
    assert [a["index"] for a in expected[1]] == [50, 210]


def test_a_capped_input_is_built_without_joining_each_end_whole() -> None:
    # Over the cap, the input is the front's first 45 % and the back's last 55 % around a
    # marker. Joining each end whole, slicing and adding held it three times over at once.
    import sys
    import tracemalloc

    config = CompactionConfig(summary_input_max_chars=200_000)
    middle = [
        {"role": "user" if i % 2 else "assistant", "content": f"step {i} ✓ " + "word " * 400}
        for i in range(400)
    ]
    serialize_middle(middle[:2], 5, config)
    tracemalloc.start()
    text, _ = serialize_middle(middle, 5, config)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert "[summary input truncated" in text
    assert len(text) < 210_000
    assert peak < 2.2 * sys.getsizeof(text)  # was 3.3×
