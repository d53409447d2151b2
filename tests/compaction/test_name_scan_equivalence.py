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
