"""The fact ledger appended to every hermes summary, and the resume-summary fixes of issue #26.

Each fixture reproduces a shape met in a real public transcript (no transcript is copied):
Codex reading files with ``sed -n``/``nl``/``rg`` and patching with an ``apply_patch``
heredoc; a ``git diff`` with ``+++ b/`` headers; a TypeScript listing holding
``const { data, error } = await query;``; a JSON ``{"output": "import …"}`` envelope; a
mid-session question; a "Do NOT call any tools" constraint marked CRITICAL that lived in the
previous summary; imported rows carrying their own ``created_at``.
"""

from __future__ import annotations

import json
from datetime import date

from compaction import CompactionConfig, LLMSummarizer, compact
from compaction.ledger import Fact, Ledger, extract, merge, parse, render
from compaction.markers import wrap_summary
from tests.compaction.builders import WORDS, assistant, call, result, system, user

DAY = date(2026, 12, 4)
CONFIG = CompactionConfig(context_length=200_000, tail_token_budget=60, protect_first_n=1)


def _compact(messages, config=CONFIG, **kw):
    return compact(messages, config=config, now=DAY, force=True, tokenizer=WORDS, **kw)


def _tail() -> list[dict]:
    return [user("tail question " + "word " * 40), assistant("tail answer " + "word " * 40)]


def _codex_session() -> list[dict]:
    patch = (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: web/src/lib/db.ts\n@@\n-a\n+b\n"
        "*** Add File: web/src/lib/cache.ts\n+export {}\n*** End Patch\nEOF"
    )
    listing = (
        "import { supabase } from './client';\n"
        "export async function load() {\n"
        "  const { data, error } = await query;\n"
        "  if (error) throw new DatabaseError(error.message);\n"
        "  return data;\n}\n"
    )
    shell = "exec_command"
    return [
        system(),
        user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        user("Make the dashboard load faster. Do not change the public API."),
        assistant(
            None, call("c1", shell, cmd=["bash", "-lc", "sed -n '1,200p' web/src/lib/db.ts"])
        ),
        result("c1", json.dumps({"output": listing, "metadata": {"exit_code": 0}})),
        assistant(None, call("c2", shell, cmd=["bash", "-lc", "rg -n 'query' web/src/app"])),
        result("c2", json.dumps({"output": "web/src/app/page.tsx:3: const { error } = query;"})),
        assistant(None, call("c3", shell, cmd=["bash", "-lc", "nl -ba web/src/app/page.tsx"])),
        result("c3", json.dumps({"output": "1 import x\n2 console.error(err)\n"})),
        assistant(None, call("c4", shell, cmd=["bash", "-lc", patch])),
        result("c4", json.dumps({"output": "Success. Updated the following files:\nM db.ts"})),
        assistant(None, call("c5", shell, cmd=["bash", "-lc", "npm test -- --run"])),
        result(
            "c5",
            json.dumps(
                {
                    "output": "FAIL src/lib/db.test.ts\nTypeError: cache is not a function\n"
                    "Tests: 1 failed, 9 passed",
                    "metadata": {"exit_code": 1},
                }
            ),
        ),
        assistant(None, call("c6", shell, cmd=["bash", "-lc", "npm test -- --run"])),
        result("c6", json.dumps({"output": "Tests: 10 passed", "metadata": {"exit_code": 0}})),
        # Claude Code's Bash results carry no exit code.
        assistant(None, call("b1", "Bash", command="cat web/src/lib/errors.ts")),
        result("b1", "export class DatabaseError extends Error {}\nerror: string;\n"),
        assistant(None, call("c7", shell, cmd=["bash", "-lc", "git diff"])),
        result(
            "c7", "diff --git a/web/next.config.js b/web/next.config.js\n+++ b/web/next.config.js"
        ),
        assistant("Done: the dashboard caches its query."),
        *_tail(),
    ]


def test_shell_only_agent_gets_its_files_from_commands_and_patch_headers():
    report = _compact(_codex_session()).report
    ledger = report.summary_body.split("## Fact Ledger")[1]
    files = ledger.split("### Files")[1].split("### ")[0]
    access = {fact.text: fact.detail for fact in parse(report.summary_body).of("files")}
    assert access["web/src/lib/db.ts"] == "pr"  # read with sed -n, patched by apply_patch
    assert access["web/src/lib/cache.ts"] == "w"  # added by the patch
    assert access["web/src/app/page.tsx"] == "r"  # nl -ba
    assert access["web/src/app"] == "s"  # rg
    assert "None" not in files
    # Paths are grouped by their use, each written in full.
    assert "- [pr] web/src/lib/db.ts×2\n" in files
    # Read only by a written command: kept inside it ("nl -ba web/src/app/page.tsx").
    assert "web/src/app/page.tsx" not in files
    assert "- npm test -- --run ×2\n" in ledger  # the newest run's code (0), counted
    written = report.to_dict()["ledger"]["facts"]["files"]
    assert "web/src/lib/db.ts" in [fact["text"] for fact in written]


def test_error_lines_come_only_from_outputs_that_are_errors():
    body = _compact(_codex_session()).report.summary_body
    errors = "\n".join(f.text for f in parse(body).of("errors"))
    assert "TypeError: cache is not a function" in errors
    assert "const { data, error }" not in body.split("## Fact Ledger")[1]
    assert "console.error" not in errors
    blocked = body.split("## Blocked")[1].split("## ")[0]
    assert "const { data, error }" not in blocked
    assert "DatabaseError" not in blocked
    assert "DatabaseError" not in errors
    # Exception names are kept from any tool result: naming one costs a word.
    assert "DatabaseError" in body.split("### Exception Names")[1]


def test_diff_headers_name_the_files():
    ledger = extract(
        [
            assistant(None, call("d", "Bash", command="git diff HEAD~1")),
            result("d", "ok"),
            assistant(None, call("p", "apply_patch", input="--- a/x.py\n+++ b/src/x.py\n@@")),
            result("p", "ok"),
        ]
    )
    assert ("src/x.py", "p") in {(f.text, f.detail) for f in ledger.of("files")}


def test_envelopes_are_decoded_before_quoting_an_outcome():
    messages = [
        system(),
        user("Look at the route handler."),
        assistant(None, call("t1", "terminal", command="cat app/api/route.ts")),
        result("t1", json.dumps({"output": "import { NextResponse } from 'next/server';"})),
        assistant("read it " + "word " * 30),
        *_tail(),
    ]
    actions = _compact(messages).report.summary_body.split("## Completed Actions")[1]
    assert "import { NextResponse } from 'next/server';" in actions
    assert '{"output"' not in actions


def test_goal_is_the_first_request_not_a_mid_session_question():
    messages = [
        system(),
        user("Build a team stats page for the admin dashboard."),
        assistant("ok " + "word " * 30),
        user("Why do we need stats for the team?"),
        assistant("Because admins asked for it. " + "word " * 30),
        *_tail(),
    ]
    config = CompactionConfig(context_length=200_000, tail_token_budget=60, protect_first_n=2)
    body = _compact(messages, config).report.summary_body
    goal = body.split("## Goal")[1].split("## ")[0].strip()
    assert goal == "Build a team stats page for the admin dashboard."


def test_an_explicit_change_of_goal_becomes_the_goal():
    messages = [
        system(),
        user("Build a team stats page."),
        assistant("ok " + "word " * 30),
        user("Change of plan: port the billing page to the new API instead."),
        assistant("ok " + "word " * 30),
        user("Why is the build slow?"),
        assistant("caching " + "word " * 30),
        *_tail(),
    ]
    body = _compact(messages).report.summary_body
    goal = body.split("## Goal")[1].split("## ")[0].strip()
    assert goal.startswith("Change of plan: port the billing page")


def test_a_constraint_of_the_previous_summary_survives_the_next_compaction():
    previous = (
        "## Active Task\nKeep going.\n\n## Goal\nAnswer from memory.\n\n"
        "## Constraints & Preferences\n- CRITICAL: Do NOT call any tools.\n\n## Remaining Work\n- go"
    )
    messages = [
        system(),
        user(wrap_summary(previous)),
        assistant("understood " + "word " * 30),
        user("What did we decide about caching?"),
        assistant("We keep it. " + "word " * 30),
        *_tail(),
    ]
    first = _compact(messages).report.summary_body
    assert "- CRITICAL: Do NOT call any tools." in first.split("### Constraints")[1]
    # ... and the round after that, through the ledger this time.
    again = [system(), user(wrap_summary(first)), assistant("ok " + "word " * 30), *_tail()]
    second = _compact(again).report.summary_body
    assert "CRITICAL: Do NOT call any tools." in second.split("### Constraints")[1]


def test_actions_of_imported_rows_are_dated_by_their_own_created_at():
    messages = [
        system(),
        user("Check the disk."),
        {**assistant(None, call("h", "terminal", command="df -h")), "created_at": "2025-03-09"},
        {**result("h", json.dumps({"output": "ok", "exit_code": 0})), "created_at": "2025-03-09"},
        assistant("done " + "word " * 30),
        *_tail(),
    ]
    actions = _compact(messages).report.summary_body.split("## Completed Actions")[1]
    assert "(on 2025-03-09)" in actions
    assert "(on 2026-12-04)" not in actions.split("## ")[0]


def test_a_ledger_that_does_not_fit_says_how_many_facts_recall_has():
    ledger = Ledger({"commands": tuple(Fact(f"make target-{i}", 1, i, "0") for i in range(300))})
    text, written = render(ledger, 2_000)
    assert len(text) <= 2_000
    kept = len(written.of("commands"))
    assert 0 < kept < 300
    assert f"({300 - kept} more commands left to recall)" in text
    assert "- make target-299\n" in text  # the newest kept
    # The count carries to the next round.
    assert parse(text).left["commands"] == 300 - kept


def test_most_referenced_facts_are_kept_before_newer_ones():
    facts = tuple(Fact(f"cmd-{i}", 9 if i == 0 else 1, i, "0") for i in range(200))
    text, _ = render(Ledger({"commands": facts}), 1_000)
    assert "- cmd-0 ×9\n" in text


def test_render_and_parse_round_trip():
    ledger = extract(_codex_session())
    text, written = render(ledger, 50_000)
    back = parse("## Goal\nx\n\n" + text)
    # A command's unknown exit code ("?", no code in its result) is written like 0: without one.
    read = {"?": "0"}
    for kind in ("files", "commands", "errors", "exceptions", "tests", "constraints"):
        assert {(f.text, f.count, f.detail) for f in back.of(kind)} == {
            (f.text, f.count, read.get(f.detail, f.detail) if kind == "commands" else f.detail)
            for f in written.of(kind)
        }, kind
    assert [f.text for f in back.of("requests")] == [f.text for f in written.of("requests")]
    merged = merge(back, ledger)
    assert {f.text: f.count for f in merged.of("commands")}["npm test -- --run"] == 4


def test_llm_summaries_carry_the_ledger_and_the_prompt_says_so(fake_openai):
    fake_openai.enqueue({"content": "## Goal\nFaster dashboard.\n\n## Active State\nTests pass."})
    summarizer = LLMSummarizer("openai/fake", api_base=fake_openai.base_url, api_key="x", timeout=5)
    report = _compact(_codex_session(), summarizer=summarizer).report
    assert report.summarizer == "aux"
    body = report.summary_body
    assert body.startswith("## Goal\nFaster dashboard.")
    assert "- [w] web/src/lib/cache.ts" in body
    assert "TypeError: cache is not a function" in body
    assert "Do not change the public API." in body
    assert "FACT LEDGER is appended" in report.summarizer_prompt
    assert report.to_dict()["ledger"]["facts"]["constraints"]


def test_classic_writes_no_ledger():
    config = CompactionConfig(profile="classic", tail_token_budget=60, protect_first_n=1)
    report = _compact(_codex_session(), config).report
    assert "## Fact Ledger" not in (report.summary_body or "")
    assert report.ledger is None


def test_the_summary_stays_within_its_token_ceiling():
    messages = [system(), user("start"), assistant("ok"), user("run everything")]
    for i in range(600):
        path = f"src/module_{i}/component_{i}/file_{i}.py"
        messages.append(assistant(None, call(f"c{i}", "terminal", command=f"sed -n 1,80p {path}")))
        messages.append(result(f"c{i}", json.dumps({"output": "x = 1", "exit_code": 0})))
    messages += _tail()
    for window, ceiling in ((32_000, 1_600), (200_000, 8_000)):
        config = CompactionConfig(context_length=window, tail_token_budget=60, protect_first_n=1)
        out = compact(messages, config=config, now=DAY, force=True)
        assert out.report.tokens["summary"] <= ceiling * 1.05, window
        assert "left to recall" in out.report.summary_body


def test_the_llm_is_asked_for_no_more_than_the_room_the_ledger_leaves(fake_openai):
    fake_openai.enqueue({"content": "## Goal\nFaster dashboard."})
    summarizer = LLMSummarizer("openai/fake", api_base=fake_openai.base_url, api_key="x")
    config = CompactionConfig(context_length=32_000, tail_token_budget=60, protect_first_n=1)
    report = _compact(_codex_session(), config, summarizer=summarizer).report
    target = int(report.summarizer_prompt.split("Target ~")[1].split(" tokens")[0])
    assert target < 2_000  # the prompt's usual floor; the ledger takes most of 5 % of 32K
