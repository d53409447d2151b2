"""Paths the fact ledger reads from shell commands: Windows paths as written, and no junk
"paths" from the lines of quoted scripts (``psql -c "SELECT …"``, ``python3 -c "…"``).

The commands are shaped on real Claude Code sessions run on Windows (Git Bash), and on
real multi-line ``python -c`` / ``psql -c`` calls of Claude Code and Codex sessions.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from compaction.ledger import command_line, command_paths, extract, parse, render
from tests.compaction.builders import assistant, call, result


def test_windows_paths_are_read_as_written_with_their_access_letter() -> None:
    cases = {
        'ls -la "E:/AI/Codex/TestProject/reports" 2>&1 | head -20': [
            ("E:/AI/Codex/TestProject/reports", "s")
        ],
        "wc -l E:/CC-test/claude-code-skills-agent-guide.md": [
            ("E:/CC-test/claude-code-skills-agent-guide.md", "r")
        ],
        'cat "C:\\Users\\Administrator\\.claude\\settings.json"': [
            ("C:\\Users\\Administrator\\.claude\\settings.json", "r")
        ],
        'find "E:/AI/Codex/TestProject" -type f -name "*.md"': [("E:/AI/Codex/TestProject", "s")],
        "type C:\\proj\\src\\main.py": [("C:\\proj\\src\\main.py", "r")],
        'Get-Content -Path "D:\\repo\\app.py"': [("D:\\repo\\app.py", "r")],
        '/c/Python314/python "E:/AI/TestProject-v2/scripts/run.py" --input '
        '"E:/AI/TestProject-v2/reports/queue.csv" > E:\\AI\\out.log': [
            ("E:\\AI\\out.log", "w"),
            ("E:/AI/TestProject-v2/scripts/run.py", "x"),
            ("E:/AI/TestProject-v2/reports/queue.csv", "x"),
        ],
        'cp -r "E:/AI/TestProject-v2" "E:/AI/TestProject-v2-backup" && echo done': [
            ("E:/AI/TestProject-v2", "w"),
            ("E:/AI/TestProject-v2-backup", "w"),
        ],
        # A quoted directory ending in a backslash: the quote ends there, as cmd reads it.
        'ls -la "E:\\CC-test\\.claude\\plugins\\" 2>/dev/null || echo "no plugins dir"': [
            ("E:\\CC-test\\.claude\\plugins\\", "s")
        ],
        'icacls "X:\\02_app\\bootstrap\\cache" /grant "${env:USERNAME}:(OI)(CI)F" /T': [
            ("X:\\02_app\\bootstrap\\cache", "r")
        ],
    }
    for command, paths in cases.items():
        assert command_paths(command) == paths, command


def test_a_drive_letter_alone_a_revision_a_remote_or_a_url_is_not_a_windows_path() -> None:
    cases = {
        'cd C: && dir /b "C:"': [],
        "git show HEAD:src/a.py": [],
        "scp deploy@build:srv/app.py backup:srv/app.py": [],
        "curl -s https://example.com/C:/report.json": [],
        "sed -n '1,20p' src/app.py": [("src/app.py", "r")],
    }
    for command, paths in cases.items():
        assert command_paths(command) == paths, command


def test_the_lines_of_a_quoted_script_are_code_not_paths() -> None:
    cases = {
        'psql -U odoo -d odoo -c "SELECT ru.id, ru.name, rp.email\nFROM res_users ru\n'
        'JOIN res_partner rp ON rp.id = ru.partner_id\nWHERE ru.active;" > out/users.txt': [
            ("out/users.txt", "w")
        ],
        'cd E:/AI/TestProject-v2 && python -c "\nfrom urllib.parse import urlparse\n'
        "contacts = DATA / 'contacts.csv'\nprint(urlparse(contacts.name).path)\n\" 2>&1": [],
        'sqlite3 var/app.db "SELECT u.email FROM users u;\nSELECT s.id FROM sessions s;"': [
            ("var/app.db", "r")
        ],
        "node -e 'const home = process.env.HOME;\nconsole.log(home)' && cat logs/app.log": [
            ("logs/app.log", "r")
        ],
        'bash -lc "cat src/app.py | head -5; rg -n TODO src/lib"': [
            ("src/app.py", "r"),
            ("src/lib", "s"),
        ],
        # A whole quoted word is no longer cut into pieces: a shell's command is still read
        # after the container it runs in, and a pattern that starts with "-" is no option.
        'docker exec app sh -c "cat /usr/local/etc/php-fpm.d/www.conf | grep listen"': [
            ("/usr/local/etc/php-fpm.d/www.conf", "r")
        ],
        'grep -rn "->unique" database/migrations/': [("database/migrations/", "s")],
        "# TODO: move docs/old.md away, don't read it\ncat config/settings.toml": [
            ("config/settings.toml", "r")
        ],
    }
    for command, paths in cases.items():
        assert command_paths(command) == paths, command


def test_the_first_line_of_a_multi_line_script_names_no_path() -> None:
    # The ledger writes a command's first line; ``parse`` reads its paths back from it.
    command = 'psql -U odoo -d odoo -c "SELECT ru.id, ru.name\nFROM res_users ru\nWHERE 1=1;"'
    assert command_line(command) == 'psql -U odoo -d odoo -c "SELECT ru.id, ru.name'
    assert command_paths(command_line(command)) == []


def test_a_windows_path_of_a_command_is_kept_through_render_and_parse() -> None:
    path = "C:\\Users\\Administrator\\.claude\\settings.json"
    ledger = extract(
        [
            assistant(None, call("c1", "Bash", command=f'cat "{path}"')),
            result("c1", '{"model": "opus"}'),
        ]
    )
    assert [(f.text, f.detail) for f in ledger.of("files")] == [(path, "r")]
    text, _ = render(ledger, 4_000)
    assert path in text
    assert [(f.text, f.detail) for f in parse(text).of("files")] == [(path, "r")]


_COMPONENT = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.",
    min_size=1,
    max_size=12,
)


@st.composite
def _drive_path(draw: st.DrawFn) -> str:
    drive = draw(st.sampled_from("CDEZcd"))
    separator = draw(st.sampled_from(["/", "\\"]))
    parts = draw(st.lists(_COMPONENT, min_size=1, max_size=5))
    return f"{drive}:{separator}" + separator.join(parts)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["cat", "ls -la", "wc -l", "head -n 5", "python", "type", "cp -r"]),
            _drive_path(),
            st.sampled_from(["", '"', "'"]),
        ),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.sampled_from([" && ", " | ", "; ", " || ", "\n"]), min_size=4, max_size=4),
)
def test_every_drive_letter_path_of_a_command_is_found(
    uses: list[tuple[str, str, str]], joints: list[str]
) -> None:
    command = uses[0][0] + " " + uses[0][2] + uses[0][1] + uses[0][2]
    for (program, path, quote), joint in zip(uses[1:], joints, strict=False):
        command += f"{joint}{program} {quote}{path}{quote}"
    found = [path for path, _ in command_paths(command)]
    for _, path, _ in uses:
        assert path in found, (command, found)
