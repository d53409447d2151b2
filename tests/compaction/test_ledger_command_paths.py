"""Paths the fact ledger reads from shell commands: no junk "paths" from the lines of
quoted scripts (``psql -c "SELECT …"``, ``python3 -c "…"``).

The commands are shaped on real multi-line ``python -c`` / ``psql -c`` calls of Claude Code
and Codex sessions.
"""

from __future__ import annotations

from compaction.ledger import command_line, command_paths


def test_the_lines_of_a_quoted_script_are_code_not_paths() -> None:
    cases = {
        'psql -U odoo -d odoo -c "SELECT ru.id, ru.name, rp.email\nFROM res_users ru\n'
        'JOIN res_partner rp ON rp.id = ru.partner_id\nWHERE ru.active;" > out/users.txt': [
            ("out/users.txt", "w")
        ],
        'cd ~/work/leads && python -c "\nfrom urllib.parse import urlparse\n'
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
