"""Inspector panels from issue #18: token strip, word diff of before/after, JSON tool results."""

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from hermes_web.presenters.inspector import slimming_page, token_strip
from hermes_web.presenters.messages import json_fields, word_diff
from hermes_web.services.sessions import append_message, create_session
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = pytest.mark.django_db


def test_word_diff_marks_removed_and_added_words():
    diff = word_diff("run the full test suite now", "run the test suite …[shrunk]")
    assert {"op": "del", "text": "full "} in diff["before"] or any(
        r["op"] == "del" and "full" in r["text"] for r in diff["before"]
    )
    assert any(r["op"] == "ins" and "…[shrunk]" in r["text"] for r in diff["after"])
    assert "".join(r["text"] for r in diff["before"]) == "run the full test suite now"
    assert "".join(r["text"] for r in diff["after"]) == "run the test suite …[shrunk]"


def test_json_fields_unescapes_string_values_and_ignores_other_text():
    fields = json_fields(json.dumps({"output": "line 1\nline 2", "exit_code": 0}))
    assert fields == [
        {"key": "output", "value": "line 1\nline 2"},
        {"key": "exit_code", "value": "0"},
    ]
    assert json_fields("plain text") == []
    assert json_fields("[1, 2]") == []
    assert json_fields("{not json}") == []


def test_token_strip_buckets_and_levels():
    report = {
        "message_tokens": [10] * 3 + [1000] + [10] * 596,
        "boundaries": {"head": [0, 4], "middle": [4, 590], "tail": [590, 600]},
    }
    strip = token_strip(report, list(range(100, 700)), cells=200)
    assert len(strip) == 200  # three messages per cell
    assert strip[0]["start"] == 0
    assert strip[0]["end"] == 3
    assert strip[1]["tokens"] == 1020
    assert strip[1]["level"] == 5
    assert strip[0]["region"] == "head"
    assert strip[-1]["region"] == "tail"
    assert strip[1]["position"] == 103  # the stored row of message 3
    assert token_strip({}) == []


def test_truncation_rows_get_a_word_diff():
    action = {
        "index": 5,
        "kind": "args_shrink",
        "before_excerpt": '{"path": "a.py", "content": "def f(): pass"}',
        "after": '{"path": "a.py", "content": "…[not part of the original call]"}',
        "chars_before": 30_000,
        "chars_after": 60,
    }
    row = slimming_page({"slimming": [action]})["rows"][0]
    assert any(r["op"] == "ins" for r in row["diff"]["after"])
    fold = slimming_page({"slimming": [{**action, "kind": "fold"}]})["rows"][0]
    assert fold["diff"] is None  # a fold line is a new text, not an edit of the old one


def test_inspector_renders_the_strip_linking_to_stored_rows(alice, alice_client):
    session = seed_conversation(alice, n=120, title="Strip")
    run = compact_now(session, alice, mode="in_place")
    html = alice_client.get(reverse("compaction_detail", args=[run.public_id])).content.decode()
    # One Tab stop for the whole strip, arrow keys between cells (issue #27).
    assert 'class="token-strip" role="group" aria-labelledby="strip-h"' in html
    cells = html.count('class="cell region-')
    assert cells == len(run.report["message_tokens"])  # 120 messages: one cell each
    # The in-place run archived its input: links open the archived rows.
    assert "?start=0&amp;archived=1#m0" in html


def test_json_tool_results_show_as_fields_with_real_newlines(alice, alice_client):
    session = create_session(owner=alice, title="JSON result")
    append_message(
        session,
        role="assistant",
        content=None,
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "ls"}'},
            }
        ],
    )
    append_message(
        session,
        role="tool",
        content=json.dumps({"output": "a.py\nb.py", "exit_code": 0}),
        tool_call_id="call_1",
        tool_name="terminal",
    )
    html = alice_client.get(
        reverse("conversation_detail", args=[session.public_id])
    ).content.decode()
    assert '<dt class="mono">output</dt><dd><pre tabindex="0">a.py\nb.py</pre></dd>' in html
    assert "<summary>raw JSON</summary>" in html


def test_a_slimmed_row_links_to_the_whole_original_message(alice, alice_client):
    session = seed_conversation(alice, n=120, title="Originals")
    run = compact_now(session, alice, mode="in_place")
    fold = next(a for a in run.report["slimming"] if a["kind"] == "fold")
    original = session.messages.order_by("position")[fold["index"]]
    link = reverse("message_detail", args=[session.public_id, original.position])
    html = alice_client.get(reverse("compaction_detail", args=[run.public_id])).content.decode()
    assert f'<a href="{link}">message {fold["index"]}</a>' in html
    page = alice_client.get(link)
    assert page.status_code == 200
    assert escape(original.content) in page.content.decode()  # whole, not an excerpt
