"""In-flight task replay (hermes profile, reference §7.5)."""

from __future__ import annotations

from typing import Any

from compaction import CompactionConfig, compact, validate_tool_pairs
from compaction.replay import REPLAY_PREFIX, inflight_replay
from compaction.summary import END_MARKER, SUMMARY_PREFIX, split_summary
from tests.compaction.builders import WORDS, assistant, call, result, system, user

_TASK = "migrate the storage layer to sqlite and keep the public API unchanged"


def _agent_run(*, finished: bool) -> list[dict[str, Any]]:
    """One request followed by a long tool run: the request is summarized away."""
    messages = [system(), user("hello"), assistant("hi"), user(_TASK)]
    for i in range(40):
        messages.append(assistant(None, call(f"c{i}", "terminal", command=f"step {i}")))
        messages.append(result(f"c{i}", f"output of step {i} " + "word " * 40))
    if finished:
        messages.append(assistant("Done: the storage layer now uses sqlite."))
    return messages


def _compact(messages: list[dict[str, Any]], **overrides: Any) -> Any:
    config = CompactionConfig(tail_token_budget=200, **overrides)
    return compact(messages, config=config, force=True, tokenizer=WORDS)


def test_an_unfinished_summarized_request_is_restated_after_the_summary() -> None:
    out = _compact(_agent_run(finished=False))
    assert out.status == "compacted"
    replay = out.report.inflight_replay
    assert replay is not None
    assert replay["source_index"] == 3
    carrier = out.messages[replay["index"]]
    text = carrier["content"]
    assert f"{REPLAY_PREFIX}\n{_TASK}" in text
    if replay["mode"] == "merged":  # after the summary's end marker, in its carrier
        assert text.startswith(SUMMARY_PREFIX)
        assert replay["index"] == out.summary_index
        _, live = split_summary(text)
        assert _TASK in live
    validate_tool_pairs(out.messages)
    assert out.report.output_message_tokens[replay["index"]] > 0
    assert sum(out.report.output_message_tokens) == out.report.tokens["after"]


def test_an_answered_request_is_not_restated() -> None:
    out = _compact(_agent_run(finished=True))
    assert out.status == "compacted"
    assert out.report.inflight_replay is None
    assert not any(REPLAY_PREFIX in str(m.get("content")) for m in out.messages)


def test_no_replay_when_the_request_is_still_in_the_tail() -> None:
    messages = _agent_run(finished=False)
    messages.append(user("also add a migration note"))
    messages.append(assistant(None, call("z", "terminal", command="ls")))
    messages.append(result("z", "docs"))
    out = _compact(messages)
    assert out.report.inflight_replay is None


def test_classic_never_replays() -> None:
    out = _compact(_agent_run(finished=False), profile="classic")
    assert out.report.inflight_replay is None
    assert not any(REPLAY_PREFIX in str(m.get("content")) for m in out.messages)


def test_wrappers_are_not_requests() -> None:
    original = [
        system(),
        user(_TASK),
        assistant(None, call("a", "terminal", command="ls")),
        result("a", "x"),
        user("<environment_context>cwd=/srv</environment_context>"),
    ]
    summary = {"role": "assistant", "content": f"{SUMMARY_PREFIX}\nbody"}
    final = [original[0], summary]
    out, replay = inflight_replay(original, final, 1)
    assert replay == {"source_index": 1, "mode": "row", "index": 2}
    assert out[2] == {"role": "user", "content": f"{REPLAY_PREFIX}\n{_TASK}"}
    assert final == [original[0], summary]  # not mutated


def test_a_carrier_with_live_text_or_a_following_user_is_left_alone() -> None:
    original = [system(), user(_TASK), assistant(None, call("a", "terminal", command="ls"))]
    original.append(result("a", "x"))
    carrier = {"role": "assistant", "content": f"{SUMMARY_PREFIX}\nbody"}
    followed = [original[0], carrier, user("next")]
    assert inflight_replay(original, followed, 1) == (followed, None)
    live = {"role": "user", "content": f"{SUMMARY_PREFIX}\nbody\n\n{END_MARKER}\nwhat now?"}
    assert inflight_replay(original, [original[0], live], 1) == ([original[0], live], None)
    merged, replay = inflight_replay(
        original, [original[0], {**live, "content": carrier["content"]}], 1
    )
    assert replay == {"source_index": 1, "mode": "merged", "index": 1}
    assert merged[1]["content"].endswith(f"\n\n{REPLAY_PREFIX}\n{_TASK}")
