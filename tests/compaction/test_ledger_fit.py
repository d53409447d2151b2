"""The summary keeps the fullest ledger that fits its token ceiling.

The shape of a real Claude Code session (tens of ``curl -s "https://api.github.com/search/
repositories?q=claude+code+…"`` and ``ls -la ~/.claude/…`` commands, files under
``E:/AI/TestProject-v2/``): as the char budget is searched, a larger budget can choose other
facts and come out with fewer tokens than a smaller one did (a long command left out, two
short ones in), so the last text that fitted is not always the fullest.
"""

from __future__ import annotations

import random

from compaction.engine import _with_ledger
from compaction.ledger import Fact, Ledger
from compaction.ledger_render import LayoutMemo
from compaction.tokens import tiktoken_counter

WORDS = ["claude", "code", "skill", "plugin", "openai", "codex"]


def _session_ledger(seed: int) -> Ledger:
    rng = random.Random(seed)
    commands = []
    for i in range(rng.randint(20, 50)):
        query = "+".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5)))
        if rng.random() < 0.5:
            text = (
                f'curl -s "https://api.github.com/search/repositories?q={query}&sort=stars'
                f'&per_page={rng.randint(5, 30)}" 2>/dev/null | head -{rng.randint(5, 100)}'
            )
        else:
            text = f"ls -la ~/.claude/{query.replace('+', '/')}/ 2>&1"
        commands.append(Fact(text, rng.randint(1, 3), i, rng.choice(["0", "0", "1"])))
    files = tuple(
        Fact(
            f"E:/AI/TestProject-v2/{rng.choice(['docs', 'scripts', 'reports'])}/f{i}."
            + rng.choice(["md", "py", "csv"]),
            rng.randint(1, 4),
            i,
            rng.choice(["r", "pr", "w"]),
        )
        for i in range(rng.randint(10, 40))
    )
    return Ledger({"commands": tuple(commands), "files": files})


def test_the_fullest_text_that_fits_is_kept_not_the_last_tried():
    count = tiktoken_counter("gpt-4o-mini")
    cap = 1_200
    for seed in (11, 12, 23, 56):
        tried: list[int] = []

        def counter(text: str, tried: list[int] = tried) -> int:
            tried.append(count(text))
            return tried[-1]

        body = "## Goal\n" + "Find the best skills. " * 20
        text, _ = _with_ledger(body, _session_ledger(seed), 6_400, cap, counter, LayoutMemo())
        assert count(text) <= cap
        assert count(text) == max(n for n in tried if n <= cap), (seed, tried)


def test_a_ledger_short_of_its_char_budget_but_over_its_tokens_is_cut_to_fit():
    # A Claude Code session of Read/Edit paths and a few commands: the whole ledger takes
    # 3,000-odd of the 6,400 chars the summary may take, yet 1-2 % more tokens than allowed.
    files = tuple(
        Fact(f"C:/Users/eduar/Projects/odoo/addons/kpi_{i}/models/report_{i}.py", 2, i, "pr")
        for i in range(30)
    )
    commands = tuple(
        Fact(
            f"docker exec odoo_docker-web-1 odoo -d odoo18 -u kpi_{i} --stop-after-init", 1, i, "0"
        )
        for i in range(10)
    )
    ledger = Ledger({"files": files, "commands": commands})
    count = tiktoken_counter("gpt-4o-mini")
    body = "## Goal\nWeekly KPI dashboard."
    whole, _ = _with_ledger(body, ledger, 6_400, 100_000, count, LayoutMemo())
    assert len(whole) < 6_400 * 0.97**7  # the budget, shrunk 7 times by 3 %, stays above it
    cap = count(whole) - 20
    text, written = _with_ledger(body, ledger, 6_400, cap, count, LayoutMemo())
    assert count(text) <= cap
    assert 0 < written.total() < ledger.total()
