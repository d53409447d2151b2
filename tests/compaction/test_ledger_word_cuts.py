"""A fact ledger line that is cut never begins or ends inside a word (issue #37, item 3): a
long error line, a long request, an error's command label and an abbreviated command keep
whole words on each side of their "…", as the summary's gists do."""

from __future__ import annotations

import re

from compaction.ledger import Fact, Ledger, extract, render
from compaction.words import is_word_char, tail_at_word
from tests.compaction.builders import assistant, call, result, user

_WORDY = "configuration " * 60  # a word straddles every possible cut point


def _cut_ends_at_a_word(line: str, whole: str) -> bool:
    """``line`` (a start of ``whole`` and "…") ends where a word of ``whole`` ends."""
    head = line.rstrip("…").rstrip()
    assert whole.startswith(head), (line, whole)
    after = whole[len(head) : len(head) + 1]
    return not (after and is_word_char(head[-1]) and is_word_char(after))


def test_a_long_error_line_and_its_command_label_end_at_a_word():
    command = "python manage.py migrate --database reporting " + "--settings deploy.prod " * 4
    error = "ValueError: " + _WORDY
    rows = [
        assistant(None, call("c1", "Bash", command=command)),
        result("c1", f"Exit code 1\nTraceback (most recent call last):\n{error}"),
    ]
    ledger = extract(rows)
    errors = [f for f in ledger.of("errors") if f.text.startswith("ValueError")]
    assert errors, ledger
    for fact in errors:
        assert fact.text.endswith("…")
        assert _cut_ends_at_a_word(fact.text, " ".join(error.split())), fact.text
        assert fact.detail.endswith("…")
        assert _cut_ends_at_a_word(fact.detail, " ".join(command.split())), fact.detail


def test_a_long_request_ends_at_a_word():
    request = "Please rename the " + _WORDY
    ledger = extract([user(request), assistant("On it.")])
    (fact,) = ledger.of("requests")
    assert fact.text.endswith("…")
    assert _cut_ends_at_a_word(fact.text, " ".join(request.split())), fact.text


def test_an_abbreviated_command_keeps_whole_words_on_both_sides():
    url = "https://api.example.org/search/repositories?q=configuration+parser&per_page=10"
    script = "import sys, json; rows = json.load(sys.stdin); print(rows['items']["
    commands = tuple(
        Fact(
            f'curl -s "{url}" 2>/dev/null | python3 -c "{script}{n}])" '
            f"> configuration_report_{n}_output.txt",
            1,
            n,
            "0",
        )
        for n in range(12)
    )
    short = tuple(Fact(f"ls src/m{n}", 1, 20 + n, "0") for n in range(3))
    whole, _ = render(Ledger({"commands": short + commands[-2:]}), 100_000)
    text, written = render(Ledger({"commands": commands + short}), len(whole) + 200)
    cut = [f.text for f in written.of("commands") if "…" in f.text]
    assert cut, text
    for line in cut:
        head, end = line.split("…")
        original = next(
            c.text for c in commands if c.text.startswith(head) and c.text.endswith(end)
        )
        assert _cut_ends_at_a_word(head + "…", original), line
        before = original[len(original) - len(end) - 1]
        assert not (is_word_char(before) and is_word_char(end[0])), line
        assert re.search(r"_\d+_output\.txt$", end)  # what tells the commands apart


def test_tail_at_word_starts_at_a_word_keeping_a_long_last_word_whole():
    assert tail_at_word("copy the configuration file", 12) == "configuration file"
    assert tail_at_word("copy the configuration file", 5) == "file"
    assert tail_at_word("a /very/long/path.py", 9) == "/path.py"
    assert tail_at_word("x" * 30, 5) == "x" * 5
    assert tail_at_word("short", 10) == "short"
