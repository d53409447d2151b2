"""A ledger section's size worked out from its facts' lengths (``_section_size``) is the size
of the lines ``_lines`` writes for them (the reference below, how it was worked out before),
for every kind, whatever the facts hold; and the facts ``_choose`` keeps by those sizes, with
each fact's cost worked out once, are those it kept measuring written lines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.ledger import KINDS, Fact
from compaction.ledger_facts import _MAX_REQUESTS, _TITLES
from compaction.ledger_render import (
    _LONG_COMMAND,
    LayoutMemo,
    _abbreviated,
    _access,
    _choose,
    _file_entry,
    _line_size,
    _lines,
    _newest,
    _rank,
    _section_size,
    _times,
)


def _reference(kind: str, facts: list[Fact]) -> int:
    written = sum(len(line) + 1 for line in _lines(kind, facts))
    return len(_TITLES[kind]) + 5 + written + (40 if facts else 0)


_facts = st.lists(
    st.builds(
        Fact,
        st.text(min_size=1, max_size=30),
        st.integers(1, 120),
        st.integers(-5, 50),
        st.sampled_from(["", "0", "?", "1", "127", "r", "pr", "rw", "x", "s", "src/a.py"]),
    ),
    max_size=25,
)


@settings(max_examples=1_500, deadline=None)
@given(st.sampled_from(KINDS), _facts)
def test_the_size_from_lengths_is_the_size_of_the_written_lines(kind: str, facts) -> None:
    assert _section_size(kind, facts) == _reference(kind, facts)
    if kind not in ("files", "exceptions"):
        for fact in facts:
            assert _line_size(kind, fact) == len(_lines(kind, (fact,))[0])


def _reference_choose(kind: str, facts: tuple[Fact, ...], room: int) -> tuple[Fact, ...]:
    """``_choose`` as it was: every cost and the final size measured on written lines."""
    if kind == "requests":
        facts = facts[-_MAX_REQUESTS:]
    if _reference(kind, list(facts)) <= room:
        return tuple(facts)
    ranked = sorted(facts, key=_rank if kind != "requests" else _newest, reverse=True)
    used = _reference(kind, []) + 40
    groups: set[str] = set()
    chosen: list[Fact] = []
    abbreviations: set[str] = set()
    for fact in ranked:
        if kind == "files":
            cost = len(_file_entry(fact)) + 2
            if _access(fact) not in groups:
                cost += len(_access(fact)) + 4
        elif kind == "exceptions":
            cost = len(fact.text) + len(_times(fact)) + 2
        else:
            cost = len(_lines(kind, (fact,))[0]) + 1
        if used + cost > room:
            if kind != "commands" or len(fact.text) <= _LONG_COMMAND:
                continue
            fact = _abbreviated(fact)
            cost = len(_lines(kind, (fact,))[0]) + 1
            if used + cost > room or fact.text in abbreviations:
                continue
            abbreviations.add(fact.text)
        used += cost
        chosen.append(fact)
        if kind == "files":
            groups.add(_access(fact))
    while chosen and _reference(kind, chosen) > room:
        chosen.pop()
    return tuple(sorted(chosen, key=lambda f: f.last))


_long_facts = st.lists(
    st.builds(
        Fact,
        st.text(min_size=1, max_size=30) | st.text(min_size=90, max_size=160),
        st.integers(1, 5),
        st.integers(-5, 50),
        st.sampled_from(["", "0", "?", "1", "r", "pr", "x"]),
    ),
    max_size=25,
).map(tuple)


@settings(max_examples=1_500, deadline=None)
@given(st.sampled_from(KINDS), _long_facts, st.integers(0, 3_000), st.booleans())
def test_choosing_by_known_costs_chooses_as_measuring_the_lines(
    kind: str, facts: tuple[Fact, ...], room: int, shared: bool
) -> None:
    memo = LayoutMemo() if shared else None
    for _ in range(2):  # the second time from what the memo kept
        assert _choose(kind, facts, room, memo=memo) == _reference_choose(kind, facts, room)
