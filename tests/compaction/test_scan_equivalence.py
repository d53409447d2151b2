"""The hermes fact scan's faster forms must give what the forms they replaced gave, on every
input: each reference below is the replaced code, kept verbatim."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import resume
from compaction.resume import (
    _CONSTRAINT,
    _ERROR_LITERALS,
    _EXIT_RE,
    _error_lines,
    _error_matches,
    _exit_code,
    _exit_search,
    _has_constraint,
    _name_groups,
    _one_line,
    _unseen_suffix,
)

# The error-line pattern ``_LINE_START`` and ``_IN_LINE`` were split from.
_ERROR_LINE = re.compile(
    r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b(?!\")|^\s*(?:FAILED|ERROR)\b|^\s*E\s{2,}\S"
    r"|\berror(?:\[\w+\])?:|\bTraceback \(most recent call last\)|^--- FAIL:|\bpanicked at\b"
    r"|\bfatal:|\bcommand not found\b|\bNo such file or directory\b",
    re.MULTILINE,
)

# Pieces that start, end or break an error line, with the whitespace and word characters
# where ``\s``, ``\b`` and ``^`` decide (Unicode spaces, a non-ASCII word letter, \v, \x1c).
_LINE_PIECES = (
    "ValueError",
    "ValueError: bad",
    'ValueError"',
    "OSErrorx",
    "RuntimeException",
    "fooError",
    "Error",
    "E   assert 1 == 2",
    "E  ",
    "E",
    "  FAILED tests/test_x.py::test_y",
    "FAILED",
    "ERROR",
    "ERRORS",
    "error[E0308]: mismatched",
    "error:",
    "error[x]:",
    "Traceback (most recent call last)",
    "--- FAIL: TestX",
    "--- FAIL:",
    "thread 'main' panicked at src/main.rs",
    "fatal: not a git repository",
    "bash: foo: command not found",
    "No such file or directory",
    "é",
    "_",
    "x",
    "-",
    " ",
    "  ",
    "\t",
    "\x0b",
    "\x1c",
    "\u00a0",
    "\u2028",
    "\n",
    "\n\n",
    "\r\n",
)
_line_texts = st.lists(st.sampled_from(_LINE_PIECES), max_size=25).map("".join)


def _reference_error_lines(body: str, limit: int) -> list[str]:
    """``_error_lines`` as it was: each line holding a literal run through ``_ERROR_LINE``."""
    lines: list[str] = []
    at = 0
    while len(lines) < limit:
        hint = _ERROR_LITERALS.search(body, at)
        if hint is None:
            break
        start = body.rfind("\n", 0, hint.start()) + 1
        end = body.find("\n", hint.start())
        if end == -1:
            end = len(body)
        for _ in _ERROR_LINE.finditer(body, start, end):
            lines.append(body[start:end])
            if len(lines) >= limit:
                break
        at = end + 1
    return lines


@settings(max_examples=2_000, deadline=None)
@given(_line_texts, _line_texts, st.integers(0, 30), st.integers(1, 4))
def test_a_line_has_as_many_matches_as_the_plain_pattern_finds(
    before: str, line: str, cut: int, most: int
) -> None:
    # The line is cut at its first newline (a line has none) and perhaps shortened: the
    # pattern sees the text before it (lookbehinds, word boundaries) but not past its end.
    line = line.split("\n")[0]
    body = before + "\n" + line + "\n" + before if before else line + "\n" + before
    start = len(before) + 1 if before else 0
    end = max(start, start + len(line) - cut)
    expected = min(most, sum(1 for _ in _ERROR_LINE.finditer(body, start, end)))
    assert _error_matches(body, start, end, most) == expected


@settings(max_examples=1_000, deadline=None)
@given(_line_texts, st.integers(1, 6))
def test_error_lines_are_those_of_the_reference(body: str, limit: int) -> None:
    assert _error_lines(body, limit) == _reference_error_lines(body, limit)


def test_an_error_line_is_listed_once_per_match() -> None:
    body = "ok\nraise ValueError; KeyError\nE   assert x\nplain\nfatal: no\n"
    assert _error_lines(body, 9) == [
        "raise ValueError; KeyError",
        "raise ValueError; KeyError",
        "E   assert x",
        "fatal: no",
    ]
    assert _error_lines(body, 1) == ["raise ValueError; KeyError"]


_CONSTRAINT_PIECES = (
    "must",
    "MUST",
    "Must",
    "never",
    "Always",
    "do not",
    "DO NOT",
    "do  not",
    "don't",
    "Don\u2019t",
    "make sure",
    "avoid",
    "only use",
    "prefer",
    "preferred",
    "should not",
    "shouldn't",
    "mustn",
    "_must",
    "must_",
    "1must",
    "mu",
    "st",
    "mu\u017ft",  # long s: an "s" to re's IGNORECASE, not to str.lower
    "\u212a",  # Kelvin sign
    "\u0130",  # capital I with dot: str.lower makes it two characters
    "é",
    "x",
    " ",
    "\n",
    ".",
    "'",
    "-",
)


@settings(max_examples=1_500, deadline=None)
@given(st.lists(st.sampled_from(_CONSTRAINT_PIECES), max_size=12).map("".join))
def test_the_constraint_check_is_the_regex(text: str) -> None:
    assert _has_constraint(text) == (_CONSTRAINT.search(text) is not None)


def test_the_spelled_out_words_are_the_constraint_words() -> None:
    # ``_has_constraint`` spells the words out; each must decide on its own.
    for word in resume._CONSTRAINT_WORDS:
        assert _has_constraint(f"you {word} do it")
        assert _has_constraint(f"You {word.upper()} do it.")
    assert not _has_constraint("a plain request with no such word")


# Names after JSON escapes (lone and doubled backslashes), the shape of a JSON-encoded
# traceback read as raw text.
_ESCAPE_PIECES = (
    "ValueError",
    "IndexError",
    "\\nIndexError",
    "\\\\nIndexError",
    "\\\\\\nIndexError",
    "\\tValueError",
    "\\xValueError",
    "\\nValueErrors",
    "nIndexError",
    "AnIndexError",
    "A",
    "\\n",
    "\\",
    "n",
    "OSError",
    "\\nOSError",
    '{"output": "Traceback (most recent call last):\\n  File \\"x.py\\"\\n',
    " ",
    "\n",
)
_escape_texts = st.lists(st.sampled_from(_ESCAPE_PIECES), max_size=20).map("".join)


@settings(max_examples=700, deadline=None)
@given(st.lists(_escape_texts, max_size=20))
def test_skipping_escaped_known_names_changes_no_group(texts: list[str]) -> None:
    assert _name_groups(texts) == _name_groups(texts, skip_known=False)


def test_a_known_name_after_a_json_escape_needs_no_full_scan() -> None:
    unseen = _unseen_suffix({"IndexError", "ValueError"})
    assert unseen.search('{"output": "Traceback:\\n  x\\nIndexError: list index"}') is None
    assert unseen.search("\\tValueError and ValueError") is None
    # After a doubled backslash the "n" starts the word: "nIndexError" is no name either.
    assert unseen.search("\\\\nIndexError") is None
    assert unseen.search("xIndexError") is not None
    assert unseen.search("AnIndexError") is not None


_EXIT_PIECES = (
    '"exit_code": 0',
    '"exit_code":1',
    '"exit_code": x',
    '"exit_status" : 2',
    '"returncode": -3',
    '"returncode"',
    "Exit code: 4",
    "exit status 5",
    "exit code",
    "Exit statu",
    "xit code: 6",
    "exit",
    "E",
    "e",
    '"',
    ":",
    " ",
    "\n",
    "7",
    "x" * 50,
    "y" * 390,
)
_exit_texts = st.lists(st.sampled_from(_EXIT_PIECES), max_size=14).map("".join)


def _reference_exit_code(text: str) -> str | None:
    """``_exit_code`` as it was: ``_EXIT_RE`` searched from the window's start."""
    match = _EXIT_RE.search(text, max(0, len(text) - 400)) or (
        _EXIT_RE.search(text, 0, 400) if len(text) > 400 else None
    )
    if match is None and len(text) <= 64_000 and '"exit_code"' in text:
        match = _EXIT_RE.search(text)
    if match is None:
        return None
    return match.group(1) or match.group(2)


@settings(max_examples=1_500, deadline=None)
@given(_exit_texts, st.integers(0, 60), st.integers(0, 900))
def test_the_exit_code_search_finds_what_the_pattern_finds(
    text: str, start: int, stop: int
) -> None:
    found = _exit_search(text, start, stop)
    expected = _EXIT_RE.search(text, start, stop)
    assert (found and (found.span(), found.groups())) == (
        expected and (expected.span(), expected.groups())
    )


@settings(max_examples=800, deadline=None)
@given(_exit_texts)
def test_exit_codes_are_those_of_the_reference(text: str) -> None:
    assert _exit_code(text) == _reference_exit_code(text)


def test_every_whitespace_but_the_space_is_unprintable() -> None:
    # ``_one_line`` leaves printable text without doubled or edge spaces as it is: that is
    # its split-and-join only if no other whitespace character is printable.
    for code in range(0x110000):
        char = chr(code)
        if char.isspace() and char != " ":
            assert not char.isprintable(), hex(code)


_ONE_LINE_PIECES = (
    "a",
    "bc",
    " ",
    "  ",
    "\n",
    "\t",
    "\u00a0",
    "\u2028",
    "\x1c",
    "é",
    "…",
    "x" * 30,
)


@settings(max_examples=1_000, deadline=None)
@given(st.lists(st.sampled_from(_ONE_LINE_PIECES), max_size=12).map("".join), st.integers(1, 80))
def test_one_line_is_the_split_and_join(text: str, limit: int) -> None:
    # The fast path (printable text without doubled or edge spaces is left as it is) gives
    # what splitting and joining first gives; where a long one is cut is
    # tests/compaction/test_gist_boundaries.py's subject.
    joined = " ".join(text.split())
    expected = joined if len(joined) <= limit else _one_line(joined, limit)
    assert _one_line(text, limit) == expected
    assert len(expected) <= limit
    assert expected == joined or (expected.endswith("…") and joined.startswith(expected[:-1]))
