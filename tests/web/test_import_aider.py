"""Aider's ``.aider.chat.history.md`` (issue #25): one session per ``# aider chat started
at`` run, ``####`` user lines, Aider's ``>`` output kept in the reply it follows (edits
applied, commits, tokens) or as a meta row before any reply, slash commands as meta rows,
fenced blocks and reply headings read as the reply's."""

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.formats import aider
from hermes_web.models import Message, Session
from tests.web.agent_import_helpers import AGENTS, imported, parsed, refused, wrapper_free

pytestmark = pytest.mark.django_db
LOG = AGENTS / "aider" / ".aider.chat.history.md"


def _sessions():
    return parsed(aider.parse, LOG)


def test_one_session_per_run_and_runs_without_turns_skipped():
    sessions = _sessions()
    # the first run was quit before any turn; the last two started in the same second
    assert [s.public_id for s in sessions] == ["aider-20250504-170236", "aider-20250504-170236-2"]
    first = sessions[0]
    assert first.model == "gemini/gemini-2.5-pro"
    assert first.extra["aider"] == {"started_at": "2025-05-04 17:02:36", "version": "0.82.3"}
    assert first.title == "what does the equals key do in this calculator?"
    assert first.created_at.isoformat() == "2025-05-04T17:02:36+00:00"


def test_user_lines_commands_and_banner():
    first = _sessions()[0]
    rows = [(m.role, m.meta) for m in first.messages]
    assert rows == [
        ("user", "aider_output"),  # the banner
        ("user", "command"),  # /ask ...
        ("user", ""),
        ("assistant", ""),
        ("user", ""),
        ("assistant", ""),
        ("user", "command"),  # /run npm test
        ("user", "aider_output"),  # its output
    ]
    multi = first.messages[4]
    assert multi.content == "replace eval with a small parser\nkeep the keyboard shortcuts working"
    assert first.messages[7].content.startswith("PASS src/evaluate.test.js")


def test_output_after_a_reply_stays_in_it_and_a_reply_after_output_is_merged():
    first = _sessions()[0]
    reply = first.messages[3].content
    assert reply.startswith("It evaluates the expression on the display.")
    assert "> Add file to the chat?" in reply
    assert "Now I can see it: `handleEqual` calls `eval`" in reply
    assert "#### Why it matters" in reply  # a heading of the reply, not a user line
    assert "> eval runs any JavaScript" in reply  # a quote of the reply, not Aider output
    assert first.messages[3].extra["tokens"] == {"sent": "3.4k", "received": "120"}


def test_edit_blocks_and_their_outcome_are_assistant_content():
    edit = _sessions()[0].messages[5].content
    assert "<<<<<<< SEARCH\n    setDisplay(String(eval(display)));" in edit
    assert ">>>>>>> REPLACE\n```" in edit
    assert "#### this heading is inside a fence  " in edit
    assert "> so is this quote  " in edit
    assert edit.endswith(
        "> Applied edit to src/components/ButtonsContainer.jsx\n"
        "> Commit 5f2c1d9 feat: Replace eval with a small expression parser"
    )


def test_imports_with_format_auto_and_no_wrapper_is_a_user_turn(alice):
    sessions = imported(LOG, alice, "aider")
    assert all(s.source == Session.Source.IMPORT_AIDER for s in sessions)
    wrapper_free(sessions, ("/", ">"))
    assert Message.objects.filter(session=sessions[1]).count() == 3
    again = import_path(LOG, owner=alice)
    assert len(again.duplicates) == 2  # the same runs again: duplicates, as other formats


def test_a_log_without_turns_or_headers_is_refused(alice, tmp_path):
    empty_run = tmp_path / ".aider.chat.history.md"
    empty_run.write_text("# aider chat started at 2025-01-01 10:00:00\n\n> Aider v0.70.0  \n")
    assert "no user or assistant turn" in refused(empty_run, alice).problem
    no_header = tmp_path / "notes.md"
    no_header.write_text("#### hello  \n\nhi\n")
    assert "no '# aider chat started at' header" in refused(no_header, alice, "aider").problem
    blank = tmp_path / "blank.aider.chat.history.md"
    blank.write_bytes(b"")
    assert "empty" in refused(blank, alice).problem
    broken = tmp_path / "latin1.aider.chat.history.md"
    broken.write_bytes(b"# aider chat started at 2025-01-01 10:00:00\n#### caf\xe9  \n")
    problem = refused(broken, alice)
    assert "not valid UTF-8" in problem.problem
    assert problem.line == 2


def test_a_folder_import_finds_the_aider_log_and_no_other_markdown(alice, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    project = tmp_path / "project"
    project.mkdir()
    (project / ".aider.chat.history.md").write_bytes(LOG.read_bytes())
    (project / "README.md").write_text("# aider chat started at 2025-01-01 10:00:00\n#### hi  \n")
    out = StringIO()
    call_command("import_sessions", str(project), user=alice.username, stdout=out)
    assert out.getvalue().count("imported aider-") == 2  # the log's two runs; README.md not read


def test_the_import_page_takes_other_agents_files(alice_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    html = alice_client.get("/import/").content.decode()
    for fmt in ("gemini-cli", "aider", "openhands", "cline", "continue"):
        assert f'value="{fmt}"' in html
    assert ".md" in html.split('accept="', 1)[1].split('"', 1)[0]
    log = SimpleUploadedFile(".aider.chat.history.md", LOG.read_bytes())
    response = alice_client.post("/import/", {"file": [log], "format": "auto"})
    assert response.status_code == 200
    assert Session.objects.filter(source=Session.Source.IMPORT_AIDER).count() == 2
    assert "aider-20250504-170236" in response.content.decode()
