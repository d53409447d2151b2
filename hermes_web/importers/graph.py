"""Walking parent links (entry trees, session chains) without ever looping.

Every importer that follows ``parent`` ids up a tree goes through ``walk_up``: a file whose
entries name each other as parents (or an entry that is its own parent) is a ``Cycle``,
raised the moment a node comes back, so a 388-byte file can no longer spin forever.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


class Cycle(ValueError):
    """``node`` came back while walking up from ``path[0]``: it is its own ancestor."""

    def __init__(self, node: Hashable, path: list) -> None:
        self.node, self.path = node, path
        super().__init__(f"{node!r} is its own ancestor (parent cycle)")


def walk_up(
    start: K | None,
    parent_of: Callable[[K], K | None],
    *,
    stop: Callable[[K], bool] | None = None,
) -> tuple[list[K], K | None]:
    """``([start, its parent, ...], end)``: follows ``parent_of`` until it gives None or
    reaches a node for which ``stop`` is true (``end``, not in the list; None at a root).

    Raises ``Cycle`` when a node comes back (``Cycle.path`` holds the nodes walked), so the
    caller refuses the file or stops where the loop starts, as it sees fit."""
    path: list[K] = []
    seen: set[K] = set()
    node = start
    while node is not None and not (stop is not None and stop(node)):
        if node in seen:
            raise Cycle(node, path)
        seen.add(node)
        path.append(node)
        node = parent_of(node)
    return path, node


def top_of(start: K, parent_of: Callable[[K], K | None]) -> K:
    """The last node up from ``start``: its root, or, in a loop (stored data may loop), the
    last node before the walk came back round."""
    try:
        path, _ = walk_up(start, parent_of)
    except Cycle as cycle:
        path = cycle.path
    return path[-1]
