"""Issue #27: what the inspector, Compare, what-if and message pages say is so (items 1, 5, 6, 7)."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from compaction import CompactionConfig
from hermes_web.models import Compaction, Message
from hermes_web.presenters.vocabulary import number, report_warnings, term
from hermes_web.views.what_if import threshold_note
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = pytest.mark.django_db


def test_the_tail_warning_judges_the_tail_as_it_was_sent():
    """Item 1: a 73,199-token input tail demoted to 561 tokens is not "over the threshold"."""
    report = {
        "status": "compacted",
        "profile": "hermes",
        "config": {"context_length": 64_000, "profile": "hermes"},
        "tokens": {"after": 1_171, "threshold": 54_400, "tail": 73_199, "tail_slimmed": 561},
        "warnings": [],
    }
    assert report_warnings(report) == []
    # The same tail still over the threshold after the passes is warned about, with its size.
    over = {**report, "tokens": {**report["tokens"], "tail_slimmed": 60_000}}
    (warning,) = report_warnings(over)
    assert warning["code"] == "tail_over_threshold"
    assert "60,000 tokens" in warning["message"]


def test_a_default_threshold_lowered_below_the_window_is_not_a_warning():
    """Item 6: nobody configured 64,000 on a 64,000 window; the engine's note is not shown."""
    config = CompactionConfig(context_length=64_000)
    engine_note = {"code": "threshold_at_window", "message": "the configured threshold …"}
    report = {
        "status": "compacted",
        "config": config.to_dict(),
        "tokens": {"after": 1_000, "threshold": config.threshold_tokens},
        "warnings": [engine_note],
    }
    assert report_warnings(report) == []
    # A floor someone set is still reported.
    configured = {**report, "config": {**config.to_dict(), "min_threshold_tokens": 70_000}}
    assert [w["code"] for w in report_warnings(configured)] == ["threshold_at_window"]


def test_codes_and_numbers_read_as_words():
    """Item 7: one place turns codes and numbers into words."""
    assert term("reason", "summary_not_smaller") == (
        "the summary would not have been smaller than what it replaces"
    )
    assert "nothing" in term("reason", "nothing_to_compact")
    assert term("reason", "some_new_code") == "some new code"
    assert number(125_824) == "125,824"
    assert number(None) == "not reported"
    assert number(64_000.0) == "64,000"


def test_the_inspector_says_reasons_and_unreported_figures_in_words(alice, alice_client):
    session = seed_conversation(alice, n=14)
    now = timezone.now()
    run = Compaction.objects.create(
        session=session,
        trigger="manual",
        status="skipped",
        reason="nothing_to_compact",
        report={"status": "skipped", "reason": "nothing_to_compact", "tokens": {}},
        started_at=now,
        finished_at=now,
    )
    html = alice_client.get(reverse("compaction_detail", args=[run.public_id])).content.decode()
    assert "nothing_to_compact" not in html
    assert term("reason", "nothing_to_compact") in html
    committed = compact_now(seed_conversation(alice, n=120, seed=3), alice)
    html = alice_client.get(
        reverse("compaction_detail", args=[committed.public_id])
    ).content.decode()
    assert re.search(r"Provider-reported prompt tokens</dt><dd>not reported", html)
    assert ">None<" not in html


def test_compare_counts_kept_verbatim_as_its_fate_table(alice, alice_client):
    """Item 5: "Kept verbatim (head + tail)" is the fate table's "kept verbatim"."""
    session = seed_conversation(alice, n=160, seed=4)
    response = alice_client.post(
        reverse("compare"),
        {
            "session": session.public_id,
            "compare": "profiles",
            "profile_a": "classic",
            "profile_b": "hermes",
            "mode": "in_place",
        },
    )
    page = alice_client.get(response["Location"]) if response.status_code == 302 else response
    ctx = page.context
    for side in ("a", "b"):
        fates = ctx[side]["fates"]
        structure = ctx[f"{side}_structure"]
        assert structure["kept_verbatim"] == fates.count("kept")
        assert structure["slimmed"] == fates.count("slimmed")
        assert structure["summarized"] == fates.count("summarized")
    html = page.content.decode()
    totals = {t["fate"]: (t["a"], t["b"]) for t in ctx["fates"]["totals"]}
    row = re.search(r"Kept verbatim \(head \+ tail\)</th><td>([\d,]+)</td><td>([\d,]+)</td>", html)
    assert row is not None
    assert (int(row[1].replace(",", "")), int(row[2].replace(",", ""))) == totals["kept"]


def test_what_if_says_why_a_low_threshold_changes_nothing(alice):
    session = seed_conversation(alice, n=6)
    session.context_length = 64_000
    note = threshold_note(session, {"threshold_percent": 0.30})
    assert "85 % of the window" in note
    assert "Threshold: 54,400 tokens." in note
    assert "lowering it further has no effect" in note


def test_parameters_used_name_the_profile_and_mark_a_changed_summarizer(alice, alice_client):
    session = seed_conversation(alice, n=120)
    url = reverse("what_if", args=[session.public_id])
    response = alice_client.post(
        url, {"summarizer": "deterministic", "mode": "rotation", "profile": "classic"}
    )
    rows = {p["label"]: p for p in alice_client.get(response["Location"]).context["run_params"]}
    assert rows["Engine profile"]["used"] == "classic"
    assert rows["Engine profile"]["differs"] is True
    # The form pre-selects the deterministic summarizer: keeping it is no change (#37);
    # choosing "auto" is one.
    assert rows["Summarizer asked for"]["used"] == "deterministic (no model)"
    assert rows["Summarizer asked for"]["differs"] is False
    response = alice_client.post(url, {"summarizer": "auto", "mode": "rotation"})
    rows = {p["label"]: p for p in alice_client.get(response["Location"]).context["run_params"]}
    assert rows["Summarizer asked for"]["differs"] is True


def test_a_message_page_links_each_call_to_its_result(alice, alice_client):
    """Item 7: "calls search_files (no result)" only when there is no result row."""
    session = seed_conversation(alice, n=40)
    call_row = next(
        m for m in Message.objects.filter(session=session).order_by("position") if m.tool_calls
    )
    result = Message.objects.get(session=session, tool_call_id=call_row.tool_calls[0]["id"])
    html = alice_client.get(
        reverse("message_detail", args=[session.public_id, call_row.position])
    ).content.decode()
    assert reverse("message_detail", args=[session.public_id, result.position]) in html
    assert "(no result)" not in html


def test_the_markdown_export_says_what_the_pages_say(alice, alice_client):
    """Item 7: one "## Warnings", numbers with separators, reasons in words, and the
    summary's own headings fenced so they do not collide with the report's."""
    session = seed_conversation(alice, n=160, seed=7)
    session.context_length = 64_000  # a default threshold lowered below the window
    session.save(update_fields=["context_length"])
    run = compact_now(session, alice, overrides={"tail_token_budget": 70_000})
    text = alice_client.get(reverse("compaction_report_md", args=[run.public_id])).content.decode()
    assert text.count("## Warnings") <= 1
    tokens = run.report["tokens"]
    assert f"{tokens['before']:,} → {tokens['after']:,}" in text
    assert "provider prompt tokens: not reported" in text
    codes = [w["code"] for w in report_warnings(run.report)]
    for code in codes:
        assert f"`{code}`" in text
    assert "`threshold_at_window`" not in text  # nobody configured it (item 6)
    outside = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            outside.append(line)
    assert "## Active Task" not in outside
    assert len(outside) == len(set(outside))


def test_json_previews_read_as_text():
    """Item 7: a JSON tool result's preview has its text, not ``{"output": "a\\nb"``."""
    from hermes_web.presenters.messages import preview_line

    line = preview_line('{"output": "line one\\nline two", "exit_code": 0}')
    assert "\\n" not in line
    assert line == "output: line one line two · exit_code: 0"
    assert preview_line("x" * 200).endswith("…")
    assert len(preview_line("x" * 200)) == 90


def test_token_counts_on_lists_have_thousands_separators(alice, alice_client):
    """Item 7: "125824 tokens" reads "125,824"."""
    session = seed_conversation(alice, n=120, seed=11)
    run = compact_now(session, alice)
    assert run.tokens_before >= 1_000
    html = alice_client.get(reverse("conversation_detail", args=[session.public_id])).content
    assert f"{run.tokens_before:,} → {run.tokens_after:,}".encode() in html
    assert f">{run.tokens_before} →".encode() not in html
