"""Which stored row a ``[ref:N]`` opens, for the summary panel and the chat.

N is an index into the INPUT of the compaction that wrote the reference. An updated
(iterative) summary carries lines of earlier summaries forward, and a fold line an earlier
compaction wrote may be quoted by a later one, so the N of a line is not always the index of
the run being shown. ``RefResolver`` finds the writer of each line:

1. the run of the chain (this one, then the earlier committed ones) whose slimming action at
   index N wrote a line quoted in the text (a fold, a stub, a pointer);
2. else the oldest run whose summary holds the same line (a carried-forward action line);
3. else the run being shown (its summary wrote the reference from its own input).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.urls import reverse

from hermes_web.models import Compaction

REF_RE = re.compile(r"\[ref:(\d+)\]")
# A text longer than this is a message, not a line a compaction wrote (the engine's own
# rule for "already folded", compaction.slimming).
FOLDED_MAX_CHARS = 800


class RefResolver:
    """Resolves ``[ref:N]`` of a text to ``(session public id, position)`` of the row.

    ``runs``: the run being shown first, then the chain's earlier committed runs, newest
    first (``chain_of``). Input rows and action indexes are read once per run, when needed.
    """

    def __init__(self, runs: Sequence[Compaction]) -> None:
        self.runs = list(runs)
        self._rows: dict[int, list[tuple[str, int]]] = {}
        self._lines: dict[int, dict[int, list[str]]] = {}

    def rows(self, run: Compaction) -> list[tuple[str, int]]:
        if run.pk not in self._rows:
            self._rows[run.pk] = list(
                run.input_rows().values_list("session__public_id", "position")
            )
        return self._rows[run.pk]

    def written_lines(self, run: Compaction) -> dict[int, list[str]]:
        """Per input index, the lines the run's slimming actions wrote there."""
        if run.pk not in self._lines:
            lines: dict[int, list[str]] = {}
            for action in (run.report or {}).get("slimming") or ():
                index, line = action.get("index"), action.get("line") or action.get("fold_line")
                if isinstance(index, int) and line:
                    lines.setdefault(index, []).append(str(line))
            self._lines[run.pk] = lines
        return self._lines[run.pk]

    def writer(self, ref: int, line: str) -> Compaction | None:
        """The run that wrote ``[ref:ref]`` in ``line`` (see the module doc)."""
        if not self.runs:
            return None
        for run in self.runs:
            if any(written in line for written in self.written_lines(run).get(ref, ())):
                return run
        stripped = line.strip()
        if stripped and len(self.runs) > 1:
            for run in reversed(self.runs):
                if stripped in str((run.report or {}).get("summary") or ""):
                    return run
        return self.runs[0]

    def folded_from(self, text: str) -> tuple[str, int] | None:
        """The original row of a short text a compaction wrote in place of it (a fold, a
        stub: it quotes the line a run's action wrote at its ``[ref:N]``), else None."""
        if len(text) > FOLDED_MAX_CHARS:
            return None
        for match in REF_RE.finditer(text):
            ref = int(match.group(1))
            for run in self.runs:
                if any(written in text for written in self.written_lines(run).get(ref, ())):
                    rows = self.rows(run)
                    return rows[ref] if 0 <= ref < len(rows) else None
        return None

    def target(self, ref: int, line: str) -> tuple[str, int] | None:
        run = self.writer(ref, line)
        if run is None:
            return None
        rows = self.rows(run)
        return rows[ref] if 0 <= ref < len(rows) else None

    def segments(self, text: str) -> list[dict[str, Any]]:
        """``text`` split around its references, line by line: ``{"text"}`` or ``{"text",
        "ref", "href"}`` (``href`` "" when the row is unknown)."""
        segments: list[dict[str, Any]] = []
        for line in (text or "").splitlines(keepends=True):
            last = 0
            for match in REF_RE.finditer(line):
                if match.start() > last:
                    segments.append({"text": line[last : match.start()]})
                ref = int(match.group(1))
                found = self.target(ref, line)
                href = reverse("message_detail", args=list(found)) if found else ""
                segments.append({"text": match.group(0), "ref": ref, "href": href})
                last = match.end()
            if last < len(line):
                segments.append({"text": line[last:]})
        # Consecutive plain pieces read as one (fewer template iterations).
        merged: list[dict[str, Any]] = []
        for segment in segments:
            if merged and "ref" not in segment and "ref" not in merged[-1]:
                merged[-1] = {"text": merged[-1]["text"] + segment["text"]}
            else:
                merged.append(segment)
        return merged


def chain_of(run: Compaction) -> list[Compaction]:
    """``run``, then the committed runs of its chain that finished before it, newest first."""
    earlier = (
        Compaction.objects.for_lineage(run.session)
        .committed()
        .exclude(pk=run.pk)
        .order_by("-finished_at", "-pk")
    )
    moment = run.finished_at or run.queued_at
    if moment is not None:
        earlier = earlier.filter(finished_at__lte=moment)
    return [run, *earlier]


def lineage_runs(session: Any) -> list[Compaction]:
    """The committed runs of ``session``'s chain, newest first (for a ``RefResolver``)."""
    return list(Compaction.objects.for_lineage(session).committed().order_by("-finished_at", "-pk"))
