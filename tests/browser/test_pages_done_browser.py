"""Issue #27's "Done when" in real Chromium, for what the other browser tests leave out.

axe-core (no serious or critical violation) and no sideways scroll at 1440 and 390 px on the
chat list, the import page, a rotation's tree and live chat, an agent's own (native)
compaction and its Compare with our replay, the fact-survival audit's own page; the chat and the inspector used with the keyboard
alone; a rotation's old chat URL followed to the live session; Regenerate replacing the newest
reply in place (htmx) without a reload.
"""

import re

import pytest
from playwright.sync_api import expect

from hermes_web.importers import import_path
from hermes_web.models import Compaction, Session
from hermes_web.services.sessions import append_message
from tests.browser.test_inspector_pages_browser import overflows, serious_violations
from tests.web.inspector_seed import compact_now, seed_conversation
from tests.web.native_fixtures import claude_code_lines, write_lines

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "done-when-123"
LONG = "w" * 20_000


@pytest.fixture
def corpus(django_user_model, tmp_path):
    user = django_user_model.objects.create_user("dora", password=PASSWORD)
    parent = seed_conversation(user, n=120, title="Rotated " + LONG, mode="rotation")
    append_message(parent, role="user", content=f"a word of {LONG} characters")
    run = compact_now(parent, user, mode="rotation", overrides={"tail_token_budget": 1_000})
    assert run.status == "committed", run.error
    child = Session.objects.get(pk=run.result_session_id)
    append_message(child, role="user", content="What changed after the compaction?")
    reply = append_message(child, role="assistant", content="The **old** reply to take back.")
    imported = import_path(
        write_lines(tmp_path / "cc.jsonl", claude_code_lines(compacts=2, rounds=8)), owner=user
    )
    native = Compaction.objects.filter(session=imported.sessions[0]).order_by("pk").last()
    return {
        "user": user,
        "parent": parent,
        "child": child,
        "run": run,
        "reply": reply,
        "native": native,
    }


def log_in(page, live_server):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("dora")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_the_remaining_pages_pass_axe_and_never_scroll_sideways(
    live_server, page, corpus, width, height
):
    page.set_viewport_size({"width": width, "height": height})
    log_in(page, live_server)
    native = corpus["native"]
    page.goto(live_server.url + f"/compactions/{native.public_id}/")
    page.get_by_role("button", name=re.compile("Replay", re.I)).first.click()
    page.wait_for_url(re.compile(r"/compare/"))
    compare = page.url
    pages = {
        "chat-list": "/chat/",
        "import": "/import/",
        "tree": f"/conversations/{corpus['parent'].public_id}/tree/",
        "live-chat": f"/chat/{corpus['child'].public_id}/",
        "old-chat-history": f"/chat/{corpus['parent'].public_id}/?history=1",
        "native-inspector": f"/compactions/{native.public_id}/",
        "native-compare": compare.replace(live_server.url, ""),
        # The audit's page of its own: where the inspector's "Fact-survival audit" link leads
        # without JavaScript (the inline htmx partial is checked with the inspector).
        "audit": f"/compactions/{corpus['run'].public_id}/audit/",
        "native-audit": f"/compactions/{native.public_id}/audit/",
    }
    problems = {}
    for name, path in pages.items():
        page.goto(live_server.url + path)
        expect(page.locator("main h1").first).to_be_visible()
        found = serious_violations(page)
        if overflows(page):
            found.append(
                f"scrolls sideways ({page.evaluate('document.documentElement.scrollWidth')} px)"
            )
        if found:
            problems[name] = found
    assert not problems, "\n".join(f"{k}: {v}" for k, vs in problems.items() for v in vs)


def tab_to(page, pattern: str, *, back: bool = False, limit: int = 400) -> None:
    """Press Tab (or Shift+Tab) until the focused element's text matches ``pattern``."""
    for _ in range(limit):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        text = page.evaluate("document.activeElement && document.activeElement.innerText || ''")
        if re.search(pattern, text or ""):
            return
    raise AssertionError(f"no element matching {pattern!r} reachable by keyboard")


def test_chat_and_inspector_by_keyboard_alone(live_server, page, corpus):
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(page, live_server)
    # An old URL of the rotated chat follows to the live session (the defect walk's rotation).
    page.goto(live_server.url + f"/chat/{corpus['parent'].public_id}/")
    expect(page).to_have_url(re.compile(rf"/chat/{corpus['child'].public_id}/"))
    # The composer has the focus; a command typed and sent with Enter answers near it.
    expect(page.locator("#message")).to_be_focused()
    page.keyboard.type("/mode in_place")
    page.keyboard.press("Enter")
    expect(page.locator("#chat-notices .chat-notice")).to_contain_text("in-place")
    # From the composer, back to the compaction marker's inspector link, opened with Enter.
    page.locator("#message").focus()
    tab_to(page, r"^Inspect this compaction$", back=True)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/compactions/{corpus['run'].public_id}/"))
    # In the inspector: a [ref:N] link of the summary, followed with Enter, opens its message.
    tab_to(page, r"^\[ref:\d+\]$")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/conversations/[0-9a-f]+/messages/\d+/"))
    expect(page.locator("main h1").first).to_be_visible()


def test_regenerate_replaces_the_newest_reply_in_place(live_server, page, corpus):
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page, live_server)
    url = live_server.url + f"/chat/{corpus['child'].public_id}/"
    page.goto(url)
    old = page.locator(f"#msg-{corpus['reply'].pk}")
    expect(old).to_contain_text("The old reply to take back.")
    page.evaluate("window.__same_page = true")
    page.get_by_role("button", name="Regenerate").click()
    expect(old).to_have_count(0)
    expect(page.locator(".turn").last).to_be_visible()
    assert page.evaluate("window.__same_page === true"), "the page was reloaded"
    assert page.url == url
    # The old reply is archived, not deleted: the conversation page's archived rows keep it.
    page.goto(live_server.url + f"/conversations/{corpus['child'].public_id}/?archived=1")
    expect(page.get_by_text(re.compile("reply to take back")).first).to_be_attached()
