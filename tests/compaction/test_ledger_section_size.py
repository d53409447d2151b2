"""A ledger section's size worked out from its facts' lengths (``_section_size``) is the size
of the lines ``_lines`` writes for them (the reference below, how it was worked out before),
for every kind, whatever the facts hold."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.ledger import KINDS, Fact
from compaction.ledger_facts import _TITLES
from compaction.ledger_render import _line_size, _lines, _section_size


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
