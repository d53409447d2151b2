"""Issue #27 item 3: a tool result whose call an earlier compaction summarized keeps its tool
name and target in the updated summary's Completed Actions."""

from __future__ import annotations

from datetime import date

from compaction import CompactionConfig, compact
from tests.compaction.builders import WORDS, assistant, call, result, system, user

DAY = date(2026, 12, 3)
FOLD = "[read_file] read logs/ingest-2025-03-14.log from line 1 (3,058 chars) [ref:11]"


def test_a_result_without_its_call_is_named_from_its_fold_line():
    messages = [
        system(),
        user("look at the ingest log"),
        # The call was summarized by an earlier compaction; its result row is its fold line.
        assistant("ok"),
        user("go"),
        result("gone-call", FOLD),
        assistant("the log shows checksum errors"),
        user("and now?"),
        assistant(None, call("c2", "terminal", command="ls logs")),
        result("c2", "ingest-2025-03-14.log\n"),
        assistant("done"),
        user("thanks"),
        assistant("you are welcome"),
    ]
    out = compact(
        messages,
        config=CompactionConfig(context_length=200_000, tail_token_budget=10, protect_first_n=1),
        now=DAY,
        force=True,
        tokenizer=WORDS,
    )
    body = out.report.summary_body or ""
    line = next(ln for ln in body.splitlines() if "ingest-2025-03-14.log from line" in ln)
    assert "(no arguments)" not in line
    assert "[tool: tool]" not in line
    assert line.split(". ", 1)[1].startswith("READ — [read_file] read logs/ingest-2025-03-14.log")
    assert line.endswith("[tool: read_file]")
