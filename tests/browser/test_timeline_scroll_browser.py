"""The timeline chart on a phone (issue #37, item 5): at 390 px it scrolls sideways inside
a labelled, focusable region and a hint above it says so; at 1440 px it fits, and the
hint is not shown."""

import pytest

from hermes_web.demo import load_demo_conversations
from hermes_web.models import Session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "timeline-scroll-123"

REGION = """() => {
  const region = document.querySelector('.chart-scroll');
  const hint = document.getElementById(region.getAttribute('aria-describedby'));
  return {
    role: region.getAttribute('role'),
    label: region.getAttribute('aria-label'),
    tabindex: region.getAttribute('tabindex'),
    scrolls: region.scrollWidth > region.clientWidth + 1,
    hint: hint.offsetParent !== null && hint.getBoundingClientRect().height > 0,
    page_scrolls: document.documentElement.scrollWidth > window.innerWidth + 1,
  };
}"""


def test_the_timeline_chart_scrolls_in_a_labelled_region_with_a_hint(
    live_server, page, django_user_model
):
    user = django_user_model.objects.create_user("tess", password=PASSWORD)
    load_demo_conversations(user)
    rotated = Session.objects.filter(owner=user, parent__isnull=True, children__isnull=False)[0]
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("tess")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()
    url = f"{live_server.url}/conversations/{rotated.public_id}/timeline/"
    for width, scrolls in ((390, True), (1440, False)):
        page.set_viewport_size({"width": width, "height": 844})
        page.goto(url)
        page.wait_for_load_state()
        found = page.evaluate(REGION)
        assert found["role"] == "region"
        assert found["label"]
        assert found["tabindex"] == "0"
        assert found["scrolls"] is scrolls, (width, found)
        assert found["hint"] is scrolls, (width, found)  # said exactly where it scrolls
        assert not found["page_scrolls"], (width, found)  # only the region scrolls
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(url)
    page.wait_for_load_state()
    hint = page.locator("#tl-scroll-hint")
    assert "scroll it sideways" in hint.inner_text()
    region = page.get_by_role("region", name="Compaction timeline chart, scrolls sideways")
    region.focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    # The keyboard scrolls it (Chromium animates the scroll: waited for, 5 s at most; a
    # region that does not scroll times out here).
    page.wait_for_function(
        "() => document.querySelector('.chart-scroll').scrollLeft > 0", timeout=5_000
    )
