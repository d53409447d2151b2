"""Real Chromium, a real Celery worker and the offline demo model: chat, watch the reply
arrive without reloading, /compress, see the row reach committed and follow the marker."""

import re

import pytest
from playwright.sync_api import expect

from tests.conftest import WorkerProcess, point_app_at_broker

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo_worker(tmp_path, settings):
    from hermes_web.celery import app

    settings.HERMES_CHAT_MODEL = ""
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    original = app.conf.broker_url
    broker = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    point_app_at_broker(broker)
    worker = WorkerProcess(
        broker,
        tmp_path / "worker.log",
        extra_env={"HERMES_CHAT_MODEL": "", "HERMES_SUMMARY_MODEL": ""},
    )
    try:
        yield worker
    finally:
        worker.stop()
        point_app_at_broker(original)


def test_chat_with_the_demo_model_then_compress(
    live_server, page, screenshot, django_user_model, demo_worker
):
    django_user_model.objects.create_user("alice", password="alice-pass-123")
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pass-123")
    page.get_by_role("button", name="Log in").click()

    page.goto(live_server.url + "/chat/")
    expect(page.get_by_text("demo model (offline)").first).to_be_visible()
    page.get_by_label("Your first message").fill("What is in this workspace?")
    page.get_by_role("button", name="Start chatting").click()
    expect(page).to_have_url(re.compile(r"/chat/[0-9a-f]{32}/$"))
    chat_url = page.url
    # The reply arrives by polling the turn, without a reload.
    reply = page.locator(".assistant-bubble").filter(has_text="Demo model (offline)")
    expect(reply.first).to_be_visible(timeout=60_000)
    expect(page.locator(".turn.turn-done")).to_be_visible(timeout=60_000)
    expect(page.locator(".toolcall").filter(has_text="list_files").first).to_be_visible()
    assert page.url == chat_url
    screenshot("chat-first-reply")

    page.locator("#message").fill("Why did ingest fail on March 14?")
    page.get_by_role("button", name="Send").click()
    expect(
        page.locator(".user-bubble").filter(has_text="Why did ingest fail on March 14?")
    ).to_be_visible()
    expect(page.locator("#message")).to_have_value("")
    expect(page.locator(".toolcall").filter(has_text="ingest-2025-03-14.log").first).to_be_visible(
        timeout=60_000
    )
    expect(page.locator(".assistant-bubble").filter(has_text="ERROR").first).to_be_visible(
        timeout=60_000
    )
    expect(page.locator(".turn.turn-done")).to_have_count(2, timeout=60_000)
    expect(page.locator("#chat-meter")).to_contain_text("prompt tokens (provider)")
    screenshot("chat-tools-and-meter")

    page.locator("#message").fill("/compress ingest failure")
    page.get_by_role("button", name="Send").click()
    row = page.locator("#compaction-status .compaction-row")
    expect(row).to_contain_text("ingest failure", timeout=30_000)
    # Rotation: on commit the page follows to the continuation session.
    expect(page).not_to_have_url(chat_url, timeout=60_000)
    expect(row.locator(".badge.committed")).to_be_visible()
    marker = page.locator(".chat-marker")
    expect(marker).to_contain_text("Context compacted")
    link = marker.get_by_role("link", name="Inspect this compaction")
    expect(link).to_have_attribute("href", re.compile(r"^/compactions/[0-9a-f]{32}/$"))
    screenshot("chat-after-compress")

    # The old URL redirects to the live session; the marker opens the inspector.
    page.goto(chat_url)
    expect(page.locator(".chat-marker")).to_be_visible()
    page.locator(".chat-marker").get_by_role("link", name="Inspect this compaction").click()
    expect(page).to_have_url(re.compile(r"/compactions/[0-9a-f]{32}/$"))
    screenshot("chat-marker-inspector")
