"""Counting a text line by line (``piecewise_counter``) gives tiktoken's exact count.

The summary is counted many times while the fact ledger is fitted; the piecewise counter cuts
it only at line starts no pre-split piece crosses and remembers each line, so the sum must be
the whole text's count under every offline encoding, whatever the lines hold.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact, generate_conversation
from compaction.tokens import (
    OFFLINE_ENCODINGS,
    _piece_break,
    _piece_split,
    get_encoding,
    piecewise_counter,
)

# Line starts and ends that pre-split pieces like to join: slashes after punctuation and
# newlines (o200k_base), indented and blank lines, CRLF, contractions, digits, non-ASCII.
_TRICKY = (
    "## Files\n- [pr] src/a.py, src/b.py×2\n/usr/bin/env python\n  indented\n\n\nblank above\n"
    "end.\n/slash after a period\nx)\n//comment\r\nCRLF line\n's contraction\n123456 digits\n"
    '— dash\n…ellipsis\n日本語の行\n😀 emoji\n\tTab\n \n- exit 1 ×3\n}\n]\n"quoted"\n'
)

_PIECES = st.lists(
    st.sampled_from(
        [
            "\n",
            "\r\n",
            " ",
            "\t",
            "/",
            "//",
            ".",
            ")",
            "'s",
            "'",
            "a",
            "Word",
            "123",
            "4567",
            "—",
            "…",
            "日本",
            "😀",
            "- ",
            "#",
            "[x]",
            "→",
            "\u00a0",
        ]
    ),
    max_size=60,
).map("".join)


@pytest.mark.parametrize("encoding", sorted(OFFLINE_ENCODINGS))
def test_tricky_lines_count_as_the_whole_text(encoding: str) -> None:
    count = piecewise_counter(encoding)
    exact = len(get_encoding(encoding).encode_ordinary(_TRICKY))
    assert count(_TRICKY) == exact
    assert count(_TRICKY) == exact  # the remembered lines give the same sum again


@settings(max_examples=300, deadline=None)
@given(_PIECES)
def test_any_text_counts_as_the_whole_text(text: str) -> None:
    for encoding in sorted(OFFLINE_ENCODINGS):
        assert piecewise_counter(encoding)(text) == len(
            get_encoding(encoding).encode_ordinary(text)
        )


def test_a_compaction_summary_counts_as_the_whole_text() -> None:
    config = CompactionConfig(context_length=32_000)
    out = compact(generate_conversation(400, seed=3), config=config, force=True)
    summary = out.messages[out.summary_index]["content"]
    assert "\n" in summary
    assert len(summary) > 2_000
    for encoding in sorted(OFFLINE_ENCODINGS):
        exact = len(get_encoding(encoding).encode_ordinary(summary))
        assert piecewise_counter(encoding)(summary) == exact


@settings(max_examples=500, deadline=None)
@given(_PIECES)
def test_the_newline_split_cuts_where_the_line_start_split_does(text: str) -> None:
    # The counter splits at the "\n" before each cut (a regex searched newline to newline);
    # with that "\n" put back on each piece, the pieces are the zero-width split's.
    for encoding in sorted(OFFLINE_ENCODINGS):
        found = get_encoding(encoding)
        *pieces, last = _piece_split(found).split(text)
        assert [f"{piece}\n" for piece in pieces] + [last] == _piece_break(found).split(text)
