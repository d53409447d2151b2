"""The pages the frameworks draw for us (django-ninja's API docs, Django's admin) at 1440 and
390 px in real Chromium: no serious or critical axe-core violation, no sideways scroll."""

import pytest
from playwright.sync_api import expect

from tests.browser.test_inspector_pages_browser import overflows, serious_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "framework-pass-123"


@pytest.mark.parametrize("width", [1440, 390])
def test_api_docs_and_admin_have_no_serious_axe_violations(
    live_server, page, django_user_model, width
):
    django_user_model.objects.create_superuser("root", "root@example.org", PASSWORD)
    page.set_viewport_size({"width": width, "height": 900})
    problems = {}

    def check(name):
        found = serious_violations(page)
        if overflows(page):
            found.append("the page scrolls sideways")
        if found:
            problems[name] = found

    page.goto(live_server.url + "/admin/login/")
    check("admin login")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    check("admin index")
    page.goto(live_server.url + "/api/docs")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    check("api docs")
    assert not problems, "\n".join(f"{k}: {v}" for k, vs in problems.items() for v in vs)
