"""The fact ledger as text: ``merge`` two ledgers, ``parse`` a written one back, and ``render``
one within a size bound, keeping per kind the most referenced and newest facts and saying how
many were left to ``recall`` (the format: ``compaction.ledger``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from compaction.ledger_facts import (
    _KIND_OF_TITLE,
    _MAX_REQUESTS,
    _NOTE,
    _SHARES,
    _TITLES,
    _WEIGHTS,
    KINDS,
    LEDGER_HEADING,
    Fact,
    Ledger,
    _one_line,
)
from compaction.shell_paths import (
    _paths_of,
)
from compaction.words import cut_at_word, tail_at_word


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


def _section_size(kind: str, facts: Sequence[Fact]) -> int:
    """The chars of the section of ``facts``: its heading, ``_lines`` and their newlines, and
    room for a "left to recall" line; worked out from the facts' lengths without writing the
    lines (a layout sizes each kind's facts several times while it chooses them)."""
    if kind == "files":
        # A line per access group: "- [pr] " and its newline, then "path, " per path (the
        # last path's ", " pays for the newline and the group's "- [" less one).
        groups: set[str] = set()
        total = 0
        for fact in facts:
            access = _access(fact)
            if access not in groups:
                groups.add(access)
                total += len(access) + 4
            total += len(_file_entry(fact)) + 2
    elif kind == "exceptions":
        # One line: "- " and its newline, "name ×n, " per name less the last ", ".
        total = sum(len(f.text) + len(_times(f)) + 2 for f in facts) + 1 if facts else 0
    else:
        total = sum(_line_size(kind, fact) + 1 for fact in facts)
    return len(_TITLES[kind]) + 5 + total + (40 if facts else 0)


def _line_size(kind: str, fact: Fact) -> int:
    """``len(_lines(kind, (fact,))[0])`` for a kind written one fact a line (not files or
    exception names)."""
    if kind == "commands":
        return 2 + len(fact.text) + len(_exit(fact)) + len(_times(fact))
    if kind == "errors":
        if not fact.detail:
            return 2 + len(fact.text)
        return 5 + len(fact.detail) + len(fact.text) + len(_times(fact))
    return 2 + len(fact.text) + len(_times(fact))


_T = TypeVar("_T")


class LayoutMemo:
    """What the layouts of one ledger at several sizes have in common, worked out once: the
    fitting loop renders a ledger at up to 8 sizes, 2 to 6 layouts each, and each layout
    sized every kind's whole section, read the paths of every kept command and labelled
    every command again.

    Results are held by the identity of the fact tuple they were worked out from, and the
    tuple with them, so no other tuple can take its id while the memo lives."""

    __slots__ = ("_found",)

    def __init__(self) -> None:
        self._found: dict[tuple[str, int], tuple[object, Any]] = {}

    def get(self, what: str, facts: tuple[Fact, ...], work: Callable[[], _T]) -> _T:
        """``work()``, the value kept for ``(what, facts)`` when ``facts`` was met before."""
        key = (what, id(facts))
        known = self._found.get(key)
        if known is not None and known[0] is facts:
            value: _T = known[1]
            return value
        value = work()
        self._found[key] = (facts, value)
        return value

    def size(self, kind: str, facts: tuple[Fact, ...]) -> int:
        """``_section_size(kind, facts)``."""
        return self.get(kind, facts, lambda: _section_size(kind, facts))


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
    return Fact(_abbreviation(fact.text), fact.count, fact.last, fact.detail)


@functools.lru_cache(maxsize=4_096)
def _abbreviation(text: str) -> str:
    # Every layout tried while a summary is fitted abbreviates the long commands that do not
    # fit again (a char at a time, at word boundaries): each command's is worked out once.
    # Whole words on both sides of the "…" (a cut "repo…" or "…ems'][8]" reads as a typo).
    head, end = cut_at_word(text, _HEAD, more=True), tail_at_word(text, _END)
    return f"{head}…{end}"


def _newest(fact: Fact) -> int:
    return fact.last


def _choose(
    kind: str,
    facts: tuple[Fact, ...],
    room: int,
    whole: int | None = None,
    memo: LayoutMemo | None = None,
) -> tuple[Fact, ...]:
    """The facts of ``kind`` that fit ``room`` chars: most referenced (3+ times) and newest
    first; written back in chronological order. ``whole``: the section size of all
    ``facts`` when the caller has it; ``memo``: where their ranking is kept."""
    given = len(facts)
    if kind == "requests":
        facts = facts[-_MAX_REQUESTS:]
    if whole is None or len(facts) != given:
        whole = _section_size(kind, facts)
    if whole <= room:
        return tuple(facts)
    ranked, costs, shorts = (
        _ranking(kind, facts)
        if memo is None
        else memo.get(f"ranked {kind}", facts, lambda: _ranking(kind, facts))
    )
    # Each fact's cost alone (a path: its entry, plus its group's "- [pr] " the first time);
    # one pass, then a final check of the real size (dropping the last chosen while over).
    used = _section_size(kind, ()) + 40  # the "left to recall" line, written since some are
    groups: set[str] = set()
    chosen: list[Fact] = []
    abbreviations: set[str] = set()
    for fact, cost, short in zip(ranked, costs, shorts, strict=True):
        if kind == "files" and _access(fact) not in groups:
            cost += len(_access(fact)) + 4  # the group's own line
        if used + cost > room:
            if short is None:
                continue
            # A long command that does not fit whole keeps its identity (the program and its
            # first arguments), marked "…"; recall has it whole.
            fact, cost = short
            if used + cost > room or fact.text in abbreviations:
                continue
            abbreviations.add(fact.text)
        used += cost
        chosen.append(fact)
        if kind == "files":
            groups.add(_access(fact))
    # ``used`` is the chosen facts' section size (each cost is its fact's share of it), but
    # for exception names: one line, whose last ", " is not written and its newline is.
    size = used + 1 if kind == "exceptions" else used
    while chosen and size > room:
        chosen.pop()
        size = _section_size(kind, chosen)
    return tuple(sorted(chosen, key=lambda f: f.last))


def _ranking(
    kind: str, facts: tuple[Fact, ...]
) -> tuple[list[Fact], list[int], list[tuple[Fact, int] | None]]:
    """``facts`` in the order ``_choose`` keeps them, each one's cost alone (a path's
    without its group's line) and, for a long command, its abbreviation and that one's cost:
    the same whatever the room, so worked out once per fact tuple."""
    # Requests: the newest (an agent resumes from the latest asks); other kinds by ``_rank``.
    ranked = sorted(facts, key=_rank if kind != "requests" else _newest, reverse=True)
    if kind == "files":
        costs = [len(_file_entry(fact)) + 2 for fact in ranked]
    elif kind == "exceptions":
        costs = [len(fact.text) + len(_times(fact)) + 2 for fact in ranked]
    else:
        costs = [_line_size(kind, fact) + 1 for fact in ranked]
    shorts: list[tuple[Fact, int] | None] = [None] * len(ranked)
    if kind == "commands":
        for at, fact in enumerate(ranked):
            if len(fact.text) > _LONG_COMMAND:
                short = _abbreviated(fact)
                shorts[at] = (short, _line_size(kind, short) + 1)
    return ranked, costs, shorts


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


def _pick(
    wanted: Mapping[str, tuple[Fact, ...]], room: int, memo: LayoutMemo
) -> dict[str, tuple[Fact, ...]]:
    """The facts of each kind chosen to fill ``room`` chars."""
    need = {kind: memo.size(kind, facts) for kind, facts in wanted.items() if facts}
    allowed = _allot(need, room)
    # Each kind's whole size is worked out once here (it is the most costly size: every
    # line of the kind), then handed to ``_choose`` and reused for a kind kept whole (the
    # very tuple back: a kept-whole kind whose long commands were abbreviated is not).
    chosen = {kind: _choose(kind, wanted[kind], allowed[kind], need[kind], memo) for kind in need}
    # Facts are whole lines: what a kind's share could not use goes, in order, to the kinds
    # that still left facts out.
    spare = room - sum(
        need[kind] if facts is wanted[kind] else _section_size(kind, facts)
        for kind, facts in chosen.items()
    )
    for kind in ("constraints", "files", "commands", "errors", "exceptions", "tests"):
        if kind in chosen and len(chosen[kind]) < len(wanted[kind]) and spare > 0:
            used = _section_size(kind, chosen[kind])
            chosen[kind] = _choose(kind, wanted[kind], used + spare, need[kind], memo)
            spare -= _section_size(kind, chosen[kind]) - used
    return chosen


def _written(
    chosen: Mapping[str, tuple[Fact, ...]], files: tuple[Fact, ...], memo: LayoutMemo
) -> tuple[tuple[Fact, ...], tuple[Fact, ...]]:
    """``(paths written on their own lines, paths kept)``: a path every use of which is a
    written command is kept inside that command, chosen or not."""
    commands = chosen.get("commands", ())
    # The same for every layout that keeps the same commands (all of them, mostly).
    among, inside = memo.get("inside", commands, lambda: (files, _inside(files, commands)))
    if among is not files:  # the memo was shared with a ledger of other paths
        inside = _inside(files, commands)
    own = tuple(f for f in chosen.get("files", ()) if f.text not in inside)
    kept = {f.text for f in own} | inside
    return own, tuple(f for f in files if f.text in kept)


def _inside(files: Iterable[Fact], commands: Iterable[Fact]) -> frozenset[str]:
    """The paths of ``files`` every use of which is one of ``commands`` (see ``_named_in``)."""
    named = _named(commands)
    return frozenset(f.text for f in files if _named_in(named, f))


def _source(command: Fact) -> str:
    """The label an error line of ``command`` carries (see ``_result``)."""
    return _label(command.text)


@functools.lru_cache(maxsize=4_096)
def _label(text: str) -> str:
    # Every layout labels every command of the ledger again (up to 24 layouts while a
    # summary is fitted): each distinct command's label is worked out once.
    return _one_line(text, 60)


def _nested(
    errors: Sequence[Fact], commands: Sequence[Fact], every: tuple[Fact, ...], memo: LayoutMemo
) -> dict[str, list[Fact]]:
    """Written command text → the error lines written under it: those whose label names that
    command alone among ``every`` command of the ledger (a label names a command by its first
    60 chars; two alike would leave it unclear whose error it is)."""
    labels = memo.get("labels", every, lambda: _labels(every))
    by_label = {label: c.text for c in commands if labels.get(label := _source(c)) == 1}
    nested: dict[str, list[Fact]] = {}
    for error in errors:
        text = by_label.get(error.detail)
        if text is not None:
            nested.setdefault(text, []).append(error)
    return nested


def _labels(commands: Iterable[Fact]) -> dict[str, int]:
    """How many of ``commands`` each label names."""
    labels: dict[str, int] = {}
    for command in commands:
        label = _source(command)
        labels[label] = labels.get(label, 0) + 1
    return labels


def render(ledger: Ledger, max_chars: int, memo: LayoutMemo | None = None) -> tuple[str, Ledger]:
    """The ledger as text of at most ``max_chars`` (about: a kind with facts always writes
    its heading), and the ledger actually written (what did not fit is counted in ``left``).

    Facts another written fact holds are not written twice: a path that a written command
    names (``cat src/a.py``, every use of the path being such a command) stays inside the
    command, and an error line of a written command is written under it instead of with its
    label (the command's first 60 chars); ``parse`` reads both back. The room they leave
    goes to the other facts.

    ``memo``: one shared by every render of this ledger (see ``LayoutMemo``)."""
    if memo is None:
        memo = LayoutMemo()
    room = max(0, max_chars - len(LEDGER_HEADING) - len(_NOTE) - 2)
    text, written = _layout(ledger, room, memo)
    for _ in range(2):
        spare = max_chars - len(text)
        if spare < 40 or not any(
            len(written.of(kind)) < len(ledger.of(kind)) for kind in KINDS if kind != "requests"
        ):
            break
        room += spare
        more, more_written = _layout(ledger, room, memo)
        if len(more) > max_chars:
            break
        text, written = more, more_written
    return text, written


def _layout(ledger: Ledger, room: int, memo: LayoutMemo) -> tuple[str, Ledger]:
    """The ledger's text with facts chosen for ``room`` chars, as their lines would take."""
    wanted = {kind: ledger.of(kind) for kind in KINDS}
    # The same tuple of newest requests in every layout, so its size is worked out once.
    requests = wanted["requests"]
    wanted["requests"] = memo.get("newest", requests, lambda: requests[-_MAX_REQUESTS:])
    chosen = _pick(wanted, room, memo)
    own, kept_files = _written(chosen, wanted["files"], memo)
    if len(own) < len(chosen.get("files", ())):
        # Choose again without the paths the chosen commands hold; kept if it keeps as many
        # facts (the commands chosen the second time may name fewer of them).
        inside = {f.text for f in kept_files} - {f.text for f in own}
        trimmed = {**wanted, "files": tuple(f for f in wanted["files"] if f.text not in inside)}
        again = _pick(trimmed, room, memo)
        own_again, kept_again = _written(again, wanted["files"], memo)
        before = sum(len(v) for k, v in chosen.items() if k != "files") + len(kept_files)
        after = sum(len(v) for k, v in again.items() if k != "files") + len(kept_again)
        if after >= before:
            chosen, own, kept_files = again, own_again, kept_again
    nested = _nested(chosen.get("errors", ()), chosen.get("commands", ()), wanted["commands"], memo)
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
