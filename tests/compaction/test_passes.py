"""The hermes profile's passes: each one's effect, its report action and its recall reference."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest

from compaction import CompactionConfig, compact, validate_tool_pairs
from compaction.passes import DEDUP_MARKER, hermes_fold, output_lines
from tests.compaction.builders import WORDS, assistant, call, image_part, result, system, user

DAY = date(2026, 3, 1)


def _run(messages: list[dict[str, Any]], **config: Any):
    cfg = CompactionConfig(**config)
    return compact(messages, config=cfg, now=DAY, force=True, tokenizer=WORDS)


def _actions(out, kind: str) -> list[dict[str, Any]]:
    return [a for a in out.report.to_dict()["slimming"] if a["kind"] == kind]


def _reading_agent(turns: int, body: str, *, first_body: str | None = None) -> list[dict]:
    messages = [system()]
    for i in range(turns):
        messages.append(user(f"ask {i}: look at the file again"))
        messages.append(assistant(None, call(f"r{i}", "read_file", path="src/big.py")))
        text = first_body if (i == 0 and first_body is not None) else body
        messages.append(result(f"r{i}", text))
        messages.append(assistant(f"read it, turn {i}"))
    return messages


def test_dedup_keeps_the_newest_copy_and_points_older_ones_at_it():
    body = "def handler():\n    return 42\n" * 60
    messages = _reading_agent(6, body)
    out = _run(messages, context_length=200_000, tail_token_budget=100_000)
    dedups = _actions(out, "dedup")
    newest = max(i for i, m in enumerate(messages) if m.get("content") == body)
    assert {a["index"] for a in dedups} == {
        i for i, m in enumerate(messages) if m.get("content") == body and i != newest
    }
    for a in dedups:
        assert a["line"] == f"{DEDUP_MARKER} [ref:{newest}]"
        assert a["chars_before"] == len(body)
        assert a["chars_after"] == len(a["line"])
    # The head's copy (index 3) is slimmed too: head rows are not exempt.
    assert any(a["index"] == 3 and a["region"] == "head" for a in dedups)
    assert any(m.get("content") == body for m in out.messages)


def test_a_huge_tool_result_in_the_head_is_folded():
    big = "x = 1\n" * 20_000  # 120 KB, read before anything else
    messages = _reading_agent(8, "small output " * 30, first_body=big)
    out = _run(messages, context_length=200_000, tail_token_budget=2_000)
    # Folded by the prune pass, or demoted when the prune walk protected it.
    folds = [a for a in _actions(out, "fold") + _actions(out, "demote") if a["index"] == 3]
    assert folds
    assert folds[0]["region"] == "head"
    assert folds[0]["line"] == "[read_file] read src/big.py from line 1 (120,000 chars) [ref:3]"
    assert all(big not in json.dumps(m) for m in out.messages)
    classic = compact(
        messages,
        config=CompactionConfig(profile="classic", tail_token_budget=2_000),
        now=DAY,
        force=True,
        tokenizer=WORDS,
    )
    assert any(m.get("content") == big for m in classic.messages)  # the seed keeps it forever


def test_tool_arguments_are_shrunk_with_a_marker_that_says_it_is_not_part_of_the_call():
    content = "line of the new file\n" * 400
    messages = [system(), user("write the file")]
    messages.append(assistant(None, call("w1", "write_file", path="out.txt", content=content)))
    messages.append(result("w1", '{"ok": true}'))
    for i in range(12):
        messages.append(user(f"next {i} " + "word " * 40))
        messages.append(assistant(f"done {i} " + "word " * 40))
    out = _run(messages, context_length=200_000, tail_token_budget=400, protect_first_n=3)
    shrinks = _actions(out, "args_shrink")
    assert [a["index"] for a in shrinks] == [2]
    assert shrinks[0]["region"] == "head"
    args = json.loads(out.messages[2]["tool_calls"][0]["function"]["arguments"])
    assert args["path"] == "out.txt"
    assert args["content"].startswith(content[:200])
    assert "NOT part of the original tool call" in args["content"]
    assert "[ref:2]" in args["content"]
    assert len(args["content"]) < len(content)


def test_only_the_newest_three_tool_images_are_kept():
    messages = [system(), user("take screenshots")]
    for i in range(5):
        messages.append(assistant(None, call(f"s{i}", "browser_vision", url=f"https://x/{i}")))
        content = [{"type": "text", "text": f"shot {i}"}, image_part()]
        messages.append({"role": "tool", "tool_call_id": f"s{i}", "content": content})
    messages.append(assistant("all taken"))
    out = _run(messages, context_length=200_000, tail_token_budget=100_000)
    retired = _actions(out, "image_retire")
    assert sorted(a["index"] for a in retired) == [3, 5]
    assert all("[screenshot removed to save context]" in a["line"] for a in retired)


def test_terminal_folds_count_the_output_inside_a_json_envelope():
    twenty = "\n".join(f"abc{i} commit message" for i in range(20))
    envelope = json.dumps({"output": twenty, "exit_code": 0})
    line = hermes_fold("terminal", {"command": "git log --oneline -20"}, envelope, 7)
    assert line == "[terminal] ran `git log --oneline -20` -> exit 0, 20 lines output [ref:7]"
    one = json.dumps({"output": "ok\n", "exit_code": 1})
    assert "exit 1, 1 line output" in hermes_fold("terminal", {"command": "true"}, one, 1)
    split = json.dumps({"stdout": "a\nb\n", "stderr": "warn\n", "returncode": 2})
    assert output_lines(split) == (3, "2")
    assert output_lines("plain\ntext\n") == (2, None)
    code = hermes_fold("execute_code", {"code": "print(1)"}, json.dumps({"output": "1"}), 4)
    assert code == "[execute_code] `print(1)` (1 line output) [ref:4]"


def test_lean_tail_demotes_old_tool_rounds_with_a_recall_stub():
    messages = [system(), user("start"), assistant("ok")]
    for i in range(20):
        messages.append(user(f"earlier {i} " + "word " * 500))
        messages.append(assistant(f"reply {i} " + "word " * 500))
    messages.append(user("now do the long job"))
    for i in range(10):
        messages.append(assistant(None, call(f"t{i}", "terminal", command=f"step {i}")))
        messages.append(result(f"t{i}", json.dumps({"output": f"out {i} " * 400, "exit_code": 0})))
    messages.append(assistant("finished"))
    out = _run(messages, context_length=200_000, tail_token_budget=10_000)
    stubs = _actions(out, "lean_tail")
    assert stubs, out.report.boundaries
    for a in stubs:
        assert a["region"] == "tail"
        assert f"[ref:{a['index']}]" in a["line"]
        assert "recall" in a["line"]
    # The newest six rounds stay verbatim.
    newest = [i for i, m in enumerate(messages) if m["role"] == "tool"][-6:]
    assert not {a["index"] for a in stubs} & set(newest)


def test_pressure_demotion_folds_protected_rows_when_the_tail_is_over_its_ceiling():
    messages = [system(), user("go")]
    for i in range(4):
        messages.append(assistant(None, call(f"t{i}", "read_file", path=f"f{i}.py")))
        messages.append(result(f"t{i}", "word " * 3_000))
    messages.append(assistant("done"))
    out = _run(messages, context_length=20_000, tail_token_budget=2_000)
    demoted = _actions(out, "demote") + _actions(out, "fold")
    assert demoted
    assert out.report.tokens["after"] <= CompactionConfig(context_length=20_000).threshold_tokens


def test_one_user_message_then_hundreds_of_tool_calls_still_makes_room():
    # The demo chat's failure: the latest user message pulled the whole tool chain into the
    # tail and the compaction stayed over the window.
    messages = [system("You are the demo agent."), user("hello"), assistant("hi")]
    messages += [user("what is here?"), assistant("a workspace")]
    messages.append(user("read every file of the workspace and explain them"))
    for i in range(200):
        messages.append(assistant(None, call(f"c{i}", "read_file", path=f"src/f{i}.py")))
        messages.append(result(f"c{i}", f"content of file {i} " * 100))
    messages.append(assistant("Here is what I found."))
    cfg = CompactionConfig(context_length=64_000)
    out = compact(messages, config=cfg, now=DAY, force=True, tokenizer=WORDS)
    report = out.report.to_dict()
    assert report["tokens"]["before"] > 64_000
    assert report["status"] == "compacted"
    assert report["tokens"]["after"] < cfg.threshold_tokens
    assert report["tokens"]["tail_slimmed"] <= 0.20 * 64_000
    assert "latest_user_summarized" in {e["kind"] for e in report["alignment"]}
    assert "read every file of the workspace" in report["summary_body"]
    assert validate_tool_pairs(out.messages) == []


def test_a_small_window_conversation_compacts_instead_of_nothing_to_compact():
    messages = [system()]
    for i in range(20):
        messages.append(user(f"question {i} " + "word " * 30))
        messages.append(assistant(None, call(f"c{i}", "terminal", command=f"ls {i}")))
        messages.append(result(f"c{i}", json.dumps({"output": "file\n" * 40, "exit_code": 0})))
    assert len(messages) == 61
    cfg = CompactionConfig(context_length=8_000)
    out = compact(messages, config=cfg, now=DAY, tokenizer=WORDS)
    assert out.status == "compacted"
    assert out.report.tokens["after"] < cfg.threshold_tokens < 8_000
    assert "threshold_at_window" in {w["code"] for w in out.report.warnings}


def test_a_user_message_bigger_than_the_window_is_reported_as_the_reason():
    messages = [system(), user("hi"), assistant("hello"), user("word " * 20_000)]
    out = compact(
        messages,
        config=CompactionConfig(context_length=8_000),
        now=DAY,
        force=True,
        tokenizer=WORDS,
    )
    codes = {w["code"]: w["message"] for w in out.report.warnings}
    assert "cannot_make_room" in codes
    assert "message 3" in codes["cannot_make_room"]
    assert "over_window" in codes


def test_report_names_the_profile_and_every_action_has_a_region_and_a_line():
    messages = _reading_agent(10, "payload " * 100)
    out = _run(messages, context_length=200_000, tail_token_budget=300)
    report = json.loads(out.report.to_json())
    assert report["profile"] == "hermes"
    assert report["slimming"]
    for a in report["slimming"]:
        assert a["region"] in ("head", "middle", "tail")
        assert isinstance(a["line"], str)
        assert a["line"]
    assert set(report["slimming_totals"]) >= {
        "dedup",
        "args_shrink",
        "image_retire",
        "demote",
        "lean_tail",
        "fold",
        "truncate",
        "image",
    }
    assert report["warnings"] == []
    classic = compact(
        messages,
        config=CompactionConfig(profile="classic", tail_token_budget=300),
        now=DAY,
        tokenizer=WORDS,
    ).report.to_dict()
    assert classic["profile"] == "classic"
    assert set(classic["slimming_totals"]) == {"fold", "truncate", "image"}


@pytest.mark.parametrize("kind", ["fold", "lean_tail", "dedup"])
def test_pass_lines_are_not_folded_again_by_a_second_compaction(kind):
    messages = _reading_agent(10, "payload " * 100)
    first = _run(messages, context_length=200_000, tail_token_budget=300)
    again = _run(
        [*first.messages, user("more"), assistant("sure")],
        context_length=200_000,
        tail_token_budget=300,
    )
    for a in again.report.to_dict()["slimming"]:
        assert not a["before_excerpt"].startswith(("[read_file]", "[Duplicate", "[tool output"))


def test_the_markdown_report_names_the_profile_and_the_warnings():
    from compaction import report_to_markdown

    messages = [system(), user("hi"), assistant("hello"), user("word " * 20_000)]
    out = compact(
        messages,
        config=CompactionConfig(context_length=8_000),
        now=DAY,
        force=True,
        tokenizer=WORDS,
    )
    text = report_to_markdown(out.report.to_dict())
    assert "**Profile:** hermes" in text
    assert "## Warnings" in text
    assert "`cannot_make_room`" in text
