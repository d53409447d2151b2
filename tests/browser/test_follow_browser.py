"""Follow live in real Chromium: a folder added on Settings › Follow folders, its Claude Code
file imported by the worker's scan, then written on in bursts while its conversation page
is open: the real file watcher imports the new rows and its compaction, and the open page
shows them without a reload."""

import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from hermes_web.importers.follow_watch import Follower
from hermes_web.models import Compaction, Message, Session
from hermes_web.tasks import follow_folders

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CLAUDE = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "claude_code"
    / "7c1e9a52-3b0d-4f8e-a6c4-91d2e5f0b7a3.jsonl"
)


def _login(page, live_server, name, password):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_an_open_conversation_gains_the_rows_its_agent_appends(
    live_server, page, screenshot, django_user_model, settings, tmp_path
):
    settings.HERMES_FOLLOW_ROOTS = [str(tmp_path)]
    user = django_user_model.objects.create_user("fred", password="follow-pass-123")
    folder = tmp_path / "projects" / "-home-dev-shop"
    folder.mkdir(parents=True)
    live = folder / CLAUDE.name
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    boundary = next(i for i, line in enumerate(lines) if b"compact_boundary" in line)
    live.write_bytes(b"".join(lines[:6]))

    _login(page, live_server, "fred", "follow-pass-123")
    page.goto(live_server.url + "/import/")
    page.get_by_role("link", name="Follow its folder").click()
    expect(page.get_by_role("heading", name="Follow folders")).to_be_visible()
    page.get_by_label("Folder").fill(str(tmp_path / "projects"))
    page.get_by_role("button", name="Follow").click()
    expect(page.locator(".followed-folders")).to_contain_text(str(tmp_path / "projects"))
    assert follow_folders() == 1  # the worker's beat: the file is imported
    page.reload()
    session = Session.objects.get(owner=user)
    page.locator(".followed-files").get_by_role("link").first.click()
    expect(page.get_by_role("heading", name=session.title)).to_be_visible()
    expect(page.locator("#live-rows")).to_contain_text("Followed live")
    page.evaluate("window.stillTheSamePage = true")
    shown = Message.objects.filter(session=session, active=True).count()
    expect(page.locator("article.msg, details.msg")).to_have_count(shown)

    follower = Follower([tmp_path / "projects"], user, debounce=0.2)
    follower.start()
    try:
        with live.open("ab") as stream:  # the agent writes on, record by record
            for line in lines[6 : boundary + 3]:
                stream.write(line)
                stream.flush()
                time.sleep(0.02)
        deadline = time.monotonic() + 30
        while not Compaction.objects.filter(session=session).exists():
            assert time.monotonic() < deadline, "the watcher did not import the compaction"
            follower.wake.wait(0.05)
            follower.wake.clear()
            follower.step()
    finally:
        follower.stop()
    newest = Message.objects.filter(session=session, active=True).order_by("-position").first()
    expect(page.locator(f"#m{newest.position}")).to_be_visible(timeout=15_000)
    notice = page.locator(".live-compaction")
    expect(notice).to_contain_text("Claude Code compacted its context")
    assert page.evaluate("window.stillTheSamePage") is True  # no reload
    assert Session.objects.filter(owner=user).count() == 1
    screenshot("follow-live-rows")
    notice.get_by_role("link", name="open it in the inspector").click()
    run = Compaction.objects.get(session=session)
    assert page.url.endswith(f"/compactions/{run.public_id}/")
