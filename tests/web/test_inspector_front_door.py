"""The front door: landing and overview at /, error pages, favicon, sign-up ARIA, counts agree."""

import re

import pytest
from django.test import RequestFactory
from django.urls import reverse
from django.views.defaults import server_error

from hermes_web.management.commands.load_demo import DEMO_PASSWORD, DEMO_USERNAME
from hermes_web.models import Compaction
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = pytest.mark.django_db


def test_signed_out_home_explains_the_product_and_offers_the_demo(client, django_user_model):
    django_user_model.objects.create_user(DEMO_USERNAME, password=DEMO_PASSWORD)
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "See exactly what your agent forgot" in html
    assert f"<code>{DEMO_USERNAME}</code>" in html
    assert f"<code>{DEMO_PASSWORD}</code>" in html
    assert 'src="/static/hermes_web/inspector-preview.svg"' in html
    assert reverse("login") in html
    assert reverse("signup") in html


def test_signed_out_home_without_a_demo_user_does_not_advertise_one(client, alice):
    html = client.get("/").content.decode()
    assert "demo account" not in html


def test_signed_in_home_links_an_example_compaction_and_charts_savings(alice, alice_client):
    session = seed_conversation(alice, n=120, title="Overview me")
    run = compact_now(session, alice, mode="in_place")
    html = alice_client.get("/").content.decode()
    assert "Inspect an example compaction" in html
    assert reverse("compaction_detail", args=[run.public_id]) in html
    saved = run.tokens_before - run.tokens_after
    assert f"<strong>{saved:,}</strong> tokens saved by the last 1 committed compaction" in html
    assert "Overview me" in html


def test_404_is_app_styled_with_navigation(alice_client):
    response = alice_client.get("/compactions/does-not-exist/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "Page not found" in html
    assert 'aria-label="Main"' in html  # the app's nav, not Django's bare page


def test_500_page_renders_without_a_request_context():
    response = server_error(RequestFactory().get("/boom"))
    assert response.status_code == 500
    assert b"Something went wrong on our side" in response.content
    assert b'href="/"' in response.content


def test_favicon_is_served(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert body[:4] == b"\x00\x00\x01\x00"  # an ICO header


def test_signup_help_texts_exist_for_aria_describedby(client, alice):
    html = client.get(reverse("signup")).content.decode()
    described = set(re.findall(r'aria-describedby="([^"]+)"', html))
    assert described
    for ids in described:
        for element_id in ids.split():
            assert f'id="{element_id}"' in html, element_id


def test_compaction_counts_agree_for_a_what_if_only_conversation(alice, alice_client):
    session = seed_conversation(alice, n=120, title="Only a what-if")
    compact_now(session, alice, trigger="what_if")
    assert Compaction.objects.filter(session=session).count() == 1
    listing = alice_client.get(reverse("conversation_list")).content.decode()
    row = listing.split("Only a what-if", 1)[1].split("</tr>", 1)[0]
    counts = re.findall(r'<td class="num">(\d+)</td>', row)
    assert counts[-1] == "0"
    page = alice_client.get(reverse("conversation_detail", args=[session.public_id]))
    assert "0 committed · 1 what-if" in page.content.decode()
    timeline = alice_client.get(reverse("conversation_timeline", args=[session.public_id]))
    text = timeline.content.decode()
    assert "No compaction has been committed" in text
    assert "1 what-if" in text


def test_api_docs_use_the_pages_words(alice_client):
    schema = alice_client.get("/api/openapi.json").json()
    out = schema["components"]["schemas"]["CompactionOut"]["properties"]
    assert "`forced`: manual" in out["trigger"]["description"]
    assert "`what_if`: what-if" in out["trigger"]["description"]
    assert "`dry_run`: dry run" in out["status"]["description"]
    assert "`in_place`: in-place" in out["mode"]["description"]


def test_pages_have_no_inline_scripts_or_event_handlers(alice, alice_client, client):
    session = seed_conversation(alice, n=120, title="CSP ready", payload=True)
    run = compact_now(session, alice, mode="in_place")
    dry = compact_now(session, alice, trigger="what_if")
    urls = [
        "/",
        reverse("conversation_detail", args=[session.public_id]),
        reverse("compaction_detail", args=[run.public_id]),
        reverse("compaction_audit", args=[run.public_id]),
        reverse("what_if", args=[session.public_id]) + f"?run={dry.public_id}",
        reverse("compare") + f"?session={session.public_id}&a={run.public_id}&b={dry.public_id}",
        reverse("conversation_timeline", args=[session.public_id]),
        reverse("conversation_tree", args=[session.public_id]),
        "/no/such/page/",
    ]
    for url in urls:
        html = alice_client.get(url).content.decode()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), url
        assert not re.search(r"<[a-z][^>]*\son[a-z]+\s*=", html), url
    client.logout()
    landing = client.get("/").content.decode()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", landing)
