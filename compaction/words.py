"""Cutting text at word boundaries: a one-line gist of a longer text, and the start or the end
of a text that fits a room, never beginning or ending inside a word.

The deterministic summary's gists (``compaction.resume``) and the fact ledger's cut lines
(``compaction.ledger_facts``, ``compaction.ledger_render``) share these, so "…" always stands
for whole words left out.
"""

from __future__ import annotations

from unicodedata import east_asian_width

__all__ = ["cut_at_word", "is_word_char", "one_line", "tail_at_word"]


def one_line(text: str, limit: int, *, more: bool = False) -> str:
    """``text`` on one line in at most ``limit`` chars: a longer one (or one that ``more``
    says goes on past its end, a slice of a longer text) is cut at its last word boundary
    within the limit and ends with "…", so a gist never ends inside a word."""
    # Printable text has no whitespace but " " (every other whitespace character is a
    # control or separator character): without doubled or edge spaces it is one line already.
    more = more and not text[-1:].isspace()  # a slice ending at a space ends at a word
    if not (text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " "):
        text = " ".join(text.split())
    if len(text) <= limit and not more:
        return text
    head = cut_at_word(text, limit - 1, more)
    return head + "…" if text else ""


def is_word_char(char: str) -> bool:
    """Whether ``char`` is inside a word: letters, digits and "_". A wide (CJK) character
    counts as a word of its own: those scripts put no spaces between words, so a gist of
    them is cut at a character."""
    return (char.isalnum() or char == "_") and east_asian_width(char) not in ("W", "F")


def cut_at_word(text: str, room: int, more: bool) -> str:
    """The longest start of ``text`` of at most ``room`` chars that ends at a word boundary
    (``more``: the text goes on after its last char). A first word longer than ``room`` is
    cut inside, as before: a gist of only "…" would say nothing."""
    end = min(room, len(text))
    for cut in range(end, 0, -1):
        after = text[cut] if cut < len(text) else ("a" if more else " ")
        if not (is_word_char(text[cut - 1]) and is_word_char(after)):
            return text[:cut].rstrip()
    return text[:end]


def _starts_a_word(text: str, at: int) -> bool:
    return at == 0 or not (is_word_char(text[at - 1]) and is_word_char(text[at]))


def tail_at_word(text: str, room: int) -> str:
    """An end of ``text`` of about ``room`` chars that begins at a word boundary (what comes
    before it is cut off): the longest within ``room``, unless that keeps less than half of
    it; then the word the cut falls in is kept whole, up to twice ``room`` (a file name like
    ``report_8_output.txt`` is what tells two commands apart). A longer word is cut inside."""
    start = max(0, len(text) - room)
    for cut in range(start, len(text)):
        if _starts_a_word(text, cut):
            if len(text) - cut >= room // 2:
                return text[cut:].lstrip()
            break
    for cut in range(start, max(0, len(text) - 2 * room) - 1, -1):
        if _starts_a_word(text, cut):
            return text[cut:].lstrip()
    return text[start:]
