"""No one-line gist of a tool result in the deterministic summary begins or ends inside a
word (issue #37, item 3): a result longer than its gist is cut at the last word boundary
within the limit and marked "…" ("…: bool = Fal…" was a cut mid-word)."""

from __future__ import annotations

import re
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact
from compaction.redact import redact
from compaction.resume import _one_line
from tests.compaction.builders import WORDS, assistant, call, result, system, user

DAY = date(2026, 12, 3)
_TAIL = "Looked at it. " + "word " * 30


def _outcomes(bodies: list[str]) -> list[str]:
    """The outcome quoted by each action line of the summary, in call order."""
    messages = [system(), user("Look the names up.")]
    for i, body in enumerate(bodies):
        messages.append(assistant(None, call(f"c{i}", "lookup", key=f"n{i}")))
        messages.append(result(f"c{i}", body))
    messages += [assistant(_TAIL), user("Go on. " + "word " * 30), assistant(_TAIL)]
    out = compact(
        messages,
        config=CompactionConfig(context_length=200_000, tail_token_budget=60, protect_first_n=1),
        now=DAY,
        force=True,
        tokenizer=WORDS,
    )
    section = (out.report.summary_body or "").split("## Completed Actions")[1].split("## ")[0]
    lines = [line for line in section.splitlines() if re.match(r"\d+\. ", line)]
    return [re.sub(r" \[ref:\d+\].*", "", line.split(" — ", 1)[1]) for line in lines]


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


# Words of letters and digits (and CJK runs, which have no spaces between words), joined by
# spaces, newlines and punctuation: every word shorter than a gist's limit.
_latin = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=14)
_cjk = st.text(alphabet="漢字仮名交文章処理結果", min_size=1, max_size=6)
_sep = st.sampled_from([" ", "  ", "\n", ": ", ", ", ". ", "/", "-", "(", ") ", " = "])
# A body the secret redaction rewrites ("secret = 0000000a/0/0") is not quoted as written:
# what it keeps is the redacted text, so it says nothing about where a gist is cut.
_body = (
    st.lists(st.tuples(st.one_of(_latin, _cjk), _sep), min_size=20, max_size=90)
    .map(lambda parts: "".join(word + sep for word, sep in parts).strip())
    .filter(lambda body: redact(body)[1] == 0)
)


@settings(max_examples=40, deadline=None)
@given(bodies=st.lists(_body.filter(bool), min_size=1, max_size=3))
def test_no_gist_begins_or_ends_inside_a_word(bodies):
    outcomes = _outcomes(bodies)
    assert len(outcomes) == len(bodies)
    for body, gist in zip(bodies, outcomes, strict=True):
        source = " ".join(body.split())
        cut = gist.endswith("…") and gist != source
        head = gist[:-1] if cut else gist
        # It begins where the result begins (nothing of a word before its first char)...
        assert source.startswith(head), (gist, source[:200])
        if not cut:
            continue
        # ... and, cut short, ends where a word ends: not both the last char kept and the
        # next one are word chars (a CJK character is a word of its own: cut at a character).
        after = source[len(head)]
        latin_cut = _is_word_char(head[-1]) and _is_word_char(after)
        assert not latin_cut or {head[-1], after} <= set("漢字仮名交文章処理結果"), (gist, source)


def test_a_cjk_run_is_cut_at_a_character_and_a_word_longer_than_the_limit_inside_it():
    assert _one_line("処理結果 " + "漢字" * 40, 12) == "処理結果 漢字漢字漢字…"
    assert _one_line("x" * 30, 10) == "x" * 9 + "…"
    assert _one_line("ok: " + "x" * 30, 10) == "ok:…"


def test_a_slice_of_a_longer_result_drops_its_last_partial_word():
    # The outcome reads the first 300 chars of a result: a word cut by that slice is not quoted.
    body = ("alpha" + " " * 20) * 10 + "bravo charlie " * 40
    (gist,) = _outcomes([body])
    assert gist.endswith("…")
    assert not re.search(r"\b(?:b|br|bra|brav|c|ch|cha|char|charl|charli)…$", gist), gist
