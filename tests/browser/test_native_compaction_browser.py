"""Claude Code's own compaction in real Chromium: imported, opened in the inspector (its
recorded numbers, its summary by section, the audit), replayed with our engine, Compare."""

import re

import pytest
from playwright.sync_api import expect

from hermes_web.importers import import_path
from hermes_web.models import Compaction
from tests.web.native_fixtures import claude_code_lines, write_lines

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_open_a_native_compaction_replay_it_and_compare(
    live_server, page, screenshot, django_user_model, tmp_path
):
    user = django_user_model.objects.create_user("nadia", password="native-pass-123")
    path = write_lines(tmp_path / "cc-browser.jsonl", claude_code_lines(compacts=2, rounds=8))
    session = import_path(path, owner=user).sessions[0]
    native = Compaction.objects.filter(session=session).order_by("queued_at", "pk")[1]

    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("nadia")
    page.get_by_label("Password").fill("native-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()

    # The conversation lists it, labelled with its agent; the link opens the inspector.
    page.goto(live_server.url + f"/conversations/{session.public_id}/")
    expect(page.get_by_text("Claude Code's own compaction").first).to_be_visible()
    page.get_by_role("link", name=re.compile(native.public_id[:8])).click()
    expect(page.get_by_role("heading", name=re.compile("Compaction inspector"))).to_be_visible()
    expect(page.locator("#tokens-before-recorded")).to_have_text("152,300")
    # The agent's summary byte for byte (issue #37), its headings listed beside it.
    expect(page.locator("#native-summary-text")).to_contain_text("1. Primary Request and Intent")
    expect(page.locator(".summary-outline li").first).to_have_count(1)
    expect(page.locator("#native-replaced li").first).to_be_visible()
    page.locator("#audit").scroll_into_view_if_needed()
    expect(page.locator(".audit-score")).to_contain_text("identifiers")
    screenshot("native-compaction-inspector")

    page.get_by_role("button", name="Replay with our engine and compare").click()
    expect(page.get_by_role("heading", name="Compare compactions")).to_be_visible()
    expect(page.locator("#structure")).to_contain_text("Claude Code's own compaction")
    expect(page.locator("#structure")).to_contain_text("our engine, profile hermes")
    expect(page.locator("#facts-by-kind")).to_contain_text("file paths")
    expect(page.locator("#facts-b")).not_to_have_text("0")
    expect(page.locator("#summary-diff")).to_contain_text("Summary 2:")
    screenshot("native-compaction-compare")
    # The other profile is one link away, and the agent's compaction one link back.
    page.get_by_role("link", name="classic profile").click()
    expect(page.locator("#structure")).to_contain_text("profile classic")
