"""The ledger's written form spends its room on the facts, not on their decoration.

Shapes from real sessions: a Claude Code session on Windows reading and patching many files of
one ``X:/03_ACG/Custom_Addons/…/models/`` directory, each with its access letters and count,
and Git Bash turning ``/etc/odoo/odoo.conf`` into ``C:/Program Files/Git/etc/odoo/odoo.conf``
(a path with a space); a Hermes session whose every terminal result carries ``"exit_code": 0``
(``grep -A8 "auxiliary:" ~/.hermes/config.yaml | head -15``), one failing; ledgers written by
the previous format, stored in summaries of existing conversations.
"""

from __future__ import annotations

import json

from compaction import CompactionConfig, compact
from compaction.ledger import Fact, Ledger, extract, parse, render
from tests.compaction.builders import assistant, call, result, system, user

MODELS = "X:/03_ACG/Custom_Addons/mail_activity_kpi_dashboard/models/"


def _files_section(text: str) -> str:
    return text.split("### Files")[1].split("### ")[0]


def test_paths_are_grouped_by_use_each_written_once_in_full():
    ledger = Ledger(
        {
            "files": (
                Fact(MODELS + "mail_activity_weekly_performance.py", 31, 1, "prsw"),
                Fact(MODELS + "__init__.py", 3, 2, "pr"),
                Fact(MODELS + "mail_activity_kpi_dashboard.py", 7, 3, "pr"),
                Fact("X:/03_ACG/Odoo_Docker/docker-compose.yml", 2, 4, "r"),
            )
        }
    )
    files = _files_section(render(ledger, 4_000)[0])
    # The letters once per group, the paths sorted (a directory's together), no directory
    # heading repeating what every full path says.
    assert f"- [pr] {MODELS}__init__.py×3, {MODELS}mail_activity_kpi_dashboard.py×7\n" in files
    assert f"- [prsw] {MODELS}mail_activity_weekly_performance.py×31\n" in files
    assert f"{MODELS}: " not in files
    assert files.count("[pr]") == 1
    back = {(f.text, f.count, f.detail) for f in parse(render(ledger, 4_000)[0]).of("files")}
    assert back == {(f.text, f.count, f.detail) for f in ledger.of("files")}


def test_a_path_with_a_space_is_read_back_whole():
    rows = [
        assistant(None, call("c1", "Read", file_path="C:/Program Files/Git/etc/odoo/odoo.conf")),
        result("c1", "[options]\naddons_path = /mnt/extra-addons"),
    ]
    text, _ = render(extract(rows), 4_000)
    assert [f.text for f in parse(text).of("files")] == ["C:/Program Files/Git/etc/odoo/odoo.conf"]


def _terminal(cid: str, command: str, code: int, out: str = "ok") -> list[dict]:
    output = json.dumps({"output": out, "exit_code": code, "error": None})
    return [assistant(None, call(cid, "terminal", command=command)), result(cid, output)]


def test_only_a_failing_command_carries_its_exit_code():
    rows = [
        *_terminal("c1", 'grep -A8 "auxiliary:" ~/.hermes/config.yaml | head -15', 0),
        *_terminal("c2", "sudo systemctl restart smbd", 0),
        *_terminal("c2b", "sudo systemctl restart smbd", 0),
        *_terminal("c3", "smbclient -L localhost -U ocarjohann", 1, "NT_STATUS_LOGON_FAILURE"),
    ]
    text, _ = render(extract(rows), 4_000)
    commands = text.split("### Commands (exit code when not 0; error lines indented below)\n")
    commands = commands[1].split("### ")[0]
    assert commands.splitlines() == [
        '- grep -A8 "auxiliary:" ~/.hermes/config.yaml | head -15',
        "- sudo systemctl restart smbd ×2",
        "- smbclient -L localhost -U ocarjohann -> exit 1",
        "  exit 1: NT_STATUS_LOGON_FAILURE",
    ]
    assert [(f.text, f.count, f.detail) for f in parse(text).of("commands")] == [
        ('grep -A8 "auxiliary:" ~/.hermes/config.yaml | head -15', 1, "0"),
        ("sudo systemctl restart smbd", 2, "0"),
        ("smbclient -L localhost -U ocarjohann", 1, "1"),
    ]


def test_a_ledger_of_the_previous_format_is_still_read():
    older = (
        "## Fact Ledger\n(exact facts of the compacted turns, kept by the engine; recall has"
        " every row)\n### Files (r read, w written, p patched, s searched, x run)\n"
        f"- {MODELS}: {MODELS}__init__.py [pr]×3, {MODELS}views.py [r]\n"
        "- X:/03_ACG/Odoo_Docker/docker-compose.yml [r]×2\n"
        "### Commands (exit code)\n"
        "- `docker restart odoo_docker-nginx-1`\n"
        "- `psql -U odoo -d odoo -c x` -> exit 1 ×2\n"
        "- `ls -la` -> exit 0\n"
    )
    ledger = parse(older)
    assert [(f.text, f.count, f.detail) for f in ledger.of("files")] == [
        (MODELS + "__init__.py", 3, "pr"),
        (MODELS + "views.py", 1, "r"),
        ("X:/03_ACG/Odoo_Docker/docker-compose.yml", 2, "r"),
    ]
    assert [(f.text, f.count, f.detail) for f in ledger.of("commands")] == [
        ("docker restart odoo_docker-nginx-1", 1, "?"),
        ("psql -U odoo -d odoo -c x", 2, "1"),
        ("ls -la", 1, "0"),
    ]


def test_a_path_only_a_written_command_used_is_kept_inside_it():
    # Codex reads with `sed -n` and `nl -ba`, patches with an apply_patch heredoc.
    patch = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: web/src/lib/db.ts\n@@\n-a\n+b\n*** End Patch\nEOF"
    rows = [
        *_terminal("c1", "sed -n '1,200p' web/src/lib/db.ts", 0),
        *_terminal("c2", "nl -ba web/src/app/page.tsx | sed -n '1,60p'", 0),
        *_terminal("c3", patch, 0),
    ]
    ledger = extract(rows)
    text, written = render(ledger, 4_000)
    files = _files_section(text)
    # Only read by `nl -ba …`: its exact text is in that command, not written again.
    assert "web/src/app/page.tsx" not in files
    assert "- nl -ba web/src/app/page.tsx | sed -n '1,60p'" in text.splitlines()
    # Also patched (the heredoc's header is not in the command's first line): its own line.
    assert "- [pr] web/src/lib/db.ts×2" in files.splitlines()
    assert {f.text for f in written.of("files")} == {"web/src/lib/db.ts", "web/src/app/page.tsx"}
    # The next round reads it back from the command, letters and count included.
    back = {(f.text, f.count, f.detail) for f in parse(text).of("files")}
    assert back == {(f.text, f.count, f.detail) for f in ledger.of("files")}


def test_a_path_whose_command_is_left_out_is_written_on_its_own():
    # Claude Code grepping one report per round: `grep "key_person_name" reports/… | head -10`.
    rows = []
    for n in range(40):
        command = f'grep "key_person_name" reports/round{n}-optimized-batch1.csv | head -10'
        rows += [assistant(None, call(f"c{n}", "Bash", command=command)), result(f"c{n}", "x")]
    text, written = render(extract(rows), 2_500)
    kept_commands = {f.text for f in written.of("commands")}
    assert 0 < len(kept_commands) < 40
    files_section = _files_section(text)
    for fact in written.of("files"):
        inside = any(fact.text in command for command in kept_commands)
        # Kept inside its written command, or on its own line when the command did not fit.
        assert inside != (fact.text in files_section), fact.text
    assert len(written.of("files")) > len(kept_commands)


def test_an_error_line_is_written_under_its_command_not_with_its_label():
    # Claude Code on Windows: a heredoc run in the Odoo container fails with a traceback.
    command = "docker exec -i odoo_docker-web-1 python3 << 'PYTHON'"
    out = (
        'Exit code 1\nTraceback (most recent call last):\n  File "<stdin>", line 3\n'
        "AttributeError: type object 'Environment' has no attribute 'manage'"
    )
    rows = [
        assistant(None, call("c1", "Bash", command=command + "\nimport odoo\nPYTHON")),
        result("c1", out),
    ]
    ledger = extract(rows)
    text, written = render(ledger, 4_000)
    lines = text.splitlines()
    at = lines.index(f"- {command} -> exit 1")
    assert lines[at + 1 : at + 3] == [
        "  Traceback (most recent call last):",
        "  AttributeError: type object 'Environment' has no attribute 'manage'",
    ]
    assert "### Errors" not in text
    assert f"[{command}]" not in text  # no label repeating the command
    assert {f.text for f in written.of("errors")} == {f.text for f in ledger.of("errors")}
    back = {(f.text, f.count, f.detail) for f in parse(text).of("errors")}
    assert back == {(f.text, f.count, f.detail) for f in ledger.of("errors")}


def test_an_error_of_one_of_two_commands_alike_keeps_its_label():
    # Two psql queries whose first 60 chars are the same: the label cannot tell them apart.
    query = 'docker exec odoo_docker-db-1 psql -U odoo -d postgres -c "SELECT tablename FROM'
    rows = [
        assistant(None, call("c1", "Bash", command=f'{query} pg_tables LIMIT 5;" 2>&1')),
        result("c1", 'Exit code 1\nERROR:  relation "mail_activity" does not exist'),
        assistant(None, call("c2", "Bash", command=f'{query} pg_tables LIMIT 10;" 2>&1')),
        result("c2", " tablename\n-----------\n mail_message"),
    ]
    text, _ = render(extract(rows), 4_000)
    errors = text.split("### Errors\n")[1]
    # The label is the command's first 60 chars, cut at a word ("SELECT" does not fit).
    assert errors.startswith(f"- [{query[: query.index('SELECT')]}…] ERROR: relation")
    assert parse(text).of("errors")[0].text.startswith("ERROR: relation")


def test_a_failure_without_output_adds_no_error_line_restating_its_code():
    # Claude Code: `curl … | python3 -c "…"` whose result is only "Exit code 49".
    command = 'curl -s "https://api.github.com/repos/JuliusBrussee/caveman" | python3 -c "'
    rows = [
        assistant(None, call("c1", "Bash", command=command + '\nimport sys\n"')),
        result("c1", "Exit code 49"),
        assistant(None, call("c2", "Bash", command="ls -la ~/.claude/commands/")),
        result("c2", "Exit code 2\nls: cannot access '/root/.claude/commands/': No such file"),
    ]
    ledger = extract(rows)
    text, _ = render(ledger, 4_000)
    assert f"- {command} -> exit 49" in text.splitlines()
    assert "Exit code 49" not in text
    # A tail that says more than the code is still written.
    assert [f.text for f in ledger.of("errors")] == [
        "exit 2: ls: cannot access '/root/.claude/commands/': No such file"
    ]


def test_a_shell_only_session_points_to_the_commands_for_its_paths():
    # Codex reads every file with `sed -n` / `nl -ba`: no path needs a Files line of its own.
    rows = [system(), user("Explain the dashboard's data flow.")]
    for n, path in enumerate(["web/src/lib/db.ts", "web/src/app/page.tsx", "web/src/lib/q.ts"]):
        rows += _terminal(f"c{n}", f"sed -n '1,200p' {path}", 0, "export const x = 1;\n" * 30)
    rows += [assistant("It reads the rows through db.ts. " + "word " * 60)]
    rows += [user("Go on. " + "word " * 60), assistant("On it. " + "word " * 60)]
    config = CompactionConfig(context_length=200_000, tail_token_budget=60, protect_first_n=1)
    body = compact(rows, config=config, force=True).report.summary_body or ""
    ledger = body.split("## Fact Ledger")[1]
    assert "### Files" not in ledger
    assert "- sed -n '1,200p' web/src/lib/db.ts" in ledger.splitlines()
    relevant = body.split("## Relevant Files\n")[1].split("\n")[0]
    assert relevant == "See Files and Commands in the Fact Ledger."
