"""Which files a tool call or shell command names, and how (read, written, patched, searched,
run), as the fact ledger records them.

A command is split where the shell splits it (quoted scripts, comments and ``python -c`` bodies
name no file), Windows paths are read as written, and a command is parsed once per process
(sessions run the same commands again and again, and the ledger reads them again to write them).
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Mapping
from typing import Any

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


@functools.lru_cache(maxsize=4096)
def _paths_of(command: str) -> tuple[tuple[str, str], ...]:
    return tuple(command_paths(command))
