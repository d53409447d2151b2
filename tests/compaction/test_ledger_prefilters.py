"""The ledger's substring prefilters must decide exactly as the regexes they stand in front
of: each reference below is the replaced regex, kept verbatim."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.ledger import (
    _TEST_HINT_SCAN,
    _TEST_HINTS,
    _has_strong_error,
    _holds_any,
    _may_hold_facts,
)

# The hint regex the substring tests replaced (run over every tool result before).
_HINTS_REGEX = re.compile(
    r"rror|xception|FAIL|Traceback|fatal|panic|not found|No such|passed|failed|Ran |Tests?:"
    r"|test result|✕|✗|×|^E ",
    re.MULTILINE,
)

# The error-report regex ``_has_strong_error`` replaced (it tried every position of a result;
# with a substring prefilter in front of it, it was a sixth of ``extract`` on a codex session).
_STRONG_ERROR = re.compile(
    r"^Traceback \(most recent call last\)|^[A-Z][\w.]*(?:Error|Exception): |^FAILED |"
    r"^E {2,}\S|^--- FAIL:|panicked at|: command not found|No such file or directory"
    r"|^(?:error|fatal)(?:\[\w+\])?: ",
    re.MULTILINE,
)

# Pieces around which the patterns decide: each hint, each anchor, their near misses, line
# starts and the characters that end a word.
_PIECES = (
    "Error", "rror", "xception", "FAIL", "FAILED ", "FAILED", "Traceback", "fatal", "fatal: ",
    "panic", "panicked at", "not found", "No such", "No such file or directory", "passed",
    "failed", "Ran ", "Ran", "Test:", "Tests:", "Tests", "test result", "✕", "✗", "×", "E ",
    "E  x", "E", "\n", "\r\n", " ", "ValueError: bad", "Exception: x", "error: x", "error[E0425]: ",
    "--- FAIL:", ": command not found", "Traceback (most recent call last)", "ok", "x", "é",
    "✕ t", "\ud800", "\ud83d\ude00", "×\n", "\nE  x", "\nFAILED ", "\nValueError: ", "A.b_Error: ",
    "Aé1Exception: ", "Error: ", "A",
    ".", "_", "fatal[x]: ", "error[", "\r", "\t",
)  # fmt: skip

_texts = st.lists(st.sampled_from(_PIECES) | st.text(max_size=6), max_size=12).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_texts)
def test_the_hint_prefilter_is_the_hint_regex(text: str) -> None:
    assert _may_hold_facts(text) == (_HINTS_REGEX.search(text) is not None)


@settings(max_examples=3000, deadline=None)
@given(_texts)
def test_the_strong_error_scan_is_the_strong_error_regex(text: str) -> None:
    assert _has_strong_error(text) == (_STRONG_ERROR.search(text) is not None)


@settings(max_examples=3000, deadline=None)
@given(_texts | st.text())
def test_the_test_hint_scan_is_a_substring_test_of_each_hint(text: str) -> None:
    assert _holds_any(_TEST_HINT_SCAN, text) == any(hint in text for hint in _TEST_HINTS)
