"""Which committed rotation a request that continues no session starts with.

A client that rebuilds its history instead of appending to it (aider moves its "files added
to the chat" turns behind the history it grew) sends no request that is a prefix of the
next, so each starts a session of its own. When such a request starts with the messages a
committed rotation replaced, the model may read that rotation's head + summary + kept tail
instead (``service._use_replaced_prefix``).

Finding that rotation used to mean reading and hashing the rows of the key's newest runs on
every such request (hundreds of milliseconds under load). Each run is now indexed once
(``index``): the hash of what it replaced is a column, and one indexed query over the
request's own prefix hashes finds every run it starts with (``candidates``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from hermes_web.models import ApiKey, Compaction, Message
from hermes_web.openai_compat.matching import prefix_hashes

# How many not yet indexed runs one request indexes (runs committed before the index
# existed, or by a path that does not index): a bound on what one request may read.
INDEX_PER_REQUEST = 4
# Hashes bound per query (SQLite's limit on variables is far above; a long history is
# looked up in a few queries rather than one huge one).
HASHES_PER_QUERY = 2_000
# The most rows of a run's result read back (as the chat reads a compacted context).
RESULT_ROWS = 10_000
# Large columns no lookup needs.
UNUSED = ("config", "native_record", "summarizer_transcript", "native_summary", "error")


@dataclass(frozen=True)
class Replaced:
    """A run the request starts with: the first ``common`` messages of the request equal
    its input's; ``context`` is what the model reads in place of them."""

    run: Compaction
    common: int
    context: list[dict]


def _result_rows(run: Compaction) -> list[tuple]:
    return list(run.final_rows(RESULT_ROWS).values_list(*Message.ENGINE_COLUMNS, "is_summary"))


def index(run: Compaction) -> list[str]:
    """Compute and store ``run``'s replaced-prefix hashes (see the model's fields).

    Nothing is usable ([]) when its result has no summary, when it replaced nothing, or when
    the kept tail is longer than its input."""
    source = [
        Message.engine_dict(*row) for row in run.input_rows().values_list(*Message.ENGINE_COLUMNS)
    ]
    rows = _result_rows(run)
    summary = [position for position, row in enumerate(rows) if row[-1]]
    hashes: list[str] = []
    if summary:
        kept_tail = len(rows) - summary[-1] - 1  # the tail is the input's last messages
        replaced = len(source) - kept_tail
        if replaced >= 1:
            hashes = prefix_hashes(source)[replaced - 1 :]
    run.replaced_hashes = hashes
    run.replaced_prefix_hash = hashes[0] if hashes else ""
    Compaction.objects.filter(pk=run.pk).update(
        replaced_hashes=hashes, replaced_prefix_hash=run.replaced_prefix_hash
    )
    return hashes


def _common(stored: list[str], hashes: list[str], position: dict[str, int]) -> int:
    """How many leading messages the request shares with the run's input, given that it
    shares at least the replaced part (``stored[0]`` is one of its hashes)."""
    replaced = position[stored[0]]
    common = replaced
    for offset, digest in enumerate(stored[1:], start=replaced):
        if offset >= len(hashes) or hashes[offset] != digest:
            break
        common += 1
    return common


def _newest_first(run: Compaction) -> tuple[float, int]:
    finished = run.finished_at.timestamp() if run.finished_at else 0.0
    return (-finished, -run.pk)


def find(key: ApiKey, hashes: list[str]) -> Replaced | None:
    """The committed rotation of ``key``'s sessions the request (prefix hashes ``hashes``)
    shares the most leading messages with (the newest among equals), or None.

    Usually two queries: the candidates, then the chosen run's result rows."""
    if not hashes:
        return None
    position = {digest: index + 1 for index, digest in enumerate(hashes)}
    runs = (
        Compaction.objects.committed()
        .filter(
            session__api_key_id=key.pk,
            mode=Compaction.Mode.ROTATION,
            result_session__isnull=False,
        )
        .defer(*UNUSED)
        .order_by("-finished_at", "-pk")
    )
    found: dict[int, Compaction] = {}
    for start in range(0, len(hashes), HASHES_PER_QUERY):
        chunk = hashes[start : start + HASHES_PER_QUERY]
        # The first chunk also brings the runs not indexed yet (a few are indexed below).
        unindexed = Q(replaced_hashes__isnull=True) if start == 0 else Q(pk__in=[])
        for run in runs.filter(Q(replaced_prefix_hash__in=chunk) | unindexed):
            found.setdefault(run.pk, run)
    best: tuple[int, Compaction] | None = None
    budget = INDEX_PER_REQUEST
    for run in sorted(found.values(), key=_newest_first):
        stored = run.replaced_hashes
        if stored is None:
            if budget == 0:
                continue
            budget -= 1
            stored = index(run)
        if not stored or stored[0] not in position:
            continue
        common = _common(stored, hashes, position)
        if best is None or common > best[0]:
            best = (common, run)
    if best is None:
        return None
    common, run = best
    rows = _result_rows(run)
    stored = run.replaced_hashes or []
    unshared = len(stored) - 1 - (common - position[stored[0]])  # input's tail not sent
    result = [Message.engine_dict(*row[:-1]) for row in rows]
    return Replaced(run, common, result[: len(result) - unshared])
