"""The fact ledger: the exact facts of the compacted turns, appended to every summary.

An LLM summary keeps what the model happened to keep; the ledger keeps, mechanically and
verbatim, what a resuming agent must not lose:

- files: every path read, written, patched or searched, from file-tool arguments, from
  shell commands (``sed -n``, ``cat``, ``rg``, ``head``, ``python x.py``, ``> out``, ``sed -i``
  …) and from patch headers (``*** Update File: x``, ``+++ b/x``);
- commands: every shell command (its first line) with its exit code, repeats counted;
- errors: error lines of outputs that are errors (a non-zero exit code, a tool error, a
  traceback), never lines of a file listing or a search result; a line met again is counted,
  labelled with its newest source;
- exceptions: ``FooError``/``FooException`` names of tool results;
- tests: failing test names and test counts;
- constraints: the user's constraint sentences, verbatim;
- requests: the user's requests, verbatim, newest first (a bounded number).

``extract`` reads the compacted rows, ``parse`` reads the ledger of the previous summary, and
``merge`` joins them (so nothing falls out on the next round). ``render`` writes it within a
size bound: when everything does not fit it keeps, per kind, the most referenced and newest
facts and says how many were left to ``recall``. The rendering starts with ``LEDGER_HEADING``
on its own line, so ``parse`` finds it again.

Format (one fact per line; paths grouped by how they were used, each path written in full,
a group's paths sorted so a directory's stay together; a command's exit code only when not 0)::

    ## Fact Ledger
    (exact facts of the compacted turns, kept by the engine; recall has every row)
    ### Files (r read, w written, p patched, s searched, x run)
    - [pr] src/app/models.py, src/app/views.py×3
    ### Commands (exit code when not 0)
    - pytest -q tests/test_app.py -> exit 1 ×2
    - ls src/app

The ledger is four modules, one idea each: this one reads the facts of rows (``extract``);
``ledger_facts`` holds the data (``Fact``, ``Ledger``, the kinds); ``shell_paths`` reads which
files a command names; ``ledger_render`` merges, writes within a budget and parses back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import re2

from compaction.ledger_facts import (
    _LINE_CHARS,
    _REQUEST_CHARS,
    KINDS,
    LEDGER_HEADING,
    Fact,
    Ledger,
    _one_line,
)
from compaction.ledger_render import merge, parse, render, split_ledger
from compaction.messages import (
    Message,
    content_text,
    parse_arguments,
    tool_call_id,
    tool_call_name,
)
from compaction.resume import (
    _UPPER,
    _WORD_CHARS,
    SHELL_TOOLS,
    _error_lines,
    _exit_code,
    _has_constraint,
    _sentences,
    _unwrap,
    is_wrapper,
    without_ide_context,
)
from compaction.shell_paths import (
    _FILE_VERBS,
    _HEADER_KIND,
    _PATCH_HEADERS,
    _command,
    _is_listing,
    _paths_of,
    command_line,
    command_paths,
)

__all__ = [
    "KINDS",
    "LEDGER_HEADING",
    "Fact",
    "Ledger",
    "command_line",
    "command_paths",
    "extract",
    "merge",
    "parse",
    "render",
    "split_ledger",
]

_SCAN = 20_000  # chars of one tool result read for names, errors and tests


_USER_SCAN = 100_000  # chars of one user message read for constraints (long prompts end with rules)


class _Collector:
    """Facts by kind and key, in a mutable form while rows are read."""

    def __init__(self) -> None:
        self.found: dict[str, dict[str, list[Any]]] = {kind: {} for kind in KINDS}

    def add(self, kind: str, key: str, pos: int, detail: str = "", text: str | None = None) -> None:
        # [text, count, last, detail]
        entry = self.found[kind].get(key)
        if entry is None:
            self.found[kind][key] = [text or key, 1, pos, detail]
            return
        entry[1] += 1
        entry[2] = pos
        if kind == "files":
            entry[3] = "".join(sorted(set(entry[3]) | set(detail)))
        elif detail:
            entry[3] = detail

    def detail(self, kind: str, key: str, detail: str) -> None:
        """Set the detail of a fact already added (a command's exit code, from its result)."""
        entry = self.found[kind].get(key)
        if entry is not None:
            entry[3] = detail

    def ledger(self) -> Ledger:
        facts = {
            kind: tuple(
                Fact(text, count, last, detail)
                for text, count, last, detail in sorted(found.values(), key=lambda e: e[2])
            )
            for kind, found in self.found.items()
        }
        return Ledger(facts)


_PATH_KEY = re.compile(r"path$|^file$|^filename$|^notebook_path$|^dir$", re.IGNORECASE)


_TEST_FAIL = re.compile(
    r"^(?:FAILED|ERROR) (\S+::\S+)|^--- FAIL: (\S+)|^test (\S+) \.\.\. FAILED"
    r"|^\s*(?:✕|✗|×) (.{3,160})$",
    re.MULTILINE,
)


_TEST_COUNT = re.compile(
    r"\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|failures?)\b"
    r"|\bRan \d+ tests?\b|\btest result: \w+\.|^Tests?: +\d+",
    re.IGNORECASE | re.MULTILINE,
)


# Every error report, exception name and test result the scan below finds holds one of these
# (or starts a line with "E "). Looked for as literals (``_literals``): ``re``'s alternation of
# them tries each one at every position, ten times slower than even one substring test each.
_HINTS = (
    "rror", "xception", "FAIL", "Traceback", "fatal", "panic", "not found", "No such",
    "passed", "failed", "Ran ", "Test:", "Tests:", "test result", "✕", "✗", "×", "\nE ",
)  # fmt: skip


_TEST_HINTS = ("passed", "failed", "FAIL", "Ran ", "Tests:", "test result", "✕", "✗")


def _literals(literals: Sequence[str]) -> Any:
    """One RE2 pattern for "any of ``literals`` occurs", searched over a text's UTF-8 bytes:
    one linear pass where ``str.__contains__`` makes one per literal (18 over every 40,000-
    char result). A literal's bytes occur exactly where it does (UTF-8, lone surrogates
    passed through, never puts a lead byte inside another character)."""
    return re2.compile("|".join(re2.escape(literal) for literal in literals))


_HINT_SCAN = _literals(_HINTS)
_TEST_HINT_SCAN = _literals(_TEST_HINTS)


def _holds_any(scan: Any, text: str) -> bool:
    return scan.search(text.encode("utf-8", "surrogatepass")) is not None


_EXITED = re.compile(
    r"exited with (?:code|status) (-?\d+)|\bexit (?:code|status)[: ]+(-?\d+)", re.I
)


# An output that is an error even without an exit code (Claude Code results carry none).
_ERROR_START = re.compile(
    r"^\s*(?:<tool_use_error>|Error\b|ERROR\b|error(?:\[\w+\])?:|fatal:|Traceback \(most"
    r"|[A-Z][\w.]*(?:Error|Exception)\b[:(]|E {2,}\S|FAILED\b|panic)",
)


# An error report line of an output that does not start as an error: a line starting with
# one of ``_STRONG_STARTS``, or one of ``_STRONG_LITERALS`` anywhere.
_STRONG_STARTS = (
    r"Traceback \(most recent call last\)|[A-Z][\w.]*(?:Error|Exception): |FAILED |E {2,}\S"
    r"|--- FAIL:|(?:error|fatal)(?:\[\w+\])?: "
)
_STRONG_FIRST = re.compile(f"(?:{_STRONG_STARTS})")
# The literal "\n" in front lets ``re`` jump from newline to newline; "^" in MULTILINE mode
# has no literal, so the whole regex tries all its alternatives at every position.
_STRONG_LINE = re.compile(f"\n(?:{_STRONG_STARTS})")
_STRONG_LITERALS = ("panicked at", ": command not found", "No such file or directory")


_ASCII_WORD = frozenset(_WORD_CHARS)


def exception_words(text: str) -> list[str]:
    """What ``re.findall(r"\\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\\b", text)`` finds,
    each once, in text order, found with ``str.find`` (the regex tries every capital letter
    of a 40,000-char result: a third of the engine's time on a 1,000-message session).

    A match is a whole run of ASCII word characters that starts with a capital, ends with
    "Error" or "Exception" and has no other word character (``\\w``, Unicode) on either side:
    inside such a run ``\\b`` holds nowhere, so the regex can match only all of it."""
    names: dict[str, None] = {}
    size = len(text)
    # The capital and more before the suffix of the name found last, and the suffix's length:
    # a result that names an error names it again and again (140 "ValueError" in one).
    last, last_suffix = "", 0
    error, exception = text.find("Error"), text.find("Exception")
    while error != -1 or exception != -1:
        if exception == -1 or (error != -1 and error < exception):
            suffix, end = error, error + 5
            error = text.find("Error", end)
        else:
            suffix, end = exception, exception + 9
            exception = text.find("Exception", end)
        if end < size and (text[end] == "_" or text[end].isalnum()):
            continue  # the run goes on: this suffix is not at its end
        # The last name again, with no word character before it: found already. (Suffixes
        # come in text order, so ``start`` is past the start of the last name, never < 0.)
        start = suffix - len(last)
        if (
            end - suffix == last_suffix
            and text.startswith(last, start)
            and (start == 0 or not (text[start - 1] == "_" or text[start - 1].isalnum()))
        ):
            continue
        start = suffix
        while start > 0 and text[start - 1] in _ASCII_WORD:
            start -= 1
        if start == suffix or text[start] not in _UPPER:
            continue  # a name is a capital and more before its suffix ("Error" alone is none)
        if start > 0 and (text[start - 1] == "_" or text[start - 1].isalnum()):
            continue  # a non-ASCII word character before the run: no boundary
        names[text[start:end]] = None
        last, last_suffix = text[start:suffix], end - suffix
    return list(names)


def _error_output(text: str, code: str | None, listing: bool) -> bool:
    """Whether a tool result is an error: a non-zero exit code; or, without one, an output
    that starts as an error or (not a listing) holds a traceback or error report line."""
    if code is not None:
        return code != "0"
    if _ERROR_START.match(text):
        return True
    return not listing and _has_strong_error(text)


def _has_strong_error(text: str) -> bool:
    """Whether ``text`` holds an error report line: what one MULTILINE regex of the literals
    and "^"-anchored starts said, in a seventh of its time on a 40,000-char result (``re``
    tries a regex with no literal prefix at every position; here the literals are substring
    tests and the starts are tried at the text's start and after each newline only)."""
    return (
        any(literal in text for literal in _STRONG_LITERALS)
        or _STRONG_FIRST.match(text) is not None
        or _STRONG_LINE.search(text) is not None
    )


def _may_hold_facts(text: str) -> bool:
    """Whether ``text`` holds one of ``_HINTS`` or a line starting with "E " (a result without
    any holds no error report, exception name or test result)."""
    # "rror" first: the commonest hint, mostly met early, where a substring test stops (the
    # scan encodes the whole text first).
    return text.startswith("E ") or "rror" in text or _holds_any(_HINT_SCAN, text)


def _exit_of(text: str) -> str | None:
    """The exit code ``text`` (a command's result) reports: ``_exit_code``'s, else an "exited
    with code N" or "exit status N" in its last 400 chars, else in its first 400."""
    code = _exit_code(text)
    if code is None:
        head = text[-400:] if len(text) > 400 else text
        match = _exited(head) or (_exited(text, 400) if len(text) > 400 else None)
        if match:
            code = match.group(1) or match.group(2)
    return code


def _exited(text: str, stop: int | None = None) -> re.Match[str] | None:
    """``_EXITED.search(text, 0, stop)``, run only when ``text[:stop]`` holds "exit" in any
    case: a command's result seldom does, and ``_EXITED`` tries every position. IGNORECASE
    also takes "ı" and "İ" for "i", so a text holding either is searched as before."""
    window = text if stop is None else text[:stop]
    if "exit" not in window.lower() and "ı" not in window and "İ" not in window:
        return None
    return _EXITED.search(text, 0, len(text) if stop is None else stop)


def extract(
    middle: Sequence[Message],
    calls: Mapping[str, tuple[str, dict[str, Any]]] | None = None,
) -> Ledger:
    """The facts of the compacted rows ``middle`` (see the module docstring).

    Args:
        middle: the compacted messages, original content.
        calls: tool call id → (name, parsed arguments) when already known.
    """
    got = _Collector()
    add = got.add
    pending: dict[str, tuple[str, str | None]] = {}  # call id -> (tool name, command)
    for pos, message in enumerate(middle):
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                if not isinstance(call, Mapping):
                    continue
                cid = tool_call_id(call) or f"#{pos}"
                known = calls.get(cid) if calls is not None else None
                name, args = known if known else (tool_call_name(call), parse_arguments(call))
                lowered = name.lower()
                letter = _FILE_VERBS.get(lowered, "x")
                command = _command(args) if lowered in SHELL_TOOLS or "command" in args else None
                for key, value in args.items():
                    if not isinstance(value, str) or not value.strip():
                        continue
                    if _PATH_KEY.search(key) and "\n" not in value:
                        add("files", value.strip(), pos, letter)
                    elif key not in ("command", "cmd") and (
                        "File:" in value or "+++ " in value or "Move to:" in value
                    ):
                        for match in _PATCH_HEADERS.finditer(value):
                            action, path, moved, diff = match.groups()
                            kind = _HEADER_KIND.get(action or "", "p" if diff else "w")
                            add("files", path or moved or diff, pos, kind)
                if command is not None and (lowered in SHELL_TOOLS or lowered == "apply_patch"):
                    add("commands", command_line(command), pos, "?")
                    for path, kind in _paths_of(command):  # cached: render reads them again
                        add("files", path, pos, kind)
                pending[cid] = (name, command)
        elif role == "tool":
            cid = str(message.get("tool_call_id") or "")
            name, command = pending.pop(cid, ("tool", None))
            _result(got, pos, message, name, command)
        elif role == "user":
            raw = content_text(message.get("content"), images=False)
            text = without_ide_context(raw.strip())
            if is_wrapper(text):
                continue
            add("requests", _one_line(text, _REQUEST_CHARS), pos)
            head = text[:_USER_SCAN]
            if _has_constraint(head):
                for sentence in _sentences(head):
                    if 8 <= len(sentence) <= 400 and _has_constraint(sentence):
                        key = " ".join(sentence.split()).lower()
                        add("constraints", key, pos, text=" ".join(sentence.split()))
    return got.ledger()


def _result(got: _Collector, pos: int, message: Message, name: str, command: str | None) -> None:
    """The exit code, error lines, exception names and test results of one tool result."""
    content = message.get("content")
    text = content if type(content) is str else content_text(content)
    if len(text) > 2 * _SCAN:
        text = text[:_SCAN] + "\n" + text[-_SCAN:]
    code = _exit_of(text) if command is not None else None
    if command is not None and code is not None:
        got.detail("commands", command_line(command), code)
    failed = code is not None and code != "0"
    if not failed and message.get("is_error") is not True and not _may_hold_facts(text):
        return  # no error, exception name or test result can be in it: most results
    body = _unwrap(text)
    listing = _is_listing(name, command)
    source = _one_line(command_line(command), 60) if command else name
    if message.get("is_error") is True or _error_output(body.lstrip(), code, listing):
        for line in _error_lines(body, 4):
            line = _one_line(line.strip(), _LINE_CHARS)
            got.add("errors", line, pos, source)
        if code not in (None, "0") and not _error_lines(body, 1):
            tail = body.rstrip().rsplit("\n", 1)[-1].strip()
            # A tail that only restates the code ("Exit code 49", all Claude Code wrote of a
            # failure with no output) says nothing the command's "-> exit 49" does not.
            if _exit_of(tail) != code or len(tail) > 24:
                line = _one_line(f"exit {code}: {tail}", _LINE_CHARS)
                got.add("errors", line, pos, source)
    # Names are read from the raw text: an envelope's ``"error_type": "FooError"`` field is
    # not among the text values ``_unwrap`` keeps.
    if "rror" in text or "xception" in text:
        for exception in exception_words(text):
            got.add("exceptions", exception, pos)
    if not listing and _holds_any(_TEST_HINT_SCAN, body):
        for match in _TEST_FAIL.finditer(body):
            test = next(g for g in match.groups() if g)
            got.add("tests", f"FAILED {_one_line(test, 200)}", pos)
        counted = _test_count_line(body)
        if counted is not None:
            got.add("tests", _one_line(counted.strip("= "), 200), pos)


# A lowercase word every ``_TEST_COUNT`` match holds (its lowercased text holds it, ``re``'s
# IGNORECASE matching aside: see ``_test_count_line``).
_COUNT_WORDS = (
    "passed", "failed", "error", "skipped", "failure", "ran ", "test result: ", "test: ",
    "tests: ",
)  # fmt: skip


def _test_count_line(body: str) -> str | None:
    """The first line (stripped) under 300 chars that holds a ``_TEST_COUNT`` match, if any.

    A match never spans lines, so only lines holding one of ``_COUNT_WORDS`` in ``body``
    lowered are searched: ``_TEST_COUNT`` has no literal to jump to and tried each of a 40,000-
    char result's positions (a quarter of ``extract`` on a codex session that runs tests).
    The lowered text stands in for ``re``'s case folding only where each character lowers to
    one character and none is one that IGNORECASE also takes for "i" or "s" ("ı", "ſ"): else
    every line is searched, as before."""
    lowered = body.lower()
    if len(lowered) != len(body) or "ı" in body or "ſ" in body:
        return _first_count_line(body, 0, len(body))
    starts: set[int] = set()
    for word in _COUNT_WORDS:
        at = lowered.find(word)
        while at != -1:
            starts.add(body.rfind("\n", 0, at) + 1)
            end = body.find("\n", at)
            if end == -1:
                break
            at = lowered.find(word, end)
    for start in sorted(starts):
        end = body.find("\n", start)
        line = _first_count_line(body, start, len(body) if end == -1 else end)
        if line is not None:
            return line
    return None


def _first_count_line(body: str, start: int, stop: int) -> str | None:
    """The first line under 300 chars (stripped) of ``body[start:stop]`` holding a
    ``_TEST_COUNT`` match (``start`` and ``stop`` at line ends: "^" and "\\b" see them as the
    whole text would)."""
    for match in _TEST_COUNT.finditer(body, start, stop):
        begin = body.rfind("\n", 0, match.start()) + 1
        end = body.find("\n", match.end())
        line = body[begin : end if end != -1 else len(body)].strip()
        if len(line) < 300:
            return line
    return None
