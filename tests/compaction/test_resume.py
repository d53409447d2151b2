"""The hermes deterministic summary keeps what a resuming agent needs, verbatim.

Fixtures reproduce the shapes met in real public transcripts (Claude Code ``Bash``/``Read``/
``Edit`` calls without exit codes and ``<task-notification>`` wrappers; Codex
``exec_command``/``apply_patch`` with ``<environment_context>`` and JSON ``metadata``; Hermes
``terminal`` JSON envelopes with epoch timestamps); no transcript is copied here.
"""

from __future__ import annotations

import json
import re
import string
from datetime import date

from hypothesis import example, given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact, resume
from compaction.ledger import parse
from compaction.resume import is_wrapper, message_date
from tests.compaction.builders import WORDS, assistant, call, result, system, user

DAY = date(2026, 12, 3)


def _summary(messages, **config) -> str:
    out = compact(
        messages,
        config=CompactionConfig(
            context_length=200_000, tail_token_budget=60, protect_first_n=1, **config
        ),
        now=DAY,
        force=True,
        tokenizer=WORDS,
    )
    return out.report.summary_body or ""


def _claude_code_like() -> list[dict]:
    ts = "2025-06-02T10:00:00Z"
    return [
        system(),
        user("hi"),
        assistant("hello"),
        {
            **user(
                "Fix the failing parser tests. Never touch config/settings.yaml. Always run the "
                "tests before you commit."
            ),
            "timestamp": ts,
        },
        {
            **assistant(None, call("b1", "Bash", command="pytest tests/test_parser.py -q")),
            "timestamp": ts,
        },
        {
            **result(
                "b1",
                "FAILED tests/test_parser.py::test_empty - ValueError: empty input\n"
                "1 failed, 41 passed in 0.52s",
            ),
            "timestamp": ts,
        },
        assistant(None, call("r1", "Read", file_path="/repo/src/parser.py")),
        result("r1", "     1→def parse(text):\n     2→    return text.split()\n" * 30),
        assistant(
            None,
            call("e1", "Edit", file_path="/repo/src/parser.py", old_string="a", new_string="b"),
        ),
        result("e1", "The file /repo/src/parser.py has been updated."),
        assistant(None, call("b2", "Bash", command="pytest tests/test_parser.py -q")),
        result("b2", "42 passed in 0.48s"),
        assistant('Config says {"error": null}; the error handling code is fine.'),
        user(
            "<task-notification>\n<task-id>x1</task-id>\n<status>completed</status>\n"
            "</task-notification>"
        ),
        user("Never touch config/settings.yaml."),  # a repeated constraint
        assistant(None, call("b3", "Bash", command="make lint")),
        result("b3", "src/app.py:3: error: Name 'foo' is not defined  [name-defined]"),
        assistant("lint fails"),
        user("ok thanks"),
        assistant("you're welcome"),
        user("tail question " + "word " * 40),
        assistant("tail answer " + "word " * 40),
    ]


def test_paths_commands_exit_codes_errors_and_test_counts_survive_verbatim():
    body = _summary(_claude_code_like())
    files = {f.text: f.detail for f in parse(body).of("files")}
    assert files["/repo/src/parser.py"] == "pr"
    assert "/repo/src/parser.py" in body.split("## Fact Ledger")[1]
    assert "- pytest tests/test_parser.py -q" in body
    assert "- make lint" in body
    assert "FAILED tests/test_parser.py::test_empty - ValueError: empty input" in body
    assert "ValueError" in body.split("### Exception Names")[1]
    assert "1 failed, 41 passed in 0.52s" in body
    assert "42 passed in 0.48s" in body


def test_constraints_are_verbatim_and_not_repeated():
    body = _summary(_claude_code_like())
    constraints = body.split("### Constraints")[1].split("### ")[0]
    assert constraints.count("Never touch config/settings.yaml.") == 1
    assert "Always run the tests before you commit." in constraints


def test_active_task_is_the_real_latest_request_never_a_wrapper():
    messages = _claude_code_like()[:-4]  # the middle ends before "ok thanks"
    messages.append(user("<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"))
    messages.append(assistant("noted"))
    messages += [user("tail question " + "word " * 40), assistant("tail answer " + "word " * 40)]
    body = _summary(messages)
    task = body.split("## Active Task")[1].split("## ")[0].strip()
    assert task == "Never touch config/settings.yaml."
    assert "<task-notification>" not in body.split("## Goal")[0]
    assert is_wrapper("\x1b[31m") is False
    assert is_wrapper("<environment_context><cwd>/x</cwd></environment_context>")


def test_blocked_holds_only_unresolved_errors():
    body = _summary(_claude_code_like())
    blocked = body.split("## Blocked")[1].split("## ")[0]
    # The parser failure was fixed by a later passing run of the same command.
    assert "ValueError" not in blocked
    # `"error": null` and code mentioning "error" are no blockers.
    assert "null" not in blocked
    assert "make lint" in blocked
    assert "Name 'foo' is not defined" in blocked


def test_actions_are_dated_from_their_own_timestamps_and_name_a_recall_reference():
    body = _summary(_claude_code_like())
    actions = body.split("## Completed Actions")[1].split("## ")[0]
    assert "(on 2025-06-02)" in actions
    assert "[ref:5]" in actions  # the first Bash result, index 5 of the input
    assert "2026-12-03" in body.split("## Active State")[1]  # the compaction's own date


def test_codex_and_hermes_shapes():
    env = "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"
    patch = "*** Begin Patch\n*** Update File: src/App.tsx\n@@\n-a\n+b\n*** End Patch"
    messages = [
        system(),
        user(env),
        user("Add the collapsible card. Do not use inline styles."),
        assistant(None, call("c1", "exec_command", cmd=["bash", "-lc", "npm test -- --run"])),
        result(
            "c1",
            json.dumps(
                {
                    "output": "Tests: 3 failed, 9 passed\nTypeError: x is undefined",
                    "metadata": {"exit_code": 1},
                }
            ),
        ),
        assistant(None, call("c2", "apply_patch", input=patch)),
        result(
            "c2", json.dumps({"output": "Success. Updated the following files:\nM src/App.tsx"})
        ),
        {
            **assistant(None, call("h1", "terminal", command="df -h /srv")),
            "timestamp": 1775372583.2,
        },
        {
            **result(
                "h1", json.dumps({"output": "Filesystem Size\n/dev/sda1 100G", "exit_code": 0})
            ),
            "timestamp": 1775372583.9,
        },
        assistant("done " + "word " * 30),
        user("thanks " + "word " * 40),
        assistant("bye " + "word " * 40),
    ]
    body = _summary(messages)
    assert "- [p] src/App.tsx" in body.split("### Files")[1]
    assert "- npm test -- --run -> exit 1" in body
    assert "- df -h /srv\n" in body  # exit 0: no code written
    assert "TypeError" in body
    assert "Tests: 3 failed, 9 passed" in body
    assert "Do not use inline styles." in body
    assert body.split("## Active Task")[1].split("## ")[0].strip().startswith("Add the collapsible")
    assert "(on 2026-04-05)" in body
    assert message_date({"timestamp": 1775372583.2}) == date(2026, 4, 5)
    assert message_date({"timestamp": "2025-06-02T10:00:00Z"}) == date(2025, 6, 2)
    assert message_date({"timestamp": "garbage"}) is None


def test_the_summary_stays_within_its_bound_and_keeps_the_facts_first():
    messages = [system(), user("start"), assistant("ok"), user("run everything")]
    for i in range(400):
        messages.append(assistant(None, call(f"c{i}", "terminal", command=f"make target-{i}")))
        messages.append(result(f"c{i}", json.dumps({"output": "ok " * 50, "exit_code": 0})))
    messages += [user("tail " + "word " * 40), assistant("tail " + "word " * 40)]
    config = CompactionConfig(context_length=64_000, tail_token_budget=60, protect_first_n=1)
    body = compact(
        messages, config=config, now=DAY, force=True, tokenizer=WORDS
    ).report.summary_body
    assert len(body) <= config.summary_chars
    assert "`make target-398` -> exit 0" in body
    assert "earlier actions omitted" in body


def _reference_exception_names(text: str) -> list[str]:
    """The regex formulation ``_exception_names`` must reproduce."""
    names: dict[str, None] = {}
    for count, match in enumerate(re.finditer(r"(?:Error|Exception)\b", text), 1):
        start = match.start()
        word = text[max(0, start - 60) : start]
        word = word[len(word.rstrip(string.ascii_letters + string.digits + "_")) :]
        backslashes = re.search(r"\\*\Z", text[: start - len(word)])
        if word and word[0] in "nrtbf" and backslashes and len(backslashes.group()) % 2:
            word = word[1:]  # a JSON escape's letter, not the name's
        if word and word[0].isupper() and word[0].isascii():
            names[word + match.group()] = None
        if count >= 8:
            break
    return list(names)


def test_an_exception_name_starting_a_line_of_a_json_envelope_is_read_without_the_escape():
    envelope = json.dumps(
        {
            "output": "Traceback (most recent call last):\nIndexError: list index\n\tKeyError",
            "exit_code": 1,
        }
    )
    assert resume._exception_names(envelope) == ["IndexError", "KeyError"]
    # An escaped backslash before the letter is a real "n": no escape, no capital, no name.
    assert resume._exception_names(r"path\\nIndexError") == []


_NAME_PARTS = [
    "Error",
    "Exception",
    "Errors",
    "ExceptionError",
    "Value",
    "value",
    "_",
    "Key",
    "é",
    "Ä",
    "٣",  # a non-ASCII digit: a word character to re's \b
    "9",
    " ",
    "\n",
    ".",
    ":",
    "X" * 70,
    "\\",
    "n",
    "t",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_NAME_PARTS), max_size=30))
def test_exception_names_are_those_of_the_regex(parts):
    text = "".join(parts)
    assert resume._exception_names(text) == _reference_exception_names(text)


_CONSTRAINT_PARTS = [
    "must",
    "MUST",
    "Never",
    "do not",
    "Don't",
    "shouldn't",
    "make sure",
    "only use",
    "mu",
    "st",
    "muſt",  # long s: case-insensitively an "s" to re, not to str.lower
    "\u212a",  # Kelvin sign
    "x",
    " ",
    "\n",
    ".",
    "'",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_CONSTRAINT_PARTS), max_size=12))
def test_the_constraint_prefilter_agrees_with_the_regex(parts):
    text = "".join(parts)
    assert resume._has_constraint(text) == (resume._CONSTRAINT.search(text) is not None)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*resume._ERROR_HINTS, *resume._TEST_HINTS, "x", "é", "\ud800"])))
def test_the_hint_scan_agrees_with_substring_checks(parts):
    text = "".join(parts)
    assert resume._hints(text) == (
        any(h in text for h in resume._ERROR_HINTS),
        any(h in text for h in resume._TEST_HINTS),
    )


@settings(max_examples=12, deadline=None)
@example(calls=2_500, summary_chars=12_000)  # more than the scan keeps
@given(calls=st.integers(1, 2_500), summary_chars=st.sampled_from([1_200, 4_000, 12_000]))
def test_actions_are_numbered_and_counted_whatever_their_number(calls, summary_chars):
    # The scan keeps only the newest actions it can show (2.6 MB fewer at 50k messages): the
    # numbering and the count of those left out still cover every action. The shortest lines
    # an action can have (a one-letter tool, an empty result) fill the room fastest.
    messages = [system(), user("start"), assistant("ok"), user("go on")]
    for i in range(calls):
        messages.append(assistant(None, call(f"c{i}", "x")))
        messages.append(result(f"c{i}", ""))
    messages += [user("tail " + "word " * 40), assistant("tail " + "word " * 40)]
    config = CompactionConfig(
        context_length=64_000,
        tail_token_budget=60,
        protect_first_n=1,
        resume_summary_max_chars=summary_chars,
    )
    report = compact(messages, config=config, now=DAY, force=True, tokenizer=WORDS).report
    middle_calls = sum(
        1
        for message in messages[report.boundaries["middle"][0] : report.boundaries["middle"][1]]
        if message["role"] == "tool"
    )
    section = report.summary_body.split("## Completed Actions", 1)[1].split("\n## ", 1)[0]
    numbered = [int(n) for n in re.findall(r"^(\d+)\. ", section, re.M)]
    omitted = re.search(r"\((\d+) earlier actions omitted", section)
    assert numbered == list(range(middle_calls - len(numbered) + 1, middle_calls + 1))
    assert (int(omitted.group(1)) if omitted else 0) + len(numbered) == middle_calls
