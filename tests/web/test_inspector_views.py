"""Compaction inspector, exports, audit, what-if, commit, tree, timeline and compare views."""

import json

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import request_compaction
from tests.web.inspector_seed import compact_now, continue_with, seed_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def committed(alice):
    session = seed_conversation(alice, n=120, title="Parser work")
    return compact_now(session, alice, mode="rotation")


def url(name, *args):
    return reverse(name, args=args)


# ---------------------------------------------------------------- inspector


def test_inspector_shows_every_panel(committed, alice_client):
    response = alice_client.get(url("compaction_detail", committed.public_id))
    assert response.status_code == 200
    html = response.content.decode()
    report = committed.report
    for panel in (
        'id="numbers"',
        'id="split"',
        'id="slimming"',
        'id="summarizer-input"',
        'id="summary"',
        'id="repairs"',
        'id="final-list"',
        'id="audit"',
    ):
        assert panel in html
    assert 'class="seg seg-middle"' in html
    assert 'class="threshold"' in html
    first_fold = next(a for a in report["slimming"] if a["kind"] == "fold")
    assert escape(first_fold["fold_line"]) in html
    assert "END OF CONTEXT SUMMARY" in html
    assert "REFERENCE ONLY" in html
    assert "<h3>Active Task</h3>" in html
    assert "deterministic" in html
    # The committed rows of the child session are listed with their total.
    final = html[html.index('id="final-list"') :].split("</table>")[0]
    assert final.count("<tr") - 1 == report["counts"]["messages_after"]  # minus the header
    assert f"<strong>{sum(report['output_message_tokens']):,}</strong> tokens" in html
    assert url("compaction_report_json", committed.public_id) in html
    assert url("compaction_report_md", committed.public_id) in html


def test_slimming_panel_pages_and_filters_as_a_partial(committed, alice_client):
    base = url("compaction_detail", committed.public_id)
    partial = alice_client.get(
        base, {"panel": "slimming", "kind": "fold", "page": 2}, HTTP_HX_REQUEST="true"
    )
    assert partial.status_code == 200
    assert b'id="slimming"' in partial.content
    assert b"<html" not in partial.content
    folds = sum(1 for a in committed.report["slimming"] if a["kind"] == "fold")
    pages = -(-folds // 50)
    html = partial.content.decode()
    assert f"{folds} shown, page {min(2, pages)} of {pages}" in html
    assert f'aria-current="true">fold ({folds})' in html
    # Without htmx the same query renders the whole page.
    full = alice_client.get(base, {"panel": "slimming", "kind": "fold", "page": 2})
    assert b"<html" in full.content


def test_status_partial_polls_while_queued_and_refreshes_when_done(alice, alice_client, committed):
    queued = request_compaction(
        session=committed.result_session, requested_by=alice, summarizer="deterministic"
    )
    assert queued.status == "queued"
    base = url("compaction_detail", queued.public_id)
    page = alice_client.get(base).content.decode()
    assert 'hx-trigger="every 1s"' in page
    assert "reload" in page
    partial = alice_client.get(base, {"panel": "compaction-status"}, HTTP_HX_REQUEST="true")
    assert b'id="compaction-status"' in partial.content
    assert b"<html" not in partial.content
    done = alice_client.get(
        url("compaction_detail", committed.public_id),
        {"panel": "compaction-status"},
        HTTP_HX_REQUEST="true",
    )
    assert done.status_code == 204
    assert done["HX-Refresh"] == "true"


def test_sparse_skipped_report_renders(alice, alice_client):
    session = seed_conversation(alice, n=20)
    now = timezone.now()
    skipped = Compaction.objects.create(
        session=session,
        trigger="auto",
        status="skipped",
        reason="ineffective",
        report={"status": "skipped", "reason": "ineffective", "tokens": {"threshold": 64000}},
        started_at=now,
        finished_at=now,
    )
    response = alice_client.get(url("compaction_detail", skipped.public_id))
    assert response.status_code == 200
    # The reason in words, not its code (issue #27).
    assert b"the latest compactions saved too little" in response.content


def test_exports_json_and_markdown(committed, alice_client):
    as_json = alice_client.get(url("compaction_report_json", committed.public_id))
    assert as_json.status_code == 200
    assert json.loads(as_json.content) == committed.report
    assert "attachment" in as_json["Content-Disposition"]
    as_md = alice_client.get(url("compaction_report_md", committed.public_id))
    assert as_md["Content-Type"].startswith("text/markdown")
    assert as_md.content.decode().startswith("# Compaction report")


def test_audit_full_page_and_partial(committed, alice_client):
    full = alice_client.get(url("compaction_audit", committed.public_id))
    assert full.status_code == 200
    assert b"<html" in full.content
    audit = full.context["audit"]
    assert audit["total"] > 0
    assert audit["score"] is not None
    assert f"<strong>{audit['score']} %</strong>".encode() in full.content
    partial = alice_client.get(url("compaction_audit", committed.public_id), HTTP_HX_REQUEST="true")
    assert b'id="audit-body"' in partial.content
    assert b"<html" not in partial.content


def test_audit_of_in_place_run_reads_the_archived_rows(alice, alice_client):
    session = seed_conversation(alice, n=120, mode="in_place")
    run = compact_now(session, alice, mode="in_place")
    audit = alice_client.get(url("compaction_audit", run.public_id)).context["audit"]
    assert audit["total"] > 0


# ---------------------------------------------------------------- what-if and commit


def test_what_if_form_has_labelled_fields_with_defaults(alice, alice_client):
    session = seed_conversation(alice, n=20)
    response = alice_client.get(url("what_if", session.public_id))
    html = response.content.decode()
    for name in (
        "threshold",
        "head",
        "tail",
        "fold",
        "content_max",
        "content_head",
        "content_tail",
        "summarizer",
        "mode",
        "focus",
    ):
        assert f'<label for="f-{name}">' in html
        assert f'id="f-{name}"' in html
    assert response.context["values"]["tail"] == 20_000
    # The share that runs: the hermes profile raises 50 % to 75 % on this 128,000 window.
    assert response.context["values"]["threshold"] == 75.0


def test_what_if_runs_a_dry_run_shown_next_to_the_committed_one(alice, alice_client):
    session = seed_conversation(alice, n=120)
    committed = compact_now(session, alice, mode="in_place")
    before = list(session.messages.filter(active=True).values_list("pk", flat=True))
    response = alice_client.post(
        url("what_if", session.public_id),
        {
            "threshold": "60",
            "head": "2",
            "tail": "1500",
            "fold": "300",
            "content_max": "5000",
            "content_head": "3000",
            "content_tail": "1000",
            "summarizer": "deterministic",
            "mode": "in_place",
            "focus": "the parser",
        },
    )
    assert response.status_code == 302
    run = Compaction.objects.get(session=session, trigger="what_if")
    assert f"?run={run.public_id}&" in response["Location"]
    assert run.status == "dry_run"
    assert run.config["tail_token_budget"] == 1500
    assert run.config["protect_first_n"] == 2
    assert run.config["threshold_percent"] == pytest.approx(0.6)
    assert run.focus == "the parser"
    assert (
        list(session.messages.filter(active=True).values_list("pk", flat=True)) == before
    )  # nothing committed
    page = alice_client.get(response["Location"])
    assert page.context["run"] == run
    assert page.context["committed"] == committed
    html = page.content.decode()
    assert "This what-if" in html
    assert "Latest committed" in html
    assert url("compaction_detail", run.public_id) in html
    assert url("compaction_detail", committed.public_id) in html
    partial = alice_client.get(response["Location"] + "&panel=run-status", HTTP_HX_REQUEST="true")
    assert b'id="run-status"' in partial.content
    assert b"<html" not in partial.content


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("tail", "lots", "Tail budget"),
        ("threshold", "0", "Give a percentage above 0 and at most 100"),
        ("content_head", "9000", "longer than the truncation limit (6,000)"),
        ("summarizer", "gpt", "Summarizer"),
    ],
)
def test_what_if_rejects_bad_input_and_stores_nothing(alice, alice_client, field, value, message):
    session = seed_conversation(alice, n=20)
    response = alice_client.post(
        url("what_if", session.public_id),
        {field: value, "summarizer": "deterministic", **({field: value})},
    )
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Compaction.objects.filter(session=session).exists()


def test_what_if_on_a_big_conversation_is_queued_with_polling(
    alice, alice_client, settings, monkeypatch
):
    from hermes_web.views import compactions

    monkeypatch.setattr(compactions, "INLINE_MAX_MESSAGES", 10)
    session = seed_conversation(alice, n=40)
    response = alice_client.post(url("what_if", session.public_id), {"summarizer": "deterministic"})
    run = Compaction.objects.get(session=session)
    assert run.status == "queued"
    page = alice_client.get(response["Location"]).content.decode()
    assert "panel=run-status" in page
    assert 'hx-trigger="every 1s"' in page


def test_commit_this_commits_the_dry_run_parameters(alice, alice_client):
    session = seed_conversation(alice, n=120)
    dry = compact_now(
        session, alice, mode="in_place", trigger="what_if", overrides={"tail_token_budget": 1500}
    )
    response = alice_client.post(url("commit_compaction", dry.public_id))
    assert response.status_code == 302
    real = Compaction.objects.get(session=session, trigger="manual")
    assert response["Location"] == url("compaction_detail", real.public_id)
    assert real.status == "committed"
    assert real.mode == "in_place"
    assert real.config["tail_token_budget"] == 1500
    assert session.messages.filter(archived_by=real).exists()


def test_commit_refuses_what_is_not_a_dry_run(committed, alice_client):
    assert alice_client.post(url("commit_compaction", committed.public_id)).status_code == 409
    assert alice_client.get(url("commit_compaction", committed.public_id)).status_code == 405


# ---------------------------------------------------------------- tree and timeline


def test_tree_has_a_node_per_session_and_edges_to_the_inspector(alice, alice_client):
    root = seed_conversation(alice, n=100, title="Chain")
    first = compact_now(root, alice, mode="rotation")
    continue_with(first.result_session, 60)
    second = compact_now(first.result_session, alice, mode="rotation")
    in_place = compact_now(continue_with(second.result_session, 80), alice, mode="in_place")
    response = alice_client.get(url("conversation_tree", second.result_session.public_id))
    nodes = response.context["nodes"]
    assert [n["depth"] for n in nodes] == [0, 1, 2]
    assert [n["s"].pk for n in nodes] == [
        root.pk,
        first.result_session.pk,
        second.result_session.pk,
    ]
    assert nodes[0]["edge"] is None
    assert nodes[1]["edge"] == first
    assert nodes[2]["edge"] == second
    assert nodes[2]["events"] == [in_place]
    assert nodes[2]["current"]
    html = response.content.decode()
    for run in (first, second, in_place):
        assert url("compaction_detail", run.public_id) in html
    assert nodes[0]["n"] == root.messages.filter(active=True).count()


def test_timeline_charts_compactions_and_warns(alice, alice_client):
    session = seed_conversation(alice, n=40)
    now = timezone.now()
    for before, after in ((100_000, 20_000), (90_000, 85_000), (88_000, 84_000)):
        Compaction.objects.create(
            session=session,
            status="committed",
            mode="in_place",
            tokens_before=before,
            tokens_after=after,
            finished_at=now,
            report={},
        )
    Compaction.objects.create(
        session=session, trigger="auto", status="skipped", reason="ineffective", report={}
    )
    Compaction.objects.create(
        session=session, trigger="what_if", status="dry_run", tokens_before=1, tokens_after=1
    )
    response = alice_client.get(url("conversation_timeline", session.public_id))
    chart = response.context["chart"]
    assert len(chart["bars"]) == 4  # dry runs are not part of the history
    html = response.content.decode()
    assert "<svg" in html
    assert html.count('class="before"') == 4
    assert "anti-thrash" in html
    assert "saved less than 10 %" in html


def test_timeline_without_compactions_suggests_a_what_if(alice, alice_client):
    session = seed_conversation(alice, n=10)
    html = alice_client.get(url("conversation_timeline", session.public_id)).content.decode()
    assert "No compaction has been committed" in html
    assert url("what_if", session.public_id) in html


# ---------------------------------------------------------------- compare


def test_compare_lists_conversations_to_pick(alice, alice_client):
    seed_conversation(alice, n=10, title="Pick me")
    response = alice_client.get(url("compare"))
    assert response.status_code == 200
    assert b"Pick me" in response.content
    assert b'<label for="c-session">' in response.content


def test_compare_runs_rotation_and_in_place_side_by_side(alice, alice_client):
    session = seed_conversation(alice, n=120)
    response = alice_client.post(
        url("compare"), {"session": session.public_id, "summarizer": "deterministic"}
    )
    assert response.status_code == 302
    runs = {c.mode: c for c in Compaction.objects.filter(session=session)}
    assert set(runs) == {"rotation", "in_place"}
    assert all(c.status == "dry_run" for c in runs.values())
    assert not Session.objects.filter(parent=session).exists()  # nothing committed
    page = alice_client.get(response["Location"])
    html = page.content.decode()
    assert "new child session" in html
    assert "same session id" in html
    assert 'id="summary-diff"' in html
    assert page.context["a_structure"]["rotation"]
    assert not page.context["b_structure"]["rotation"]
    assert "Commit this" in html
    partial = alice_client.get(
        response["Location"] + "&panel=compare-result", HTTP_HX_REQUEST="true"
    )
    assert b'id="compare-result"' in partial.content
    assert b"<html" not in partial.content


def test_compare_any_two_compactions_shows_the_summary_diff(alice, alice_client):
    session = seed_conversation(alice, n=120)
    a = compact_now(session, alice, trigger="what_if", overrides={"tail_token_budget": 1000})
    b = compact_now(session, alice, trigger="what_if", overrides={"tail_token_budget": 6000})
    response = alice_client.get(
        url("compare"), {"session": session.public_id, "a": a.public_id, "b": b.public_id}
    )
    diff = response.context["diff"]
    assert (
        any(r["op"] == "-" for r in diff)
        or any(r["op"] == "+" for r in diff)
        or response.context["same_summary"]
    )
    assert a.report["summary"] != b.report["summary"]
    assert (
        'class="diff-add"' in response.content.decode()
        or 'class="diff-del"' in response.content.decode()
    )


def test_compare_refuses_compactions_of_different_conversations(alice, alice_client):
    one, two = seed_conversation(alice, n=60), seed_conversation(alice, n=60, seed=2)
    a = compact_now(one, alice, trigger="what_if")
    b = compact_now(two, alice, trigger="what_if")
    response = alice_client.get(
        url("compare"), {"session": one.public_id, "a": a.public_id, "b": b.public_id}
    )
    assert response.status_code == 400


def test_compare_post_without_a_session_is_400(alice_client):
    assert alice_client.post(url("compare"), {}).status_code == 400


def test_compare_rejects_other_methods(alice_client):
    assert alice_client.put(url("compare")).status_code == 405


# ---------------------------------------------------------------- isolation


def test_everything_of_alice_is_404_for_bob(alice, bob_client, committed):
    session = committed.session
    for name, arg in [
        ("compaction_detail", committed.public_id),
        ("compaction_audit", committed.public_id),
        ("compaction_report_json", committed.public_id),
        ("compaction_report_md", committed.public_id),
        ("what_if", session.public_id),
        ("conversation_tree", session.public_id),
        ("conversation_timeline", session.public_id),
    ]:
        assert bob_client.get(url(name, arg)).status_code == 404, name
    assert bob_client.post(url("commit_compaction", committed.public_id)).status_code == 404
    assert (
        bob_client.post(
            url("what_if", session.public_id), {"summarizer": "deterministic"}
        ).status_code
        == 404
    )
    assert bob_client.get(url("compare"), {"session": session.public_id}).status_code == 404
    assert bob_client.post(url("compare"), {"session": session.public_id}).status_code == 404
    assert not Compaction.objects.filter(requested_by__username="bob").exists()


def test_read_only_pages_reject_post(alice, alice_client, committed):
    for name, arg in [
        ("compaction_detail", committed.public_id),
        ("compaction_audit", committed.public_id),
        ("compaction_report_json", committed.public_id),
        ("conversation_tree", committed.session.public_id),
        ("conversation_timeline", committed.session.public_id),
    ]:
        assert alice_client.post(url(name, arg)).status_code == 405, name


def test_a_dry_run_that_compacts_nothing_says_so_and_cannot_be_committed(alice, alice_client):
    session = seed_conversation(alice, n=120)
    # classic: its latest-user anchor keeps the whole tail, so the second run has no middle
    # (the hermes profile's bounded tail would find one to compact).
    compact_now(
        session,
        alice,
        mode="in_place",
        overrides={"tail_token_budget": 2_000, "profile": "classic"},
    )
    dry = compact_now(
        session,
        alice,
        trigger="what_if",
        mode="in_place",
        overrides={"tail_token_budget": 1500, "profile": "classic"},
    )
    assert dry.status == "dry_run"
    assert dry.report["status"] == "skipped"
    html = alice_client.get(url("compaction_detail", dry.public_id)).content.decode()
    assert "the engine would not compact" in html
    assert "Commit this" not in html
    assert alice_client.post(url("commit_compaction", dry.public_id)).status_code == 409
    assert (
        not Compaction.objects.filter(session=session, trigger="manual")
        .exclude(pk__lt=dry.pk)
        .exists()
    )
