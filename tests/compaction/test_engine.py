import copy
import json
from datetime import date, datetime

import pytest

from compaction import (
    END_MARKER,
    CompactionConfig,
    InputError,
    SummaryOutcome,
    compact,
    generate_conversation,
    report_to_markdown,
    validate_tool_pairs,
)
from compaction.summary import COMPACTION_NOTE, wrap_summary

from .builders import WORDS, assistant, call, image_part, long_conversation, result, system, user

CONFIG = CompactionConfig(tail_token_budget=300, profile="classic")
DAY = date(2026, 5, 1)
REPORT_KEYS = {
    "status",
    "reason",
    "config",
    "focus",
    "now",
    "counts",
    "boundaries",
    "alignment",
    "message_tokens",
    "tokens",
    "slimming",
    "slimming_totals",
    "summarizer_input",
    "summarizer_prompt",
    "summary",
    "summary_body",
    "summary_role",
    "summary_index",
    "summarizer",
    "summarizer_model",
    "fallbacks",
    "previous_summary_used",
    "sanitization",
    "output_message_tokens",
    "timings_ms",
}


class Recording:
    def __init__(self, body="## Active Task\nrecorded"):
        self.requests = []
        self.body = body

    def summarize(self, request):
        self.requests.append(request)
        return SummaryOutcome(body=self.body, source="aux", model="fake")


def test_report_has_every_key_and_is_json():
    messages = long_conversation()
    result = compact(messages, config=CONFIG, now=DAY, provider_prompt_tokens=4242, focus="x")
    report = result.report.to_dict()
    assert set(report) >= REPORT_KEYS
    json.loads(json.dumps(report))
    assert report["status"] == "compacted"
    assert report["now"] == "2026-05-01"
    assert set(report["tokens"]) >= {
        "before",
        "after",
        "head",
        "middle",
        "tail",
        "summary",
        "saved",
        "ratio",
        "threshold",
        "provider_prompt_tokens",
    }
    assert report["tokens"]["provider_prompt_tokens"] == 4242
    assert report["tokens"]["before"] == sum(report["message_tokens"])
    assert report["tokens"]["after"] == sum(report["output_message_tokens"])
    assert report["tokens"]["saved"] == report["tokens"]["before"] - report["tokens"]["after"]
    assert report["counts"] == {
        "messages_before": len(messages),
        "messages_after": len(result.messages),
    }
    assert set(report["timings_ms"]) == {
        "tokens",
        "boundary",
        "slimming",
        "serialize",
        "summarize",
        "assemble",
        "sanitize",
        "total",
    }
    assert set(report["slimming_totals"]) == {"fold", "truncate", "image"}
    assert report["summarizer"] == "deterministic"
    assert report["summarizer_prompt"] is None
    assert report["summary"] == result.messages[result.summary_index]["content"]
    assert len(report["output_message_tokens"]) == len(result.messages)


def test_head_summary_tail_layout():
    messages = long_conversation()
    result = compact(messages, config=CONFIG, now=DAY)
    b = result.report.boundaries
    head_end, tail_start = b["head"][1], b["tail"][0]
    out = result.messages
    assert out[0]["content"] == messages[0]["content"] + "\n\n" + COMPACTION_NOTE
    assert out[1:head_end] == messages[1:head_end]
    assert result.summary_index == head_end
    assert out[head_end]["content"].startswith("[CONTEXT COMPACTION — REFERENCE ONLY]")
    assert out[head_end]["content"].endswith(END_MARKER)
    assert out[head_end + 1 :] == messages[tail_start:]
    assert b["middle"] == [head_end, tail_start]


def test_input_is_never_mutated():
    messages = generate_conversation(200, seed=5)
    snapshot = copy.deepcopy(messages)
    result = compact(messages, config=CompactionConfig(tail_token_budget=5_000), now=DAY)
    assert messages == snapshot
    result.messages[0]["content"] = "changed"
    result.messages[-1]["content"] = "changed"
    assert messages == snapshot


def test_nothing_to_compact_is_skipped_unchanged():
    messages = [system(), user("hi"), assistant("hello")]
    result = compact(messages, now=DAY)
    assert (result.report.status, result.report.reason) == ("skipped", "nothing_to_compact")
    assert result.messages == messages
    assert result.summary_index is None


def test_summary_larger_than_the_middle_is_skipped():
    messages = [
        system(),
        user("a"),
        assistant("b"),
        user("c"),
        assistant("d"),
        user("e"),
        assistant("f"),
    ]
    result = compact(messages, config=CompactionConfig(tail_token_budget=0), now=DAY)
    assert (result.report.status, result.report.reason) == ("skipped", "summary_not_smaller")
    assert result.messages == messages


def test_precomputed_token_counts_are_used_and_the_tokenizer_is_injectable():
    messages = long_conversation()
    calls = []

    def counter(text):
        calls.append(text)
        return WORDS(text)

    counts = [50] * len(messages)
    result = compact(messages, config=CONFIG, token_counts=counts, tokenizer=counter, now=DAY)
    assert list(result.report.message_tokens) == counts
    assert len(calls) <= 3  # only changed rows (system note, summary) are counted


def test_bad_input_raises_input_error():
    with pytest.raises(InputError, match="message 1"):
        compact([system(), "nope"])
    with pytest.raises(InputError, match="token_counts"):
        compact([system(), user("x")], token_counts=[1])


@pytest.mark.parametrize("profile", ["classic", "hermes"])
@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("nope", "message 2: expected a dict, got str"),
        ({"content": "no role"}, "message 2: missing or non-string 'role'"),
        ({"role": 7, "content": "x"}, "message 2: missing or non-string 'role'"),
        ({"role": ["user"], "content": "x"}, "message 2: missing or non-string 'role'"),
    ],
)
def test_each_profile_names_the_first_bad_message(profile, bad, match):
    # The hermes profile validates in its passes' own walk: the same errors as classic's scan.
    messages = [system(), user("a"), bad, *long_conversation()]
    counts = [5] * len(messages)
    counts[0] = -1  # a bad count too: the bad message is named first
    with pytest.raises(InputError, match=match):
        compact(messages, config=CompactionConfig(profile=profile), token_counts=counts)


@pytest.mark.parametrize("profile", ["classic", "hermes"])
def test_rows_of_other_roles_are_accepted_by_each_profile(profile):
    parts = [{"type": "text", "text": "note"}]
    messages = [system(), user("a"), {"role": "developer", "content": parts}, *long_conversation()]
    config = CompactionConfig(tail_token_budget=300, profile=profile)
    result = compact(messages, config=config, now=DAY)
    assert result.report.status == "compacted"


def test_middle_is_slimmed_and_summarizer_sees_the_serialized_middle():
    recorder = Recording()
    messages = long_conversation()
    result = compact(messages, config=CONFIG, summarizer=recorder, now=DAY)
    (request,) = recorder.requests
    assert request.serialized_input == result.report.summarizer_input
    assert "[terminal] ran `run 3` -> exit 0, 1 lines output" in request.serialized_input
    folds = [a for a in result.report.slimming if a["kind"] == "fold"]
    assert folds
    assert all(a["fold_line"] == a["after"] for a in folds)
    assert result.report.slimming_totals["fold"]["count"] == len(folds)
    assert result.report.summarizer == "aux"


def test_datetime_now_and_temporal_anchoring():
    result = compact(long_conversation(), config=CONFIG, now=datetime(2026, 7, 4, 12, 0))
    assert result.report.now == "2026-07-04"
    assert "(on 2026-07-04)" in result.report.summary_body


def test_repeated_compaction_carries_the_summary_and_does_not_duplicate():
    first = compact(long_conversation(), config=CONFIG, now=DAY)
    more = first.messages + long_conversation(8)[1:]
    second = compact(more, config=CONFIG, now=DAY)
    assert second.report.status == "compacted"
    assert second.report.previous_summary_used
    contents = [m["content"] for m in second.messages if isinstance(m["content"], str)]
    assert sum(c.startswith("[CONTEXT COMPACTION") or END_MARKER in c for c in contents) == 1
    assert second.messages[0]["content"].count(COMPACTION_NOTE) == 1
    assert "RAN `run 0`" in second.report.summary_body  # first summary's actions kept
    assert "[CONTEXT COMPACTION" not in second.report.summarizer_input


def test_legacy_summary_is_recognized_as_previous():
    messages = long_conversation()
    messages.insert(
        5, {"role": "user", "content": "[CONTEXT SUMMARY]: the database runs on port 5433"}
    )
    result = compact(messages, config=CONFIG, now=DAY)
    assert result.report.previous_summary_used
    assert "port 5433" in result.report.summary_body
    assert "CONTEXT SUMMARY" not in result.report.summarizer_input


def test_explicit_previous_summary_and_decay_head():
    config = CompactionConfig(tail_token_budget=300, decay_head_after_first=True)
    result = compact(
        long_conversation(), config=config, previous_summary="## Goal\nkeep me", now=DAY
    )
    assert result.report.boundaries["head"] == [0, 1]
    assert "keep me" in result.report.summary_body


def test_only_newest_user_images_survive_in_the_output():
    messages = long_conversation()
    messages[1] = {"role": "user", "content": [{"type": "text", "text": "old"}, image_part("OLD")]}
    messages[-4] = {"role": "user", "content": [{"type": "text", "text": "new"}, image_part("NEW")]}
    result = compact(messages, config=CONFIG, now=DAY)
    dumped = json.dumps(result.messages, ensure_ascii=False)
    assert "OLD" not in dumped
    assert "NEW" in dumped
    assert "[Attached image — stripped after compression]" in dumped
    images = [a for a in result.report.slimming if a["kind"] == "image"]
    assert [a["index"] for a in images] == [1]


def test_orphan_result_at_the_start_of_the_tail_is_dropped():
    messages = long_conversation()
    messages.insert(-2, result("ghost", "stray"))
    result_ = compact(messages, config=CONFIG, now=DAY)
    assert {
        "kind": "dropped_orphan_result",
        "tool_call_id": "ghost",
    }.items() <= result_.report.sanitization[0].items()
    assert validate_tool_pairs(result_.messages) == []


@pytest.mark.parametrize("mode", ["stub", "strip"])
def test_sanitize_mode_is_honoured(mode):
    messages = long_conversation() + [user("go"), assistant(None, call("open1"))]
    result = compact(
        messages, config=CompactionConfig(tail_token_budget=300, sanitize_mode=mode), now=DAY
    )
    kinds = {s["kind"] for s in result.report.sanitization}
    assert kinds == {"inserted_stub" if mode == "stub" else "stripped_call"}
    assert validate_tool_pairs(result.messages) == []


@pytest.mark.parametrize(
    "content", [None, "", [{"type": "text", "text": "ü ünïcödé 😀"}, image_part()]]
)
def test_odd_contents_do_not_crash(content):
    messages = long_conversation()
    messages[6] = {"role": "user", "content": content}
    result = compact(messages, config=CONFIG, now=DAY)
    assert result.report.status == "compacted"


def test_markdown_export():
    result = compact(long_conversation(), config=CONFIG, now=DAY)
    text = report_to_markdown(result.report.to_dict())
    assert text.startswith("# Compaction report")
    assert "## Boundaries" in text
    assert "[CONTEXT COMPACTION — REFERENCE ONLY]" in text
    skipped = compact([system()], now=DAY)
    assert "skipped (nothing_to_compact)" in report_to_markdown(skipped.report.to_dict())


def test_previous_summary_message_in_tail_is_replaced():
    old = {"role": "assistant", "content": wrap_summary("## Goal\nold goal")}
    messages = long_conversation()
    messages.insert(-3, old)
    result = compact(messages, config=CONFIG, now=DAY)
    assert "old goal" in result.report.summary_body
    assert sum("old goal" in (m["content"] or "") for m in result.messages) == 1


def test_the_garbage_collector_is_left_as_it_was_found():
    import gc

    messages = generate_conversation(60, seed=5)
    assert gc.isenabled()
    compact(messages, force=True)
    assert gc.isenabled()
    gc.disable()
    try:
        compact(messages, force=True)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("block", [1, 7, 100_000])
def test_the_result_does_not_depend_on_the_block_size(monkeypatch, block):
    # The middle is slimmed and measured in blocks; any block size gives the same compaction.
    import compaction.engine

    messages = generate_conversation(700, seed=3)
    messages.insert(300, {"role": "user", "content": wrap_summary("## Goal\nearlier goal")})
    for at in (120, 350, 500):  # truncated records at both ends and in the dropped part
        messages.insert(at, user(f"long {at} " + "w" * 900))
    config = CompactionConfig(
        tail_token_budget=2_000,
        summary_input_max_chars=30_000,
        content_max=300,
        content_head=200,
        content_tail=50,
    )
    expected = compact(messages, config=config, now=DAY).report.to_dict()
    monkeypatch.setattr(compaction.engine, "_BLOCK", block)
    result = compact(messages, config=config, now=DAY)
    report = result.report.to_dict()
    expected.pop("timings_ms"), report.pop("timings_ms")
    assert report == expected
    kinds = {a["kind"] for a in report["slimming"]}
    assert kinds >= {"fold", "truncate", "image"}
    assert "omitted" in report["summarizer_input"]


def test_tuple_input_and_token_counts_are_accepted():
    messages = long_conversation()
    counts = [50] * len(messages)
    as_list = compact(messages, config=CONFIG, token_counts=counts, now=DAY)
    as_tuple = compact(tuple(messages), config=CONFIG, token_counts=tuple(counts), now=DAY)
    assert as_tuple.messages == as_list.messages
    assert as_tuple.report.message_tokens == tuple(counts)


@pytest.mark.parametrize(("bad", "position"), [(-1, 2), (True, 0), (1.0, 3), ("5", 1), (None, 4)])
def test_each_bad_token_count_is_named(bad, position):
    messages = [system(), user("a"), assistant("b"), user("c"), assistant("d")]
    counts = [5] * len(messages)
    counts[position] = bad
    with pytest.raises(InputError, match=f"message {position}"):
        compact(messages, token_counts=counts)
