"""What an import looks like to the person running it: a summary line, no empty sessions,
titles a person would write, duplicates for every format, the page's own words, and the
tool's own id accepted by export_session."""

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from hermes_web.importers import import_path
from hermes_web.models import Message, Session
from tests.web.native_fixtures import claude_code_lines, write_lines

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAUDE = FIXTURES / "claude_code_session.jsonl"
CLAUDE_ID = "5f0c2a4e-8b1d-4c3e-9a7f-2d6b1e0c9f31"


def _hermes_export(path, sessions):
    path.write_text("".join(json.dumps(s) + "\n" for s in sessions))
    return path


def test_the_cli_ends_with_a_summary_line_and_leaves_empty_sessions_out(alice, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(CLAUDE, folder / CLAUDE.name)
    _hermes_export(
        folder / "export.jsonl",
        [
            {"id": "empty-1", "title": "nothing said", "messages": []},
            {"id": "full-1", "messages": [{"role": "user", "content": "hello"}]},
        ],
    )
    out = StringIO()
    call_command("import_sessions", str(folder), user="alice", stdout=out)
    printed = out.getvalue()
    claude = Session.objects.get(extra__source_id=CLAUDE_ID)
    messages = Message.objects.filter(session=claude, active=True).count() + 1
    assert printed.splitlines()[-1] == (
        f"summary: 2 sessions, {messages} messages; 1 empty session left out"
    )
    assert "left out export.jsonl" not in printed  # the full path names the file
    assert "no messages: an empty session, not imported (session empty-1)" in printed
    assert not Session.objects.filter(extra__source_id="empty-1").exists()


def test_an_empty_session_is_rolled_back_in_a_streamed_format(alice, tmp_path):
    pi = tmp_path / "pi.jsonl"
    pi.write_text(
        json.dumps({"type": "session", "version": 3, "id": "quiet"})
        + "\n"
        + json.dumps({"type": "model_change", "id": "m", "parentId": None, "modelId": "x"})
        + "\n"
    )
    report = import_path(pi, owner=alice)
    assert report.errors == []
    assert [e.session for e in report.empties] == ["quiet"]
    assert report.summary == "0 sessions, 0 messages; 1 empty session left out"
    codex = tmp_path / "rollout.jsonl"
    codex.write_text(
        json.dumps({"type": "session_meta", "payload": {"id": "meta-only"}})
        + "\n"
        + json.dumps(
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {
                            "type": "input_text",
                            "text": "<environment_context>\n</environment_context>",
                        }
                    ],
                },
            }
        )
        + "\n"
    )
    report = import_path(codex, owner=alice)
    assert [e.session for e in report.empties] == ["meta-only"]
    claude = tmp_path / "summary-only.jsonl"  # Claude Code leaves such files behind
    claude.write_text(json.dumps({"type": "summary", "summary": "Old topic", "leafUuid": "x"}))
    report = import_path(claude, owner=alice)
    assert report.errors == []
    assert len(report.empties) == 1
    assert not Session.objects.exists()
    assert not Message.objects.exists()


def test_the_page_shows_the_summary_and_says_already_imported_in_its_own_words(alice_client):
    def upload():
        return SimpleUploadedFile(CLAUDE.name, CLAUDE.read_bytes())

    first = alice_client.post("/import/", {"file": upload()})
    assert first.status_code == 200
    stored = Message.objects.filter(session__extra__source_id=CLAUDE_ID).count()
    assert stored
    html = first.content.decode()
    assert '<p class="import-summary">1 session, ' in html
    again = alice_client.post("/import/", {"file": upload()}).content.decode()
    assert "0 sessions, 0 messages; 1 already there" in again
    assert "already imported: a duplicate (tick “Skip sessions imported before”" in again
    assert "--skip-existing" not in again


def test_imported_sessions_with_no_messages_are_not_listed_unless_asked(alice, alice_client):
    Session.objects.create(owner=alice, title="left from an old import", source="import:codex")
    Session.objects.create(owner=alice, title="a chat not started yet")
    full = Session.objects.create(owner=alice, title="has turns", source="import:codex")
    Message.objects.create(session=full, position=0, role="user", content="hi")
    listed = alice_client.get("/conversations/").content.decode()
    assert "has turns" in listed
    assert "a chat not started yet" in listed  # only imports are filtered
    assert "left from an old import" not in listed
    assert "1 imported session with no messages not listed" in listed
    everything = alice_client.get("/conversations/?empty=1").content.decode()
    assert "left from an old import" in everything


@pytest.mark.parametrize(
    ("title", "first_user", "expected"),
    [
        ("", "<think>what do they want</think>\n\nRename the CLI flag", "Rename the CLI flag"),
        (
            "<command-name>/clear</command-name>",
            "<environment_context><cwd>/w</cwd></environment_context>",
            "",  # nothing a person wrote: untitled rather than a wrapper
        ),
        ("<user_instructions>be brief", "Fix the login redirect", "Fix the login redirect"),
    ],
)
def test_titles_never_start_with_reasoning_or_a_wrapper(
    alice, tmp_path, title, first_user, expected
):
    export = _hermes_export(
        tmp_path / "e.jsonl",
        [
            {
                "id": "t1",
                "title": title,
                "messages": [
                    {"role": "user", "content": first_user},
                    {"role": "assistant", "content": "ok"},
                ],
            }
        ],
    )
    (session,) = import_path(export, owner=alice).sessions
    assert Session.objects.get(pk=session.pk).title == expected


def test_an_openai_file_starting_with_reasoning_gets_the_question_as_title(alice, tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(
        json.dumps([{"role": "user", "content": "<think>plan</think>How do I undo a commit?"}])
    )
    (session,) = import_path(path, owner=alice).sessions
    assert Session.objects.get(pk=session.pk).title == "How do I undo a commit?"


def test_importing_the_same_openai_file_again_is_a_duplicate(alice, bob, tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant"}]))
    first = import_path(path, owner=alice)
    assert len(first.sessions) == 1
    renamed = tmp_path / "copy-of-chat.json"
    shutil.copy(path, renamed)
    again = import_path(renamed, owner=alice)
    assert again.sessions == []
    assert [d.problem for d in again.duplicates] == [
        "already imported: a duplicate (use --skip-existing to skip it)"
    ]
    assert len(import_path(path, owner=bob).sessions) == 1  # another user's is their own
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"role": "user", "content": "hi!"}]))
    assert len(import_path(other, owner=alice).sessions) == 1


def test_export_session_accepts_the_tools_own_id(alice, bob, tmp_path):
    import_path(CLAUDE, owner=alice)
    out = StringIO()
    call_command("export_session", CLAUDE_ID, format="openai", stdout=out)
    exported = json.loads(out.getvalue())
    assert exported[0]["role"] == "user"
    import_path(CLAUDE, owner=bob)
    with pytest.raises(CommandError, match="is the tool's id of 2 imported sessions"):
        call_command("export_session", CLAUDE_ID, stdout=StringIO())
    mine = StringIO()
    call_command("export_session", CLAUDE_ID, user="bob", stdout=mine)
    assert json.loads(mine.getvalue()) == exported
    with pytest.raises(CommandError, match="no session with id 'nope' for user 'bob'"):
        call_command("export_session", "nope", user="bob", stdout=StringIO())


def test_the_api_answers_the_summary_and_its_own_duplicate_words(alice_client):
    def upload():
        return SimpleUploadedFile(CLAUDE.name, CLAUDE.read_bytes())

    first = alice_client.post("/api/import", {"file": upload()}).json()
    assert first["summary"].startswith("1 session, ")
    assert first["empty_sessions"] == 0
    again = alice_client.post("/api/import", {"file": upload()}).json()
    assert again["summary"] == "0 sessions, 0 messages; 1 already there"
    assert again["duplicates"][0]["problem"] == (
        "already imported: a duplicate (send skip_existing to skip it)"
    )


def test_the_summary_line_says_how_many_rows_the_agents_compactions_archived(alice, tmp_path):
    path = write_lines(tmp_path / "cc-compacted.jsonl", claude_code_lines(compacts=3))
    report = import_path(path, owner=alice)
    session = report.sessions[0]
    live = Message.objects.filter(session=session, active=True).count()
    archived = Message.objects.filter(session=session, archived=True).count()
    assert archived > live > 0  # three compactions replaced most of the chat
    assert report.summary == (
        f"1 session, {live} messages (and {archived:,} archived by the agent's compactions)"
    )
