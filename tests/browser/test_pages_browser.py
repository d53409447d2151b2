"""Issue #27 in real Chromium: phones, hostile data, axe-core, keyboard (items 13–16).

A conversation holding a 200,000-character word (in its title, a message and a tool output)
and a long id must not make any page scroll sideways at 1440, 390 or 360 px; the navigation
wraps at 390 px; the chat's composer stays small; axe-core finds nothing serious or critical
on the chat, API keys, what-if and inspector pages; the token strip works by keyboard; a
reload of the API keys page after creating a key creates no second key.
"""

import pytest
from playwright.sync_api import expect

from hermes_web.models import ApiKey
from hermes_web.services.sessions import append_message
from tests.browser.test_inspector_pages_browser import overflows, serious_violations
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pages-pass-123"
WORD = "x" * 200_000


@pytest.fixture
def hostile(django_user_model):
    user = django_user_model.objects.create_user("paula", password=PASSWORD)
    session = seed_conversation(user, n=80, title="T" + "y" * 5_000)
    append_message(session, role="user", content=f"look at {WORD} please")
    append_message(session, role="assistant", content=f"I see `{WORD[:50_000]}` and /{'z' * 3_000}")
    run = compact_now(session, user, mode="in_place", overrides={"tail_token_budget": 1_000})
    what_if = compact_now(session, user, trigger="what_if")
    return {"user": user, "session": session, "run": run, "what_if": what_if}


def log_in(page, live_server):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("paula")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()


def pages_of(data) -> dict[str, str]:
    s, run = data["session"], data["run"]
    last = s.messages.order_by("-position").first().position
    return {
        "chat": f"/chat/{s.public_id}/",
        "conversations": "/conversations/",
        "conversation": f"/conversations/{s.public_id}/?archived=1",
        "message": f"/conversations/{s.public_id}/messages/{last - 1}/",
        "inspector": f"/compactions/{run.public_id}/",
        "what-if": f"/conversations/{s.public_id}/what-if/?run={data['what_if'].public_id}",
        "api-keys": "/settings/api-keys/",
    }


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844), (360, 740)])
def test_no_page_scrolls_sideways_and_axe_finds_nothing_serious(
    live_server, page, hostile, width, height
):
    page.set_viewport_size({"width": width, "height": height})
    log_in(page, live_server)
    problems = {}
    for name, path in pages_of(hostile).items():
        page.goto(live_server.url + path)
        expect(page.locator("main h1").first).to_be_visible()
        found = serious_violations(page) if width != 360 else []
        if overflows(page):
            width_now = page.evaluate("document.documentElement.scrollWidth")
            found.append(f"the page scrolls sideways ({width_now} px)")
        if found:
            problems[name] = found
    assert not problems, "\n".join(f"{k}: {v}" for k, vs in problems.items() for v in vs)


def test_the_navigation_wraps_and_the_composer_stays_small_on_a_phone(live_server, page, hostile):
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server)
    page.goto(live_server.url + f"/chat/{hostile['session'].public_id}/")
    for link in page.locator(".topbar nav a").all():
        box = link.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= 390, (link.text_content(), box)
    composer = page.locator("#composer").bounding_box()
    assert composer is not None
    assert composer["height"] < 0.25 * 844, composer


def test_the_token_strip_works_by_keyboard(live_server, page, hostile):
    log_in(page, live_server)
    page.goto(live_server.url + f"/compactions/{hostile['run'].public_id}/")
    cells = page.locator(".token-strip .cell")
    assert cells.count() > 2
    cells.first.focus()
    expect(cells.first).to_be_focused()
    page.keyboard.press("ArrowRight")
    expect(cells.nth(1)).to_be_focused()
    page.keyboard.press("End")
    expect(cells.last).to_be_focused()
    assert "tokens" in (cells.last.get_attribute("aria-label") or "")


def test_a_reload_after_creating_a_key_creates_no_second_key(live_server, page, hostile):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    log_in(page, live_server)
    page.goto(live_server.url + "/settings/api-keys/")
    page.get_by_label("Name").fill("backup script")
    page.get_by_role("button", name="Create key").click()
    raw = page.locator("#raw-key").text_content().strip()
    assert raw.startswith("hk_")
    page.get_by_role("button", name="Copy the key").click()
    expect(page.locator(".copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == raw
    page.reload()
    expect(page.locator("#raw-key")).to_have_count(0)
    assert ApiKey.objects.filter(owner=hostile["user"]).count() == 1
