"""The inspector renders the engine's new report fields (issue #13 item 7) and tolerates old reports.

Reports are built directly (the engine's own tests cover producing them): a real committed run
is compacted first, then its stored report gets the new fields a "hermes" profile run writes.
"""

import re

import pytest
from django.urls import reverse

from hermes_web.presenters.inspector import slimming_page
from hermes_web.presenters.vocabulary import report_warnings, term
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = pytest.mark.django_db

NEW_ACTIONS = [
    {
        "index": 2,
        "kind": "fold",
        "region": "head",
        "role": "tool",
        "tool_name": "read_file",
        "chars_before": 110_000,
        "chars_after": 80,
        "line": "[read_file] read src/app.py from line 1 (110,000 chars) [ref:2]",
        "before_excerpt": "def main():",
        "after": "",
    },
    {
        "index": 40,
        "kind": "dedup",
        "region": "middle",
        "role": "tool",
        "tool_name": "read_file",
        "chars_before": 9_000,
        "chars_after": 60,
        "line": "[duplicate of the output at message 90] [ref:40]",
        "before_excerpt": "same text",
        "after": "",
    },
    {
        "index": 41,
        "kind": "args_shrink",
        "region": "middle",
        "role": "assistant",
        "tool_name": "write_file",
        "chars_before": 30_000,
        "chars_after": 300,
        "line": '{"path": "a.py", "content": "…[shrunk: not part of the original call]"}',
        "before_excerpt": '{"path": "a.py"',
        "after": "",
    },
    {
        "index": 97,
        "kind": "lean_tail",
        "region": "tail",
        "role": "tool",
        "tool_name": "terminal",
        "chars_before": 5_000,
        "chars_after": 90,
        "line": "[terminal] ran `pytest` -> exit 1, 40 lines output; recall [ref:97] for the full text",
        "before_excerpt": "===== test session starts",
        "after": "",
    },
    {
        "index": 99,
        "kind": "demote",
        "region": "tail",
        "role": "tool",
        "tool_name": "terminal",
        "chars_before": 4_000,
        "chars_after": 70,
        "line": "[demoted under pressure] [ref:99]",
        "before_excerpt": "log line",
        "after": "",
    },
]
WARNINGS = [
    {"code": "over_threshold", "message": "70,000 tokens after compaction, threshold 64,000."},
    {"code": "summarizer_fallback", "message": "aux failed (429); deterministic wrote it."},
]


@pytest.fixture
def hermes_run(alice):
    session = seed_conversation(alice, n=120, title="Profiles")
    run = compact_now(session, alice, mode="rotation")
    run.report = {
        **run.report,
        "profile": "hermes",
        "slimming": NEW_ACTIONS,
        "slimming_totals": {
            "fold": {"count": 1, "chars_before": 110_000, "chars_after": 80},
            "dedup": {"count": 1, "chars_before": 9_000, "chars_after": 60},
        },
        "warnings": WARNINGS,
        "redactions": 3,
        "tokens_estimated": ["middle"],
    }
    run.save(update_fields=["report"])
    return run


def detail(client, run, **params):
    return client.get(reverse("compaction_detail", args=[run.public_id]), params)


def test_new_kinds_head_and_tail_rows_profile_and_banners(hermes_run, alice_client):
    html = detail(alice_client, hermes_run).content.decode()
    # Every new kind gets a filter link with its count; rows of the head and tail are shown.
    for kind, label in (
        ("dedup", "duplicate output"),
        ("args_shrink", "arguments shrunk"),
        ("lean_tail", "lean-tail stub"),
        ("demote", "pressure demotion"),
    ):
        assert f'data-kind="{kind}"' in html
        assert f"{label} (1)" in html
    assert 'data-region="head"' in html
    assert "head (1)" in html
    assert "tail (2)" in html
    assert "[read_file] read src/app.py from line 1 (110,000 chars) <a href=" in html
    assert 'title="the whole message 2">[ref:2]</a>' in html
    assert 'class="badge region-tail"' in html
    # Profile, redactions and estimated figures.
    assert '<dd class="profile">hermes</dd>' in html
    assert "<dt>Secrets redacted</dt><dd>3</dd>" in html
    assert "Estimated, not counted exactly" in html
    # One banner per warning, the serious one as an alert.
    assert re.search(r'role="alert" data-code="over_threshold"', html)
    assert "Still over the threshold" in html
    assert 'data-code="summarizer_fallback"' in html


def test_filter_by_kind_and_region_together(hermes_run, alice_client):
    response = detail(alice_client, hermes_run, kind="lean_tail", region="tail", panel="slimming")
    html = response.content.decode()
    assert "1 shown, page 1 of 1" in html
    assert 'recall <a href="' in html
    assert 'title="the whole message 97">[ref:97]</a>' in html
    # A demotion (another kind) is not listed; the summarizer input further down may name it.
    assert "[ref:99]" not in html.split('id="slimming"')[1].split("</section>")[0]
    tail_only = detail(alice_client, hermes_run, region="tail").content.decode()
    assert "2 shown" in tail_only
    assert "[ref:2]" not in tail_only.split('id="slimming"')[1]
    # Without htmx the filter links are real links that keep the other filter.
    assert 'href="?kind=lean_tail&amp;region=tail#slimming"' in tail_only


def test_old_reports_read_as_classic_middle_with_derived_warnings(alice, alice_client):
    session = seed_conversation(alice, n=120, title="Old row")
    run = compact_now(session, alice, mode="in_place")
    report = dict(run.report)
    for key in ("profile", "warnings", "redactions", "tokens_estimated"):
        report.pop(key, None)
    report["config"] = {k: v for k, v in report.get("config", {}).items() if k != "profile"}
    report["slimming"] = [{k: v for k, v in a.items() if k != "region"} for a in report["slimming"]]
    # A stored run that ended over its threshold says so even without engine warnings.
    report["tokens"] = {**report["tokens"], "threshold": 10, "after": 5_000}
    run.report = report
    run.save(update_fields=["report"])
    html = detail(alice_client, run).content.decode()
    assert '<dd class="profile">classic</dd>' in html
    assert f"middle ({len(report['slimming'])})" in html
    assert "head (0)" in html
    assert 'data-code="over_threshold"' in html
    assert "Secrets redacted" not in html


def test_warning_and_slimming_helpers_are_pure():
    assert term("trigger", "forced") == term("trigger", "manual") == "manual"
    assert term("status", "dry_run") == "dry run"
    assert term("mode", "in_place") == "in-place"
    assert [w["code"] for w in report_warnings({"warnings": WARNINGS, "status": "skipped"})] == [
        "over_threshold",
        "summarizer_fallback",
    ]
    derived = report_warnings(
        {
            "status": "compacted",
            "tokens": {"after": 9_000, "threshold": 4_000, "tail": 5_000},
            "config": {"context_length": 8_000},
        }
    )
    assert {w["code"] for w in derived} == {"over_window", "over_threshold", "tail_over_threshold"}
    # A classic 64,000 floor on a 16,000 window (a real Hermes session imported here did this).
    floor = report_warnings(
        {
            "status": "compacted",
            "tokens": {"after": 32_754, "threshold": 64_000},
            "config": {"context_length": 16_000},
        }
    )
    assert [w["code"] for w in floor] == ["over_window", "threshold_at_window"]
    page = slimming_page({"slimming": NEW_ACTIONS}, kind="nonsense", region="head")
    assert page["kind"] == ""
    assert page["count"] == 1
    assert page["rows"][0]["line"].endswith("[ref:2]")


def test_markdown_export_fences_backticks_and_says_manual(hermes_run, alice_client):
    report = dict(hermes_run.report)
    report["slimming"] = [
        {**NEW_ACTIONS[3], "line": "[terminal] ran `echo ``x``` -> exit 0, 1 line output"}
    ]
    hermes_run.report = report
    hermes_run.save(update_fields=["report"])
    md = alice_client.get(reverse("compaction_report_md", args=[hermes_run.public_id]))
    text = md.content.decode()
    assert "- **Trigger:** manual" in text
    assert "forced" not in text
    assert "- **Profile:** hermes" in text
    # The line holds runs of one, two and three backticks: the span uses four.
    assert "```` [terminal] ran `echo ``x``` -> exit 0, 1 line output ````" in text
    assert "## Warnings" in text
    assert "`over_threshold`" in text
    # The summary sits in a fence longer than any backtick run inside it.
    assert "```text\n[CONTEXT COMPACTION" in text


def test_markdown_export_renders_with_every_line_in_one_code_span(hermes_run, alice_client):
    import markdown

    line = "[terminal] ran `echo ``x``` -> exit 0, 1 line output"
    hermes_run.report = {**hermes_run.report, "slimming": [{**NEW_ACTIONS[3], "line": line}]}
    hermes_run.save(update_fields=["report"])
    text = alice_client.get(reverse("compaction_report_md", args=[hermes_run.public_id]))
    html = markdown.markdown(text.content.decode(), extensions=["fenced_code", "tables"])
    assert "<code>[terminal] ran `echo ``x``` -&gt; exit 0, 1 line output</code>" in html
    assert "<h1>Compaction report</h1>" in html
    assert html.count("<h1>") == 1  # no list item turned into a heading
    assert '<code class="language-text">[CONTEXT COMPACTION' in html


def test_ref_references_link_to_the_stored_original(hermes_run, alice_client):
    session = hermes_run.session
    summary = hermes_run.report["summary"].replace(
        "## Active Task\n", "## Active Task\nSee [ref:7] and [ref:99999].\n", 1
    )
    hermes_run.report = {**hermes_run.report, "summary": summary}
    hermes_run.save(update_fields=["report"])
    html = detail(alice_client, hermes_run).content.decode()
    row = session.messages.order_by("position")[7]
    link = reverse("message_detail", args=[session.public_id, row.position])
    assert f'<a href="{link}" title="the whole message 7">[ref:7]</a>' in html
    assert "[ref:99999]" in html  # no such input message: plain text, not a dead link
    head_row = session.messages.order_by("position")[2]
    head_link = reverse("message_detail", args=[session.public_id, head_row.position])
    assert f'<a href="{head_link}" title="the whole message 2">[ref:2]</a>' in html


def test_a_small_window_run_of_todays_engine_shows_its_banners(alice, alice_client):
    """The shape of real Hermes sessions imported with a 16K window: the 64K floor is above the
    window and the result stays over the window; the classic engine writes no warnings itself."""
    session = seed_conversation(alice, n=200, title="Small window")
    session.context_length = 16_000
    session.save(update_fields=["context_length"])
    run = compact_now(
        session,
        alice,
        trigger="what_if",
        overrides={"tail_token_budget": 20_000, "profile": "classic"},
    )
    html = detail(alice_client, run).content.decode()
    tokens = run.report["tokens"]
    assert tokens["threshold"] >= 16_000
    assert 'data-code="threshold_at_window"' in html
    assert tokens["after"] > 16_000  # the 20,000-token tail alone is over the window
    assert 'role="alert" data-code="over_window"' in html
