"""hermes_web.presenters: pure helpers from report + messages to view data (no database)."""

import json

import pytest

from compaction import END_MARKER, SUMMARY_PREFIX, CompactionConfig, compact, generate_conversation
from hermes_web.presenters.facts import extract_facts, fact_survival_audit
from hermes_web.presenters.inspector import (
    slimming_page,
    split_view,
    summary_diff,
    summary_sections,
)
from hermes_web.presenters.lineage import timeline_chart
from hermes_web.presenters.messages import anchor_for, message_view


@pytest.fixture(scope="module")
def report():
    messages = generate_conversation(240, seed=5)
    return compact(
        messages, config=CompactionConfig(context_length=200_000), force=True
    ).report.to_dict()


def test_split_widths_follow_tokens_and_sum_to_100(report):
    split = split_view(report)
    names = [p["name"] for p in split["parts"]]
    assert names == ["head", "middle", "tail"]
    assert sum(p["percent"] for p in split["parts"]) == pytest.approx(100, abs=0.1)
    middle = split["parts"][1]
    assert middle["tokens"] == report["tokens"]["middle"]
    assert middle["count"] == report["boundaries"]["middle"][1] - report["boundaries"]["middle"][0]


def test_threshold_marker_sits_at_its_share_and_is_capped():
    base = {
        "boundaries": {"head": [0, 1], "middle": [1, 2], "tail": [2, 3]},
        "message_tokens": [10, 80, 10],
    }
    inside = split_view({**base, "tokens": {"before": 100, "threshold": 25}})
    assert inside["threshold_percent"] == 25
    assert not inside["threshold_beyond"]
    beyond = split_view({**base, "tokens": {"before": 100, "threshold": 400}})
    assert beyond["threshold_percent"] == 100
    assert beyond["threshold_beyond"]
    # Part tokens missing from the report come from the per-message counts.
    assert inside["parts"][1]["tokens"] == 80


def test_alignment_reasons_are_described():
    split = split_view(
        {
            "boundaries": {"head": [0, 1], "middle": [1, 5], "tail": [5, 9]},
            "tokens": {"before": 10},
            "alignment": [{"kind": "latest_user_pulled_in", "from": 7, "to": 5}],
        }
    )
    assert split["alignment"][0]["label"] == "latest user message pulled into the tail"
    assert (split["alignment"][0]["from"], split["alignment"][0]["to"]) == (7, 5)


def test_slimming_pages_filter_and_show_the_cut():
    actions = [
        {"index": i, "kind": "fold", "chars_before": 500, "chars_after": 40} for i in range(120)
    ]
    actions.append(
        {
            "index": 200,
            "kind": "truncate",
            "chars_before": 9000,
            "chars_after": 5500,
            "after": "HEAD\n...[truncated]...\nTAIL",
        }
    )
    report = {
        "slimming": actions,
        "slimming_totals": {"fold": {"count": 120, "chars_before": 1, "chars_after": 1}},
    }
    first = slimming_page(report, per_page=50)
    assert first["count"] == 121
    assert first["pages"] == 3
    assert len(first["rows"]) == 50
    assert first["has_next"]
    assert not first["has_previous"]
    assert first["rows"][0]["saved"] == 460
    last = slimming_page(report, page=99, per_page=50)  # clamped
    assert last["page"] == 3
    only = slimming_page(report, kind="truncate")
    assert only["count"] == 1
    assert only["rows"][0]["cut"] == {"head": "HEAD", "marker": "...[truncated]...", "tail": "TAIL"}
    assert first["totals"][0]["kind"] == "fold"


def test_summary_sections_split_prefix_headings_and_end_marker():
    summary = f"{SUMMARY_PREFIX}\n## Goal\nFix it\n\n## Relevant Files\n- a.py\n{END_MARKER}"
    parsed = summary_sections(summary)
    assert parsed["prefix"] == SUMMARY_PREFIX.strip()
    assert [s["heading"] for s in parsed["sections"]] == ["Goal", "Relevant Files"]
    assert parsed["sections"][1]["body"] == "- a.py"
    assert parsed["end_marker"] == END_MARKER


def test_summary_sections_of_a_real_report(report):
    parsed = summary_sections(report["summary"])
    headings = [s["heading"] for s in parsed["sections"]]
    assert "Active Task" in headings
    assert "Relevant Files" in headings
    assert parsed["end_marker"]


def test_summary_without_prefix_or_marker():
    parsed = summary_sections("plain text\n## One\nbody")
    assert parsed["prefix"] == ""
    assert parsed["end_marker"] == ""
    assert parsed["preamble"] == "plain text"


def test_summary_diff_marks_added_and_removed_lines():
    rows = summary_diff("a\nb\nc", "a\nB\nc")
    ops = [(r["op"], r["text"]) for r in rows]
    assert (" ", "a") in ops
    assert ("-", "b") in ops
    assert ("+", "B") in ops
    assert all(r["op"] in " +-" for r in rows)


def _tool_call(call_id, name, args):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


MIDDLE = [
    {
        "role": "user",
        "content": "Never touch config/settings.yaml without asking me first. The page takes 450 ms.",
    },
    {
        "role": "assistant",
        "content": "Checking https://docs.example.org/tz.html and src/app/parser.py",
        "tool_calls": [_tool_call("c1", "terminal", {"command": "pytest -q tests/test_parser.py"})],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": json.dumps(
            {
                "output": "Traceback (most recent call last):\nIndexError: list index out of range",
                "exit_code": 1,
            }
        ),
    },
]


def test_extract_facts_finds_every_kind():
    facts = {(f["kind"], f["value"]) for f in extract_facts(MIDDLE)}
    assert (
        "constraint",
        "Never touch config/settings.yaml without asking me first.",
    ) in facts or any(k == "constraint" and v.startswith("Never touch") for k, v in facts)
    assert ("command", "pytest -q tests/test_parser.py") in facts
    assert ("path", "src/app/parser.py") in facts
    assert ("url", "https://docs.example.org/tz.html") in facts
    assert ("error", "IndexError: list index out of range") in facts
    assert ("number", "450 ms") in facts


def test_extract_ignores_code_that_merely_mentions_errors():
    code = {"role": "tool", "tool_call_id": "x", "content": "    raise ValueError('empty value')\n"}
    assert not [f for f in extract_facts([code]) if f["kind"] == "error"]


def test_audit_scores_what_survives_and_lists_what_was_lost():
    summary = "Never touch config/settings.yaml without asking me first. Ran `pytest -q tests/test_parser.py`; src/app/parser.py"
    audit = fact_survival_audit(MIDDLE, summary)
    lost = {f["value"] for f in audit["lost"]}
    assert "https://docs.example.org/tz.html" in lost
    assert "IndexError: list index out of range" in lost
    kept = {f["value"] for f in audit["facts"] if f["survived"]}
    assert "pytest -q tests/test_parser.py" in kept
    assert "src/app/parser.py" in kept
    assert audit["kept"] + len(audit["lost"]) == audit["total"]
    assert audit["score"] == round(100 * audit["kept"] / audit["total"], 1)
    assert {k["kind"] for k in audit["by_kind"]} >= {"url", "error", "command"}


def test_audit_of_nothing_has_no_score():
    audit = fact_survival_audit([{"role": "assistant", "content": "ok"}], "summary")
    assert audit["total"] == 0
    assert audit["score"] is None


def test_audit_counts_a_paraphrased_constraint_as_kept():
    middle = [{"role": "user", "content": "You must always run the linter before committing."}]
    audit = fact_survival_audit(
        middle, "Constraint: always run the linter before committing (user must)."
    )
    assert audit["kept"] == 1


def test_message_view_thumbnails_only_inline_images():
    png = "data:image/png;base64,iVBORw0KGgo="
    view = message_view(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image_url", "image_url": {"url": png}},
                {"type": "image_url", "image_url": {"url": "javascript:alert(1)"}},
            ],
        }
    )
    assert view["images"][0]["src"] == png
    assert view["images"][1]["src"] == ""
    assert "javascript:" in view["images"][1]["label"]
    assert view["text"] == "see"


def test_message_view_cuts_long_text_and_links_tool_calls():
    view = message_view(
        {
            "role": "assistant",
            "content": "x" * 5000,
            "tool_calls": [_tool_call("call/1 a", "read_file", {"path": "a"})],
        },
        preview_chars=100,
    )
    assert len(view["text"]) == 100
    assert view["truncated"] == 4900
    call = view["calls"][0]
    assert call["name"] == "read_file"
    assert '"path": "a"' in call["arguments"]
    assert call["anchor"] == anchor_for("call/1 a")
    assert " " not in call["anchor"]
    assert "/" not in call["anchor"]
    result = message_view({"role": "tool", "content": "r", "tool_call_id": "call/1 a"})
    assert result["result_anchor"] == call["anchor"]


def test_anchor_distinguishes_ids_that_sanitize_alike():
    assert anchor_for("a/b") != anchor_for("a_b")


def test_timeline_warns_on_anti_thrash_and_two_small_savings():
    points = [
        {"label": "#1", "before": 100_000, "after": 20_000, "status": "committed"},
        {"label": "#2", "before": 90_000, "after": 85_000, "status": "committed"},
        {"label": "#3", "before": 88_000, "after": 84_000, "status": "committed"},
        {"label": "#4", "before": 0, "after": 0, "status": "skipped", "reason": "ineffective"},
    ]
    chart = timeline_chart(points)
    assert len(chart["bars"]) == 4
    assert chart["bars"][0]["h_before"] > chart["bars"][0]["h_after"] > 0
    text = " ".join(chart["warnings"])
    assert "#3" in text
    assert "10 %" in text
    assert "#4" in text
    assert "anti-thrash" in text
    assert "#2" not in text  # one small saving alone is not a streak


def test_timeline_without_problems_has_no_warnings():
    chart = timeline_chart([{"label": "#1", "before": 100, "after": 10, "status": "committed"}])
    assert chart["warnings"] == []
