"""The exception-name scan skips a result whose every suffix ends a name already seen; the
groups it returns must be those of the scan that reads every result."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.resume import _name_groups

_PIECES = (
    "ValueError",
    "ValueError",
    "ValueError(",
    " ValueError: x",
    "XValueError",
    "ValueErrors",
    "ValueError_",
    "ValueErrorException",
    "valueError",
    "KeyError",
    "IndexError",
    "RuntimeException",
    "Exception",
    "Error",
    "ErrorException",
    "\\nIndexError",
    "Erroré",
    "é",
    "_",
    " ",
    "\n",
    "(",
    "raise ",
    "A" * 58,
    "B" * 61,
    "FooError" * 3,
    "x" * 9,
)

_texts = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@settings(max_examples=700, deadline=None)
@given(st.lists(_texts, max_size=25))
def test_skipping_known_names_changes_no_group(texts: list[str]) -> None:
    assert _name_groups(texts) == _name_groups(texts, skip_known=False)


def test_a_known_name_in_a_longer_word_is_still_read() -> None:
    texts = ["ValueError: a", "raise ValueError('b')", "XValueError", "KeyErrorException"]
    expected = [["ValueError"], ["XValueError"], ["KeyErrorException"]]
    assert _name_groups(texts) == expected == _name_groups(texts, skip_known=False)


def test_many_texts_naming_the_same_error_give_one_group() -> None:
    texts = [f"line {i}\n    raise ValueError('empty value {i}')\n" * 9 for i in range(300)]
    texts.insert(200, "OSError: disk full")
    assert _name_groups(texts) == [["ValueError"], ["OSError"]]


_LONG_PIECES = (*_PIECES, "y" * 1_000, " ValueError;" * 40, "KeyError " * 3, "\n" * 30)
_long_texts = st.lists(st.sampled_from(_LONG_PIECES), min_size=5, max_size=60).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(_long_texts, min_size=1, max_size=8))
def test_long_texts_are_checked_on_their_head_only_when_it_decides(texts: list[str]) -> None:
    # Texts over 4,096 chars: the known-names check may stop after the first 9 suffixes.
    assert _name_groups(texts) == _name_groups(texts, skip_known=False)


def test_a_new_name_among_the_first_eight_suffixes_past_the_head_is_found() -> None:
    known = "x = 1\n" * 700 + " ValueError;" * 5  # 5 suffixes, all past 4,096 chars
    texts = ["ValueError", known + " OSError;" + " ValueError;" * 30]
    assert _name_groups(texts) == [["ValueError"], ["OSError"]]
    few = " ValueError;" * 3 + "x = 1\n" * 700 + " OSError;"  # 3 in the head, the 4th past it
    assert _name_groups(["ValueError", few]) == [["ValueError"], ["OSError"]]
    # 7 suffixes, then "ValueErrorx" ending the head: no boundary after it in the text, so
    # the 8th suffix read is OSError, past the head.
    seven = " ValueError;" * 7
    edge = seven + " " * (4_096 - len(seven) - 10) + "ValueErrorx OSError;"
    assert edge.index("x OSError") == 4_096
    assert _name_groups(["ValueError", edge]) == [["ValueError"], ["OSError"]]
    crowded = " ValueError;" * 9 + "y" * 5_000 + " OSError"  # OSError is the 10th suffix
    assert _name_groups(["ValueError", crowded]) == [["ValueError"]]
