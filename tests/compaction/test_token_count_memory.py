"""Counting a long conversation exactly keeps the counts, not every message's token ids."""

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, count_message_tokens, count_messages_tokens, tokens
from compaction.tokens import OFFLINE_ENCODINGS, get_encoding, tiktoken_counter, token_length


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


def test_one_long_text_is_counted_without_its_token_ids() -> None:
    # One 400 KB tool result: its ids as Python ints take ~36 bytes a token (> 3 MB), the
    # peak of a small compaction before; the count is read from tiktoken's packed buffer.
    config = CompactionConfig()
    text = "".join(f"value_{i} = {i * 7} # ok\n" for i in range(16_000))
    count = tiktoken_counter(config.model)
    count("warm up")
    tracemalloc.start()
    tokens = count(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert tokens == len(get_encoding(config.model).encode_ordinary(text))
    assert tokens * 36 > 3_000_000
    assert peak < 200_000


def test_counts_equal_encode_ordinary_for_surrogates_and_special_token_text() -> None:
    encoding = get_encoding("gpt-4o-mini")
    for text in ("", "a", "x <|endoftext|> y <|fim_prefix|>", "lone \ud800 surrogate", "é" * 99):
        assert token_length(encoding, text) == len(encoding.encode_ordinary(text))


def test_repeated_rows_are_counted_as_often_as_they_occur() -> None:
    # The per-run memo of plain rows (same content and call id) gives each row its count;
    # a different call id or tool calls count apart.
    config = CompactionConfig()
    row = {"role": "tool", "tool_call_id": "c1", "content": "same output\n" * 40}
    other = {**row, "tool_call_id": "c2-longer-id"}
    calls = {
        "role": "assistant",
        "content": "same output\n" * 40,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}
        ],
    }
    messages = [row, dict(row), other, calls, dict(row)]
    expected = [count_message_tokens(m, config) for m in messages]
    assert count_messages_tokens(messages, config) == expected
    assert expected[0] == expected[1] == expected[4] != expected[2] != expected[3]


# Lines that pre-split pieces like to join across a cut (see test_piecewise_count.py), in a
# text long enough to be counted in pieces.
_PIECE_PARTS = st.lists(
    st.sampled_from(
        [
            "\n",
            "\r\n",
            " ",
            "   ",
            "\t",
            "/",
            ".",
            ")",
            "'s",
            "a",
            "Word",
            "123",
            "—",
            "日本",
            "😀",
            "\u00a0",
            "\ud800",
            "- ",
            "→",
            "     12→",
            "\x0b",
            "\u2028",
            "\x85",
        ]
    ),
    max_size=80,
).map("".join)


@pytest.mark.parametrize("encoding", sorted(OFFLINE_ENCODINGS))
@settings(max_examples=400, deadline=None)
@given(text=_PIECE_PARTS, suffix=st.sampled_from(["", "call_1", "\n", "é"]))
def test_a_long_text_counted_in_pieces_counts_as_the_whole(
    encoding: str, text: str, suffix: str
) -> None:
    enc = get_encoding(encoding)
    whole = (text + suffix).encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokens, "_PIECE_CHARS", 4)  # cut every few characters
        assert token_length(enc, text, suffix) == len(enc.encode_ordinary(whole))


def test_a_long_non_ascii_text_is_not_converted_to_utf8_whole() -> None:
    # A 50,000-character system prompt with one dash: CPython builds its UTF-8 form through
    # a buffer of 3 bytes a character, then keeps the result (200 KB at once). A suffix (a
    # result's call id) copied the whole text before that.
    enc = get_encoding("o200k_base")
    text = "".join(f"line {i}: the value — {i * 7}\n" for i in range(2_000))
    assert len(text) > 50_000
    expected = len(enc.encode_ordinary(text + "call_7"))
    tracemalloc.start()
    counted = token_length(enc, text, "call_7")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert counted == expected
    assert peak < 60_000  # the whole text's UTF-8 alone is over 50 KB
