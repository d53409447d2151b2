"""SpecStory's Cursor chats (``.specstory/history/*.md``) are picked up when a directory is
imported (issue #25), and no other markdown is: READMEs, notes and docs stay out."""

import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from hermes_web.importers.directory import plan_directory
from hermes_web.models import Session

from .agent_import_helpers import AGENTS

pytestmark = pytest.mark.django_db

CHATS = sorted((AGENTS / "cursor").glob("*.md"))


def _project(tmp_path) -> Path:
    root = tmp_path / "project"
    history = root / ".specstory" / "history"
    history.mkdir(parents=True)
    for chat in CHATS[:-1]:
        shutil.copy(chat, history / chat.name)
    moved = root / "notes" / "saved-chat.md"  # a chat moved out of .specstory, marker kept
    moved.parent.mkdir()
    shutil.copy(CHATS[-1], moved)
    (root / "README.md").write_text("# Project\n\n_**User**_ is a word here.\n")
    (root / "notes" / "todo.md").write_text("- [ ] ship\n")
    (root / "docs").mkdir()
    (root / "docs" / "history.md").write_text("<!-- not SpecStory -->\n# History\n")
    return root


def test_the_plan_lists_specstory_chats_and_no_other_markdown(tmp_path):
    root = _project(tmp_path)
    names = sorted(str(p.relative_to(root)) for p in plan_directory(root).files)
    assert names == sorted(
        [*(f".specstory/history/{c.name}" for c in CHATS[:-1]), "notes/saved-chat.md"]
    )


def test_the_command_imports_the_chats_of_a_project(alice, tmp_path):
    root = _project(tmp_path)
    out, err = StringIO(), StringIO()
    call_command("import_sessions", str(root), user=alice.username, stdout=out, stderr=err)
    sessions = Session.objects.filter(owner=alice)
    assert sessions.count() == len(CHATS)
    assert set(sessions.values_list("source", flat=True)) == {Session.Source.IMPORT_CURSOR}
    assert "README.md" not in out.getvalue() + err.getvalue()
