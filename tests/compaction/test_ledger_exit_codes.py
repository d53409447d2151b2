"""The "exited with code N" search of a command's result (``_exited``) finds what the plain
``_EXITED.search`` over the same chars finds: it is only skipped where no "exit" can match."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.ledger import _EXITED, _exited

# Reports as tools write them, in several cases and with the letters IGNORECASE also takes
# for "i" ("ı", "İ"); near misses, digits and separators around them.
_REPORTS = st.builds(
    "{} {}{}{}".format,
    st.sampled_from(["exit", "Exit", "EXIT", "exıt", "EXİT", "exited with", "Exited With",
                     "exİted with", "éxit", "exi\u0307t", "exit_"]),
    st.sampled_from(["code", "CODE", "status", "Status", "cod"]),
    st.sampled_from([": ", " ", ":", "", "  "]),
    st.sampled_from(["0", "1", "-1", "127", "x"]),
)  # fmt: skip
_PIECES = (" ", ":", "x", "é", "\n", "_", "ex", "it", "1")

_texts = st.lists(_REPORTS | st.sampled_from(_PIECES) | st.text(max_size=3), max_size=8).map(
    "".join
)


@settings(max_examples=3000, deadline=None)
@given(_texts, st.none() | st.integers(0, 40))
def test_the_guarded_search_finds_what_the_search_finds(text: str, stop: int | None) -> None:
    expected = _EXITED.search(text, 0, len(text) if stop is None else stop)
    found = _exited(text, stop)
    assert (found and found.span()) == (expected and expected.span())
    assert (found and found.groups()) == (expected and expected.groups())
