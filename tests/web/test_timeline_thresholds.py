"""The timeline of an imported chain (issue #37, item 2): an agent's own threshold drawn
where its transcript tells it and said to be the agent's; where it does not, the page says
so, and a threshold line of ours is labelled ours. On a phone the chart scrolls inside a
labelled region with a hint (item 5)."""

import html as html_lib
import json

import pytest
from django.urls import reverse

from hermes_web.importers import import_path
from hermes_web.models import Compaction
from tests.web.inspector_seed import compact_now, continue_with
from tests.web.native_fixtures import claude_code_lines, codex_lines, write_lines

pytestmark = pytest.mark.django_db


def _timeline(client, session) -> str:
    response = client.get(reverse("conversation_timeline", args=[session.public_id]))
    assert response.status_code == 200
    return html_lib.unescape(response.content.decode())


def _imported(alice, path):
    report = import_path(path, owner=alice)
    assert report.refused == []
    return report.sessions[0]


def _pre_tokens(lines: list[str], values: tuple[int, ...]) -> list[str]:
    """The fixture's Claude Code boundaries with these ``preTokens``, in order."""
    out, left = [], list(values)
    for line in lines:
        record = json.loads(line)
        if record.get("subtype") == "compact_boundary" and left:
            record["compactMetadata"]["preTokens"] = left.pop(0)
        out.append(json.dumps(record))
    return out


def test_claude_codes_automatic_compaction_draws_where_it_fired(alice, alice_client, tmp_path):
    # Boundaries: manual at 15,000, auto at 16,500, manual at 14,000 (the agent's counts),
    # near our counts of the rows (about 14,600) so the line is inside the chart.
    lines = _pre_tokens(claude_code_lines(compacts=3, rounds=8), (15_000, 16_500, 14_000))
    session = _imported(alice, write_lines(tmp_path / "cc.jsonl", lines))
    page = _timeline(alice_client, session)
    assert "Claude Code's threshold: its automatic compaction fired at 16,500 tokens" in page
    assert "as its transcript records" in page
    assert "not the bars' scale" in page
    assert 'class="limit limit-agent"' in page
    assert "Claude Code's threshold 16,500</text>" in page
    assert "limit-threshold" not in page  # no line of ours against the agent's compactions


def test_an_agent_threshold_far_above_the_bars_is_said_not_drawn(alice, alice_client, tmp_path):
    session = _imported(alice, write_lines(tmp_path / "cc.jsonl", claude_code_lines(compacts=2)))
    page = _timeline(alice_client, session)
    assert "fired at 152,300 tokens" in page
    assert "(above the chart)" in page
    assert "limit-agent" not in page


def test_codexs_recorded_auto_compact_limit_is_its_threshold(alice, alice_client, tmp_path):
    lines = codex_lines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record["type"] == "turn_context":
            record["payload"]["model_auto_compact_token_limit"] = 240_000
            lines[i] = json.dumps(record)
    session = _imported(alice, write_lines(tmp_path / "codex.jsonl", lines))
    natives = Compaction.objects.filter(session=session)
    assert {c.native_record.get("model_auto_compact_token_limit") for c in natives} == {240_000}
    page = _timeline(alice_client, session)
    assert "Codex's threshold 240,000 tokens: the auto-compact limit its transcript records" in page


def test_an_unknown_threshold_is_said_and_a_line_of_ours_is_labelled_ours(
    alice, alice_client, tmp_path
):
    # One manual /compact: nothing says when Claude Code would have compacted on its own.
    session = _imported(alice, write_lines(tmp_path / "cc.jsonl", claude_code_lines(compacts=1)))
    page = _timeline(alice_client, session)
    unknown = "No line for Claude Code's threshold: its transcript does not record when it compacts"
    assert unknown in page
    assert "limit-agent" not in page
    assert "limit-threshold" not in page
    continue_with(session, n=80)  # turns after the agent's compaction, for ours to compact
    run = compact_now(session, alice)
    assert run.status == "committed", (run.status, run.reason)
    page = _timeline(alice_client, session)
    assert "limit-threshold" in page
    assert ">our threshold " in page
    assert "hermes-web's, for this conversation's window, not Claude Code's" in page
    assert "the threshold line drawn is ours, not Claude Code's" in page


def test_the_chart_scrolls_in_a_labelled_region_with_a_hint(alice, alice_client, tmp_path):
    session = _imported(alice, write_lines(tmp_path / "cc.jsonl", claude_code_lines(compacts=2)))
    page = _timeline(alice_client, session)
    region = page.split('<div class="chart-scroll"', 1)[1].split(">", 1)[0]
    assert 'role="region"' in region
    assert 'tabindex="0"' in region
    assert 'aria-label="Compaction timeline chart, scrolls sideways"' in region
    assert 'aria-describedby="tl-scroll-hint"' in region
    assert 'id="tl-scroll-hint">The chart is wider than the screen: scroll it sideways' in page
    table = page.split('<div class="table-scroll"', 1)[1].split(">", 1)[0]
    assert 'role="region"' in table
    assert "aria-label=" in table
