"""The Import page in real Chromium: refusals are shown even when every file fails (htmx
does not swap 4xx answers, so the page answers htmx with 200 and the errors)."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from hermes_web.models import Session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ivy", password="import-pass-123")


def log_in(page, live_server):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("ivy")
    page.get_by_label("Password").fill("import-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Conversations")).to_be_visible()


def test_a_refused_file_shows_its_error_on_the_import_page(
    live_server, page, screenshot, user, tmp_path
):
    log_in(page, live_server)
    page.goto(live_server.url + "/import/")
    bad = tmp_path / "notes.jsonl"
    bad.write_text(
        '{"type": "user", "sessionId": "c1", "message": {"role": "user", "content": 5}}\n'
    )
    page.set_input_files("#import-file", str(bad))
    page.get_by_role("button", name="Import").click()
    alert = page.locator("#import-results [role=alert]")
    expect(alert).to_contain_text("notes.jsonl, line 1")
    expect(alert).to_contain_text("neither text nor a list of blocks")
    # Still the same page: htmx swapped the results in, the form is there to try again.
    expect(page.get_by_role("heading", name="Import conversations")).to_be_visible()
    screenshot("import-refused")
    assert not Session.objects.exists()


def test_a_good_file_then_the_same_again_shows_the_duplicate(live_server, page, screenshot, user):
    log_in(page, live_server)
    page.goto(live_server.url + "/import/")
    fixture = FIXTURES / "claude_code" / "7c1e9a52-3b0d-4f8e-a6c4-91d2e5f0b7a3.jsonl"
    page.set_input_files("#import-file", str(fixture))
    page.get_by_role("button", name="Import").click()
    results = page.locator("#import-results")
    expect(results).to_contain_text("4/4 tool calls paired")
    expect(results.get_by_role("link", name="The checkout total ignores")).to_be_visible()
    screenshot("import-fidelity")
    page.set_input_files("#import-file", str(fixture))
    page.get_by_role("button", name="Import").click()
    # A duplicate is a notice linking the stored conversation, not a red error (issue #37).
    notice = page.locator("#import-results .duplicates[role=status]")
    expect(notice).to_contain_text("already imported")
    notice.get_by_role("link", name="open the stored conversation").click()
    expect(page).to_have_url(re.compile(rf"/conversations/{Session.objects.get().public_id}/$"))
    assert Session.objects.count() == 1
