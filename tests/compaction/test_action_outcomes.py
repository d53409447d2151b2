"""Every action line of the deterministic summary states its call's real outcome and its
arguments (issue #37, item 3): a search says its pattern and its match count, never "no
output" for a JSON result that had one."""

from __future__ import annotations

import json
import re
import string
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact
from tests.compaction.builders import WORDS, assistant, call, result, system, user

DAY = date(2026, 12, 3)


def _actions(messages) -> list[str]:
    out = compact(
        messages,
        config=CompactionConfig(context_length=200_000, tail_token_budget=60, protect_first_n=1),
        now=DAY,
        force=True,
        tokenizer=WORDS,
    )
    body = out.report.summary_body or ""
    section = body.split("## Completed Actions")[1].split("## ")[0]
    return [line for line in section.splitlines() if re.match(r"\d+\. ", line)]


def _conversation(pattern: str, path: str, hits: int, exit_code: int) -> list[dict]:
    found = {
        "total_count": hits,
        "matches": [{"path": f"{path}/m{i}.py", "line": i + 1} for i in range(hits)],
    }
    return [
        system(),
        user("Find where the source is loaded."),
        assistant(None, call("s1", "search_files", pattern=pattern, path=path)),
        result("s1", json.dumps(found)),
        assistant(None, call("t1", "terminal", command="make check")),
        result("t1", json.dumps({"output": "", "exit_code": exit_code})),
        assistant("Looked at both. " + "word " * 30),
        user("Go on. " + "word " * 30),
        assistant("On it. " + "word " * 30),
    ]


def test_a_search_line_names_its_pattern_and_its_matches():
    lines = _actions(_conversation("source", ".", 3, 0))
    search = next(line for line in lines if "SEARCHED" in line)
    assert "SEARCHED 'source' in ." in search
    assert "total_count: 3" in search
    assert "no output" not in search


_words = st.text(alphabet=string.ascii_lowercase, min_size=3, max_size=12)


@settings(max_examples=25, deadline=None)
@given(
    pattern=_words,
    path=_words,
    hits=st.integers(min_value=0, max_value=40),
    exit_code=st.integers(min_value=0, max_value=255),
)
def test_every_action_line_states_its_result(pattern, path, hits, exit_code):
    lines = _actions(_conversation(pattern, path, hits, exit_code))
    search = next(line for line in lines if "SEARCHED" in line)
    assert f"'{pattern}' in {path}" in search
    assert f"total_count: {hits};" in search
    assert f"matches: {hits} item" in search
    ran = next(line for line in lines if "RAN `make check`" in line)
    assert f"exit_code: {exit_code}" in ran or f"exit {exit_code}" in ran


def test_no_generated_tool_output_begins_inside_a_word():
    # The demo and benchmark conversations' tool outputs are whole lines: a summary quoting
    # the start of one starts at a word ("n result def load_28…" was a cut mid-word).
    from compaction import generate_conversation
    from compaction.synthetic import _corpus

    corpus = _corpus()
    bodies = [
        m["content"]
        for m in generate_conversation(300, seed=1)
        if m["role"] == "tool" and isinstance(m["content"], str) and m["content"][:40] in corpus
    ]
    assert len(bodies) > 20
    for body in bodies:
        at = corpus.find(body[:200])
        assert at == 0 or corpus[at - 1] == "\n", body[:40]
