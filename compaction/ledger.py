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
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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

LEDGER_HEADING = "## Fact Ledger"
_NOTE = "(exact facts of the compacted turns, kept by the engine; recall has every row)"
KINDS: tuple[str, ...] = (
    "constraints",
    "requests",
    "files",
    "commands",
    "errors",
    "exceptions",
    "tests",
)
_TITLES = {
    "constraints": "Constraints (verbatim)",
    "requests": "User Requests (verbatim, newest first)",
    "files": "Files (r read, w written, p patched, s searched, x run)",
    "commands": "Commands (exit code when not 0; error lines indented below)",
    "errors": "Errors",
    "exceptions": "Exception Names",
    "tests": "Tests",
}
_KIND_OF_TITLE = {title.split(" (")[0]: kind for kind, title in _TITLES.items()}
# Share of the ledger's room the constraints, exception names and requests may take when not
# everything fits; the other kinds share what is left in proportion to size × weight.
_SHARES = {"constraints": 0.30, "exceptions": 0.05, "requests": 0.08}
_WEIGHTS = {
    "constraints": 3.0,
    "exceptions": 1.0,
    "requests": 0.3,
    "files": 0.9,
    "commands": 0.8,
    "errors": 0.7,
    "tests": 0.7,
}
_MAX_REQUESTS = 5
_REQUEST_CHARS = 600
_LINE_CHARS = 240
_SCAN = 20_000  # chars of one tool result read for names, errors and tests
_USER_SCAN = 100_000  # chars of one user message read for constraints (long prompts end with rules)


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact: its text, how often it was met, when last (a position; facts carried from a
    previous ledger are older than every new one) and its detail (a path's access letters,
    a command's exit code, an error's source)."""

    text: str
    count: int = 1
    last: int = 0
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Ledger:
    """The facts by kind (``KINDS``), each kind oldest first, and how many facts of each kind
    earlier rounds left to ``recall``."""

    facts: Mapping[str, tuple[Fact, ...]] = field(default_factory=dict)
    left: Mapping[str, int] = field(default_factory=dict)

    def of(self, kind: str) -> tuple[Fact, ...]:
        """The facts of ``kind``."""
        return self.facts.get(kind, ())

    def total(self) -> int:
        """How many facts the ledger holds."""
        return sum(len(v) for v in self.facts.values())

    def to_dict(self) -> dict[str, Any]:
        """The ledger as JSON-serializable data (for the report)."""
        return {
            "facts": {
                kind: [
                    {"text": f.text, "count": f.count, "detail": f.detail} for f in self.of(kind)
                ]
                for kind in KINDS
            },
            "left_to_recall": dict(self.left),
        }


# ---------------------------------------------------------------------------------------
# Extraction


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


_FILE_VERBS = {
    "read_file": "r",
    "read": "r",
    "view": "r",
    "notebookread": "r",
    "write_file": "w",
    "write": "w",
    "create": "w",
    "patch": "p",
    "edit": "p",
    "multiedit": "p",
    "notebookedit": "p",
    "apply_patch": "p",
    "str_replace_based_edit_tool": "p",
    "str_replace_editor": "p",
    "search_files": "s",
    "grep": "s",
    "glob": "s",
    "ls": "s",
    "list_files": "s",
    "list_directory": "s",
}
_PATH_KEY = re.compile(r"path$|^file$|^filename$|^notebook_path$|^dir$", re.IGNORECASE)
_PATCH_HEADERS = re.compile(
    r"^\*\*\* ?(Add|Update|Delete) File: ?(\S+)|^\*\*\* Move to: ?(\S+)|^\+\+\+ [ab]/(\S+)",
    re.MULTILINE,
)
_HEADER_KIND = {"Add": "w", "Update": "p", "Delete": "p"}
_READERS = frozenset(
    [
        "cat",
        "sed",
        "head",
        "tail",
        "less",
        "more",
        "nl",
        "wc",
        "bat",
        "stat",
        "file",
        "awk",
        "cut",
        "sort",
        "uniq",
        "jq",
        "diff",
        "cmp",
        "md5sum",
        "sha256sum",
        "xxd",
        "od",
        "strings",
    ]
)
_SEARCHERS = frozenset(
    ["rg", "grep", "egrep", "fgrep", "ag", "ack", "ls", "find", "fd", "tree", "du"]
)
_WRITERS = frozenset(["tee", "touch", "cp", "mv", "mkdir", "rm", "truncate", "chmod"])
_RUNNERS = frozenset(
    [
        "python",
        "python3",
        "node",
        "deno",
        "bun",
        "ruby",
        "perl",
        "bash",
        "sh",
        "zsh",
        "pytest",
        "go",
        "cargo",
        "npx",
        "tsx",
        "ts-node",
        "php",
        "java",
        "javac",
        "gcc",
        "clang",
        "make",
    ]
)
_PATTERN_FIRST = frozenset(["rg", "grep", "egrep", "fgrep", "ag", "ack", "awk", "sed"])
_WRAPPING = frozenset(
    ["sudo", "env", "time", "timeout", "nice", "nohup", "xargs", "command", "exec"]
)
_PATHLIKE = re.compile(r"^(?:~|\.{1,2})?/?[\w@+.-]+(?:/[\w@+.-]+)*/?$")
# A Windows path as written (``E:/AI/x``, ``C:\Users\a\.claude``): a drive letter alone
# before the colon, so ``HEAD:src/a.py``, ``host:path`` and ``https://`` are not one.
_DRIVE_PATH = re.compile(r"^[A-Za-z]:[\\/]+(?:[\w@+.~-]+[\\/]+)*[\w@+.~-]+[\\/]?$")
# A command naming a ``C:\`` path is read the Windows way: its backslashes escape nothing.
_BACKSLASH_DRIVE = re.compile(r"(?<![\w:/\\])[A-Za-z]:\\")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_SEGMENTS = re.compile(r"&&|\|\||[;|\n]")
_REDIRECT = re.compile(r"(?<![0-9&<])>>?\s*([^\s;&|<>]+)")
# What the shell does not read as separators or redirects: quoted text (a quote left open
# runs to the end), a backslash-escaped character, a ``#`` comment to the end of its line.
_QUOTED = re.compile(
    r"""'[^']*(?:'|\Z)|"(?:[^"\\]|\\.)*(?:"|\Z)|\\.|(?<![^\s;|&()])#[^\n]*""", re.DOTALL
)
_QUOTED_WINDOWS = re.compile(r"""'[^']*(?:'|\Z)|"[^"]*(?:"|\Z)|(?<![^\s;|&()])#[^\n]*""")
_OPTION = re.compile(r"--?\w.*", re.DOTALL)  # not "->unique" (a grep pattern), "-" or "--"
# Options whose value is a script, not a file (``python -c "…"``, ``psql -c "SELECT …"``).
_SCRIPT_OPTIONS: dict[str, frozenset[str]] = {
    "python": frozenset(["-c"]),
    "node": frozenset(["-e", "--eval", "-p", "--print"]),
    "bun": frozenset(["-e", "--eval", "-p", "--print"]),
    "ruby": frozenset(["-e"]),
    "perl": frozenset(["-e", "-E"]),
    "php": frozenset(["-r"]),
    "osascript": frozenset(["-e"]),
    "psql": frozenset(["-c", "--command"]),
    "mysql": frozenset(["-e", "--execute"]),
    "mariadb": frozenset(["-e", "--execute"]),
    "sqlite3": frozenset(["-cmd"]),
    "duckdb": frozenset(["-c", "-cmd"]),
}
_SHELLS = frozenset(["bash", "sh", "zsh", "dash"])
_SHELL_COMMAND = re.compile(r"-[a-z]*c[a-z]*")  # bash -c, -lc, -ec …
_CMD_SWITCH = re.compile(r"/[A-Za-z?]+(?::\S*)?")
_SQL_AFTER_DB = frozenset(["sqlite3", "duckdb"])  # sqlite3 app.db "SELECT …": SQL after the file
# cmd and PowerShell programs (any case) that name files: how they use them.
_WINDOWS_LETTERS = {
    "type": "r",
    "get-content": "r",
    "gc": "r",
    "dir": "s",
    "get-childitem": "s",
    "gci": "s",
    "select-string": "s",
    "copy": "w",
    "move": "w",
    "del": "w",
    "erase": "w",
    "ren": "w",
    "copy-item": "w",
    "move-item": "w",
    "remove-item": "w",
    "new-item": "w",
    "set-content": "w",
    "add-content": "w",
    "out-file": "w",
    "xcopy": "w",
    "robocopy": "w",
    "icacls": "r",
    "attrib": "r",
    "findstr": "s",
}
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
# (or starts a line with "E "). Plain substring tests: one pass of ``str.__contains__`` each is
# an order of magnitude faster than one alternation regex over a 40,000-char result.
_HINTS = (
    "rror", "xception", "FAIL", "Traceback", "fatal", "panic", "not found", "No such",
    "passed", "failed", "Ran ", "Test:", "Tests:", "test result", "✕", "✗", "×", "\nE ",
)  # fmt: skip
_TEST_HINTS = ("passed", "failed", "FAIL", "Ran ", "Tests:", "test result", "✕", "✗")
_EXITED = re.compile(
    r"exited with (?:code|status) (-?\d+)|\bexit (?:code|status)[: ]+(-?\d+)", re.I
)
# An output that is an error even without an exit code (Claude Code results carry none).
_ERROR_START = re.compile(
    r"^\s*(?:<tool_use_error>|Error\b|ERROR\b|error(?:\[\w+\])?:|fatal:|Traceback \(most"
    r"|[A-Z][\w.]*(?:Error|Exception)\b[:(]|E {2,}\S|FAILED\b|panic)",
)
# Literals of which every ``_STRONG_ERROR`` match holds one: a result with none of them
# (most results) is not searched with the regex at all.
_STRONG_ANCHORS = (
    "Traceback (most recent call last)", "Error: ", "Exception: ", "FAILED ", "E  ",
    "--- FAIL:", "panicked at", ": command not found", "No such file or directory",
    "error", "fatal",
)  # fmt: skip
_STRONG_ERROR = re.compile(
    r"^Traceback \(most recent call last\)|^[A-Z][\w.]*(?:Error|Exception): |^FAILED |"
    r"^E {2,}\S|^--- FAIL:|panicked at|: command not found|No such file or directory"
    r"|^(?:error|fatal)(?:\[\w+\])?: ",
    re.MULTILINE,
)


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
        start = suffix
        while start > 0 and text[start - 1] in _ASCII_WORD:
            start -= 1
        if start == suffix or text[start] not in _UPPER:
            continue  # a name is a capital and more before its suffix ("Error" alone is none)
        if start > 0 and (text[start - 1] == "_" or text[start - 1].isalnum()):
            continue  # a non-ASCII word character before the run: no boundary
        names[text[start:end]] = None
    return list(names)


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _command(args: Mapping[str, Any]) -> str | None:
    """The whole shell command of a call's arguments (argv lists joined; ``bash -lc`` read)."""
    command = args.get("command", args.get("cmd"))
    if isinstance(command, list):
        parts = [str(p) for p in command]
        if len(parts) >= 3 and parts[0] in ("bash", "sh", "zsh") and parts[1] in ("-lc", "-c"):
            return parts[-1]
        return " ".join(parts)
    return command if isinstance(command, str) and command.strip() else None


def command_line(command: str) -> str:
    """A command as the ledger names it: its first line, at most 200 chars."""
    return command.strip().splitlines()[0][:200]


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


def _is_path(word: str, *, loose: bool) -> bool:
    """A word naming a file: path-like characters, no URL or option, and a directory part
    or an extension (``loose``: any path-like word of a file command); a drive-letter path."""
    if not word or word.startswith("-") or "://" in word or len(word) > 300:
        return False
    if _DRIVE_PATH.match(word):
        return True
    if not _PATHLIKE.match(word) or word in (".", "..", "/", "~"):
        return False
    if word.replace(".", "").replace(",", "").isdigit():
        return False
    return loose or "/" in word or _EXTENSION.search(word) is not None


def _scan(body: str, windows: bool) -> tuple[str, str]:
    """``(mask, text)`` of a shell command, both as long as ``body``: ``mask`` has its
    quoted text, escaped characters and comments blanked with ``_`` (the separators and
    redirects found in it are the shell's own, not those of a quoted SQL or Python script);
    ``text`` is ``body`` with its comments blanked with spaces (their words name nothing).
    ``windows``: backslashes escape nothing (they separate the directories of its paths)."""
    comments: list[tuple[int, int]] = []

    def blank(match: re.Match[str]) -> str:
        if match.group().startswith("#"):
            comments.append(match.span())
        return "_" * (match.end() - match.start())

    mask = (_QUOTED_WINDOWS if windows else _QUOTED).sub(blank, body)
    text = body
    for start, end in reversed(comments):
        text = text[:start] + " " * (end - start) + text[end:]
    return mask, text


def _spans(mask: str, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """The parts of ``mask`` between the matches of ``pattern``."""
    spans, start = [], 0
    for match in pattern.finditer(mask):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(mask)))
    return spans


def _segment_words(segment: str, windows: bool) -> list[str]:
    """The words of one command as the shell reads them (``windows``: keeping its
    backslashes); a quote left open (a multi-line argument cut at its first line) is closed."""
    for closing in ("", '"', "'"):
        lexer = shlex.shlex(segment + closing, posix=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        if windows:
            lexer.escape = ""
        try:
            return list(lexer)
        except ValueError:
            continue
    return segment.split()


def command_paths(command: str) -> list[tuple[str, str]]:
    """``(path, access letter)`` of the files a shell command names: read by ``cat``/``sed
    -n``/``head`` …, searched by ``rg``/``ls`` …, written by ``> x``/``tee``/``cp``, patched by
    ``sed -i``/``apply_patch``, run by ``python x.py`` … Patch headers in a heredoc count.
    Windows paths (``E:/x``, ``C:\\x``) are read as written; quoted text splits no command,
    and the script of ``python -c``/``psql -c`` … names no file (``bash -c``'s is read)."""
    found: list[tuple[str, str]] = []
    for match in _PATCH_HEADERS.finditer(command):
        action, path, moved, diff = match.groups()
        found.append((path or moved or diff, _HEADER_KIND.get(action or "", "p" if diff else "w")))
    found.extend(_shell_paths(command, 0))
    return found


def _shell_paths(command: str, depth: int) -> list[tuple[str, str]]:
    """The paths ``command_paths`` reads from a command's words (``depth``: how many
    ``bash -c`` it is inside)."""
    found: list[tuple[str, str]] = []
    body = command.split("<<", 1)[0]  # a heredoc's lines are data, read above
    windows = _BACKSLASH_DRIVE.search(body) is not None
    mask, text = _scan(body, windows)
    for match in _REDIRECT.finditer(mask):
        target = body[match.start(1) : match.end(1)]
        if target[:1] in "\"'" and target[-1:] == target[:1] and _DRIVE_PATH.match(target[1:-1]):
            target = target[1:-1]
        if _is_path(target, loose=False) and not target.startswith("/dev/"):
            found.append((target, "w"))
    for start, end in _spans(mask, _SEGMENTS):
        # The command without its redirects (their targets are read above).
        segment = " ".join(
            text[start + a : start + b] for a, b in _spans(mask[start:end], _REDIRECT)
        )
        words = [w for w in _segment_words(segment, windows) if "=" not in w[:1]]
        while words and (words[0] in _WRAPPING or "=" in words[0] or words[0].isdigit()):
            words = words[1:]
        if not words:
            continue
        if len(words) > 2 and words[0] in ("uv", "poetry", "pipenv") and words[1] == "run":
            words = words[2:]
        words, inner = _shell_command(words)
        if inner is not None and depth < 2:
            found.extend(_shell_paths(inner, depth + 1))
        if not words:
            continue
        program = _program(words[0])
        rest = words[1:]
        if program in ("git", "npm", "pnpm", "yarn") and rest:
            rest = rest[1:]  # the subcommand
        if program in ("cd", "echo", "printf", "export", "source", "."):
            continue
        rest = _without_scripts(program, rest)
        if program in _READERS or program == "apply_patch":
            letter = "r"
        elif program in _SEARCHERS:
            letter = "s"
        elif program in _WRITERS:
            letter = "w"
        elif program in _RUNNERS or program.startswith("python"):
            letter = "x"
        else:
            letter = _WINDOWS_LETTERS.get(program.lower(), "r")
        if program == "sed" and any(w == "-i" or w.startswith("-i") for w in rest):
            letter = "p"
        if program == "find":  # its paths come before its expression (-type f, -name x)
            rest = rest[: next((i for i, w in enumerate(rest) if w.startswith("-")), len(rest))]
        positional = [w for w in rest if not _OPTION.fullmatch(w)]
        if program.lower() in _WINDOWS_LETTERS:  # cmd's switches: dir /s /b, copy /y
            positional = [w for w in positional if not _CMD_SWITCH.fullmatch(w)]
        if program in _PATTERN_FIRST and positional and not any(w in ("-e", "-f") for w in rest):
            positional = positional[1:]  # the pattern or script
        if program in _SQL_AFTER_DB:
            positional = positional[:1]  # the database file; the SQL after it
        known = program in _READERS or program in _SEARCHERS or program in _WRITERS
        for word in positional:
            if _is_path(word, loose=known and program not in ("awk", "jq", "sort")):
                found.append((word, letter))  # as written: "dir/" stays "dir/"
    return found


def _program(word: str) -> str:
    """The program a command's first word runs: ``/usr/bin/python3`` and
    ``C:\\Python314\\python.exe`` run ``python3`` and ``python``."""
    program = re.split(r"[\\/]", word)[-1]
    return program[:-4] if program.lower().endswith(".exe") else program


def _shell_command(words: list[str]) -> tuple[list[str], str | None]:
    """``(the words before a shell, the command it is given)`` of a command that runs a
    shell (``bash -lc "…"``, also after ``docker exec app`` or ``ssh host``; ``cmd /c …``,
    ``powershell -Command …``); ``(words, None)`` when it runs none."""
    first = _program(words[0]).lower()
    if first in ("cmd", "powershell", "pwsh"):
        starts = ("/c", "/k") if first == "cmd" else ("-c", "-command")
        at = next((i for i, w in enumerate(words) if w.lower() in starts), None)
        return (words, None) if at is None else ([], " ".join(words[at + 1 :]))
    for at, word in enumerate(words):
        if _program(word) not in _SHELLS:
            continue
        for after in range(at + 1, len(words)):
            if _SHELL_COMMAND.fullmatch(words[after]):
                return words[:at], words[after + 1] if after + 1 < len(words) else ""
            if not words[after].startswith("-"):
                break
    return words, None


def _without_scripts(program: str, rest: list[str]) -> list[str]:
    """``rest`` without the script arguments of ``python -c``, ``node -e``, ``psql -c`` …:
    code, not file names."""
    options = _SCRIPT_OPTIONS.get("python" if program.startswith("python") else program)
    if options is None:
        return rest
    kept: list[str] = []
    words = iter(rest)
    for word in words:
        kept.append(word)
        if word in options:
            next(words, None)
    return kept


def _error_output(text: str, code: str | None, listing: bool) -> bool:
    """Whether a tool result is an error: a non-zero exit code; or, without one, an output
    that starts as an error or (not a listing) holds a traceback or error report line."""
    if code is not None:
        return code != "0"
    if _ERROR_START.match(text):
        return True
    return not listing and _has_strong_error(text)


def _has_strong_error(text: str) -> bool:
    """``_STRONG_ERROR.search(text)``, the regex run only on a text holding one of its anchors."""
    if not any(anchor in text for anchor in _STRONG_ANCHORS):
        return False
    return _STRONG_ERROR.search(text) is not None


def _may_hold_facts(text: str) -> bool:
    """Whether ``text`` holds one of ``_HINTS`` or a line starting with "E " (a result without
    any holds no error report, exception name or test result)."""
    return text.startswith("E ") or any(hint in text for hint in _HINTS)


def _exit_of(text: str) -> str | None:
    code = _exit_code(text)
    if code is None:
        head = text[-400:] if len(text) > 400 else text
        match = _EXITED.search(head) or (_EXITED.search(text, 0, 400) if len(text) > 400 else None)
        if match:
            code = match.group(1) or match.group(2)
    return code


def _is_listing(name: str, command: str | None) -> bool:
    """A result that shows file contents or search hits (source code, not an error report)."""
    lowered = name.lower()
    if _FILE_VERBS.get(lowered) in ("r", "s"):
        return True
    return command is not None and _lists(command)


@functools.lru_cache(maxsize=4096)
def _lists(command: str) -> bool:
    """Whether a shell command's first program shows files or search hits (sessions run the
    same commands again and again: each is read once)."""
    first = _words(_SEGMENTS.split(command.split("<<", 1)[0], 1)[0])
    while first and (first[0] in _WRAPPING or "=" in first[0]):
        first = first[1:]
    program = first[0].rsplit("/", 1)[-1] if first else ""
    if program == "sed" and any(w.startswith("-i") for w in first[1:]):
        return False
    return program in _READERS or program in _SEARCHERS or program == "git"


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
            request = text if len(text) <= _REQUEST_CHARS else text[: _REQUEST_CHARS - 1] + "…"
            add("requests", " ".join(request.split()), pos)
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
    if not listing and any(hint in body for hint in _TEST_HINTS):
        for match in _TEST_FAIL.finditer(body):
            test = next(g for g in match.groups() if g)
            got.add("tests", f"FAILED {_one_line(test, 200)}", pos)
        for match in _TEST_COUNT.finditer(body):
            start = body.rfind("\n", 0, match.start()) + 1
            end = body.find("\n", match.end())
            line = body[start : end if end != -1 else len(body)].strip()
            if len(line) < 300:
                got.add("tests", _one_line(line.strip("= "), 200), pos)
                break


# ---------------------------------------------------------------------------------------
# Merging, parsing, rendering


def merge(previous: Ledger, new: Ledger) -> Ledger:
    """``previous`` with ``new`` added: counts summed, details joined, order by last mention
    (every previous fact is older than every new one)."""
    facts: dict[str, tuple[Fact, ...]] = {}
    for kind in KINDS:
        joined: dict[str, Fact] = {}
        old = previous.of(kind)
        for index, fact in enumerate(old):
            joined[_key(kind, fact)] = Fact(fact.text, fact.count, index - len(old), fact.detail)
        for fact in new.of(kind):
            key = _key(kind, fact)
            before = joined.pop(key, None)
            if before is None:
                joined[key] = fact
                continue
            detail = fact.detail
            if kind == "files":
                detail = "".join(sorted(set(before.detail) | set(fact.detail)))
            elif detail == "?" and kind == "commands":
                detail = before.detail
            joined[key] = Fact(fact.text, before.count + fact.count, fact.last, detail)
        facts[kind] = tuple(sorted(joined.values(), key=lambda f: f.last))
    left = {k: previous.left.get(k, 0) + new.left.get(k, 0) for k in KINDS}
    return Ledger(facts, {k: v for k, v in left.items() if v})


def _key(kind: str, fact: Fact) -> str:
    if kind == "constraints":
        return fact.text.lower()
    return fact.text


def split_ledger(body: str) -> tuple[str, str | None]:
    """``(narrative, ledger text or None)`` of a summary body: the ledger is the part from
    the last ``LEDGER_HEADING`` line on."""
    at = body.rfind("\n" + LEDGER_HEADING + "\n")
    if at == -1:
        if body.startswith(LEDGER_HEADING + "\n"):
            return "", body
        return body, None
    return body[:at].rstrip(), body[at + 1 :]


_COUNT = re.compile(r" ×(\d+)$")
_LEFT = re.compile(r"^\((\d+) (?:more |earlier )?(\w+) left to recall\)$")
_FILE_ENTRY = re.compile(r"(\S+) \[([a-z]+)\](?:×(\d+))?")  # older ledgers: "a.py [r]×2"
_FILE_GROUP = re.compile(r"^\[([a-z]+)\] (.*)$")  # "[pr] a.py, b.py×2"
_FILE_TIMES = re.compile(r"×(\d+)$")
_COMMAND_LINE = re.compile(r"^`(.*)`(?: -> exit (\S+))?$")  # older ledgers: "`ls` -> exit 0"
_COMMAND = re.compile(r"^(.*?)(?: -> exit (\S+))?$")
_ERROR_LINE = re.compile(r"^\[(.{1,80}?)\] (.*)$")


def parse(body: str | None) -> Ledger:
    """The ledger written in a previous summary body (empty when it has none). A body without
    a ledger (an older summary) gives the constraints of its "Constraints & Preferences"."""
    if not body:
        return Ledger()
    _, text = split_ledger(body)
    if text is None:
        return _legacy(body)
    found: dict[str, list[Fact]] = {kind: [] for kind in KINDS}
    left: dict[str, int] = {}
    kind: str | None = None
    for raw in text.splitlines()[1:]:
        line = raw.rstrip()
        if line.startswith("### "):
            kind = _KIND_OF_TITLE.get(line[4:].split(" (")[0].strip())
            continue
        note = _LEFT.match(line.strip())
        if note and kind is not None:
            left[kind] = left.get(kind, 0) + int(note.group(1))
            continue
        if kind == "commands" and line.startswith("  ") and found["commands"]:
            # An error line written under its command.
            item = line.strip()
            repeated = _COUNT.search(item)
            times = int(repeated.group(1)) if repeated else 1
            item = item[: repeated.start()] if repeated else item
            found["errors"].append(Fact(item, times, 0, _source(found["commands"][-1])))
            continue
        if kind is None or not line.startswith("- "):
            continue
        item = line[2:]
        count = 1
        if kind not in ("files", "exceptions"):
            match = _COUNT.search(item)
            if match:
                count, item = int(match.group(1)), item[: match.start()]
        if kind == "files":
            found[kind].extend(_file_facts(item))
        elif kind == "commands":
            # Older ledgers wrote every known code ("`ls` -> exit 0"); now a line without
            # one says the command did not fail.
            old = _COMMAND_LINE.match(item)
            match = old or _COMMAND.match(item)
            if match and match.group(1):
                code = match.group(2) or ("?" if old else "0")
                found[kind].append(Fact(match.group(1), count, 0, code))
        elif kind == "errors":
            match = _ERROR_LINE.match(item)
            if match:
                found[kind].append(Fact(match.group(2), count, 0, match.group(1)))
            else:
                found[kind].append(Fact(item, count, 0, ""))
        elif kind == "exceptions":
            for name in item.split(", "):
                repeated = _COUNT.search(name)
                if repeated:
                    found[kind].append(Fact(name[: repeated.start()], int(repeated.group(1))))
                else:
                    found[kind].append(Fact(name, 1))
        else:
            found[kind].append(Fact(item, count))
    found["requests"].reverse()  # written newest first
    # A path that ``render`` left inside the commands naming it.
    listed = {f.text for f in found["files"]}
    for path, (letters, times) in _named(found["commands"]).items():
        if path not in listed:
            found["files"].append(Fact(path, times, 0, letters))
    return Ledger({k: tuple(v) for k, v in found.items()}, left)


def _file_facts(item: str) -> list[Fact]:
    """The paths of one Files line: "[pr] a, b×2" (every path of the group in full, a path
    may hold spaces), or, in older ledgers, "dir/: a [r], b [p]" or "a [r]×2"."""
    group = _FILE_GROUP.match(item)
    if group:
        facts = []
        for entry in group.group(2).split(", "):
            times = _FILE_TIMES.search(entry)
            text = entry[: times.start()] if times else entry
            if text:
                facts.append(Fact(text, int(times.group(1)) if times else 1, 0, group.group(1)))
        return facts
    head, _, after = item.partition(": ")
    listing = after if after and head.endswith("/") and " [" not in head else item
    return [
        Fact(entry.group(1).rstrip(","), int(entry.group(3) or 1), 0, entry.group(2))
        for entry in _FILE_ENTRY.finditer(listing)
    ]


def _legacy(body: str) -> Ledger:
    constraints: list[Fact] = []
    section = ""
    for line in body.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif section == "Constraints & Preferences" and line.startswith("- "):
            text = " ".join(line[2:].split())
            if text and not text.lower().startswith(("none", "(")):
                constraints.append(Fact(text))
    return Ledger({"constraints": tuple(constraints)} if constraints else {})


def _file_entry(fact: Fact) -> str:
    return f"{fact.text}×{fact.count}" if fact.count > 1 else fact.text


def _access(fact: Fact) -> str:
    return fact.detail or "x"


def _exit(fact: Fact) -> str:
    """A command's exit code as written: only a failure's. 0 goes without saying (the
    heading says so), and an unknown one is Claude Code's success (its results carry a code
    only when the command failed)."""
    return f" -> exit {fact.detail}" if fact.detail not in ("", "?", "0") else ""


def _times(fact: Fact) -> str:
    return f" ×{fact.count}" if fact.count > 1 else ""


def _lines(kind: str, facts: Sequence[Fact]) -> list[str]:
    """The rendered lines of ``facts`` (chronological)."""
    if kind == "files":
        # One line per way of use ("[pr]": patched and read), its paths in full and sorted
        # (a directory's paths stay together): the letters are written once per group, not
        # once per path, and no directory heading repeats what every full path says.
        groups: dict[str, list[Fact]] = {}
        for fact in facts:
            groups.setdefault(_access(fact), []).append(fact)
        return [
            f"- [{access}] " + ", ".join(_file_entry(f) for f in sorted(group, key=_text))
            for access, group in groups.items()
        ]
    if kind == "commands":
        return [f"- {f.text}{_exit(f)}{_times(f)}" for f in facts]
    if kind == "errors":
        return [f"- [{f.detail}] {f.text}{_times(f)}" if f.detail else f"- {f.text}" for f in facts]
    if kind == "exceptions":
        return ["- " + ", ".join(f"{f.text}{_times(f)}" for f in facts)] if facts else []
    if kind == "requests":
        return [f"- {f.text}{_times(f)}" for f in reversed(facts)]
    return [f"- {f.text}{_times(f)}" for f in facts]


def _text(fact: Fact) -> str:
    return fact.text


def _size(lines: Iterable[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _section_size(kind: str, facts: Sequence[Fact]) -> int:
    return len(_TITLES[kind]) + 5 + _size(_lines(kind, facts)) + (40 if facts else 0)


def _rank(fact: Fact) -> tuple[bool, int, int]:
    """The order in which facts are kept when not all fit: first the facts the previous
    ledger kept (``last`` < 0: a summary the agent already resumed from does not lose them on
    the next round) and facts met more than once, then the most referenced, then the newest."""
    carried = fact.last < 0 and "…" not in fact.text  # not an abbreviated command
    return (carried or fact.count > 1, min(fact.count, 3), fact.last)


_LONG_COMMAND = 100  # chars of a command past which it may be written abbreviated
_HEAD, _END = 44, 20  # chars an abbreviated command keeps of its start and of its end


def _abbreviated(fact: Fact) -> Fact:
    """``fact`` (a command) as its start (the program and first arguments) "…" its end (often
    the file or the filter that tells two similar commands apart)."""
    text = fact.text
    return Fact(
        f"{text[:_HEAD].rstrip()}…{text[-_END:].lstrip()}", fact.count, fact.last, fact.detail
    )


def _newest(fact: Fact) -> int:
    return fact.last


def _choose(kind: str, facts: Sequence[Fact], room: int) -> tuple[Fact, ...]:
    """The facts of ``kind`` that fit ``room`` chars: most referenced (3+ times) and newest
    first; written back in chronological order."""
    if kind == "requests":
        facts = facts[-_MAX_REQUESTS:]
    if _section_size(kind, facts) <= room:
        return tuple(facts)
    # Requests: the newest (an agent resumes from the latest asks); other kinds by ``_rank``.
    ranked = sorted(facts, key=_rank if kind != "requests" else _newest, reverse=True)
    # Each fact's cost alone (a path: its entry, plus its group's "- [pr] " the first time);
    # one pass, then a final check of the real size (dropping the last chosen while over).
    used = _section_size(kind, ()) + 40  # the "left to recall" line, written since some are
    groups: set[str] = set()
    chosen: list[Fact] = []
    abbreviations: set[str] = set()
    for fact in ranked:
        if kind == "files":
            cost = len(_file_entry(fact)) + 2
            if _access(fact) not in groups:
                cost += len(_access(fact)) + 4  # the group's own line
        elif kind == "exceptions":
            cost = len(fact.text) + len(_times(fact)) + 2
        else:
            cost = len(_lines(kind, (fact,))[0]) + 1
        if used + cost > room:
            if kind != "commands" or len(fact.text) <= _LONG_COMMAND:
                continue
            # A long command that does not fit whole keeps its identity (the program and its
            # first arguments), marked "…"; recall has it whole.
            fact = _abbreviated(fact)
            cost = len(_lines(kind, (fact,))[0]) + 1
            if used + cost > room or fact.text in abbreviations:
                continue
            abbreviations.add(fact.text)
        used += cost
        chosen.append(fact)
        if kind == "files":
            groups.add(_access(fact))
    while chosen and _section_size(kind, chosen) > room:
        chosen.pop()
    return tuple(sorted(chosen, key=lambda f: f.last))


def _allot(need: Mapping[str, int], room: int) -> dict[str, int]:
    """Each kind's room: all it needs when everything fits; otherwise the room is shared by
    weight (``_WEIGHTS``), constraints, exception names and requests each at most their
    ``_SHARES`` of it, and what a kind does not need goes back to the others."""
    if sum(need.values()) <= room:
        return dict(need)
    allowed: dict[str, int] = {}
    open_kinds = dict(need)
    spare = room
    while open_kinds:
        weight = sum(_WEIGHTS[k] for k in open_kinds)
        fair = {k: spare * _WEIGHTS[k] / weight for k in open_kinds}
        capped = {k: min(v, int(room * _SHARES[k])) if k in _SHARES else v for k, v in need.items()}
        settled = [k for k in open_kinds if capped[k] <= fair[k]]
        if not settled:
            for kind in open_kinds:
                allowed[kind] = int(fair[kind])
            break
        for kind in settled:
            allowed[kind] = capped[kind]
            spare -= capped[kind]
            del open_kinds[kind]
    return allowed


@functools.lru_cache(maxsize=4096)
def _paths_of(command: str) -> tuple[tuple[str, str], ...]:
    return tuple(command_paths(command))


def _named(commands: Iterable[Fact]) -> dict[str, tuple[str, int]]:
    """Path → (access letters, times) of the paths ``commands`` name, read from each
    command's written text as ``extract`` reads them (every mention, times its count)."""
    named: dict[str, tuple[str, int]] = {}
    for command in commands:
        for path, letter in _paths_of(command.text):
            letters, times = named.get(path, ("", 0))
            if letter not in letters:
                letters = "".join(sorted(letters + letter))
            named[path] = (letters, times + command.count)
    return named


def _named_in(named: Mapping[str, tuple[str, int]], fact: Fact) -> bool:
    """Whether every use of the path ``fact`` is one of the commands of ``named``: then the
    path is written in full inside them, and ``parse`` reads it back from them exactly."""
    letters, times = named.get(fact.text, ("", 0))
    return fact.count <= times and set(fact.detail or "x") <= set(letters)


def _pick(wanted: Mapping[str, tuple[Fact, ...]], room: int) -> dict[str, tuple[Fact, ...]]:
    """The facts of each kind chosen to fill ``room`` chars."""
    need = {kind: _section_size(kind, facts) for kind, facts in wanted.items() if facts}
    allowed = _allot(need, room)
    chosen = {kind: _choose(kind, wanted[kind], allowed[kind]) for kind in need}
    # Facts are whole lines: what a kind's share could not use goes, in order, to the kinds
    # that still left facts out.
    spare = room - sum(_section_size(kind, facts) for kind, facts in chosen.items())
    for kind in ("constraints", "files", "commands", "errors", "exceptions", "tests"):
        if kind in chosen and len(chosen[kind]) < len(wanted[kind]) and spare > 0:
            used = _section_size(kind, chosen[kind])
            chosen[kind] = _choose(kind, wanted[kind], used + spare)
            spare -= _section_size(kind, chosen[kind]) - used
    return chosen


def _written(
    chosen: Mapping[str, tuple[Fact, ...]], files: tuple[Fact, ...]
) -> tuple[tuple[Fact, ...], tuple[Fact, ...]]:
    """``(paths written on their own lines, paths kept)``: a path every use of which is a
    written command is kept inside that command, chosen or not."""
    named = _named(chosen.get("commands", ()))
    inside = {f.text for f in files if _named_in(named, f)}
    own = tuple(f for f in chosen.get("files", ()) if f.text not in inside)
    kept = {f.text for f in own} | inside
    return own, tuple(f for f in files if f.text in kept)


def _source(command: Fact) -> str:
    """The label an error line of ``command`` carries (see ``_result``)."""
    return _one_line(command.text, 60)


def _nested(
    errors: Sequence[Fact], commands: Sequence[Fact], every: Sequence[Fact]
) -> dict[str, list[Fact]]:
    """Written command text → the error lines written under it: those whose label names that
    command alone among ``every`` command of the ledger (a label names a command by its first
    60 chars; two alike would leave it unclear whose error it is)."""
    labels: dict[str, int] = {}
    for command in every:
        labels[_source(command)] = labels.get(_source(command), 0) + 1
    by_label = {_source(c): c.text for c in commands if labels.get(_source(c)) == 1}
    nested: dict[str, list[Fact]] = {}
    for error in errors:
        text = by_label.get(error.detail)
        if text is not None:
            nested.setdefault(text, []).append(error)
    return nested


def render(ledger: Ledger, max_chars: int) -> tuple[str, Ledger]:
    """The ledger as text of at most ``max_chars`` (about: a kind with facts always writes
    its heading), and the ledger actually written (what did not fit is counted in ``left``).

    Facts another written fact holds are not written twice: a path that a written command
    names (``cat src/a.py``, every use of the path being such a command) stays inside the
    command, and an error line of a written command is written under it instead of with its
    label (the command's first 60 chars); ``parse`` reads both back. The room they leave
    goes to the other facts."""
    room = max(0, max_chars - len(LEDGER_HEADING) - len(_NOTE) - 2)
    text, written = _layout(ledger, room)
    for _ in range(2):
        spare = max_chars - len(text)
        if spare < 40 or not any(
            len(written.of(kind)) < len(ledger.of(kind)) for kind in KINDS if kind != "requests"
        ):
            break
        room += spare
        more, more_written = _layout(ledger, room)
        if len(more) > max_chars:
            break
        text, written = more, more_written
    return text, written


def _layout(ledger: Ledger, room: int) -> tuple[str, Ledger]:
    """The ledger's text with facts chosen for ``room`` chars, as their lines would take."""
    wanted = {kind: ledger.of(kind) for kind in KINDS}
    wanted["requests"] = wanted["requests"][-_MAX_REQUESTS:]
    chosen = _pick(wanted, room)
    own, kept_files = _written(chosen, wanted["files"])
    if len(own) < len(chosen.get("files", ())):
        # Choose again without the paths the chosen commands hold; kept if it keeps as many
        # facts (the commands chosen the second time may name fewer of them).
        inside = {f.text for f in kept_files} - {f.text for f in own}
        trimmed = {**wanted, "files": tuple(f for f in wanted["files"] if f.text not in inside)}
        again = _pick(trimmed, room)
        own_again, kept_again = _written(again, wanted["files"])
        before = sum(len(v) for k, v in chosen.items() if k != "files") + len(kept_files)
        after = sum(len(v) for k, v in again.items() if k != "files") + len(kept_again)
        if after >= before:
            chosen, own, kept_files = again, own_again, kept_again
    nested = _nested(chosen.get("errors", ()), chosen.get("commands", ()), wanted["commands"])
    under = {id(error) for errors in nested.values() for error in errors}
    written = {
        **chosen,
        "files": own,
        "errors": tuple(f for f in chosen.get("errors", ()) if id(f) not in under),
    }
    kept: dict[str, tuple[Fact, ...]] = {}
    left = dict(ledger.left)
    parts = [LEDGER_HEADING, _NOTE]
    for kind in KINDS:
        earlier = left.get(kind, 0)
        if kind not in chosen and not earlier:
            continue
        facts = kept_files if kind == "files" else chosen.get(kind, ())
        dropped = len(ledger.of(kind)) - len(facts)
        kept[kind] = facts
        if dropped:
            left[kind] = earlier + dropped
        if kind == "commands":
            lines = []
            for command in written.get(kind, ()):
                lines.extend(_lines(kind, (command,)))
                lines.extend(f"  {e.text}{_times(e)}" for e in nested.get(command.text, ()))
        else:
            lines = _lines(kind, written.get(kind, ()))
        if not lines and not left.get(kind):
            continue  # every path is inside a command, every error line under one
        parts.append(f"### {_TITLES[kind]}")
        parts.extend(lines)
        if left.get(kind):
            parts.append(f"({left[kind]} more {kind} left to recall)")
    return "\n".join(parts), Ledger(kept, {k: v for k, v in left.items() if v})
