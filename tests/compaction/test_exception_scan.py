"""The ledger's exception names are exactly what the reference regex finds.

``exception_words`` replaces ``re.findall(EXCEPTION, text)`` (a third of the engine's time on a
1,000-message session went to that regex trying every capital letter of each result); it
must find the same names in the same order, whatever surrounds them: underscores, digits,
non-ASCII word characters (``é``, ``ß``, ``٣``) that the regex's ``\\b`` counts as word
characters, JSON escapes, suffixes that run on (``Errors``, ``ErrorCode``).
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.ledger import exception_words

EXCEPTION = re.compile(r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b")
PIECES = [
    "Error", "Exception", "Value", "Key", "os", "x", "_", "9", "é", "ß", "٣", " ", "\n",
    ".", ":", "(", '"', "\\n", "s", "Code", "E", "rror", "xception", "ErrorError",
]  # fmt: skip


def reference(text: str) -> list[str]:
    return list(dict.fromkeys(EXCEPTION.findall(text)))


@settings(max_examples=3_000, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_same_names_as_the_regex(text):
    assert exception_words(text) == reference(text)


def test_real_shapes():
    text = (
        'Traceback (most recent call last):\n  File "app.py", line 3\nValueError: bad\n'
        '{"output": "\\nKeyError: \'x\'", "error_type": "RuntimeError"} MyErrors ErrorCode '
        "_PrivateError éTypeError ß.IndexError requests.exceptions.ConnectionError"
    )
    assert exception_words(text) == reference(text)
    assert exception_words(text) == [
        "ValueError", "RuntimeError", "IndexError", "ConnectionError",
    ]  # fmt: skip


def test_a_name_met_again_is_told_from_its_neighbours():
    # The scan passes over the last name found when it meets it again: a longer run ending in
    # it, a word character before it or the other suffix after its start are other names.
    text = (
        "ValueError ValueError ValueException KValueError xValueError éValueError "
        "ValueException_ ValueError\nValueException"
    )
    assert exception_words(text) == reference(text)
    assert exception_words(text) == ["ValueError", "ValueException", "KValueError"]
