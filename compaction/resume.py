"""The hermes profile's deterministic summary: the facts a resuming agent needs, verbatim.

Same headings as the classic summary (so an iterative update and the LLM template read it
alike) plus four fact sections. From the compacted middle it keeps, within the size bound:

- every file path the agent read, wrote or patched (tool arguments and patch headers);
- every shell command (its first line) with its exit code;
- the exception/error lines and failing test names, newest first, and test counts;
- the user's constraints, deduplicated, verbatim;
- the user's real latest request as Active Task (never an ``<environment_context>`` or
  other wrapper, a tool echo or ANSI-coloured output);
- completed actions dated with their own message's timestamp when it has one, each naming
  its ``[ref:N]`` so the ``recall`` tool can fetch the full result;
- "Blocked": only errors of the latest round that no later run of the same command fixed.

Fact sections are written first and the action list gets what is left of the budget, so a
long session loses old action lines before it loses a path or a command.
"""

# Over 1,000 lines: the fact scan and the summary writer read the same scan state; the section
# budgets only make sense together.
from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime
from itertools import islice
from typing import Any

import orjson
import re2

from compaction.facts import SummaryFacts
from compaction.messages import content_text, parse_arguments, tool_call_id, tool_call_name
from compaction.narrative import cut_start, fit_sections
from compaction.prompt import SECTIONS
from compaction.words import one_line as _one_line

__all__ = ["is_wrapper", "message_date", "resume_summary"]

SHELL_TOOLS = frozenset(
    {"terminal", "bash", "shell", "exec_command", "run_shell_command", "local_shell"}
)
_VERBS = {
    "read_file": "READ",
    "read": "READ",
    "view": "READ",
    "write_file": "WROTE",
    "write": "WROTE",
    "patch": "PATCHED",
    "edit": "PATCHED",
    "multiedit": "PATCHED",
    "apply_patch": "PATCHED",
    "str_replace_based_edit_tool": "EDITED",
    "search_files": "SEARCHED",
    "grep": "SEARCHED",
    "glob": "SEARCHED",
    "web_search": "SEARCHED WEB FOR",
    "websearch": "SEARCHED WEB FOR",
    "web_extract": "EXTRACTED",
    "webfetch": "FETCHED",
    "execute_code": "EXECUTED",
    "delegate_task": "DELEGATED",
    "task": "DELEGATED",
    "todowrite": "UPDATED TODOS",
    "todo": "UPDATED TODOS",
}
_PATH_KEY = re.compile(r"path$|^file$|^filename$|^notebook_path$", re.IGNORECASE)
_PATCH_HEADER = re.compile(r"\*\*\* ?(?:Add|Update|Delete|Move) File: ?(\S+)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b")
_TEST_COUNT = re.compile(
    r"\b\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|tests?|failures?)\b"
    r"|\bRan \d+ tests?\b|\btest result: \w+\.|\bTests?: +\d+",
    re.IGNORECASE,
)
_CONSTRAINT = re.compile(
    r"\b(must|never|always|do not|don't|make sure|avoid|only use|prefer|should not|shouldn't)\b",
    re.IGNORECASE,
)
_WRAPPERS = (
    "<environment_context",
    "<user_instructions",
    "<permissions instructions",
    "<command-",
    "<local-command",
    "<system-reminder",
    "<user-prompt-submit-hook",
    "# AGENTS.md instructions",
    "Caveat: The messages below",
    "[Request interrupted",
    "[SYSTEM:",
    "<turn_aborted>",
    "This session is being continued from a previous conversation",
    "<task-notification",
    "<bash-notification",
    "<bash-input",
    "<bash-stdout",
    "<bash-stderr",
    "Stop hook feedback:",
)
_SCAN = 20_000  # chars of one tool result scanned for error lines and test counts


# Claude Code's IDE extensions put what the editor shows before the user's words, as blocks
# of their own: "<ide_opened_file>The user opened the file e:\\x.md in the IDE. This may or
# may not be related to the current task.</ide_opened_file>" then the request.
_IDE_CONTEXT = re.compile(r"\A\s*<(ide_[a-z_]+)>.*?</\1>\s*", re.DOTALL)


def without_ide_context(text: str) -> str:
    """A user message's text without the IDE context blocks it starts with."""
    while (match := _IDE_CONTEXT.match(text)) is not None:
        text = text[match.end() :]
    return text


def is_wrapper(text: str) -> bool:
    """True for user-role text that is no request of the user: harness wrappers, command
    echoes, interruption notes."""
    if text[:1].isspace():  # a stripped copy only when there is something to strip
        text = text.lstrip()
    return not text or text.startswith(_WRAPPERS)


def message_date(message: Mapping[str, Any]) -> date | None:
    """The date of a message's own ``timestamp`` (ISO string or epoch seconds/ms), if any."""
    value = message.get("timestamp") or message.get("created_at")
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = value / 1000 if value > 10_000_000_000 else value
            return datetime.fromtimestamp(seconds, tz=UTC).date()
        if isinstance(value, str) and len(value) >= 10:
            return date.fromisoformat(value[:10])
    except (ValueError, OverflowError, OSError):
        return None
    return None


def _clean(text: str) -> str:
    return _ANSI.sub("", text)


def _command_of(args: Mapping[str, Any]) -> str | None:
    command = args.get("command", args.get("cmd"))
    if isinstance(command, list):
        parts = [str(p) for p in command]
        if len(parts) >= 3 and parts[0] in ("bash", "sh", "zsh") and parts[1] in ("-lc", "-c"):
            command = parts[-1]
        else:
            command = " ".join(parts)
    if not isinstance(command, str) or not command.strip():
        return None
    return command.strip().splitlines()[0][:200]


_PATH_KEYS_SEEN: dict[str, bool] = {}  # argument name -> whether it names a path


def _is_path_key(key: str) -> bool:
    # Tools reuse a handful of argument names: the regex runs once per name, not per call.
    known = _PATH_KEYS_SEEN.get(key)
    if known is None:
        known = _PATH_KEY.search(key) is not None
        if len(_PATH_KEYS_SEEN) < 4_096:
            _PATH_KEYS_SEEN[key] = known
    return known


def _paths_of(args: Mapping[str, Any]) -> list[str]:
    found = []
    for key, value in args.items():
        if type(value) is str or isinstance(value, str):
            is_path = _PATH_KEYS_SEEN.get(key)
            if is_path is None:
                is_path = _is_path_key(key)
            if is_path and "\n" not in value and value.strip():
                found.append(value.strip())
            if "File:" in value:
                found.extend(_PATCH_HEADER.findall(value))
    return found


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CONSTRAINT_WORDS = (
    "must",
    "never",
    "always",
    "do not",
    "don't",
    "make sure",
    "avoid",
    "only use",
    "prefer",
    "should not",
    "shouldn't",
)


# ``_CONSTRAINT`` without IGNORECASE, for lower-cased ASCII text: there a case-insensitive
# match is exactly a match in the lower-cased copy (same length, same word characters; the
# non-ASCII letters re folds onto "k" and "s" cannot occur).
_CONSTRAINT_LOWER = re.compile(r"\b(?:" + "|".join(map(re.escape, _CONSTRAINT_WORDS)) + r")\b")


def _has_constraint(text: str) -> bool:
    """``_CONSTRAINT.search(text)`` is not None. ASCII text is first checked for the words
    in its lower-cased copy (C-speed substring checks, spelled out: a generator over the
    words costs more than the checks on the short texts this reads), then searched there
    with ``_CONSTRAINT_LOWER``."""
    if text.isascii():
        lowered = text.lower()
        if not (
            "must" in lowered
            or "never" in lowered
            or "always" in lowered
            or "do not" in lowered
            or "don't" in lowered
            or "make sure" in lowered
            or "avoid" in lowered
            or "only use" in lowered
            or "prefer" in lowered
            or "should not" in lowered
            or "shouldn't" in lowered
        ):
            return False
        return _CONSTRAINT_LOWER.search(lowered) is not None
    return _CONSTRAINT.search(text) is not None


def _sentences(text: str) -> list[str]:
    return [sentence for part in _SENTENCE_END.split(text) if (sentence := part.strip())]


def _section_lines(body: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip().replace("Historical ", ""), [])
        elif current is not None and line.strip():
            current.append(line)
    return sections


def _fit(lines: list[str], limit: int, what: str, *, newest: bool = True) -> list[str]:
    """The lines that fit ``limit`` chars (newest kept), with a note counting the rest."""
    kept: list[str] = []
    used = 0
    order = reversed(lines) if newest else iter(lines)
    for line in order:
        if used + len(line) + 1 > limit:
            break
        kept.append(line)
        used += len(line) + 1
    if newest:
        kept.reverse()
    dropped = len(lines) - len(kept)
    if dropped:
        note = f"({dropped} {'earlier' if newest else 'more'} {what} omitted; recall has them)"
        return [note, *kept] if newest else [*kept, note]
    return kept


class _Scan:
    """The facts of the middle, each gathered where it is cheapest.

    One front-to-back walk pairs calls with results and collects paths, commands, user
    requests and constraints, reading only what every row needs (role, call ids, arguments).
    The work that reads result texts is done only where a decision needs it:

    - error lines, test counts and the success/failure of a command: the newest
      ``_FULL_SCAN_RESULTS`` results (the latest failures; "Blocked" compares positions
      there only);
    - the exit code of a command: its newest run that reports one;
    - exception names: newest result first, until the summary's ``_MAX_NAMES`` are found
      or ``_NAME_SCAN_RESULTS`` results were read;
    - an action's date: for the actions whose line fits the summary.
    """

    def __init__(self, facts: SummaryFacts) -> None:
        self.facts = facts
        middle = facts.middle
        known = facts.calls or {}
        self.paths: dict[str, set[str]] = {}
        self.commands: dict[str, str] = {}  # first line -> exit code text
        self.command_ok: dict[str, int] = {}  # first line -> position of the last success
        self.errors: list[tuple[int, str, str]] = []  # position, command or tool, line
        self.exception_names: dict[str, None] = {}
        self.tests: list[str] = []
        self.constraints: dict[str, str] = {}
        # (call position, tool name, arguments, result position, unused): the date is read
        # by ``action_detail`` for the actions that fit. Only the newest are kept: what the
        # summary can hold and the newest results scanned (``_kept_actions``); the rest are
        # counted (``action_total``). A 50k-message middle held 24k of them, 2.6 MB.
        self.actions: deque[tuple[int, str, dict[str, Any], int, None]] = deque(
            maxlen=_kept_actions(facts.max_chars)
        )
        self.action_total = 0
        self.last_user: tuple[int, str] | None = None
        self.requests: list[tuple[int, str]] = []  # every real user request, in order
        self.user_positions: list[int] = []
        self.first_user: str | None = None
        self.last_reply_pos = -1
        self.questions: list[tuple[int, str]] = []
        self._codes: dict[int, str | None] = {}  # result position -> exit code (once read)
        # call id -> (call position, tool name, arguments, shell command or None)
        pending: dict[str, tuple[int, str, dict[str, Any], str | None]] = {}
        runs: dict[str, list[int]] = {}  # command -> positions of its results
        # id(arguments) -> (arguments, tool name, shell command or None). Repeated calls share
        # their arguments dict (``Work.start``): a call whose dict was already read for the
        # same tool adds no path, verb or command, so only its pairing is done.
        by_args: dict[int, tuple[dict[str, Any], str, str | None]] = {}
        kinds: dict[str, tuple[str, bool]] = {}  # tool name -> (verb, is a shell)
        actions = self.actions
        paths, commands = self.paths, self.commands
        add_action = actions.append
        take_pending = pending.pop
        last_reply_pos = -1
        tool_rows = 0
        for pos, message in enumerate(middle):
            role = message.get("role")
            if role == "tool":
                tool_rows += 1  # one action each
                cid = message.get("tool_call_id")
                entry = take_pending(cid if type(cid) is str else str(cid or ""), None)
                if entry is None:
                    add_action((pos, _orphan_tool(message), _UNKNOWN_ARGS, pos, None))
                    continue
                call_pos, name, args, command = entry
                add_action((call_pos, name, args, pos, None))
                if command:
                    positions = runs.get(command)
                    if positions is None:
                        runs[command] = [pos]
                    else:
                        positions.append(pos)
            elif role == "assistant":
                content = message.get("content")
                if type(content) is str:
                    if content and not content.isspace():
                        last_reply_pos = pos
                elif content_text(content, images=False).strip():
                    last_reply_pos = pos
                for call in message.get("tool_calls") or ():
                    if type(call) is not dict and not isinstance(call, Mapping):
                        continue
                    cid = call.get("id")
                    if type(cid) is not str or not cid:
                        cid = tool_call_id(call) or f"#{pos}"
                    found = known.get(cid)
                    name, args = found if found else (tool_call_name(call), parse_arguments(call))
                    of_args = by_args.get(id(args))
                    if of_args is None or of_args[0] is not args or of_args[1] != name:
                        kind = kinds.get(name)
                        if kind is None:
                            lowered = name.lower()
                            verb = _VERBS.get(lowered, "USED").lower()
                            kind = kinds[name] = (verb, lowered in SHELL_TOOLS)
                        verb = kind[0]
                        for path in _paths_of(args):
                            verbs = paths.get(path)
                            if verbs is None:
                                paths[path] = {verb}
                            else:
                                verbs.add(verb)
                        command = _command_of(args) if kind[1] else None
                        if command and command not in commands:
                            commands[command] = "?"
                        # The dict is kept in the entry, so its id stays its own.
                        of_args = by_args[id(args)] = (args, name, command)
                    pending[cid] = (pos, name, args, of_args[2])
            elif role == "user":
                content = message.get("content")
                raw = content if type(content) is str else content_text(content, images=False)
                text = without_ide_context((_clean(raw) if "\x1b" in raw else raw).strip())
                if is_wrapper(text):
                    continue
                if self.first_user is None:
                    self.first_user = text
                self.last_user = (pos, text)
                self.requests.append(self.last_user)
                self.user_positions.append(pos)
                if "?" in text[:2_000]:
                    self.questions.append((pos, _one_line(text, 200)))
                # A sentence holds a constraint word only if the text does: most do not.
                head = text[:8_000]
                if _has_constraint(head):
                    for sentence in _sentences(head):
                        if 8 <= len(sentence) <= 400 and _has_constraint(sentence):
                            key = " ".join(sentence.split()).lower()
                            self.constraints.setdefault(key, sentence)
        self.last_reply_pos = last_reply_pos
        self.action_total = tool_rows
        # Error lines and test counts come from the newest results only (the latest failures).
        # (One action per tool row, in order: the last actions are the newest results.)
        for _, name, args, pos, _ in _newest(self.actions, _FULL_SCAN_RESULTS):
            self._result(pos, name, args, self._text(pos))
        for command, positions in runs.items():
            for pos in reversed(positions):  # the newest run that reports an exit code
                code = self._code(pos)
                if code is not None:
                    self.commands[command] = code
                    break
        self._names([action[3] for action in _newest(actions, _NAME_SCAN_RESULTS)])

    def _text(self, pos: int) -> str:
        content = self.facts.middle[pos].get("content")
        return content if type(content) is str else content_text(content)

    def _code(self, pos: int) -> str | None:
        if pos not in self._codes:
            self._codes[pos] = _exit_code(self._text(pos))
        return self._codes[pos]

    def _names(self, tool_rows: Sequence[int]) -> None:
        """Exception names, ordered by their newest occurrence (oldest first)."""
        middle = self.facts.middle
        texts = (
            content if type(content := middle[pos].get("content")) is str else content_text(content)
            for pos in reversed(tool_rows[-_NAME_SCAN_RESULTS:])
        )
        for group in reversed(_name_groups(texts)):
            self.exception_names.update(dict.fromkeys(group))

    def action_detail(self, pos: int, call_pos: int) -> tuple[str, str]:
        """``(outcome line, date)`` of the action whose result is middle row ``pos`` (its
        call at ``call_pos``): dated by the call's own timestamp, else the result's."""
        facts = self.facts
        message = facts.middle[pos]
        indices = facts.indices
        ref = indices[pos] if indices is not None and pos < len(indices) else None
        outcome = facts.fold_lines.get(pos)
        if not outcome:
            raw = content_text(message.get("content"))
            if raw[:1] in "{[" or raw.lstrip()[:1] in ("{", "["):
                # Quote the output, not its JSON envelope; an envelope with no output field
                # (a search's {"total_count": 3, "matches": [...]}) is told by its fields.
                raw = _unwrap(raw) or _json_gist(raw)
            outcome = _one_line(_clean(raw[:300]), 150, more=len(raw) > 300)
        outcome = outcome or "no output"
        if ref is not None and "[ref:" not in outcome:
            outcome = f"{outcome} [ref:{ref}]"
        day = message_date(facts.middle[call_pos]) if call_pos != pos else None
        when = (day or message_date(message) or facts.now).isoformat()
        return outcome, when

    def _result(self, pos: int, name: str, args: Mapping[str, Any], text: str) -> None:
        """Error lines, test counts and the command's success, of one of the newest results."""
        lowered = name.lower()
        command = _command_of(args) if lowered in SHELL_TOOLS else None
        code = self._code(pos) if lowered in SHELL_TOOLS or lowered == "execute_code" else None
        failed = code not in (None, "0")
        scanned = text if len(text) <= 2 * _SCAN else text[:_SCAN] + "\n" + text[-_SCAN:]
        # Substring checks run in C; the regexes run only on results that can match.
        # Error reports and test summaries sit at the start or the end of an output.
        if len(scanned) > _EDGE_HEAD + _EDGE_TAIL:
            scanned = scanned[:_EDGE_HEAD] + "\n" + scanned[-_EDGE_TAIL:]
        errors_possible, tests_possible = _hints(scanned)
        # A file listing or search hit shows source code: its "error" words are no error
        # (``const { data, error } = await query;``) unless the call failed.
        if not failed and _shows_files(lowered, command, scanned):
            errors_possible = False
        errors_possible = errors_possible or failed
        if not errors_possible and not tests_possible:
            if command:
                self.command_ok[command] = pos
            return
        body = _unwrap(_clean(scanned) if "\x1b" in scanned else scanned)  # no ANSI: no copy
        found = 0
        if errors_possible:
            for line in _error_lines(body, 4):
                self.errors.append((pos, command or name, _one_line(line.strip(), 240)))
                found += 1
        if found == 0 and failed:
            tail = body.rstrip().rsplit("\n", 1)[-1]
            self.errors.append(
                (pos, command or name, _one_line(f"exit {code}: {tail.strip()}", 240))
            )
        elif command and not failed:
            # Exit 0, or no exit code and no error line (Claude Code's Bash results carry none).
            self.command_ok[command] = pos
        if tests_possible:
            counted = 0
            for match in _TEST_COUNT.finditer(body):
                line = _line_at(body, match.start())
                if len(line) < 400:
                    self.tests.append(_one_line(line.strip(), 200))
                    counted += 1
                if counted >= 5:
                    break


_LISTING_TOOLS = frozenset(
    {"read_file", "read", "view", "search_files", "grep", "glob", "ls", "list_files", "webfetch"}
)
_LISTING_COMMANDS = frozenset(
    {"cat", "sed", "head", "tail", "nl", "less", "bat", "rg", "grep", "ag", "ls", "find", "awk"}
)
_ERROR_REPORT = re.compile(r"^\s*(?:<tool_use_error>|Error\b|error:|fatal:|Traceback)")


def _shows_files(tool: str, command: str | None, text: str) -> bool:
    """Whether a result shows file contents or search hits: a read/search tool, or a shell
    command whose first program is one (``sed -n``, ``cat``, ``rg`` …; ``sed -i`` edits),
    unless the output starts as an error report (a missing file, a tool error)."""
    if _ERROR_REPORT.match(text):
        return False
    if tool in _LISTING_TOOLS:
        return True
    if command is None:
        return False
    words = command.split()
    while words and ("=" in words[0] or words[0] in ("sudo", "env", "time", "timeout")):
        words = words[1:]
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    return program in _LISTING_COMMANDS and not (program == "sed" and "-i" in words)


_ERROR_HINTS = (
    "rror",
    "xception",
    "FAIL",
    "atal",
    "Traceback",
    "panicked",
    "No such file",
    "not found",
)
_TEST_HINTS = ("passed", "failed", "tests", "Ran ", "Tests:", "test result", "failures")


def _hint_scan() -> Any:
    scan = re2.Set.SearchSet()
    for hint in (*_ERROR_HINTS, *_TEST_HINTS):
        scan.Add(re2.escape(hint))
    scan.Compile()
    return scan


_HINT_SCAN = _hint_scan()


def _hints(text: str) -> tuple[bool, bool]:
    """``(an error hint occurs in text, a test hint occurs)``: one RE2 scan for the 15
    literals (ASCII: their UTF-8 bytes occur exactly where the characters do)."""
    hits: list[int] | None = _HINT_SCAN.Match(text.encode("utf-8", "surrogatepass"))
    if not hits:
        return False, False
    errors = len(_ERROR_HINTS)
    return min(hits) < errors, max(hits) >= errors


_EXIT_RE = re.compile(
    r'"(?:exit_code|returncode|exit_status)"\s*:\s*(-?\d+)|[Ee]xit (?:code|status)[:\s]+(-?\d+)'
)


_FULL_SCAN_RESULTS = 150
# The shortest line an action can have in the summary: "1.  —  (on ) [tool: ]" and its newline.
_ACTION_LINE_MIN = 22
_NAME_SCAN_RESULTS = 1_000  # newest results read for exception names ...
_MAX_NAMES = 60  # ... stopping once the summary's list of names is full
_EDGE_HEAD, _EDGE_TAIL = 4_000, 8_000
_WORD_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"


_SUFFIX = re.compile(r"(?:Error|Exception)\b")  # what ``_exception_names`` finds
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _exception_names(text: str) -> list[str]:
    """``FooError``/``FooException`` names of the first 8 such suffixes (a result naming more
    is a code listing, not an error report), in text order, each once.

    A suffix is "Error" or "Exception" followed by a word boundary (``(?:Error|Exception)\b``,
    found here with ``str.find``: the two never overlap, so each is found on its own). The
    name is the run of ASCII word characters right before the suffix (at most 60 of them)
    and starts with a capital: a suffix at the start of a line is no name, whatever the line
    before ends with. The letter of a JSON escape (``\\n``, ``\\t`` …) right before the name
    is not part of it: terminal results are often a JSON envelope read as raw text.
    """
    names: dict[str, None] = {}
    count = 0
    size = len(text)
    error = text.find("Error")
    exception = text.find("Exception")
    while error != -1 or exception != -1:
        if exception == -1 or (error != -1 and error < exception):
            start, end = error, error + 5
            error = text.find("Error", end)
        else:
            start, end = exception, exception + 9
            exception = text.find("Exception", end)
        if end < size:
            after = text[end]
            if after == "_" or after.isalnum():  # a word character: no boundary (as re's \b)
                continue
        count += 1
        low = start - 60 if start > 60 else 0
        word = text[low:start]
        word = word[len(word.rstrip(_WORD_CHARS)) :]
        if word and word[0] in _JSON_ESCAPES and _escaped(text, start - len(word)):
            # "\\nIndexError" in a JSON-encoded result is "IndexError" starting a line.
            word = word[1:]
        if word and word[0] in _UPPER:
            names[word + text[start:end]] = None
        if count >= 8:
            break
    return list(names)


_JSON_ESCAPES = frozenset("nrtbf")  # letters of the escapes that end a line or a field


def _escaped(text: str, at: int) -> bool:
    """Whether ``text[at]`` is the letter of a backslash escape (an odd run of backslashes
    before it): a result stored as JSON text spells its line breaks ``\\n``."""
    run = 0
    while at - run > 0 and text[at - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _name_groups(texts: Iterable[str], *, skip_known: bool = True) -> list[list[str]]:
    """The new exception names of each text (``_exception_names``; texts newest first), one
    group per text that adds any, until ``_MAX_NAMES`` are seen.

    A session repeats its few exception names in result after result (a code listing can
    name one in every other line), so the list rarely fills and most texts add nothing.
    ``skip_known`` skips a text in one regex scan when every "Error"/"Exception" in it ends
    a name already seen (see ``_unseen_suffix``): the full scan would add nothing.
    """
    groups: list[list[str]] = []
    seen: set[str] = set()
    unseen: re.Pattern[str] | None = None
    for text in texts:
        if "rror" not in text and "xception" not in text:
            continue
        scanned = text if len(text) <= 2 * _SCAN else text[:_SCAN] + "\n" + text[-_SCAN:]
        if unseen is not None:
            # Only the first 8 suffixes with a word boundary after them are read: when the
            # text's head holds more than 8, the check stops there (the 9th one starts
            # before the end of the head, so the boundary after each of the first 8 is
            # checked on the text's own next character).
            end = len(scanned)
            if end > _CHECK_HEAD:
                # More than 8 suffixes in the head: a 9th is found (the scan stops there).
                ninth = next(islice(_SUFFIX.finditer(scanned, 0, _CHECK_HEAD), 8, None), None)
                if ninth is not None:
                    end = _CHECK_HEAD
            if unseen.search(scanned, 0, end) is None:
                continue
        new = [n for n in _exception_names(scanned) if n not in seen]
        if new:
            seen.update(new)
            groups.append(new)
            if len(seen) >= _MAX_NAMES:
                break
            if skip_known:
                unseen = _unseen_suffix(seen) if len(seen) <= _KNOWN_CHECK_MAX else None
    return groups


_KNOWN_CHECK_MAX = 24  # seen names up to which ``_unseen_suffix`` is worth its lookbehinds
_CHECK_HEAD = 4_096  # chars of a long text the known-names check reads when they suffice


def _unseen_suffix(seen: Iterable[str]) -> re.Pattern[str]:
    """A pattern matching every "Error"/"Exception" that does not end one of the ``seen``
    names as ``_exception_names`` reads names.

    ``_exception_names`` names a suffix by the run of ASCII word characters before it (at
    most 60). A suffix preceded by a seen name's word, itself preceded by a non-word
    character or the start of the text, is that seen name (or no name at all when no word
    boundary follows it): the lookbehinds exclude exactly those. The pattern starts with the
    literal "E", which the regex engine scans for fast.

    A seen name right after a backslash and the letter of a JSON escape (``\\nValueError``
    in a JSON result read as raw text) is that name when the backslash escapes the letter,
    and no name otherwise (the word then starts with the lower-case letter; a name is at
    most 60 characters, so a 61-character word is read as the name): the second lookbehind
    excludes those too.
    """

    def known(suffix: str) -> str:
        return "".join(
            rf"(?<!(?<![A-Za-z0-9_]){re.escape(name)})(?<!\\[nrtbf]{re.escape(name)})"
            for name in sorted(seen)
            if name.endswith(suffix)
        )

    return re.compile(f"E(?:rror{known('Error')}|xception{known('Exception')})")


def _exit_code(text: str) -> str | None:
    """The exit code a result reports (JSON ``exit_code``/``returncode``, or "Exit code: N"),
    looked for at the end first where tools write it."""
    size = len(text)
    match = _exit_search(text, max(0, size - 400), size) or (
        _exit_search(text, 0, 400) if size > 400 else None
    )
    if match is None and size <= 64_000 and '"exit_code"' in text:
        match = _EXIT_RE.search(text)
    if match is None:
        return None
    return match.group(1) or match.group(2)


# Every match of ``_EXIT_RE`` starts at one of these literals (or one character before it).
_EXIT_STARTS = (('"exit_', 0), ('"returncode"', 0), ("xit ", 1))


def _exit_search(text: str, start: int, stop: int) -> re.Match[str] | None:
    """``_EXIT_RE.search(text, start, stop)``, run from the first place a match can start
    (found with ``str.find``: the pattern's own scan stops at every "e")."""
    at = stop
    for literal, back in _EXIT_STARTS:
        found = text.find(literal, start, stop)
        if found != -1 and found - back < at:
            at = max(start, found - back)
    return None if at >= stop else _EXIT_RE.search(text, at, stop)


def _unwrap(text: str) -> str:
    """A JSON result's text values, one per line (small envelopes parsed; large ones have
    their escaped newlines turned into lines, which is enough to find error lines)."""
    if not text.lstrip().startswith("{"):
        return text
    if len(text) <= 64_000:
        try:
            # orjson is about 3× faster and, on the documents it accepts, gives the same
            # strings (only the string values are read); what it rejects goes through json.
            data = orjson.loads(text)
        except ValueError:
            try:
                data = json.loads(text)
            except ValueError:
                data = None
        if isinstance(data, Mapping):
            inner = [data.get(k) for k in ("output", "stdout", "stderr", "error", "content")]
            return "\n".join(v for v in inner if isinstance(v, str) and v)
    return text.replace("\\n", "\n")


# Every error-line alternative (``_LINE_START``, ``_IN_LINE``) holds one of these literals: a
# line without any is never run through the patterns.
_ERROR_LITERALS = re.compile(
    r"Error|Exception|FAILED|ERROR|E\s|error|Traceback|--- FAIL:|panicked at|fatal:"
    r"|command not found|No such file or directory"
)


# An error line, matched one line at a time: an exception or error name, a FAILED/ERROR or
# pytest "E" line, an "error:" or "fatal:", a traceback, a Go test failure, a panic, a missing
# command or file. (tests/compaction/test_scan_equivalence.py keeps the single pattern these
# were split from as the reference.) The alternatives anchored at a line start
# (``_LINE_START``, tried at the line's start only) and the others, each starting at a word
# boundary before a letter (``_IN_LINE``: the boundary is checked by a lookbehind after
# that letter, so the pattern starts with a character set the regex engine scans for).
# At any position at most one alternative can match (their first words differ), so the
# order of the alternatives decides nothing.
_LINE_START = re.compile(r"^\s*(?:FAILED|ERROR)\b|^\s*E\s{2,}\S|^--- FAIL:", re.MULTILINE)
_IN_LINE = re.compile(
    r"[A-Z](?<!\w[A-Z])[A-Za-z0-9_]*(?:Error|Exception)\b(?!\")"
    r"|e(?<!\we)rror(?:\[\w+\])?:"
    r"|T(?<!\wT)raceback \(most recent call last\)"
    r"|p(?<!\wp)anicked at\b"
    r"|f(?<!\wf)atal:"
    r"|c(?<!\wc)ommand not found\b"
    r"|N(?<!\wN)o such file or directory\b"
)


def _error_matches(body: str, start: int, end: int, most: int) -> int:
    """How many error-line matches the line ``body[start:end]`` holds (at most ``most``;
    ``start`` a line start, no newline in it)."""
    count = 0
    pos = start
    match = _LINE_START.match(body, start, end)
    if match is not None:
        count = 1
        pos = match.end()
    if count < most:
        for _ in _IN_LINE.finditer(body, pos, end):
            count += 1
            if count >= most:
                break
    return count


def _error_lines(body: str, limit: int) -> list[str]:
    """The first ``limit`` error lines of ``body`` (a line once per error-line match in it),
    matched line by line on the lines holding one of ``_ERROR_LITERALS``."""
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
        count = _error_matches(body, start, end, limit - len(lines))
        if count:
            lines.extend([body[start:end]] * count)
        at = end + 1
    return lines


def _line_at(text: str, index: int) -> str:
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return text[start : end if end != -1 else len(text)]


def resume_summary(facts: SummaryFacts) -> str:
    """The hermes deterministic summary (see the module docstring). Bounded by
    ``facts.max_chars``."""
    scan = _Scan(facts)
    budget = facts.max_chars
    prev = _section_lines(facts.previous_summary or "")

    def merged(section: str, new: list[str]) -> list[str]:
        old = [ln for ln in prev.get(section, []) if not ln.lower().startswith(("none", "("))]
        return list(dict.fromkeys([*old, *new]))

    # Facts first: paths, commands, errors, tests, constraints.
    paths = merged(
        "Files Touched", [f"- {p} ({', '.join(sorted(v))})" for p, v in scan.paths.items()]
    )
    commands = merged(
        "Commands Run", [f"- `{c}` -> exit {code}" for c, code in scan.commands.items()]
    )
    labels: dict[str, str] = {}  # command or tool -> its label (errors repeat a few)
    entries = []  # one per error, in order
    for _, source, line in scan.errors:
        label = labels.get(source)
        if label is None:
            label = labels[source] = _one_line(source, 80)
        entries.append(f"- [{label}] {line}")
    error_lines = list(dict.fromkeys(entries))
    if scan.exception_names:
        names = list(scan.exception_names)[-_MAX_NAMES:]
        error_lines.append("- Exception names seen: " + ", ".join(names))
    errors = merged("Errors & Failures", error_lines)
    tests = merged("Test Results", list(dict.fromkeys(f"- {t}" for t in scan.tests)))
    constraints = merged("Constraints & Preferences", [f"- {c}" for c in scan.constraints.values()])

    # Blocked: errors of the last two user turns whose command did not succeed later.
    since = scan.user_positions[-2] if len(scan.user_positions) >= 2 else -1
    ok = scan.command_ok
    blocked = list(
        dict.fromkeys(
            entry
            for (pos, source, _), entry in zip(scan.errors, entries, strict=True)
            if pos >= since and ok.get(source, -1) <= pos
        )
    )

    if scan.last_user is not None:
        active = scan.last_user[1][:2_000]
    else:
        active = "\n".join(prev.get("Active Task", [])) or "None."
    goal = _goal(facts, scan, prev)

    state = [f"- Compacted on {facts.now.isoformat()}: {len(facts.middle)} messages summarized."]
    if facts.focus:
        state.append(f"- Focus topic: {facts.focus}")
    modified = [p for p, v in scan.paths.items() if v & {"wrote", "patched", "edited"}]
    if modified:
        state.append("- Modified files: " + ", ".join(modified[-20:]))
    if scan.commands:
        last = list(scan.commands.items())[-1]
        state.append(f"- Last command run: `{last[0]}` -> exit {last[1]}")
    pending = []
    if scan.last_user is not None and scan.last_reply_pos < scan.last_user[0]:
        pending.append(f"- {_one_line(scan.last_user[1], 300)}")
    resolved = [f"- Q: {q}" for pos, q in scan.questions if pos < scan.last_reply_pos][-8:]

    # Each fact section may use a share of the budget; what they leave goes to the actions.
    shares = {
        "Files Touched": (paths, 0.18),
        "Commands Run": (commands, 0.20),
        "Errors & Failures": (errors, 0.12),
        "Test Results": (tests, 0.04),
        "Constraints & Preferences": (constraints, 0.08),
        "Blocked": (blocked, 0.05),
    }
    if facts.with_ledger:
        # The ledger appended by the engine holds these facts: the narrative only points there.
        for name in ("Files Touched", "Commands Run", "Errors & Failures", "Test Results"):
            shares.pop(name)
        shares.pop("Constraints & Preferences")
    fitted = {
        name: _fit(lines, int(budget * share), "lines") for name, (lines, share) in shares.items()
    }
    fixed = {
        "Active Task": active,
        "Goal": goal,
        "Active State": "\n".join(state),
        "Key Decisions": "\n".join(prev.get("Key Decisions", [])[-8:]) or "None.",
        "Resolved Questions": "\n".join(merged("Resolved Questions", resolved)[-10:]) or "None.",
        "Pending User Asks": "\n".join(pending) or "None.",
        # A path only commands used is written inside them, not again under Files.
        "Relevant Files": "See Files and Commands in the Fact Ledger."
        if facts.with_ledger
        else "See Files Touched.",
        "Remaining Work": "- Continue from the latest user message after this summary.\n"
        "- Verify files, git state and tests with tools before relying on this summary; "
        "recall fetches any folded output by its [ref:N].",
    }
    used = sum(len(v) + 8 for v in fixed.values()) + sum(
        sum(len(line) + 1 for line in lines) + 30 for lines in fitted.values()
    )
    number = 0
    old_actions = prev.get("Completed Actions", [])
    for line in old_actions:
        match = re.match(r"\s*(\d+)\.", line)
        if match:
            number = max(number, int(match.group(1)))
    # Only the newest actions can fit: lines are built newest first until the budget is full.
    room = max(400, budget - used - 200)
    total = scan.action_total
    action_lines: list[str] = []
    filled = 0
    for offset, (call_pos, name, args, pos, _) in enumerate(reversed(scan.actions)):
        outcome, when = scan.action_detail(pos, call_pos)
        lowered = name.lower()
        verb = _VERBS.get(lowered, "RAN" if lowered in SHELL_TOOLS else "CALLED")
        target = _command_of(args) if lowered in SHELL_TOOLS else None
        target = f"`{target}`" if target else _action_target(verb, args)
        target = "" if args is _UNKNOWN_ARGS else f" {_one_line(target, 120)}"
        line = (
            f"{number + total - offset}. {verb}{target} — "
            f"{_one_line(outcome, 240)} (on {when}) [tool: {name}]"
        )
        if filled + len(line) + 1 > room:
            break
        action_lines.append(line)
        filled += len(line) + 1
    action_lines.reverse()
    skipped = total - len(action_lines)
    older = [ln for ln in old_actions if not ln.startswith("(")] if not skipped else []
    actions = _fit(older + action_lines, room, "actions")
    if skipped:
        dropped = skipped + len([ln for ln in old_actions if not ln.startswith("(")])
        actions = [f"({dropped} earlier actions omitted; recall has them)", *actions]
    if facts.with_ledger:
        body = {
            **fixed,
            "Constraints & Preferences": "See Constraints in the Fact Ledger.",
            "Completed Actions": "\n".join(actions) or "None.",
            "Blocked": "\n".join(fitted["Blocked"]) or "None.",
        }
        text = "\n\n".join(f"## {name}\n{body[name]}" for name in SECTIONS)
        return fit_sections(text, budget)
    body = {
        **fixed,
        "Constraints & Preferences": "\n".join(fitted["Constraints & Preferences"]) or "None.",
        "Completed Actions": "\n".join(actions) or "None.",
        "Blocked": "\n".join(fitted["Blocked"]) or "None.",
    }
    extra = ("Files Touched", "Commands Run", "Errors & Failures", "Test Results")
    order = [*SECTIONS[:4], *extra, *SECTIONS[4:]]
    texts = {**body, **{name: "\n".join(fitted[name]) or "None." for name in extra}}
    text = "\n\n".join(f"## {name}\n{texts[name]}" for name in order)
    if len(text) > budget:
        text = text[: budget - 20] + "\n...[truncated]..."
    return text


# A user message that explicitly replaces the goal ("new goal: …", "change of plan", "forget
# that, instead …", "let's switch to …"): it becomes the Goal; a mere question does not.
_GOAL_CHANGE = re.compile(
    r"^\W*(?:new (?:goal|task|plan)\b|change of plans?\b|(?:actually,? )?forget (?:that|"
    r"about|the previous|what)|instead,? (?:let'?s|we|please|i want)|let'?s (?:now )?"
    r"(?:switch|move on|pivot) to\b|(?:the )?goal (?:is now|has changed)|from now on,? "
    r"(?:the|our) goal)",
    re.IGNORECASE,
)


def _goal(facts: SummaryFacts, scan: _Scan, prev: Mapping[str, list[str]]) -> str:
    """The user's latest explicit change of goal in the middle, else the previous summary's
    Goal, else the conversation's first real request (the middle's first only when the
    conversation's first user message is a harness wrapper)."""
    change = next((text for _, text in reversed(scan.requests) if _GOAL_CHANGE.match(text)), None)
    if change is not None:
        return change[:1_000]
    previous = "\n".join(prev.get("Goal", [])).strip()
    first = facts.first_user_text
    if first is not None:
        first = without_ide_context(first)
    if first is None or is_wrapper(first):
        first = scan.first_user
    start = cut_start(previous)
    if start is not None and first and " ".join(first.split()).startswith(" ".join(start.split())):
        # A goal cut short to fit an earlier summary is not carried cut: the request it
        # was cut from is written again (it may be cut again, but from its start).
        previous = ""
    if previous:
        return previous
    return (first or "Unknown.").strip()[:1_000] or "Unknown."


# The arguments of a result whose call is not in the middle (an earlier compaction
# summarized it, or it is in the parent session): unknown, not empty, so no
# "(no arguments)" is written for them; the outcome (often that compaction's fold line,
# "[read_file] read logs/x.log …") names the target.
_UNKNOWN_ARGS: dict[str, Any] = {}
_FOLD_TOOL_RE = re.compile(r"\[([A-Za-z0-9_.:-]{1,64})\] ")


def _orphan_tool(message: Mapping[str, Any]) -> str:
    """The tool name of a result without its call: the row's own ``name``, else the name an
    earlier fold line starts with, else "tool"."""
    name = message.get("name")
    if isinstance(name, str) and name:
        return name
    content = message.get("content")
    match = _FOLD_TOOL_RE.match(content) if isinstance(content, str) else None
    return match.group(1) if match else "tool"


def _action_target(verb: str, args: Mapping[str, Any]) -> str:
    """What an action line names: a search its pattern and where it looked (``'source' in
    src/``), any other tool its paths, else its first telling argument."""
    paths = ", ".join(_paths_of(args)[:2])
    if verb.startswith("SEARCHED"):
        pattern = next(
            (
                args[k]
                for k in ("pattern", "query", "regex", "glob")
                if isinstance(args.get(k), str)
            ),
            "",
        )
        if pattern:
            quoted = f"'{_one_line(pattern, 100)}'"
            return f"{quoted} in {paths}" if paths else quoted
    return paths or _first_arg(args)


def _json_gist(text: str) -> str:
    """A JSON result without an output field, told by its fields: ``total_count: 3;
    matches: 3 items``; a list by its length. "" when it is not JSON or holds nothing."""
    if len(text) > 64_000:
        return ""
    try:
        data = orjson.loads(text)
    except ValueError:
        return ""
    if isinstance(data, list):
        return f"{len(data)} item{'' if len(data) == 1 else 's'}" if data else "empty list"
    if not isinstance(data, Mapping):
        return ""
    parts = []
    for key, value in data.items():
        if isinstance(value, bool | int | float) or (isinstance(value, str) and value):
            parts.append(f"{key}: {value}")
        elif isinstance(value, list | Mapping):
            parts.append(f"{key}: {len(value)} item{'' if len(value) == 1 else 's'}")
        if len(parts) == 4:
            break
    return "; ".join(parts)


def _first_arg(args: Mapping[str, Any]) -> str:
    for key in ("pattern", "query", "url", "goal", "description", "prompt"):
        if isinstance(args.get(key), str) and args[key]:
            return _one_line(args[key], 100)
    for key, value in list(args.items())[:1]:
        return f"{key}={_one_line(str(value), 60)}"
    return "(no arguments)"


def iter_refs(text: str) -> Sequence[int]:
    """The ``[ref:N]`` numbers named in a text."""
    return [int(n) for n in re.findall(r"\[ref:(\d+)\]", text)]


def _kept_actions(budget: int) -> int:
    """How many of the newest actions ``resume_summary`` can read: more than the lines that
    fit the largest room it gives them (``max(400, budget)``, each at least ``_ACTION_LINE_MIN``)
    and than the newest results the scans read."""
    return max(_NAME_SCAN_RESULTS, _FULL_SCAN_RESULTS, max(400, budget) // _ACTION_LINE_MIN + 1)


def _newest(actions: deque[Any], count: int) -> list[Any]:
    """The last ``count`` entries of ``actions``, oldest first (``actions[-count:]``)."""
    return list(islice(actions, max(0, len(actions) - count), None))
