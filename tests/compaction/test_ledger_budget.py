"""The fact ledger at a 32K window (5 % of it, 1,600 tokens) and the gaps real sessions showed.

Each fixture reproduces a shape met in a public transcript (none is copied): a Hermes tool
result whose exception name lives only in a JSON ``"error_type"`` field; a Claude Code first
prompt of 20,000+ chars whose rules come at its end; ``find <dir> -name "*.py" -type f``;
``ls -la ~/.claude/…/skills/`` with its trailing slash; Claude Code ``Bash`` results without
an exit code; a prompt of nine rule lines and three commands; a session whose facts outgrow
the ledger over five compactions.
"""

from __future__ import annotations

import json
from datetime import date

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact
from compaction.ledger import Fact, Ledger, command_paths, extract, merge, parse, render
from compaction.tokens import count_message_tokens
from tests.compaction.builders import assistant, call, result, system, user
from tests.compaction.test_ledger_properties import _round as _drawn_round

DAY = date(2026, 12, 4)
SMALL = CompactionConfig(context_length=32_000, tail_token_budget=60, protect_first_n=1)


def _tail(tag: int) -> list[dict]:
    return [user(f"tail {tag} " + "word " * 40), assistant(f"tail {tag} " + "word " * 40)]


def test_an_exception_name_only_in_an_error_type_field_is_kept():
    # Hermes image tool: {"success": false, "error": "...", "error_type": "FalClientHTTPError"}
    envelope = json.dumps(
        {
            "success": False,
            "image": None,
            "error": "User is locked. Reason: Exhausted balance.",
            "error_type": "FalClientHTTPError",
        },
        indent=2,
    )
    ledger = extract(
        [assistant(None, call("c1", "image_generate", prompt="a cat")), result("c1", envelope)]
    )
    assert [f.text for f in ledger.of("exceptions")] == ["FalClientHTTPError"]


def test_rules_at_the_end_of_a_long_first_prompt_are_constraints():
    spec = "## Project Overview\nBuild a web application for assessments.\n" + (
        "- **Framework**: Laravel 11 with Sanctum and role-based access control.\n" * 300
    )
    assert len(spec) > 20_000
    prompt = spec + "\n**IMPORTANT**: Never skip a checkpoint.\n"
    ledger = extract([user(prompt)])
    assert "**IMPORTANT**: Never skip a checkpoint." in [f.text for f in ledger.of("constraints")]


def test_find_names_its_paths_not_the_words_of_its_expression():
    command = 'find addons/kpi -name "*.py" -type f | head -5'
    assert command_paths(command) == [("addons/kpi", "s")]


def test_a_directory_is_kept_as_the_command_wrote_it():
    assert ("~/.claude/superpowers/skills/", "s") in command_paths(
        "ls -la ~/.claude/superpowers/skills/ 2>&1 | head -30"
    )


def test_a_command_without_an_exit_code_is_written_without_one_and_read_back():
    ledger = extract(
        [
            assistant(None, call("c1", "Bash", command="docker restart odoo_docker-nginx-1")),
            result("c1", "odoo_docker-nginx-1"),
            assistant(None, call("c2", "Bash", command="psql -U odoo -d odoo -c x")),
            result("c2", 'Exit code 1\nERROR:  relation "mail_activity" does not exist'),
        ]
    )
    text, _ = render(ledger, 4_000)
    assert "- docker restart odoo_docker-nginx-1\n" in text
    assert "- psql -U odoo -d odoo -c x -> exit 1\n" in text
    assert "exit ?" not in text
    again = parse(text)
    # A line without a code says the command did not fail (Claude Code's results name a
    # code only for a failure).
    assert [(f.text, f.detail) for f in again.of("commands")] == [
        ("docker restart odoo_docker-nginx-1", "0"),
        ("psql -U odoo -d odoo -c x", "1"),
    ]


def test_a_lone_path_is_not_repeated_as_its_own_directory():
    ledger = Ledger(
        {
            "files": (
                Fact("X:/03_ACG/Odoo_Docker/docker-compose.yml", 1, 1, "r"),
                Fact("src/app/a.py", 1, 2, "r"),
                Fact("src/app/b.py", 1, 3, "p"),
            )
        }
    )
    text, _ = render(ledger, 4_000)
    assert "- [r] X:/03_ACG/Odoo_Docker/docker-compose.yml, src/app/a.py\n" in text
    assert "- [p] src/app/b.py" in text
    assert "src/app/: " not in text
    assert [f.text for f in parse(text).of("files")] == [
        "X:/03_ACG/Odoo_Docker/docker-compose.yml",
        "src/app/a.py",
        "src/app/b.py",
    ]


def test_what_a_kind_does_not_need_goes_to_the_constraints():
    # Nine rule lines of one prompt and three commands: the constraints are not held to
    # their share of the room while the commands leave most of it unused.
    rules = tuple(
        Fact(f"- Never use the root database user of site {n:02d}.", 1, n) for n in range(9)
    )
    commands = tuple(Fact(f"ls -la dir{n}", 1, 10 + n, "0") for n in range(3))
    ledger = Ledger({"constraints": rules, "commands": commands})
    needed, _ = render(ledger, 100_000)
    text, written = render(ledger, len(needed) + 100)
    assert len(written.of("constraints")) == 9
    assert "left to recall" not in text


def test_facts_the_previous_ledger_kept_are_carried_before_new_ones_compete():
    old = tuple(Fact(f"src/old/m{n}.py", 1, n - 10, "r") for n in range(10))  # carried
    new = tuple(Fact(f"src/new/n{n}.py", 1, n, "r") for n in range(10))
    ledger = Ledger({"files": old + new})
    half, _ = render(Ledger({"files": old}), 100_000)
    text, written = render(ledger, len(half) + 60)
    assert {f.text for f in old} <= {f.text for f in written.of("files")}
    assert "more files left to recall)" in text


def test_a_ledger_that_does_not_fit_counts_what_it_left_and_never_says_none():
    facts = tuple(Fact(f"pytest -q tests/test_mod_{n}.py", 1, n, "1") for n in range(200))
    text, written = render(Ledger({"commands": facts}), 2_000)
    kept = len(written.of("commands"))
    assert 0 < kept < 200
    assert f"({200 - kept} more commands left to recall)" in text
    assert "None" not in text


def _round(tag: int, files: int) -> list[dict]:
    rows: list[dict] = [user(f"Round {tag}: go on. Never touch the round {tag} fixtures.")]
    rows.append(assistant(f"Reading round {tag}. " + "word " * 2_500))
    for n in range(files):
        cid = f"r{tag}c{n}"
        command = f"sed -n '1,80p' src/round{tag}/module_{n}.py"
        rows.append(assistant(None, call(cid, "terminal", command=command)))
        rows.append(result(cid, json.dumps({"output": "def f(): ...", "exit_code": 0})))
    rows.append(assistant(None, call(f"r{tag}t", "terminal", command=f"pytest -q t{tag}.py")))
    rows.append(result(f"r{tag}t", json.dumps({"output": f"R{tag}Error: boom", "exit_code": 1})))
    return rows


def _five_rounds(files: int) -> tuple[str, list[str], int]:
    messages: list[dict] = [system(), user("Fix the test suite.")]
    wanted: list[str] = []
    pending: list[str] = []
    biggest = 0
    body = ""
    for tag in range(1, 6):
        messages = [*messages, *_round(tag, files), *_tail(tag)]
        out = compact(messages, config=SMALL, now=DAY, force=True)
        assert out.report.status == "compacted"
        start, stop = out.report.boundaries["middle"]
        middle = json.dumps(messages[start:stop])
        messages = list(out.messages)
        body = out.report.summary_body or ""
        biggest = max(biggest, count_message_tokens({"role": "user", "content": body}, SMALL))
        pending += [f"src/round{tag}/module_{n}.py" for n in range(files)]
        pending += [f"sed -n '1,80p' src/round{tag}/module_{n}.py" for n in range(files)]
        pending += [f"pytest -q t{tag}.py", f"R{tag}Error: boom", f"R{tag}Error"]
        pending.append(f"Never touch the round {tag} fixtures.")
        # Only the facts of rows compacted so far (the newest wait in the tail).
        wanted += [f for f in pending if json.dumps(f)[1:-1] in middle]
        pending = [f for f in pending if f not in wanted]
    return body, wanted, biggest


def test_five_compactions_at_32k_keep_every_fact_that_fits():
    body, wanted, biggest = _five_rounds(files=3)
    assert [f for f in wanted if f not in body] == []
    assert biggest <= 1_600


def test_five_compactions_at_32k_stay_within_five_percent_and_count_what_they_left():
    body, wanted, biggest = _five_rounds(files=14)
    missing = [f for f in wanted if f not in body]
    assert missing  # 140 paths and commands do not fit 1,600 tokens
    assert biggest <= 1_600
    # The summary is filled close to its ceiling, and what is missing is counted.
    assert biggest >= 1_200
    assert "more commands left to recall)" in body
    # Every path is kept: on its own line, or inside the written command that read it.
    assert [f for f in missing if f.startswith("src/")] == []
    # The user's constraints and the exception names of every compacted round survive.
    rules = [f for f in wanted if f.startswith("Never touch")]
    names = [f for f in wanted if f.endswith("Error")]
    assert len(rules) == 5
    assert len(names) >= 4
    assert [f for f in rules + names if f not in body] == []
    # The requests kept are the newest.
    assert "- Round 5: go on." in body.split("### User Requests")[1].split("###")[0]


SMALL_PROPERTY = CompactionConfig(context_length=32_000, tail_token_budget=60, protect_first_n=1)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(*(_drawn_round(tag) for tag in range(1, 6))))
def test_every_fact_kind_survives_five_compactions_at_32k_when_it_fits(rounds):
    # The rounds of tests/compaction/test_ledger_properties.py (paths, commands with exit
    # codes, an error line, its exception name, a constraint), at a 32K window whose summary
    # may take 1,600 tokens: they fit, so every fact survives every round.
    messages: list[dict] = [system(), user("Fix the test suite.")]
    wanted: list[str] = []
    pending: list[str] = []
    for rows, facts in rounds:
        messages = [*messages, *rows, *_tail(0)]
        out = compact(messages, config=SMALL_PROPERTY, now=DAY, force=True)
        assert out.report.status == "compacted"
        start, stop = out.report.boundaries["middle"]
        middle = json.dumps(messages[start:stop])
        messages = list(out.messages)
        pending += [f for kind in facts.values() for f in kind]
        wanted += [f for f in pending if json.dumps(f)[1:-1] in middle]
        pending = [f for f in pending if f not in wanted]
        body = out.report.summary_body or ""
        assert [f for f in wanted if f not in body] == []
        assert count_message_tokens({"role": "user", "content": body}, SMALL_PROPERTY) <= 1_600


def test_a_long_command_that_does_not_fit_whole_keeps_its_identity():
    # The Claude Code shape: curl … | python3 -c "…" one-liners of ~200 chars.
    code = "import sys, json; data = json.load(sys.stdin); print(data['items']["
    url = "https://api.github.com/search/repositories?q=claude+code+skill&sort=stars&per_page=10"
    long = tuple(
        Fact(f'curl -s "{url}" 2>/dev/null | python3 -c "{code}{n}])" > out_{n}.json', 1, n, "0")
        for n in range(12)
    )
    short = tuple(Fact(f"ls src/m{n}", 1, 20 + n, "0") for n in range(3))
    whole, _ = render(Ledger({"commands": short + long[-2:]}), 100_000)
    text, written = render(Ledger({"commands": long + short}), len(whole) + 200)
    cut = [f.text for f in written.of("commands") if "…" in f.text]
    assert cut, text
    for line in cut:
        head, end = line.split("…")
        assert any(c.text.startswith(head) and c.text.endswith(end) for c in long)
        assert len(line) <= 65
    assert len(set(cut)) == len(cut)  # two commands never share one abbreviation
    # Carried to the next round, an abbreviated command does not go before new facts.
    new = Ledger({"commands": tuple(Fact(f"pytest -q t{n}.py", 1, n, "1") for n in range(4))})
    alone, _ = render(new, 100_000)
    abbreviated = Ledger(
        {"commands": tuple(f for f in parse(text).of("commands") if "…" in f.text)}
    )
    again = render(merge(abbreviated, new), len(alone) + 60)[1]
    assert all(f.text in {g.text for g in again.of("commands")} for f in new.of("commands"))
