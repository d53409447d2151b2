"""Counting a long conversation exactly keeps the counts, not every message's token ids."""

import tracemalloc

from compaction import CompactionConfig, count_messages_tokens
from compaction.tokens import tiktoken_counter


def _messages() -> list[dict[str, str]]:
    # 3 MB of text over 600 messages: past the size where counting runs on 2 threads.
    return [
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"line {i} value = {i * 7}\n" * 250}
        for i in range(600)
    ]


def test_threaded_counts_equal_one_by_one_counts() -> None:
    config = CompactionConfig()
    messages = _messages()
    count = tiktoken_counter(config.model)
    expected = [
        count(m["content"] + m["tool_call_id"]) + config.per_message_overhead for m in messages
    ]
    assert count_messages_tokens(messages, config) == expected


def test_peak_memory_stays_far_below_the_token_ids_of_the_whole_text() -> None:
    config = CompactionConfig()
    messages = _messages()
    count_messages_tokens(messages[:1], config)  # the encoding loaded outside the measure
    tracemalloc.start()
    counts = count_messages_tokens(messages, config)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Every id list kept at once would take about 36 bytes a token (> 25 MB here), every
    # text (content + call id, a copy) 3 MB.
    assert sum(counts) * 36 > 25_000_000
    assert peak < 1_500_000
