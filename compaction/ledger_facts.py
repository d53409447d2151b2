"""The fact ledger's data: its kinds, their titles and shares, ``Fact`` and ``Ledger``.

See ``compaction.ledger`` for what the ledger is; ``compaction.ledger`` reads facts from rows,
``compaction.ledger_render`` writes them within a budget and reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction.words import one_line

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


def _one_line(text: str, limit: int) -> str:
    """``text`` on one line (runs of whitespace as one space), cut to ``limit`` chars with "…"
    at a word boundary (``compaction.words``, as the summary's gists are)."""
    return one_line(text, limit)
