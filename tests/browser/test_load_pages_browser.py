"""Issue #28, pages under load, in real Chromium: what the inspector and the conversation page
no longer send on every view arrives in place when asked for."""

import re

import pytest
from playwright.sync_api import expect

from hermes_web.views import compactions
from hermes_web.views.conversations import CHUNK
from tests.browser.test_inspector_pages_browser import overflows, serious_violations
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("lena", password="lazy-pass-123")


def log_in(page, live_server):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("lena")
    page.get_by_label("Password").fill("lazy-pass-123")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_opening_the_inspectors_boxes_loads_their_texts_in_place(
    live_server, page, user, monkeypatch
):
    session = seed_conversation(user, n=120, title="Lazy boxes")
    run = compact_now(session, user, mode="rotation")
    rows = run.report["counts"]["messages_after"]
    monkeypatch.setattr(compactions, "FINAL_INLINE_MAX", rows - 1)  # the list loads on open
    log_in(page, live_server)
    page.goto(live_server.url + f"/compactions/{run.public_id}/")
    box = page.locator("#summarizer-input details")
    expect(box.locator("pre")).to_have_count(0)
    box.locator("summary").click()
    expect(box.locator("pre")).to_contain_text(run.report["summarizer_input"][:40])
    expect(page).to_have_url(re.compile(rf"/compactions/{run.public_id}/$"))  # in place

    final = page.locator("#final-list details")
    expect(final.locator("tbody tr")).to_have_count(0)
    final.locator("summary").click()
    expect(final.locator("tbody tr")).to_have_count(rows)
    # Closed and opened again: loaded once, not appended twice.
    final.locator("summary").click()
    final.locator("summary").click()
    expect(final.locator("tbody tr")).to_have_count(rows)


def test_load_more_adds_the_next_window_in_place(live_server, page, user):
    session = seed_conversation(user, n=CHUNK + 5, title="Windows")
    log_in(page, live_server)
    page.goto(live_server.url + f"/conversations/{session.public_id}/")
    messages = page.locator("section.messages article.msg")
    expect(messages).to_have_count(CHUNK)
    page.get_by_role("link", name=re.compile("Load more messages")).click()
    expect(messages).to_have_count(CHUNK + 5)
    expect(page.locator(f"#m{CHUNK + 4}")).to_be_attached()
    expect(page).to_have_url(re.compile(rf"/conversations/{session.public_id}/$"))


@pytest.mark.parametrize("width", [1440, 390])
def test_the_texts_own_pages_and_the_opened_boxes_pass_axe_without_sideways_scroll(
    live_server, page, user, width
):
    session = seed_conversation(user, n=120, title="Lazy pages", payload=True)
    run = compact_now(session, user, mode="rotation")
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server)
    problems = {}
    for name, path in {
        "summarizer input": f"/compactions/{run.public_id}/summarizer-input/",
        "final list": f"/compactions/{run.public_id}/final-list/",
        "inspector, boxes open": f"/compactions/{run.public_id}/",
    }.items():
        page.goto(live_server.url + path)
        expect(page.locator("main h1")).to_be_visible()
        if name.startswith("inspector"):
            page.locator("#summarizer-input details summary").click()
            expect(page.locator("#summarizer-input details pre")).to_be_visible()
        found = serious_violations(page)
        if overflows(page):
            found.append("the page scrolls sideways")
        if found:
            problems[name] = found
    assert not problems, problems
