"""Rendering one ledger at several sizes with one ``LayoutMemo`` (as the summary's fitting loop
does) writes what a fresh render at each size writes.

The memo holds sizes, command paths and labels by the identity of the fact tuple they were
worked out from; a layout also works on tuples it builds itself (the chosen facts, the paths
no chosen command holds), so a result kept for the wrong tuple would change what is written.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.ledger import Fact, Ledger, render
from compaction.ledger_render import LayoutMemo, _label

_DIRS = ("src", "src/app", "tests", "docs/a long directory name")
_NAMES = ("a.py", "b.py", "models.py", "views.py", "README.md", "x")


@st.composite
def _ledgers(draw: st.DrawFn) -> Ledger:
    """A ledger whose commands name its paths (some of them every time a path was used),
    whose error lines carry those commands' labels, with long commands and requests enough
    to be cut, and what earlier rounds left to recall."""
    paths = draw(
        st.lists(
            st.builds(lambda d, n: f"{d}/{n}", st.sampled_from(_DIRS), st.sampled_from(_NAMES)),
            min_size=1,
            max_size=25,
            unique=True,
        )
    )
    commands = []
    for at, path in enumerate(paths):
        verb = draw(st.sampled_from(["cat", "sed -n '1,80p'", "rg -n needle", "python", "ls"]))
        tail = " --flag value" * draw(st.integers(0, 12))  # past 100 chars: abbreviated
        commands.append(
            Fact(f"{verb} {path}{tail}", draw(st.integers(1, 4)), at, draw(st.sampled_from("0?1")))
        )
    files = [
        Fact(path, draw(st.integers(1, 5)), at, draw(st.sampled_from(["r", "p", "rw", "s", "x"])))
        for at, path in enumerate(paths)
    ]
    errors = [
        Fact(f"error line {i}: " + "word " * draw(st.integers(0, 30)), 1, i, _label(c.text))
        for i, c in enumerate(commands)
        if draw(st.booleans())
    ]
    count = st.integers(1, 3)
    facts = {
        "files": tuple(files),
        "commands": tuple(commands),
        "errors": tuple(errors),
        "exceptions": tuple(Fact(f"Name{i}Error", draw(count), i) for i in range(draw(count))),
        "tests": tuple(Fact(f"FAILED tests/t.py::test_{i}", 1, i) for i in range(draw(count))),
        "requests": tuple(
            Fact(f"request {i} " + "please " * draw(st.integers(0, 40)), 1, i)
            for i in range(draw(st.integers(0, 8)))
        ),
        "constraints": tuple(
            Fact(f"Never touch module {i}.", draw(count), i - 3) for i in range(draw(count))
        ),
    }
    left = draw(st.dictionaries(st.sampled_from(["files", "commands", "errors"]), count))
    return Ledger(facts, left)


@settings(max_examples=150, deadline=None)
@given(_ledgers(), st.lists(st.integers(150, 6_000), min_size=2, max_size=8))
def test_a_shared_memo_renders_every_size_as_a_fresh_render(ledger, sizes) -> None:
    memo = LayoutMemo()
    for size in sizes:
        assert render(ledger, size, memo) == render(ledger, size)


def test_the_memo_keeps_a_result_for_its_own_tuple_only() -> None:
    memo = LayoutMemo()
    one, other = (Fact("a.py"),), (Fact("a.py"), Fact("b.py"))
    assert memo.get("x", one, lambda: 1) == 1
    assert memo.get("x", one, lambda: 2) == 1  # kept
    assert memo.get("x", other, lambda: 3) == 3  # another tuple, even an equal-looking one
    assert memo.get("y", one, lambda: 4) == 4  # another question about the same tuple


def test_a_memo_shared_by_two_ledgers_with_the_same_commands_keeps_each_ledgers_paths() -> None:
    commands = (Fact("cat src/a.py", 1, 0), Fact("cat src/b.py", 1, 1))
    only_read = Ledger({"commands": commands, "files": (Fact("src/a.py", 1, 0, "r"),)})
    also_patched = Ledger({"commands": commands, "files": (Fact("src/a.py", 2, 2, "pr"),)})
    memo = LayoutMemo()
    for ledger in (only_read, also_patched, only_read):
        assert render(ledger, 2_000, memo) == render(ledger, 2_000)
    # The patched path is not only inside a command: it keeps a line of its own.
    assert "- [pr] src/a.py×2" in render(also_patched, 2_000, memo)[0]
