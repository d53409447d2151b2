import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_sign_up_log_in_and_see_the_empty_conversation_list(live_server, page, screenshot):
    page.goto(live_server.url + "/")
    expect(page.get_by_role("heading", name="Create an account")).to_be_visible()
    screenshot("signup")
    page.get_by_label("Username").fill("newcomer")
    page.get_by_label("Password", exact=True).fill("a-long-pass-phrase-1")
    page.get_by_label("Password confirmation").fill("a-long-pass-phrase-1")
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("heading", name="Conversations")).to_be_visible()
    expect(page.get_by_text("No conversations yet.")).to_be_visible()

    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.get_by_label("Username").fill("newcomer")
    page.get_by_label("Password").fill("a-long-pass-phrase-1")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_text("No conversations yet.")).to_be_visible()
    screenshot("conversation-list-empty")
