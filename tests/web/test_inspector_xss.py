"""Hostile tool output, user text, commands and image URLs render as inert text on every page."""

import pytest
from django.urls import reverse

from hermes_web.models import Session
from tests.web.inspector_seed import PAYLOAD, RAW_FRAGMENTS, compact_now, seed_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def hostile(alice):
    session = seed_conversation(alice, n=120, payload=True, title=PAYLOAD[:150])
    what_if = compact_now(
        session,
        alice,
        trigger="what_if",
        overrides={"tail_token_budget": 1500, "fold_min_chars": 100_000},
    )
    rotation = compact_now(session, alice, mode="rotation")
    in_place_session = seed_conversation(alice, n=120, payload=True, seed=3)
    in_place = compact_now(in_place_session, alice, mode="in_place")
    return {"session": session, "what_if": what_if, "rotation": rotation, "in_place": in_place}


def pages(h):
    s, child, ip = h["session"], h["rotation"].result_session, h["in_place"]
    ids = (h["what_if"].public_id, h["rotation"].public_id, ip.public_id)
    yield reverse("conversation_list"), {}
    yield reverse("conversation_list") + "?q=script", {"HTTP_HX_REQUEST": "true"}
    for session in (s, child, ip.session):
        yield reverse("conversation_detail", args=[session.public_id]), {}
        yield reverse("conversation_detail", args=[session.public_id]) + "?archived=1", {}
        yield (
            reverse("conversation_detail", args=[session.public_id]) + "?start=0&chunk=1",
            {"HTTP_HX_REQUEST": "true"},
        )
        yield reverse("conversation_tree", args=[session.public_id]), {}
        yield reverse("conversation_timeline", args=[session.public_id]), {}
        yield reverse("what_if", args=[session.public_id]) + f"?run={h['what_if'].public_id}", {}
    for position in range(0, 8):
        yield reverse("message_detail", args=[s.public_id, position]), {}
    for public_id in ids:
        base = reverse("compaction_detail", args=[public_id])
        yield base, {}
        for kind in ("fold", "truncate", "image"):
            yield f"{base}?panel=slimming&kind={kind}", {"HTTP_HX_REQUEST": "true"}
        yield reverse("compaction_audit", args=[public_id]), {}
        yield reverse("compaction_audit", args=[public_id]), {"HTTP_HX_REQUEST": "true"}
    yield reverse("compare") + f"?session={s.public_id}&a={ids[0]}&b={ids[1]}", {}
    yield reverse("compare") + f"?session={s.public_id}", {}


def test_payload_reaches_the_panels(hostile):
    """The payload really is in what the panels show (else the inertness check proves nothing)."""
    what_if = hostile["what_if"].report
    truncated = [a for a in what_if["slimming"] if a["kind"] == "truncate"]
    assert any(
        "<script>alert" in a["before_excerpt"] and "<script>alert" in a["after"] for a in truncated
    )
    folded = hostile["rotation"].report["slimming"]
    assert any(
        "<script>alert" in (a.get("before_excerpt") or "") for a in folded if a["kind"] == "fold"
    )
    assert PAYLOAD in what_if["summarizer_input"]
    assert "<script>" in hostile["rotation"].report["summary"]


def test_every_page_renders_the_payload_inert(alice_client, hostile):
    checked = 0
    for path, headers in pages(hostile):
        response = alice_client.get(path, **headers)
        assert response.status_code == 200, path
        html = response.content.decode()
        for fragment in RAW_FRAGMENTS:
            assert fragment not in html, f"{fragment!r} unescaped on {path}"
        checked += "&lt;script&gt;alert" in html
    # The escaped payload is visible on the pages that show content (not silently dropped).
    assert checked >= 10


def test_template_syntax_in_content_is_printed_not_evaluated(alice_client, hostile):
    html = alice_client.get(
        reverse("compaction_detail", args=[hostile["what_if"].public_id])
    ).content.decode()
    assert "{{ secret_var }}" in html


def test_javascript_image_urls_never_become_sources_or_links(alice_client, hostile):
    session = hostile["session"]
    html = alice_client.get(
        reverse("conversation_detail", args=[session.public_id])
    ).content.decode()
    assert 'src="javascript:' not in html
    assert 'href="javascript:' not in html
    assert "image: javascript:alert(4)" in html


def test_exports_carry_the_payload_verbatim_as_data(alice_client, hostile):
    run = hostile["rotation"]
    as_json = alice_client.get(reverse("compaction_report_json", args=[run.public_id]))
    assert as_json["Content-Type"] == "application/json"
    as_md = alice_client.get(reverse("compaction_report_md", args=[run.public_id]))
    assert as_md["Content-Type"].startswith("text/markdown")
    assert "attachment" in as_md["Content-Disposition"]


def test_hostile_title_is_escaped_in_titles_and_crumbs(alice_client, hostile):
    assert Session.objects.get(pk=hostile["session"].pk).title.startswith("<script>")
    html = alice_client.get(
        reverse("conversation_tree", args=[hostile["session"].public_id])
    ).content.decode()
    assert "<title><script>" not in html
    assert "&lt;script&gt;" in html
