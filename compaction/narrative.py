"""Fitting a summary's narrative into fewer chars without losing whole sections.

When the fact ledger leaves the narrative little room, cutting the text at a char position
keeps the first section whole and drops the rest: a real Claude Code session at a 32K window
kept a 330-char Active Task and then "Goal ...[truncated]...", five rounds in a row, so the
agent resumed without its goal. Here every "## " section keeps its heading and as much of its
start as an equal share allows: short sections whole, long ones cut to the same length.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

__all__ = ["CUT_MARK", "cut_start", "fit_sections"]

CUT_MARK = "…"
_HEADING = re.compile(r"^## .*$", re.MULTILINE)
_LEGACY_CUT = "...[truncated]..."
_NUMBERED = re.compile(r"^\d+\. ", re.MULTILINE)
# Sections that log what was done, oldest first (a Goal may be a numbered list too, and its
# start is what matters).
_LOG = re.compile(r"completed|actions|progress|done|history", re.IGNORECASE)
_NONE = "None."
_PARTIAL_LINE = 30  # chars of room worth starting one more line for


def cut_start(text: str) -> str | None:
    """What is left of a section body ``fit_sections`` (or the older char cut) shortened,
    without its cut mark; None when ``text`` was not cut."""
    stripped = text.rstrip()
    for mark in (CUT_MARK, _LEGACY_CUT):
        if stripped.endswith(mark):
            return stripped.removesuffix(mark).strip()
    return None


def fit_sections(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` chars, every section that says more than "None." kept.

    Each section's body (and any text before the first heading) is cut to at most the same
    number of chars, the largest that fits, at a line end where one lies within it, else at
    a word, and ends with ``CUT_MARK``; a numbered log of what was done (Completed Actions)
    keeps its last lines instead, after ``CUT_MARK``. A text without headings, or whose headings alone do
    not fit, is cut at a line (at a char when no line fits)."""
    if len(text) <= limit:
        return text
    preamble, sections, lists, longest = _parts(text)
    if not sections:
        return _cut(text, limit)
    low, high, best = 0, min(longest, limit), None
    while low <= high:  # the largest share whose text fits
        share = (low + high) // 2
        candidate = _render(preamble, sections, lists, share)
        if len(candidate) <= limit:
            best, low = candidate, share + 1
        else:
            high = share - 1
    return best if best is not None else _cut(text, limit)


@functools.lru_cache(maxsize=8)
def _parts(text: str) -> tuple[str, tuple[tuple[str, str], ...], tuple[bool, ...], int]:
    """``(preamble, sections, which are numbered logs, the longest body)`` of ``text``: what
    ``fit_sections`` cuts, the same whatever the limit (the fact ledger's fitting cuts one
    narrative to up to 8 limits)."""
    preamble, found = _split(text)
    if not found:
        return preamble, (), (), len(preamble)
    # A section that says "None." tells an agent nothing its absence does not; its room goes
    # to the sections that say something.
    sections = tuple((heading, body) for heading, body in found if body != _NONE) or tuple(found)
    lists = tuple(
        _LOG.search(heading) is not None and _NUMBERED.search(body, 0, 4_000) is not None
        for heading, body in sections
    )
    longest = max([len(preamble), *(len(body) for _, body in sections)])
    return preamble, sections, lists, longest


def _split(text: str) -> tuple[str, list[tuple[str, str]]]:
    headings = list(_HEADING.finditer(text))
    if not headings:
        return text, []
    preamble = text[: headings[0].start()].strip()
    sections = []
    for at, heading in enumerate(headings):
        end = headings[at + 1].start() if at + 1 < len(headings) else len(text)
        sections.append((heading.group(0), text[heading.end() : end].strip()))
    return preamble, sections


def _render(
    preamble: str, sections: Sequence[tuple[str, str]], lists: Sequence[bool], share: int
) -> str:
    parts = [_shortened(preamble, share, False)] if preamble else []
    for (heading, body), numbered in zip(sections, lists, strict=True):
        kept = _shortened(body, share, numbered)
        parts.append(f"{heading}\n{kept}" if kept else heading)
    return "\n\n".join(parts)


def _shortened(body: str, share: int, numbered: bool) -> str:
    if len(body) <= share:
        return body
    room = share - len(CUT_MARK)
    if room <= 0:
        return CUT_MARK
    if numbered:
        # A numbered list (Completed Actions) is in time order: its newest lines are the
        # ones an agent resumes from, so it keeps its end.
        start = body.find("\n", len(body) - room + 1)
        if start != -1:
            return f"{CUT_MARK}\n{body[start + 1 :]}"
        return f"{CUT_MARK}\n{_word_cut(body.rsplit(chr(10), 1)[-1], room - 2 - len(CUT_MARK))}"
    # Whole lines while they fit, then the start of the next one when enough room is left
    # for a few words of it.
    whole = body.rfind("\n", 0, room + 1)
    kept = body[:whole].rstrip() if whole > 0 else ""
    left = room - len(kept) - (1 if kept else 0)
    if left < _PARTIAL_LINE and kept:
        return f"{kept} {CUT_MARK}"
    start = whole + 1 if whole > 0 else 0
    head = _word_cut(body[start:], left)
    return f"{kept}\n{head}" if kept else head


def _word_cut(line: str, room: int) -> str:
    """The start of ``line`` in ``room`` chars (at a word when one ends past half of it)
    followed by ``CUT_MARK``."""
    head = line[: max(0, room)]
    space = head.rfind(" ")
    if space > room // 2:
        head = head[:space]
    return head.rstrip() + CUT_MARK


def _cut(text: str, limit: int) -> str:
    room = limit - len(CUT_MARK) - 1
    if room <= 0:
        return text[: max(0, limit)]
    line_end = text.rfind("\n", 0, room)
    head = text[: line_end if line_end > room // 2 else room]
    return head.rstrip() + "\n" + CUT_MARK
