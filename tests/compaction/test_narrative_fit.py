"""A narrative the fact ledger leaves little room keeps every section, not only its first.

The shape of a real Claude Code session run from VS Code on Windows (a 32K window, five
compactions): the user's messages start with an ``<ide_opened_file>`` block, the agent ran
dozens of long ``curl … | python3 -c`` and ``ls -la "E:/AI/…"`` commands, so the ledger took
90 % of the summary; the narrative was then cut at a char position after a 330-char Active
Task (the IDE block included) and every later section read "Goal ...[truncated]...", on
every round, because the next round carried the cut Goal forward.
"""

from __future__ import annotations

import json
import re
from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact, should_compact
from compaction.narrative import CUT_MARK, fit_sections
from compaction.prompt import SECTIONS
from compaction.tokens import count_message_tokens

IDE_BLOCK = (
    "<ide_opened_file>The user opened the file e:\\CC-test\\claude-code-skills-agent-guide.md "
    "in the IDE. This may or may not be related to the current task.</ide_opened_file>"
)
GOAL = (
    "Find the most popular Claude Code skills: the superpowers set I need now, and one that "
    "writes a project-level PRD for my software projects; optimise them for my workflow."
)


def _windows_session(turns: int) -> list[dict]:
    messages: list[dict] = [
        {"role": "system", "content": "You are Claude Code."},
        {"role": "user", "content": f"{IDE_BLOCK}\n{GOAL}"},
    ]
    for i in range(turns):
        if i % 6 == 5:
            ask = f"问题{i}\nA，然后md操作只留下曾经执行过 step {i}"
            messages.append({"role": "user", "content": f"{IDE_BLOCK}\n{ask}"})
        command = (
            f'curl -s "https://api.github.com/search/repositories?q=claude+code+skill{i}'
            f'&sort=stars&order=desc&per_page=10" 2>/dev/null | python3 -c "import sys, json"'
            if i % 2
            else f'ls -la "E:/AI/TestProject-v2/reports/run-{i}/" 2>&1 | head -30'
        )
        call = {
            "id": f"t{i}",
            "type": "function",
            "function": {"name": "Bash", "arguments": json.dumps({"command": command})},
        }
        messages.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": [call]})
        output = "\n".join(f"line {j} of the output of step {i} " * 3 for j in range(40))
        messages.append({"role": "tool", "tool_call_id": f"t{i}", "content": output})
    return messages


def _summaries(messages: list[dict], rounds: int) -> list[str]:
    """The summary bodies of the first ``rounds`` compactions of the session as lived."""
    config = CompactionConfig(profile="hermes", context_length=32_000)
    current: list[dict] = []
    sizes: list[int] = []
    bodies: list[str] = []
    for at, message in enumerate(messages):
        current.append(message)
        sizes.append(count_message_tokens(message, config))
        following = messages[at + 1]["role"] if at + 1 < len(messages) else None
        if message["role"] != "tool" or following == "tool":
            continue
        if not should_compact(sum(sizes), config).should:
            continue
        out = compact(current, config=config, now=date(2026, 12, 4))
        if out.report.status != "compacted":
            continue
        bodies.append(out.report.summary_body or "")
        current, sizes = list(out.messages), list(out.report.output_message_tokens)
        if len(bodies) == rounds:
            break
    return bodies


def _section(body: str, name: str) -> str:
    narrative = body.split("\n## Fact Ledger\n")[0]
    match = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", narrative, re.M | re.S)
    assert match, (name, narrative)
    return match.group(1).strip()


def test_every_round_keeps_the_goal_and_the_later_sections():
    bodies = _summaries(_windows_session(160), rounds=3)
    assert len(bodies) == 3
    for body in bodies:
        assert "## Fact Ledger" in body
        goal = _section(body, "Goal")
        # The goal's start, written again every round (not a cut goal carried forward).
        assert goal.rstrip(CUT_MARK).strip(), body
        assert GOAL.startswith(goal.rstrip(CUT_MARK).strip()), goal
        assert "[truncated]" not in body.split("\n## Fact Ledger\n")[0]
        for name in SECTIONS:  # every section that says something is still there
            if name not in ("Blocked", "Key Decisions", "Resolved Questions", "Pending User Asks"):
                _section(body, name)
        assert _section(body, "Remaining Work").startswith("- Continue")


def test_the_ide_block_is_not_the_users_request():
    body = _summaries(_windows_session(160), rounds=1)[0]
    assert "<ide_opened_file>" not in body
    assert _section(body, "Active Task").startswith("问题")


def test_a_numbered_log_keeps_its_newest_lines_and_a_numbered_goal_its_first():
    actions = "\n".join(f"{n}. RAN `make test {n}` — passed (on 2026-12-04)" for n in range(1, 30))
    text = f"## Goal\nShip it.\n\n## Completed Actions\n{actions}\n\n## Remaining Work\nRelease."
    out = fit_sections(text, 260)
    kept = _section(out, "Completed Actions")
    assert kept.startswith(CUT_MARK)
    assert kept.endswith("29. RAN `make test 29` — passed (on 2026-12-04)")
    assert "1. RAN `make test 1` " not in kept
    assert _section(out, "Goal") == "Ship it."
    assert _section(out, "Remaining Work") == "Release."
    # A goal written as a numbered list (a real Claude Code request: "1. … 2. …") keeps its
    # start: it is what the user asked first, not a log.
    goal = "\n".join(
        f"{n}. Fix the weekly report's step {n} for the KPI dashboard" for n in range(1, 9)
    )
    text = f"## Goal\n{goal}\n\n## Completed Actions\n{actions}"
    out = fit_sections(text, 400)
    assert _section(out, "Goal").startswith("1. Fix the weekly report's step 1")
    assert _section(out, "Completed Actions").endswith(
        "29. RAN `make test 29` — passed (on 2026-12-04)"
    )


_BODY = st.one_of(
    st.just("None."),
    (
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=400)
        .map(str.strip)
        .filter(lambda t: not re.search(r"^## ", t, re.M))
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SECTIONS), _BODY), min_size=1, max_size=11), st.data())
def test_fitted_text_is_within_the_limit_and_keeps_each_heading(sections, data):
    text = "\n\n".join(f"## {name}\n{body}" for name, body in sections)
    headings_only = sum(len(f"## {name}\n{CUT_MARK}") + 2 for name, _ in sections)
    limit = data.draw(st.integers(headings_only, max(headings_only, len(text))))
    out = fit_sections(text, limit)
    assert len(out) <= limit
    if len(text) <= limit:
        assert out == text
        return
    said = [f"## {name}" for name, body in sections if body != "None."]
    assert re.findall(r"^## .*$", out, re.M) == (said or [f"## {n}" for n, _ in sections])


def test_a_goal_cut_by_an_earlier_round_is_written_whole_again_when_there_is_room():
    from compaction.markers import wrap_summary

    earlier = "## Active Task\nNone.\n\n## Goal\nFind the most popular Claude Code…"
    messages = [
        {"role": "system", "content": "You are Claude Code."},
        {"role": "user", "content": f"{IDE_BLOCK}\n{GOAL}"},
        {"role": "user", "content": wrap_summary(earlier)},
        *_windows_session(30)[2:],
    ]
    out = compact(messages, config=CompactionConfig(profile="hermes"), force=True)
    assert out.report.status == "compacted"
    assert _section(out.report.summary_body or "", "Goal") == GOAL
