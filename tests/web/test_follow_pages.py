"""Follow folders (Settings) and the live rows of a followed conversation."""

from pathlib import Path

import pytest
from django.urls import reverse

from hermes_web.importers.follow import follow_file, scan_followed_folders
from hermes_web.models import FollowedFolder, Message, Session
from hermes_web.tasks import follow_folders

pytestmark = pytest.mark.django_db

CODEX = Path(__file__).resolve().parent.parent / "fixtures" / "codex_rollout_current.jsonl"


@pytest.fixture
def roots(settings, tmp_path):
    settings.HERMES_FOLLOW_ROOTS = [str(tmp_path)]
    return tmp_path


def test_a_folder_added_on_the_page_is_imported_by_the_worker_scan(alice_client, alice, roots):
    folder = roots / "codex"
    folder.mkdir()
    response = alice_client.post(reverse("follow_folder_add"), {"path": str(folder)})
    assert response.status_code == 302
    assert FollowedFolder.objects.filter(owner=alice, path=str(folder.resolve())).exists()
    (folder / "rollout.jsonl").write_bytes(CODEX.read_bytes())
    assert follow_folders() == 1  # the beat task
    assert scan_followed_folders() == 0  # unchanged: not read again
    session = Session.objects.get(owner=alice)
    page = alice_client.get(reverse("follow_folders")).content.decode()
    assert str(folder) in page
    assert session.public_id in page
    assert "new session" in page
    assert reverse("follow_folders") in alice_client.get(reverse("import_page")).content.decode()


@pytest.mark.parametrize(
    ("path", "says"),
    [("", "Give the path"), ("relative/x", "full path"), ("/nonexistent-zz", "no such folder")],
)
def test_a_folder_that_cannot_be_followed_is_refused_with_why(alice_client, roots, path, says):
    response = alice_client.post(reverse("follow_folder_add"), {"path": path})
    assert response.status_code == 400
    assert says in response.content.decode()
    assert not FollowedFolder.objects.exists()


def test_a_folder_outside_the_allowed_roots_is_refused(alice_client, settings, tmp_path):
    settings.HERMES_FOLLOW_ROOTS = [str(tmp_path / "only-here")]
    (tmp_path / "only-here").mkdir()
    response = alice_client.post(reverse("follow_folder_add"), {"path": str(tmp_path)})
    assert response.status_code == 400
    assert "outside the folders" in response.content.decode()
    assert not FollowedFolder.objects.exists()


def test_a_folder_is_removed_by_its_owner_only(alice_client, bob_client, alice, roots):
    folder = FollowedFolder.objects.create(owner=alice, path=str(roots))
    url = reverse("follow_folder_remove", args=[folder.pk])
    assert bob_client.post(url).status_code == 404
    assert alice_client.post(url).status_code == 302
    assert not FollowedFolder.objects.exists()


def test_the_open_page_of_a_followed_session_polls_for_new_rows(alice_client, alice, tmp_path):
    lines = CODEX.read_bytes().splitlines(keepends=True)
    live = tmp_path / "rollout.jsonl"
    live.write_bytes(b"".join(lines[:-6]))
    follow_file(live, owner=alice)
    session = Session.objects.get(owner=alice)
    page = alice_client.get(reverse("conversation_detail", args=[session.public_id])).content
    assert b'hx-trigger="every 3s"' in page
    last = Message.objects.filter(session=session, active=True).order_by("-position").first()
    live_url = reverse("conversation_live", args=[session.public_id])
    quiet = alice_client.get(f"{live_url}?after={last.position}", HTTP_HX_REQUEST="true")
    assert quiet.status_code == 200
    assert b'id="m' not in quiet.content  # nothing new yet
    live.write_bytes(b"".join(lines))
    follow_file(live, owner=alice)
    grown = alice_client.get(f"{live_url}?after={last.position}", HTTP_HX_REQUEST="true")
    new = Message.objects.filter(session=session, active=True, position__gt=last.position)
    assert new.exists()
    for row in new:
        assert f'id="m{row.position}"'.encode() in grown.content
    # Without JavaScript the link is a reload of the page.
    assert alice_client.get(live_url).status_code == 302


def test_a_session_not_followed_has_no_poll_and_stops_one(alice_client, alice):
    session = Session.objects.create(owner=alice, title="chat")
    page = alice_client.get(reverse("conversation_detail", args=[session.public_id])).content
    assert b"every 3s" not in page
    live_url = reverse("conversation_live", args=[session.public_id])
    assert alice_client.get(live_url, HTTP_HX_REQUEST="true").status_code == 286


def test_another_users_session_has_no_live_rows(bob_client, alice, tmp_path):
    live = tmp_path / "rollout.jsonl"
    live.write_bytes(CODEX.read_bytes())
    follow_file(live, owner=alice)
    session = Session.objects.get(owner=alice)
    url = reverse("conversation_live", args=[session.public_id])
    assert bob_client.get(url, HTTP_HX_REQUEST="true").status_code == 404


def test_the_embedded_beat_scans_followed_folders(settings):
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "hermes_web.tasks.follow_folders" in tasks


def test_a_compaction_the_agent_wrote_is_announced_on_the_open_page(alice_client, alice, tmp_path):
    claude = CODEX.parent / "claude_code" / "7c1e9a52-3b0d-4f8e-a6c4-91d2e5f0b7a3.jsonl"
    lines = claude.read_bytes().splitlines(keepends=True)
    boundary = next(i for i, line in enumerate(lines) if b"compact_boundary" in line)
    live = tmp_path / claude.name
    live.write_bytes(b"".join(lines[:6]))
    follow_file(live, owner=alice)
    session = Session.objects.get(owner=alice)
    url = reverse("conversation_live", args=[session.public_id])
    page = alice_client.get(reverse("conversation_detail", args=[session.public_id])).content
    assert b"compactions=0" in page
    live.write_bytes(b"".join(lines[: boundary + 3]))
    follow_file(live, owner=alice)
    polled = alice_client.get(f"{url}?after=99&compactions=0", HTTP_HX_REQUEST="true")
    assert b"Claude Code compacted its context" in polled.content
    assert b"compactions=1" in polled.content  # said once
