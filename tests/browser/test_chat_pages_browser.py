"""Issue #27 in real Chromium: the chat after an in-place compaction, /mode, undo refusals
where the person is, the composer focused on load, copy (items 8–10, 12)."""

import pytest
from playwright.sync_api import expect

from hermes_web.services.sessions import append_message
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "chat-pages-123"


@pytest.fixture
def in_place(django_user_model):
    user = django_user_model.objects.create_user("carla", password=PASSWORD)
    session = seed_conversation(user, n=120, title="In place", mode="in_place")
    run = compact_now(session, user, mode="in_place")
    assert run.status == "committed", run.error
    return {"user": user, "session": session, "run": run}


def log_in(page, live_server):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("carla")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()


def in_view(page, locator) -> bool:
    box = locator.bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height


@pytest.mark.parametrize("width", [1440, 390])
def test_archived_turns_show_and_undo_refusals_appear_where_the_person_is(
    live_server, page, in_place, width
):
    page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
    log_in(page, live_server)
    session = in_place["session"]
    page.goto(live_server.url + f"/chat/{session.public_id}/")
    # The composer is focused on load.
    expect(page.locator("#message")).to_be_focused()
    # Item 8: the archived turns are behind "… archived by compaction — show".
    archived = page.locator("details.archived-turns")
    expect(archived.locator("> summary")).to_contain_text("earlier turn")
    expect(archived.locator("> summary")).to_contain_text("— show")
    expect(archived.locator(".chat-msg").first).to_be_hidden()
    archived.locator("> summary").click()
    expect(archived.locator(".chat-msg").first).to_be_visible()
    # Item 10: a message after the compaction makes the marker's undo refuse; the refusal
    # is in view, next to the status row, not at the top of a page scrolled to the bottom.
    append_message(session, role="user", content="**one more** question after the compaction")
    page.reload()
    page.locator(".chat-marker .marker-undo button").last.click()
    notice = page.locator("#chat-notices .chat-notice")
    expect(notice).to_contain_text("added after this compaction")
    assert in_view(page, notice)
    # Item 9: /mode feedback next to the composer.
    page.locator("#message").fill("/mode rotation")
    page.locator("#message").press("Enter")
    notice = page.locator("#chat-notices .chat-notice")
    expect(notice).to_contain_text("Compaction mode for this chat: rotation")
    expect(page.locator(".flash")).to_have_count(0)


def test_a_reply_can_be_copied(live_server, page, in_place):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    log_in(page, live_server)
    page.goto(live_server.url + f"/chat/{in_place['session'].public_id}/")
    copy = page.locator(".msg-actions button", has_text="Copy").last
    copy.click()
    expect(page.locator(".msg-actions .copy-status").last).to_have_text("Copied.")
    reply = page.locator(".assistant-bubble").last.text_content().strip()
    assert page.evaluate("navigator.clipboard.readText()") == reply
