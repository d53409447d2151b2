"""The inspector's pages at 1440 and 390 px in real Chromium: screenshots, axe-core, no overflow.

Screenshots go to test-output/screenshots/ (not committed). axe-core comes vendored inside
``axe-playwright-python`` (no network); the check fails on any serious or critical violation.
A second test walks the main paths with JavaScript turned off.
"""

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from hermes_web.models import Compaction
from tests.browser.conftest import SCREENSHOTS
from tests.web.inspector_seed import compact_now, continue_with, seed_conversation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
WIDTHS = (1440, 390, 375)  # 375: the narrowest phone the issue names
PASSWORD = "inspect-pass-123"


@pytest.fixture
def seeded(django_user_model):
    user = django_user_model.objects.create_user("ines", password=PASSWORD)
    session = seed_conversation(user, n=120, title="Parser crash", payload=True)
    committed = compact_now(session, user, mode="in_place")
    continue_with(session, 60)
    a = compact_now(session, user, trigger="what_if", overrides={"tail_token_budget": 1_000})
    b = compact_now(session, user, trigger="what_if", overrides={"tail_token_budget": 4_000})
    # What a "hermes" profile run stores (issue #13): head/tail actions, new kinds, warnings.
    b.report = {
        **b.report,
        "profile": "hermes",
        "warnings": [{"code": "over_threshold", "message": "Still 70,000 tokens."}],
        "slimming": [
            *b.report["slimming"],
            {
                "index": 2,
                "kind": "dedup",
                "region": "head",
                "role": "tool",
                "tool_name": "read_file",
                "chars_before": 9_000,
                "chars_after": 60,
                "line": "[duplicate of the output at message 90] [ref:2]",
                "before_excerpt": "same text",
                "after": "",
            },
        ],
    }
    b.save(update_fields=["report"])
    return {"user": user, "session": session, "committed": committed, "a": a, "b": b}


def log_in(page, live_server):
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("ines")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def serious_violations(page) -> list[str]:
    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at "
        + ", ".join(str(n["target"]) for n in v["nodes"][:5])
        for v in results.response["violations"]
        if v.get("impact") in ("serious", "critical")
    ]


def overflows(page) -> bool:
    return page.evaluate(
        "document.documentElement.scrollWidth > document.documentElement.clientWidth + 1"
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_at_width_have_no_serious_axe_violations(
    live_server, page, screenshot, seeded, width
):
    page.set_viewport_size({"width": width, "height": 900})
    s, run = seeded["session"], seeded["committed"]
    pages = {
        "landing": "/",
        "signup": "/accounts/signup/",
        "login": "/accounts/login/",
        "home": "/",
        "conversation": f"/conversations/{s.public_id}/",
        "inspector": f"/compactions/{run.public_id}/",
        "inspector-hermes": f"/compactions/{seeded['b'].public_id}/",
        "what-if": f"/conversations/{s.public_id}/what-if/?run={seeded['a'].public_id}",
        "compare": f"/compare/?session={s.public_id}&a={seeded['a'].public_id}"
        f"&b={seeded['b'].public_id}",
        "timeline": f"/conversations/{s.public_id}/timeline/",
        "not-found": "/no/such/page/",
    }
    problems = {}
    for name, path in pages.items():
        if name == "home":
            log_in(page, live_server)
        else:
            page.goto(live_server.url + path)
        expect(page.locator("main h1")).to_be_visible()
        screenshot(f"{name}-{width}")
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}-top.png"))  # what a visitor sees
        found = serious_violations(page)
        if overflows(page):
            found.append("the page scrolls sideways")
        if found:
            problems[name] = found
    assert not problems, "\n".join(f"{k}: {v}" for k, vs in problems.items() for v in vs)


def test_new_report_fields_show_in_the_browser(live_server, page, seeded):
    log_in(page, live_server)
    page.goto(live_server.url + f"/compactions/{seeded['b'].public_id}/")
    expect(page.locator(".warning-banner[data-code=over_threshold]")).to_contain_text(
        "Still over the threshold"
    )
    expect(page.locator("dd.profile")).to_have_text("hermes")
    expect(page.locator(".token-strip .cell").first).to_be_attached()
    page.locator("#split").screenshot(path=str(SCREENSHOTS / "inspector-split.png"))
    page.locator("#slimming a[data-region=head]").click()
    expect(page.locator("#slimming a[aria-current][data-region=head]")).to_be_visible()
    expect(page.locator("#slimming")).to_contain_text("[ref:2]")
    page.wait_for_load_state("networkidle")  # htmx has swapped and settled the panel
    page.locator("#slimming").screenshot(path=str(SCREENSHOTS / "inspector-slimming-head.png"))
    # The section nav jumps to the panels.
    page.locator(".section-nav a[href='#summary']").click()
    expect(page).to_have_url(re.compile(r"#summary$"))


def test_the_main_paths_work_without_javascript(live_server, browser, seeded):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        log_in(page, live_server)
        page.goto(live_server.url + f"/compactions/{seeded['committed'].public_id}/")
        page.locator("#slimming a[data-kind=fold]").click()
        expect(page).to_have_url(re.compile(r"kind=fold"))
        expect(page.locator("#slimming a[aria-current][data-kind=fold]")).to_be_visible()
        # The audit is a real link when htmx cannot load it.
        page.get_by_role("link", name=re.compile("Audit which identifiers")).click()
        expect(page.get_by_role("heading", name="Fact-survival audit")).to_be_visible()
        # A what-if runs through a plain form post and keeps its values.
        page.goto(live_server.url + f"/conversations/{seeded['session'].public_id}/what-if/")
        page.get_by_label("Tail budget (tokens)").fill("1500")
        page.get_by_role("button", name="Run what-if").click()
        expect(page.locator("article.card").first).to_contain_text("This what-if")
        expect(page.get_by_label("Tail budget (tokens)")).to_have_value("1500")
        assert Compaction.objects.filter(config__tail_token_budget=1500).exists()
    finally:
        context.close()
