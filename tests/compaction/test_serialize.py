from compaction import CompactionConfig
from compaction.serialize import serialize_middle

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
    assert (action.kind, action.index, action.chars_before) == ("truncate", 7, 10_000)


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
