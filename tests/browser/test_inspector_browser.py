"""The inspector in real Chromium: conversation, inspector panels, what-if, rotation tree, compare."""

import re

import pytest
from playwright.sync_api import expect

from tests.web.inspector_seed import compact_now, continue_with, seed_conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ines", password="inspect-pass-123")


def log_in(page, live_server):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("ines")
    page.get_by_label("Password").fill("inspect-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_conversation_then_inspector_split_fold_and_audit(live_server, page, screenshot, user):
    session = seed_conversation(user, n=120, title="Parser crash")
    run = compact_now(session, user, mode="in_place")
    log_in(page, live_server)
    page.get_by_role("link", name="Parser crash").click()
    expect(page.get_by_role("heading", name="Parser crash")).to_be_visible()
    screenshot("conversation-detail")
    # A tool call links to its result on the same page.
    page.locator(".toolcall a", has_text="→ result").first.click()
    expect(page).to_have_url(re.compile(r"#result-"))

    page.goto(live_server.url + f"/compactions/{run.public_id}/")
    expect(page.get_by_role("heading", name=re.compile("Compaction inspector"))).to_be_visible()
    expect(page.locator(".splitbar .seg-middle")).to_be_visible()
    expect(page.locator(".splitbar .threshold")).to_be_attached()
    expect(page.locator("pre.fold-line").first).to_contain_text("[")
    expect(page.get_by_role("heading", name="Active Task")).to_be_visible()
    screenshot("compaction-inspector")
    # The audit loads (htmx) when scrolled into view.
    page.locator("#audit").scroll_into_view_if_needed()
    expect(page.locator("#audit .audit-score")).to_contain_text(
        "identifiers from the middle survive"
    )
    # The slimming pager works in place.
    folds = page.locator("#slimming a[data-kind=fold]")
    folds.click()
    expect(page.locator("#slimming a[aria-current][data-kind=fold]")).to_have_text(
        re.compile(r"^fold \(\d+\)$")
    )
    screenshot("compaction-inspector-audit")

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator(".splitbar")).to_be_visible()
    screenshot("compaction-inspector-narrow")


def test_what_if_shows_a_second_inspector_and_commits(live_server, page, screenshot, user):
    session = seed_conversation(user, n=120, title="Storage refactor")
    compact_now(session, user, mode="in_place")
    continue_with(session, 80)  # new turns, so there is a middle to compact again
    log_in(page, live_server)
    page.goto(live_server.url + f"/conversations/{session.public_id}/what-if/")
    page.get_by_label("Tail budget (tokens)").fill("1500")
    page.get_by_label("Focus topic (optional)").fill("the sqlite connection")
    page.get_by_role("button", name="Run what-if").click()
    cards = page.locator("article.card")
    expect(cards).to_have_count(2)
    expect(cards.nth(0)).to_contain_text("This what-if")
    expect(cards.nth(0).locator(".badge")).to_have_text("dry run")
    expect(cards.nth(1)).to_contain_text("Latest committed")
    expect(cards.nth(0).locator(".splitbar")).to_be_visible()
    screenshot("what-if")
    cards.nth(0).get_by_role("link", name="Open the full inspector").click()
    expect(page.get_by_text("Dry run: this is what a compaction")).to_be_visible()
    page.get_by_role("button", name=re.compile("Commit this")).click()
    expect(page.locator("h1 .badge")).to_have_text(re.compile("committed", re.IGNORECASE))
    screenshot("what-if-committed")


def test_rotation_tree_edge_leads_to_the_inspector(live_server, page, screenshot, user):
    root = seed_conversation(user, n=100, title="Chain")
    first = compact_now(root, user, mode="rotation")
    continue_with(first.result_session, 60)
    second = compact_now(first.result_session, user, mode="rotation")
    log_in(page, live_server)
    page.goto(live_server.url + f"/conversations/{second.result_session.public_id}/tree/")
    expect(page.locator(".tree-node")).to_have_count(3)
    screenshot("rotation-tree")
    page.locator(".tree-node .edge a").first.click()
    expect(page).to_have_url(re.compile(f"/compactions/{first.public_id}/"))
    expect(page.get_by_role("heading", name=re.compile("Compaction inspector"))).to_be_visible()
    page.goto(live_server.url + f"/conversations/{root.public_id}/timeline/")
    expect(page.locator("svg.timeline rect.before")).to_have_count(2)
    screenshot("timeline")


def test_compare_rotation_and_in_place(live_server, page, screenshot, user):
    seed_conversation(user, n=120, title="Compare me")
    log_in(page, live_server)
    page.get_by_role("link", name="Compare", exact=True).click()
    option = page.locator("#c-session option", has_text="Compare me (chat)")
    page.get_by_label("Conversation").select_option(option.get_attribute("value"))
    page.get_by_role("button", name="Choose").click()
    page.get_by_role("button", name="Run rotation and in-place").click()
    structure = page.locator("#structure")
    expect(structure).to_contain_text("new child session")
    expect(structure).to_contain_text("same session id")
    expect(page.locator("article.card")).to_have_count(2)
    expect(page.locator("#summary-diff")).to_be_visible()
    screenshot("compare")
