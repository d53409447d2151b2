"""The test-count line the ledger keeps of a result is the one the plain ``finditer`` loop over
the whole result found (kept verbatim below): the first line under 300 chars holding a
``_TEST_COUNT`` match, whatever the case, the digits or the folding of its letters."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.ledger import _TEST_COUNT, _test_count_line


def _reference(body: str) -> str | None:
    for match in _TEST_COUNT.finditer(body):
        start = body.rfind("\n", 0, match.start()) + 1
        end = body.find("\n", match.end())
        line = body[start : end if end != -1 else len(body)].strip()
        if len(line) < 300:
            return line
    return None


# Counts as runners write them, in several cases and with Unicode digits; the same words with
# the letters IGNORECASE folds with "i", "s" and "k" ("ı", "ſ", "İ", the Kelvin sign); near
# misses; line ends and filler long enough to put a line past 300 chars.
_WORDS = (
    "passed", "PASSED", "xPassed", "failed", "xfailed", "Error", "errors", "skipped", "FAILURE",
    "failures", "paſſed", "faıled", "faİled", "ſkipped", "İgnored", "\u212aept", "pass", "fail", "err",
)  # fmt: skip
_COUNTS = st.builds(
    "{}{}{}".format,
    st.sampled_from(["3", "12", "٣", "x3", "", "3."]),
    st.sampled_from([" ", "  ", ""]),
    st.sampled_from(_WORDS),
)
_PHRASES = (
    "Ran 3 tests", "ran 12 test", "RAN 1 TESTS", "Ran tests", "Ran 3 testſ", "test result: ok.",
    "Test Result: FAILED.", "test result: ok", "Tests:  5", "test: 1", "TESTS: 9", "Tests:5",
    "xTests: 4", "result",
)  # fmt: skip
_PIECES = (" ", "\n", "İ", "İİ\n", "\r\n", "=", "== ", "_", "x", "é", ": ", "x" * 150, "word " * 40)

_texts = st.lists(
    _COUNTS | st.sampled_from(_PHRASES) | st.sampled_from(_PIECES) | st.text(max_size=4),
    max_size=30,
).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_texts)
def test_the_test_count_line_is_the_one_finditer_finds(body: str) -> None:
    assert _test_count_line(body) == _reference(body)


def test_a_count_on_a_long_line_is_passed_over_for_a_later_short_one() -> None:
    body = "log " + "x" * 400 + " 3 passed\n== 5 passed, 1 failed in 0.2s ==\n"
    assert _test_count_line(body) == "== 5 passed, 1 failed in 0.2s =="
