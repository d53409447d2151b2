"""Follow a fact and run a recall test in real Chromium: the nav's search box → a hit → its
Follow link → the fate strip → the compaction's inspector at the right section; the recall
test started from the inspector's button, progressing on the page (a real worker, a slow fake
model), finished with its arms."""

import re

import pytest
from playwright.sync_api import expect

from compaction.probes import normalize
from hermes_web.models import Compaction
from hermes_web.services.fate import follow, input_messages
from hermes_web.services.recall_test import draw_bank
from tests.web.inspector_seed import compact_now, seed_conversation
from tests.web.test_recall_test import model_worker  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _login(page, live_server, name, password):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def test_follow_a_fact_then_run_a_recall_test(
    live_server,
    page,
    screenshot,
    django_user_model,
    model_worker,  # noqa: F811
):
    worker, server = model_worker
    user = django_user_model.objects.create_user("fiona", password="fate-pass-123")
    session = seed_conversation(user, n=120, seed=21)
    run = compact_now(session, user, mode="rotation")
    bank = draw_bank(run, input_messages(run), 15)
    path = next(p.answer for p in bank if p.kind == "path")
    expected = follow(session, path)["compactions"][0]["fate"]
    # Slow model replies, so the test is seen running before it finishes.
    server.default_reply = {"sleep": 1.5, "content": "1. unknown"}

    _login(page, live_server, "fiona", "fate-pass-123")
    # From the search box in the nav: a hit, then "Follow" on it.
    page.locator("#nav-q").fill(f'"{path}"')
    page.locator("#nav-q").press("Enter")
    expect(page.get_by_role("heading", name="Search", exact=True)).to_be_visible()
    hit = page.locator(".search-hit").first
    expect(hit.locator(".hit-snippet mark").first).to_be_visible()
    screenshot("search-hit")
    hit.get_by_role("link", name=re.compile("^Follow")).click()
    expect(page.get_by_role("heading", name="Follow a fact")).to_be_visible()
    strip = page.get_by_role("list", name=re.compile("Fate per compaction"))
    cell = strip.get_by_role("link").first
    expect(cell).to_contain_text(expected["label"])
    screenshot("follow-fate-strip")
    cell.click()
    expect(page.get_by_role("heading", name=re.compile("Compaction inspector"))).to_be_visible()
    assert page.url.endswith(f"#{expected['anchor']}")
    expect(page.locator(f"#{expected['anchor']}")).to_be_attached()
    assert normalize(path)  # the string followed is a real path of the removed region

    # The recall test: started by the button, progressing, finished with its arms.
    page.get_by_role("button", name="Run a recall test").click()
    expect(page.locator(".recall-test").first).to_have_attribute(
        "data-status", re.compile("queued|running"), timeout=20_000
    )
    expect(page.get_by_role("progressbar", name="recall test progress").first).to_be_visible()
    screenshot("recall-test-running")
    expect(page.locator(".recall-test").first).to_have_attribute(
        "data-status", "done", timeout=90_000
    )
    expect(page.locator('td[data-arm="needle"]').first).to_contain_text("%")
    expect(page.locator('td[data-arm="model"]').first).to_have_attribute("data-status", "done")
    screenshot("recall-test-done")
    assert Compaction.objects.get(pk=run.pk).recall_tests.get().status == "done"
