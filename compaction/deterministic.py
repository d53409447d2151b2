"""The deterministic summary (no LLM): the classic one here, the hermes profile's in
``compaction.resume``; also the fallback of an LLM summarizer.
"""

# Over 450 lines: the classic deterministic summary is one walk (_MiddleScan) and its section
# writer; split further they would share most of their state.
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.facts import MiddleGathered, SummaryFacts
from compaction.messages import (
    Message,
    content_text,
    parse_arguments,
    tool_call_id,
    tool_call_name,
    tool_calls,
)
from compaction.prompt import SECTIONS
from compaction.resume import resume_summary

__all__ = ["MiddleGathered", "SummaryFacts", "deterministic_summary", "gather_middle"]

# ---------------------------------------------------------------------------------------
# Deterministic summary


_VERBS = {
    "read_file": "READ",
    "write_file": "WROTE",
    "patch": "PATCHED",
    "terminal": "RAN",
    "search_files": "SEARCHED",
    "web_search": "SEARCHED WEB FOR",
    "web_extract": "EXTRACTED",
    "execute_code": "EXECUTED",
    "delegate_task": "DELEGATED",
    "vision_analyze": "ANALYZED",
    "memory": "UPDATED MEMORY",
    "todo": "UPDATED TODOS",
    "list_files": "LISTED",
}
_ERROR_RE = re.compile(
    r"[Ee]rror\b|ERROR\b|[Ee]xception\b|Traceback|\b[Ff]ailed\b|\bFAILED\b|\b[Ff]atal\b"
)
_ERROR_SCAN_RESULTS = 200  # newest tool results scanned for errors
_PATH_RE = re.compile(r"(?<![\w/.:-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,8}\b")
_CONSTRAINT_RE = re.compile(
    r"\b(must|never|always|don't|do not|prefer|avoid|only use|make sure)\b", re.IGNORECASE
)
_DECISION_RE = re.compile(
    r"\b(decided|decide|will use|going to use|instead of|because|chose|switch(?:ed)? to)\b",
    re.IGNORECASE,
)
_PATH_KEYS = frozenset(("path", "file_path", "workdir", "output_path", "dir"))
_SCAN = 4_000  # chars of a message scanned by regexes, to stay linear and bounded


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 20] + "\n...[truncated]..."


def _target(name: str, args: Mapping[str, Any]) -> str:
    for key in ("path", "file_path"):
        if args.get(key):
            return str(args[key])
    if args.get("command"):
        return f"`{_one_line(str(args['command']), 80)}`"
    if args.get("pattern"):
        return f"'{_one_line(str(args['pattern']), 60)}'"
    urls = args.get("urls")
    if isinstance(urls, list) and urls:
        first = urls[0]
        url = first.get("url") if isinstance(first, Mapping) else first
        return str(url)
    for key in ("url", "query", "goal", "question", "action"):
        if args.get(key):
            return _one_line(str(args[key]), 80)
    if args.get("code"):
        return f"`{_one_line(str(args['code']), 60)}`"
    for key, value in list(args.items())[:1]:
        return f"{key}={_one_line(str(value), 60)}"
    return "(no arguments)"


def _sections(body: str) -> tuple[str, dict[str, str]]:
    """Split a summary body into its preamble and ``## heading`` sections."""
    preamble: list[str] = []
    sections: dict[str, list[str]] = {}
    current: list[str] = preamble
    for line in body.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        else:
            current.append(line)
    return "\n".join(preamble).strip(), {k: "\n".join(v).strip() for k, v in sections.items()}


def _is_none(text: str) -> bool:
    return not text or text.lower().startswith(("none", "[none"))


def _keep_newest(lines: list[str], limit: int, what: str) -> list[str]:
    """The newest lines that fit ``limit`` chars, with a note counting the dropped ones."""
    total = 0
    start = len(lines)
    while start > 0 and total + len(lines[start - 1]) + 1 <= limit:
        start -= 1
        total += len(lines[start]) + 1
    kept = lines[start:]
    return ([f"({start} earlier {what} omitted)"] if start else []) + kept


# How many entries of each list the summary shows: the scan stops collecting a list when full.
_KEEP_CONSTRAINTS = 8
_KEEP_DECISIONS = 12
_KEEP_RESOLVED = 12
_KEEP_FILES = 20
_KEEP_MODIFIED = 10


def _add_sentence(pattern: re.Pattern[str], text: str, found: dict[str, None]) -> None:
    """Add the sentence around the first match of ``pattern`` in the scanned head of ``text``."""
    # An end position instead of a slice: long texts are not copied unless they match.
    match = pattern.search(text, 0, _SCAN)
    if match:
        found[f"- {_sentence_around(text[:_SCAN], match.start())}"] = None


def gather_middle(
    middle: Sequence[Message],
    start: int,
    stop: int,
    calls: Mapping[str, tuple[str, dict[str, Any]]] | None,
    into: MiddleGathered,
) -> None:
    """Add the paths and tool calls of ``middle[start:stop]`` to ``into`` (ranges in order).

    Every message is read, front to back: a conversation naming fewer files than the summary
    lists has to be read to its start anyway, and front to back the engine can do it block
    by block right after slimming, while the messages are still in the CPU cache. A path
    mentioned again moves to the end, so ``paths`` ends ordered by last mention. Within a
    message the order is the reverse of reading it newest first: an assistant's calls (each
    call's arguments last to first), then its text; paths in a text in order.
    """
    paths = into.paths
    count = 0
    for pos in range(start, stop):
        message = middle[pos]
        role = message.get("role")
        if role == "assistant":
            if message.get("tool_calls") is not None:
                message_calls = tool_calls(message)
                count += len(message_calls)
                for call in message_calls:
                    cid = tool_call_id(call) or f"#{pos}"
                    found = calls.get(cid) if calls is not None else None
                    args = found[1] if found else parse_arguments(call)
                    for key, value in reversed(args.items()):
                        if key in _PATH_KEYS and value and type(value) is str:
                            paths.pop(value, None)
                            paths[value] = None
            text = message.get("content")
            if type(text) is not str:
                text = content_text(text, images=False)
            if text and not text.isspace():
                into.last_reply_pos = pos
                _mention_paths(text, paths)
        elif role == "user":
            _mention_paths(content_text(message.get("content"), images=False), paths)
    into.call_count += count


def _mention_paths(text: str, paths: dict[str, None]) -> None:
    """Move the paths named in the scanned head of ``text`` to the end of ``paths``, in order."""
    if text.find("/", 0, _SCAN) != -1:
        for path in _PATH_RE.findall(text, 0, _SCAN):
            paths.pop(path, None)
            paths[path] = None


class _MiddleScan:
    """What the deterministic summary takes from the middle, newest entries only.

    Every list in the summary shows only its newest entries, so the middle is walked newest
    first and each list stops collecting when it is full; once all are full the rest of the
    walk only counts tool calls. Lists come out in chronological order, deduplicated by their
    newest occurrence.
    """

    def __init__(self, facts: SummaryFacts, want_actions: int) -> None:
        self.facts = facts
        self.actions: list[tuple[str, dict[str, Any], str]] = []  # name, arguments, call id
        self.action_count = 0
        self.call_names: dict[str, str] = {}
        self.result_pos: dict[str, int] = {}
        self.tool_positions: list[int] = []  # newest first, for the error scan
        self.constraints: list[str] = []
        self.decisions: list[str] = []
        self.resolved: list[str] = []
        self.files: list[str] = []
        self.modified: list[str] = []
        self.last_command: str | None = None
        self.last_user: str | None = None
        self.last_user_pos = -1
        self.last_reply_pos = -1
        self._walk(want_actions)

    def call_name(self, cid: str) -> str:
        """The tool name of call ``cid`` (``"tool"`` when unknown)."""
        known = self.facts.calls.get(cid) if self.facts.calls is not None else None
        return known[0] if known else self.call_names.get(cid, "tool")

    def outcome(self, cid: str, default: str = "no result recorded") -> str:
        """The result of call ``cid``: its fold line, else its first line, else ``default``."""
        pos = self.result_pos.get(cid)
        if pos is None:
            return default
        fold = self.facts.fold_lines.get(pos)
        if fold:
            return fold
        raw = content_text(self.facts.middle[pos].get("content"))
        return _one_line(raw[:300], 150) or "no output"

    def _resolve(self, call: Mapping[str, Any], pos: int) -> tuple[str, str, dict[str, Any]]:
        """``(id, name, arguments)`` of a call at ``pos``, from the call index when it has it;
        a call it lacks has its name remembered for ``call_name``."""
        cid = tool_call_id(call) or f"#{pos}"
        found = self.facts.calls.get(cid) if self.facts.calls is not None else None
        if found:
            return cid, found[0], found[1]
        name = tool_call_name(call)
        self.call_names.setdefault(cid, name)
        return cid, name, parse_arguments(call)

    def _walk(self, want_actions: int) -> None:
        middle = self.facts.middle
        actions, result_pos, tool_positions = self.actions, self.result_pos, self.tool_positions
        modified: dict[str, None] = {}
        constraints: dict[str, None] = {}
        decisions: dict[str, None] = {}
        reply: str | None = None  # first visible assistant text after the current position
        for pos in range(len(middle) - 1, -1, -1):
            message = middle[pos]
            role = message.get("role")
            if role == "tool":
                if len(tool_positions) < _ERROR_SCAN_RESULTS:
                    tool_positions.append(pos)
                if len(actions) < want_actions:
                    result_pos.setdefault(str(message.get("tool_call_id") or ""), pos)
            elif role == "assistant":
                text = message.get("content")
                if type(text) is not str:
                    text = content_text(text, images=False)
                if text and not text.isspace():
                    reply = text
                    if len(decisions) < _KEEP_DECISIONS:
                        _add_sentence(_DECISION_RE, text, decisions)
                calls_needed = (
                    len(actions) < want_actions
                    or len(modified) < _KEEP_MODIFIED
                    or self.last_command is None
                )
                if calls_needed and message.get("tool_calls") is not None:
                    for call in reversed(tool_calls(message)):
                        cid, name, args = self._resolve(call, pos)
                        if len(actions) < want_actions:
                            actions.append((name, args, cid))
                        if name in ("write_file", "patch"):
                            for key, value in args.items():
                                if (
                                    key in _PATH_KEYS
                                    and value
                                    and type(value) is str
                                    and len(modified) < _KEEP_MODIFIED
                                ):
                                    modified[value] = None
                        if self.last_command is None and name == "terminal" and args.get("command"):
                            self.last_command = _one_line(str(args["command"]), 120)
            elif role == "user":
                text = content_text(message.get("content"), images=False)
                if self.last_user is None:
                    self.last_user, self.last_user_pos = text, pos
                if (
                    reply is not None
                    and text.find("?", 0, _SCAN) != -1
                    and len(self.resolved) < _KEEP_RESOLVED
                ):
                    question, answer = _one_line(text[:_SCAN], 200), _one_line(reply[:_SCAN], 200)
                    self.resolved.append(f"- Q: {question} — A: {answer}")
                reply = None
                if len(constraints) < _KEEP_CONSTRAINTS:
                    _add_sentence(_CONSTRAINT_RE, text, constraints)
            # Checked every 32 messages: the lists bound themselves, this only ends the walk.
            if (
                not pos & 31
                and len(actions) >= want_actions
                and len(modified) >= _KEEP_MODIFIED
                and len(decisions) >= _KEEP_DECISIONS
                and len(constraints) >= _KEEP_CONSTRAINTS
                and len(self.resolved) >= _KEEP_RESOLVED
                and len(tool_positions) >= _ERROR_SCAN_RESULTS
                and self.last_command is not None
                and self.last_user is not None
            ):
                break
        # Files, the call count and the newest reply need the whole middle: they come from
        # one front-to-back gathering (the engine's, taken while slimming, or one here).
        gathered = self.facts.gathered
        if gathered is None:
            gathered = MiddleGathered()
            gather_middle(middle, 0, len(middle), self.facts.calls, gathered)
        self.action_count = gathered.call_count
        self.last_reply_pos = gathered.last_reply_pos
        actions.reverse()
        self.resolved.reverse()
        self.constraints = list(constraints)[::-1]
        self.decisions = list(decisions)[::-1]
        self.files = gathered.newest(_KEEP_FILES)
        self.modified = list(modified)[::-1]


def deterministic_summary(facts: SummaryFacts) -> str:
    """Fill the summary template from the data alone (no LLM).

    Linear in the size of the middle; the body is bounded by ``facts.max_chars``. The
    previous summary's sections are carried forward and extended (never dropped, only
    shortened when the bound requires it, oldest first).
    """
    if facts.profile != "classic":
        return resume_summary(facts)
    day = facts.now.isoformat()
    prev_pre, prev = _sections(facts.previous_summary or "")
    prev = {k.replace("Historical ", ""): v for k, v in prev.items()}
    budget = facts.max_chars

    limit = int(budget * 0.40)
    scan = _MiddleScan(facts, max(1, limit // 40))
    actions, outcome_of = scan.actions, scan.outcome
    last_user, last_user_pos = scan.last_user, scan.last_user_pos

    # Errors: scan only the newest tool results, newest first, so the work stays bounded.
    errors: list[str] = []
    for pos in scan.tool_positions:
        if len(errors) >= 5:
            break
        message = facts.middle[pos]
        raw = content_text(message.get("content"))
        text = raw if len(raw) <= 5_500 else raw[:4_000] + "\n" + raw[-1_500:]
        match = _ERROR_RE.search(text)
        if match:
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            line = text[start : end if end != -1 else len(text)]
            name = scan.call_name(str(message.get("tool_call_id") or ""))
            errors.insert(0, f"- [{name}] {_one_line(line, 300)}")

    # Completed actions: previous ones first, numbering continued.
    prev_actions = (
        []
        if _is_none(prev.get("Completed Actions", ""))
        else [line for line in prev.get("Completed Actions", "").splitlines() if line.strip()]
    )
    number = 0
    for line in prev_actions:
        m = re.match(r"\s*(\d+)\.", line)
        if m:
            number = max(number, int(m.group(1)))
    # Only the newest actions can fit the bound; format those, count the rest.
    skipped = scan.action_count - len(actions)
    new_actions: list[str] = []
    number += skipped
    for name, args, cid in actions:
        number += 1
        verb = _VERBS.get(name, "BROWSED" if name.startswith("browser_") else "CALLED")
        new_actions.append(
            f"{number}. {verb} {_target(name, args)} — {outcome_of(cid)} (on {day}) [tool: {name}]"
        )
    kept = _keep_newest(prev_actions + new_actions, limit, "actions")
    if skipped:
        note = re.match(r"\((\d+) earlier actions omitted\)$", kept[0]) if kept else None
        dropped = int(note.group(1)) if note else 0
        kept = [f"({dropped + skipped} earlier actions omitted)", *(kept[1:] if note else kept)]
    all_actions = kept
    constraints, decisions, resolved = scan.constraints, scan.decisions, scan.resolved
    files, modified, last_command = scan.files, scan.modified, scan.last_command
    last_reply_pos = scan.last_reply_pos

    if last_user is not None:
        active_task = _bounded(last_user.strip(), 2_000) or "(empty message)"
    else:
        active_task = prev.get("Active Task") or "None."
    goal = prev.get("Goal") or (
        _bounded(facts.first_user_text.strip(), 1_000) if facts.first_user_text else "Unknown."
    )

    state = [f"- Compacted on {day}: {len(facts.middle)} messages summarized without an LLM."]
    if facts.focus:
        state.append(f"- Focus topic: {facts.focus}")
    if modified:
        state.append("- Modified files: " + ", ".join(modified))
    if last_command:
        state.append(f"- Last command run: `{last_command}`")
    tail = list(facts.middle[-4:])
    if tail:
        state.append("- Last messages before the cut:")
        for message in tail:
            role = str(message.get("role") or "?").upper()
            text = content_text(message.get("content"))[:_SCAN]
            if message.get("role") == "tool":
                text = scan.outcome(str(message.get("tool_call_id") or ""), text)
            state.append(f"  - {role}: {_one_line(text, 300) or '(no text)'}")
    if prev_pre:
        state.append("- From the previous summary: " + _bounded(prev_pre, 1_500))
    if not _is_none(prev.get("Active State", "")):
        state.append("- Earlier state: " + _bounded(prev["Active State"], 1_500))

    pending: list[str] = []
    if last_user is not None and last_reply_pos < last_user_pos:
        pending.append(f"- {_one_line(last_user, 300)}")

    def merged(section: str, new: list[str], limit: int) -> str:
        old = prev.get(section, "")
        lines = ([] if _is_none(old) else old.splitlines()) + new
        lines = list(dict.fromkeys(lines))[-12:]
        lines = _keep_newest(lines, limit, "items")
        return "\n".join(lines) if lines else "None."

    remaining = (
        "- Answer the pending user ask above."
        if pending
        else "- Continue from the latest user message after this summary."
    ) + "\n- Verify files, git state and tests with tools before relying on this summary."
    if not _is_none(prev.get("Remaining Work", "")):
        remaining = _bounded(prev["Remaining Work"], 1_000) + "\n" + remaining
    file_lines = [f"- {p}" for p in files]

    body = {
        "Active Task": active_task,
        "Goal": goal,
        "Constraints & Preferences": merged("Constraints & Preferences", constraints, 1_200),
        "Completed Actions": "\n".join(all_actions) if all_actions else "None recoverable.",
        "Active State": _bounded("\n".join(state), int(budget * 0.20)),
        "Blocked": merged("Blocked", [e + " (may be resolved later)" for e in errors[-5:]], 1_500),
        "Key Decisions": merged("Key Decisions", decisions, 1_000),
        "Resolved Questions": merged("Resolved Questions", resolved, 1_000),
        "Pending User Asks": merged("Pending User Asks", pending, 800),
        "Relevant Files": merged("Relevant Files", file_lines, 1_200),
        "Remaining Work": remaining,
    }
    text = "\n\n".join(f"## {name}\n{body[name]}" for name in SECTIONS)
    return _bounded(text, budget)


def _sentence_around(text: str, index: int) -> str:
    """The sentence of ``text`` containing ``index`` (split on ". ", "? ", "! " and newlines)."""
    start = max(text.rfind(sep, 0, index) for sep in (". ", "? ", "! ", "\n"))
    start = 0 if start < 0 else start + 1
    ends = [p for p in (text.find(sep, index) for sep in (". ", "? ", "! ", "\n")) if p != -1]
    end = min(ends) + 1 if ends else len(text)
    return _one_line(text[start:end], 250)
