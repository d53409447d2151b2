"""Undo and redo from the compaction inspector in real Chromium (a plain form: no JS needed),
the refusal in words when messages came after, and the conversation list grouping a chain."""

import pytest
from playwright.sync_api import expect

from tests.web.test_chat_undo import compacted

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("una", password="undo-pass-123")


def log_in(page, live_server):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("una")
    page.get_by_label("Password").fill("undo-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_undo_then_redo_from_the_inspector(live_server, page, screenshot, user):
    from hermes_web.models import Compaction, Session
    from hermes_web.services.sessions import append_message, resolve_tip

    session, run, _ = compacted(user, "rotation")
    log_in(page, live_server)
    page.goto(f"{live_server.url}/compactions/{run.public_id}/")
    panel = page.locator("#undo")
    expect(panel).to_contain_text("Never undone.")
    panel.get_by_role("button", name="Undo this compaction").click()
    expect(page.locator("h1 .badge")).to_have_text("undone")
    expect(page.get_by_role("alert").or_(page.get_by_role("status")).first).to_be_visible()
    expect(panel).to_contain_text("This compaction was undone")
    expect(panel.locator(".undo-history li")).to_have_count(1)
    expect(panel.locator(".undo-history li")).to_contain_text("undo")
    assert Compaction.objects.get(pk=run.pk).status == "undone"
    assert Session.objects.get(pk=session.pk).end_reason == ""

    # Continue the restored conversation: a redo now would leave that message out.
    append_message(Session.objects.get(pk=session.pk), role="user", content="one more thing")
    page.reload()
    expect(panel.locator(".undo-reason")).to_contain_text(
        "1 message was added after this compaction"
    )
    screenshot("inspector-undo-refusal")
    panel.get_by_role("button", name="Redo this compaction and carry 1 message over").click()
    expect(page.locator("h1 .badge")).to_have_text("committed")
    expect(panel.locator(".undo-history li")).to_have_count(2)
    expect(panel.locator(".undo-history li").first).to_contain_text("1 message carried over")
    child = resolve_tip(Session.objects.get(pk=session.pk))
    assert child.pk == run.result_session_id
    assert child.messages.filter(content="one more thing", active=True).exists()

    # The list shows the chain under its live session, with the undone/redone history counted.
    page.goto(f"{live_server.url}/conversations/")
    expect(page.locator("tr.chain-tip")).to_have_count(1)
    expect(page.locator("tr.chain-member")).to_have_count(1)
    expect(page.locator("tr.chain-tip")).to_contain_text("chain of 2")
