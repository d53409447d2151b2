"""The count of a text with something appended, from the text's known count
(``count_appended``), is tiktoken's count of the whole, under every offline encoding.

The compaction note is appended to the system prompt of every compacted conversation; a
coding agent's prompt runs to tens of thousands of characters, and its count is already
known exactly. A wrong shortcut here changes the output's token figures: this compares it
with encoding the whole text, on texts built to join pieces across the cut."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact, count_messages_tokens
from compaction.markers import COMPACTION_NOTE
from compaction.tokens import OFFLINE_ENCODINGS, count_appended, get_encoding
from tests.compaction.test_piecewise_count import _PIECES, _TRICKY


def _exact(encoding: str, text: str) -> int:
    return len(get_encoding(encoding).encode_ordinary(text))


@settings(max_examples=150, deadline=None)
@given(
    encoding=st.sampled_from(sorted(OFFLINE_ENCODINGS)),
    text=st.lists(st.one_of(_PIECES, st.just(_TRICKY)), max_size=8).map("".join),
    suffix=st.one_of(st.just(f"\n\n{COMPACTION_NOTE}"), _PIECES),
)
def test_appended_count_is_the_whole_texts_count(encoding: str, text: str, suffix: str) -> None:
    known = _exact(encoding, text)
    assert count_appended(encoding, text, known, suffix) == _exact(encoding, text + suffix)


@pytest.mark.parametrize("encoding", sorted(OFFLINE_ENCODINGS))
def test_a_long_prompt_is_cut_near_its_end(encoding: str) -> None:
    # 60,000 characters of indented lines, ending without a newline, with a note appended:
    # the same count as the whole, whether the last line start is near the end or not.
    prompt = "".join(f"    rule {i}: keep the API stable.\n" for i in range(1_700)) + "end"
    one_line = "x" * 5_000 + ". " + "y" * 5_000
    for text in (prompt, one_line, prompt + one_line):
        known = _exact(encoding, text)
        suffix = f"\n\n{COMPACTION_NOTE}"
        assert count_appended(encoding, text, known, suffix) == _exact(encoding, text + suffix)


def test_the_noted_system_prompt_is_counted_as_a_whole_row() -> None:
    # A compaction's output figures: the system prompt that got the note counts what
    # counting the output row itself gives.
    system = "".join(f"- rule {i}: never touch prod; keep the API stable.\n" for i in range(900))
    messages = [{"role": "system", "content": system}]
    for i in range(40):
        messages.append({"role": "user", "content": f"step {i}: fix module {i} " + "word " * 200})
        messages.append({"role": "assistant", "content": f"fixed module {i} " + "done " * 200})
    config = CompactionConfig(context_length=16_000)
    out = compact(messages, config=config, now=date(2026, 1, 15), force=True)
    assert out.report.status == "compacted"
    assert COMPACTION_NOTE in out.messages[0]["content"]
    assert list(out.report.output_message_tokens) == count_messages_tokens(out.messages, config)
