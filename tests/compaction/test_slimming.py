import json

import pytest

from compaction import CompactionConfig
from compaction.slimming import (
    FOLDERS,
    IMAGE_PLACEHOLDER,
    TRUNCATION_MARKER,
    Slimming,
    build_call_index,
    fold_tool_result,
    slim_middle,
    slim_range,
    strip_historical_images,
    truncate_text,
)

from .builders import assistant, call, image_part, result, user

BODY = "x\n" * 150  # 300 chars, 151 lines


@pytest.mark.parametrize(
    ("tool", "args", "content", "expected"),
    [
        (
            "terminal",
            {"command": "pytest -q"},
            '{"output": "a\\nb", "exit_code": 1}',
            "[terminal] ran `pytest -q` -> exit 1, 1 lines output",
        ),
        (
            "terminal",
            {"command": "c" * 90},
            BODY,
            f"[terminal] ran `{'c' * 77}...` -> exit ?, 151 lines output",
        ),
        (
            "read_file",
            {"path": "src/a.py", "offset": 40},
            "y" * 15_200,
            "[read_file] read src/a.py from line 40 (15,200 chars)",
        ),
        ("read_file", {}, BODY, "[read_file] read ? from line 1 (300 chars)"),
        (
            "write_file",
            {"path": "a.txt", "content": "1\n2\n3"},
            BODY,
            "[write_file] wrote to a.txt (3 lines)",
        ),
        ("write_file", {"path": "a.txt"}, BODY, "[write_file] wrote to a.txt (? lines)"),
        (
            "search_files",
            {"pattern": "x", "path": "dir/"},
            json.dumps({"total_count": 12}),
            "[search_files] content search for 'x' in dir/ -> 12 matches",
        ),
        (
            "search_files",
            {"target": "files"},
            BODY,
            "[search_files] files search for '?' in . -> ? matches",
        ),
        ("patch", {"path": "a.py"}, BODY, "[patch] replace in a.py (300 chars result)"),
        ("web_search", {"query": "q"}, BODY, "[web_search] query='q' (300 chars result)"),
        (
            "web_extract",
            {"urls": ["https://a", "https://b", "https://c"]},
            "z" * 8_400,
            "[web_extract] https://a (+2 more) (8,400 chars)",
        ),
        (
            "web_extract",
            {"urls": [{"href": "https://h"}]},
            BODY,
            "[web_extract] https://h (300 chars)",
        ),
        (
            "execute_code",
            {"code": "print(1)\nprint(2)"},
            BODY,
            "[execute_code] `print(1) print(2)` (151 lines output)",
        ),
        (
            "delegate_task",
            {"goal": "g" * 70},
            BODY,
            f"[delegate_task] '{'g' * 57}...' (300 chars result)",
        ),
        (
            "browser_navigate",
            {"url": "https://x"},
            BODY,
            "[browser_navigate] https://x (300 chars)",
        ),
        ("browser_click", {"ref": "e12"}, BODY, "[browser_click] ref=e12 (300 chars)"),
        ("browser_snapshot", {}, BODY, "[browser_snapshot] (300 chars)"),
        ("vision_analyze", {"question": "what?"}, BODY, "[vision_analyze] 'what?' (300 chars)"),
        ("memory", {"action": "add", "target": "user"}, BODY, "[memory] add on user"),
        ("todo", {}, BODY, "[todo] updated task list"),
        ("list_files", {"path": "src"}, BODY, "[list_files] listed src (300 chars)"),
        ("list_files", {}, BODY, "[list_files] listed . (300 chars)"),
        (
            "my_tool",
            {"alpha": "a" * 50, "beta": 2, "gamma": 3},
            BODY,
            f"[my_tool] alpha={'a' * 40} beta=2 (300 chars result)",
        ),
    ],
)
def test_fold_formats(tool, args, content, expected):
    assert fold_tool_result(tool, args, content) == expected


def test_adding_a_tool_is_one_registry_entry(monkeypatch):
    monkeypatch.setitem(FOLDERS, "deploy", lambda tool, args, content: f"[deploy] {args['env']}")
    assert fold_tool_result("deploy", {"env": "prod"}, BODY) == "[deploy] prod"


def test_a_failing_folder_falls_back():
    assert fold_tool_result("read_file", None, BODY) == "[read_file] (300 chars result)"  # type: ignore[arg-type]


def test_truncation_keeps_head_and_tail():
    config = CompactionConfig()
    text = "a" * 4_000 + "b" * 3_000 + "c" * 1_500
    out = truncate_text(text, config)
    assert out == "a" * 4_000 + TRUNCATION_MARKER + "c" * 1_500
    assert truncate_text("short", config) == "short"
    assert truncate_text("d" * 6_000, config) == "d" * 6_000


def test_slim_middle_folds_long_results_only_and_reports():
    middle = [
        user("look"),
        assistant(None, call("c1", "read_file", path="a.py"), call("c2", "terminal", command="ls")),
        result("c1", "y" * 1_000),
        result("c2", "short"),
    ]
    slimming = slim_middle(middle, [10, 11, 12, 13], CompactionConfig(), build_call_index(middle))
    slimmed = slimming.slimmed_messages()
    assert slimmed[2]["content"] == "[read_file] read a.py from line 1 (1,000 chars)"
    assert slimmed[3] is middle[3]
    assert middle[2]["content"] == "y" * 1_000  # input untouched
    assert slimming.messages[2] is middle[2]  # the fold line lives in folds, not a copy
    assert slimming.folds == {2: slimmed[2]["content"]}
    (action,) = slimming.actions
    assert action["index"] == 12
    assert (action["kind"], action["tool_name"], action["chars_before"]) == (
        "fold",
        "read_file",
        1_000,
    )
    assert action["fold_line"] == slimmed[2]["content"]
    assert len(action["before_excerpt"]) == 600


def test_fold_of_a_result_without_its_call_is_generic_unknown():
    slimming = slim_middle([result("gone", BODY)], [0], CompactionConfig(), {})
    assert slimming.folds == {0: "[unknown] (300 chars result)"}


def test_images_in_the_middle_become_the_placeholder():
    message = {"role": "user", "content": [{"type": "text", "text": "see"}, image_part()]}
    middle = [message]
    slimming = slim_middle(middle, [5], CompactionConfig(), {})
    assert slimming.messages[0]["content"][1] == {"type": "text", "text": IMAGE_PLACEHOLDER}
    assert slimming.actions[0]["kind"] == "image"
    assert slimming.actions[0]["index"] == 5
    assert message["content"][1]["type"] == "image_url"
    assert middle[0] is message  # the list given is copied before the replacement


def test_only_the_newest_user_image_message_keeps_images():
    old = {"role": "user", "content": [{"type": "text", "text": "a"}, image_part("AAA")]}
    tool_img = {"role": "tool", "tool_call_id": "c", "content": [image_part("BBB")]}
    newest = {"role": "user", "content": [image_part("CCC"), {"type": "text", "text": "b"}]}
    after = {"role": "tool", "tool_call_id": "d", "content": [image_part("DDD")]}
    out, changes = strip_historical_images([old, tool_img, newest, user("text only"), after])
    assert out[0]["content"][1] == {"type": "text", "text": IMAGE_PLACEHOLDER}
    assert out[1]["content"] == [{"type": "text", "text": IMAGE_PLACEHOLDER}]
    assert out[2] is newest
    assert out[4] is after
    assert [c[0] for c in changes] == [0, 1]
    assert old["content"][1]["type"] == "image_url"


def test_no_user_images_means_nothing_is_stripped():
    tool_img = {"role": "tool", "tool_call_id": "c", "content": [image_part()]}
    out, changes = strip_historical_images([tool_img, user("x")])
    assert out[0] is tool_img
    assert changes == []


def test_slimming_range_by_range_equals_slimming_at_once():
    from compaction import generate_conversation

    middle = generate_conversation(400, seed=9)[1:]
    indices = list(range(1, 401))
    whole = slim_middle(middle, indices, CompactionConfig(), {})
    parts = Slimming(middle)
    for start in range(0, len(middle), 37):
        slim_range(parts, indices, CompactionConfig(), start, min(start + 37, len(middle)))
    assert (parts.actions, parts.folds, parts.calls) == (whole.actions, whole.folds, whole.calls)
    assert parts.slimmed_messages() == whole.slimmed_messages()
    assert {a["kind"] for a in whole.actions} == {"fold", "image"}
    assert parts.messages is not middle  # copied at the first image replacement
