"""``SlimAction``: one change the engine made to a message, as the inspector shows it.

An action reads like the JSON-ready dict the report stores (``action["kind"]``, ``.get``,
``dict(action)``) but is a slotted object whose excerpts are cut when read: a 10k-message
middle yields thousands of actions, and as dicts with their 600-character excerpts copied
out they were the largest part of a compaction's memory (12.3 MB peak at 10k generated
messages, 4.5 MB of it the action dicts and excerpts). The text an excerpt is cut from is
the input message's own string when it can be (no copy); a text the engine built (joined
parts) is cut at once, so that nothing longer than the excerpt is kept alive for it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["BEFORE_EXCERPT_CHARS", "AFTER_CHARS", "SlimAction", "make_action"]

BEFORE_EXCERPT_CHARS = 600
AFTER_CHARS = 2_000

_KEYS = (
    "index",
    "kind",
    "role",
    "tool_name",
    "chars_before",
    "chars_after",
    "fold_line",
    "before_excerpt",
    "after",
)
_PLACED_KEYS = (*_KEYS, "region", "line")
_KNOWN = frozenset(_PLACED_KEYS)


class SlimAction(Mapping[str, Any]):
    """One slimming step, as shown in the inspector and stored in the report.

    Keys (in this order; ``region`` and ``line`` once the cut is known):
        index: index of the message in the input list.
        kind: ``"fold"``, ``"truncate"``, ``"image"`` or a hermes pass's kind.
        role: the message role.
        tool_name: the tool, for tool results.
        chars_before: text length before.
        chars_after: text length after.
        fold_line: the fold line (folds only).
        before_excerpt: the start of the original text (≤ 600 chars).
        after: the slimmed text (≤ 2,000 chars).
        region: ``"head"``, ``"middle"`` or ``"tail"`` of the input.
        line: the text it wrote: the fold line, else ``after``.
    """

    __slots__ = (
        "index",
        "kind",
        "role",
        "tool_name",
        "chars_before",
        "chars_after",
        "fold_line",
        "_before",
        "after",
        "region",
    )

    def __init__(
        self,
        index: int,
        kind: str,
        role: str,
        tool_name: str | None,
        before: str,
        after: str,
        fold_line: str | None,
        *,
        source: object = None,
    ) -> None:
        """``before``/``after``: the whole texts (their lengths are recorded, their starts
        shown). ``source``: the input's own content object; ``before`` is kept by reference
        only when it is that object (else its excerpt is cut now)."""
        self.index = index
        self.kind = kind
        self.role = role
        self.tool_name = tool_name
        self.chars_before = len(before)
        self.chars_after = len(after)
        self.fold_line = fold_line
        self._before = before if before is source else before[:BEFORE_EXCERPT_CHARS]
        self.after = after[:AFTER_CHARS]  # the same object when it is short
        self.region: str | None = None

    @property
    def before_excerpt(self) -> str:
        """The start of the original text (≤ 600 chars)."""
        return self._before[:BEFORE_EXCERPT_CHARS]

    @property
    def line(self) -> str:
        """The text the action wrote: the fold line, else ``after``."""
        return self.fold_line or self.after

    def place(self, head_end: int, tail_start: int) -> None:
        """Set ``region`` from the cut (``[0, head_end)`` head, ``[tail_start, …)`` tail)."""
        i = self.index
        self.region = "head" if 0 <= i < head_end else "tail" if i >= tail_start else "middle"

    def __getitem__(self, key: str) -> Any:
        if key in _KNOWN and (self.region is not None or key not in ("region", "line")):
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(_PLACED_KEYS if self.region is not None else _KEYS)

    def __len__(self) -> int:
        return len(_PLACED_KEYS) if self.region is not None else len(_KEYS)

    def __repr__(self) -> str:
        return f"SlimAction({self.as_dict()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (a result sent between processes) as the dict it reads as.
        return (dict, (self.as_dict(),))

    def as_dict(self) -> dict[str, Any]:
        """The action as the plain dict the report stores."""
        data = {
            "index": self.index,
            "kind": self.kind,
            "role": self.role,
            "tool_name": self.tool_name,
            "chars_before": self.chars_before,
            "chars_after": self.chars_after,
            "fold_line": self.fold_line,
            "before_excerpt": self._before[:BEFORE_EXCERPT_CHARS],
            "after": self.after,
        }
        if self.region is not None:
            data["region"] = self.region
            data["line"] = self.fold_line or self.after
        return data


def make_action(
    index: int,
    kind: str,
    message: Mapping[str, Any],
    before: str,
    after: str,
    *,
    tool_name: str | None = None,
    fold_line: str | None = None,
) -> SlimAction:
    """A ``SlimAction`` for a change to ``message`` (``before`` → ``after``)."""
    return SlimAction(
        index,
        kind,
        str(message.get("role") or ""),
        tool_name,
        before,
        after,
        fold_line,
        source=message.get("content"),
    )
