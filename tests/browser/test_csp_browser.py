"""Real Chromium under the Content Security Policy: no page triggers a CSP violation, and the
behaviour that moved out of inline handlers (the composer clearing after a send) still works."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from hermes_web.models import Session
from hermes_web.services.sessions import append_message

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_no_page_violates_the_csp(live_server, page, django_user_model):
    user = django_user_model.objects.create_user("alice", password="alice-pass-123")
    session = Session.objects.create(owner=user, title="csp")
    append_message(session, role="user", content="hello **there**")
    append_message(session, role="assistant", content="A `reply` with *markdown*.")
    violations: list[str] = []
    page.on(
        "console",
        lambda msg: (
            violations.append(f"{page.url}: {msg.text}")
            if "Content Security Policy" in msg.text or "Refused to" in msg.text
            else None
        ),
    )
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pass-123")
    page.get_by_role("button", name="Log in").click()
    # Logging in lands on the overview (settings.LOGIN_REDIRECT_URL = "home").
    expect(page).to_have_url(live_server.url + reverse("home"))
    for path in (
        "/",
        "/conversations/",
        f"/conversations/{session.public_id}/",
        f"/chat/{session.public_id}/",
        "/chat/",
        "/compare/",
        "/import/",
        "/settings/api-keys/",
        "/api/docs",
    ):
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
    # htmx itself ran (it is loaded from this origin): the conversation filter swaps rows.
    page.goto(live_server.url + "/conversations/")
    page.locator("#q").fill("csp")
    expect(page.locator("#conversation-rows")).to_contain_text("csp")
    assert violations == []
