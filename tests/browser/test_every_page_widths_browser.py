"""Every signed-in page at 1440, 390 and 360 px in real Chromium, over the demo data and a
hostile import (an unbroken 300-character title, word and tool name, right-to-left text,
emoji, a huge argument): no sideways scroll of the page itself (wide content scrolls inside
its own labelled scroller), no table header narrower than its word, no serious or critical
axe-core violation (issue #37)."""

import json

import pytest
from axe_playwright_python.sync_playwright import Axe

from hermes_web.demo import load_demo_conversations
from hermes_web.importers import import_path
from hermes_web.models import Compaction, Session
from tests.browser.test_phone_tables_browser import SQUEEZED

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "every-page-123"
WIDTHS = (1440, 390, 360)
LONG = "x" * 300


def hostile_session(tmp_path):
    """A Hermes session export whose words nobody would break."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "t" * 120, "arguments": json.dumps({"path": "/" + "d" * 400})},
    }
    messages = [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": f"Open {LONG} — مرحبا بالعالم 🦀🦀🦀"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "y" * 5_000},
        {"role": "assistant", "content": "z" * 700},
    ]
    record = {"id": "hostile-1", "title": LONG, "messages": messages}
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return path


def pages(user, hostile: Session) -> list[str]:
    """One URL of each signed-in page, on the demo data and on the hostile session."""
    run = Compaction.objects.filter(session__owner=user, status="committed").first()
    rotated = Session.objects.filter(owner=user, parent__isnull=True, children__isnull=False)[0]
    other = Compaction.objects.filter(session__owner=user).exclude(pk=run.pk).first()
    urls = [
        "/",
        "/conversations/",
        "/chat/",
        "/import/",
        "/search/?q=gateway",
        "/hurt/",
        "/settings/api-keys/",
        f"/chat/{rotated.public_id}/",
        f"/compare/?a={run.public_id}&b={(other or run).public_id}",
    ]
    for session in (rotated, hostile):
        urls += [
            f"/conversations/{session.public_id}/",
            f"/conversations/{session.public_id}/messages/1/",
            f"/conversations/{session.public_id}/timeline/",
            f"/conversations/{session.public_id}/tree/",
            f"/conversations/{session.public_id}/what-if/",
            f"/conversations/{session.public_id}/follow/?q=gateway",
        ]
    urls += [
        f"/compactions/{run.public_id}/",
        f"/compactions/{run.public_id}/audit/",
        f"/compactions/{run.public_id}/final-list/",
        f"/compactions/{run.public_id}/recall-test/",
    ]
    return urls


def serious_violations(page) -> list[str]:
    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}) at " + ", ".join(str(n["target"]) for n in v["nodes"][:3])
        for v in results.response["violations"]
        if v.get("impact") in ("serious", "critical")
    ]


def test_every_page_fits_1440_390_and_360_px(live_server, page, django_user_model, tmp_path):
    user = django_user_model.objects.create_user("wanda", password=PASSWORD)
    load_demo_conversations(user)
    report = import_path(hostile_session(tmp_path), owner=user)
    assert not report.errors, [str(e) for e in report.errors]
    [hostile] = report.sessions
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("wanda")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()

    problems = []
    for path in pages(user, hostile):
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            response = page.goto(live_server.url + path)
            page.wait_for_load_state()
            where = f"{path} at {width} px"
            if response is None or response.status != 200:
                problems.append(f"{where}: status {response and response.status}")
                continue
            if page.evaluate(
                "document.documentElement.scrollWidth > document.documentElement.clientWidth + 1"
            ):
                wide = page.evaluate(
                    """() => [...document.querySelectorAll('body *')]
                      .filter(e => e.getBoundingClientRect().right > innerWidth + 1)
                      .filter(e => !e.closest('[role=region][aria-label], [tabindex][aria-label]'))
                      .slice(0, 3).map(e => e.tagName + '.' + e.className)"""
                )
                problems.append(f"{where}: the page scrolls sideways ({wide})")
            if squeezed := page.evaluate(SQUEEZED):
                problems.append(f"{where}: header words squeezed {squeezed}")
            if width != 1440:
                continue  # axe's rules do not depend on the width; once per page is enough
            problems += [f"{where}: {v}" for v in serious_violations(page)]
    assert not problems, "\n".join(problems)
