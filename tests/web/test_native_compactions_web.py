"""An agent's own compaction in the inspector, replayed with our engine and compared
(issue #25, items 1 and 2): the page at the same URL as ours, the replay button (a plain
POST), Compare with both summaries and the facts each kept, the API and the export."""

import json
from io import StringIO
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.management import call_command
from django.urls import reverse

from hermes_web.importers import import_path, store_session
from hermes_web.importers.base import NativeCompaction, ParsedMessage, ParsedSession
from hermes_web.models import Compaction, Session
from hermes_web.presenters.native import native_sections
from tests.web.native_fixtures import claude_code_lines, codex_lines, write_lines

pytestmark = pytest.mark.django_db


@pytest.fixture
def claude_session(alice, tmp_path):
    path = write_lines(tmp_path / "cc-web.jsonl", claude_code_lines(compacts=2, rounds=8))
    report = import_path(path, owner=alice)
    assert report.refused == []
    return report.sessions[0]


def _runs(session):
    return list(Compaction.objects.filter(session=session).order_by("queued_at", "pk"))


def test_the_inspector_opens_a_native_compaction_with_what_was_recorded(
    alice_client, claude_session
):
    first, second = _runs(claude_session)
    page = alice_client.get(reverse("compaction_detail", args=[second.public_id]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Claude Code&#x27;s own compaction" in html
    assert 'id="tokens-before-recorded">152,300<' in html
    counted = second.report["tokens"]["counted_before"]
    assert f'id="tokens-before-counted">{counted:,}<' in html
    # The summary by its headings (numbered "1. Primary Request and Intent:" lines).
    assert "<li>1. Primary Request and Intent</li>" in html
    assert "<li>2. Errors and fixes</li>" in html
    # The before/after split: the replaced rows link to the archived messages.
    replaced = list(second.archived_messages.order_by("position"))
    for row in replaced:
        assert reverse("message_detail", args=[claude_session.public_id, row.position]) in html
    assert reverse("compaction_replay", args=[second.public_id]) in html
    assert "Undo this compaction" not in html
    # The audit panel reuses the audit of ours: the agent's summary against the rows.
    audit = alice_client.get(reverse("compaction_audit", args=[second.public_id]))
    assert audit.status_code == 200
    assert "identifiers from the middle survive" in audit.content.decode()


def test_a_marker_only_compaction_shows_what_was_recorded(alice, alice_client):
    parsed = ParsedSession(
        source=Session.Source.IMPORT_GEMINI_CLI,
        public_id="gem-1",
        messages=[ParsedMessage(role="user", content="hi")],
        native_compactions=[
            NativeCompaction(source="gemini-cli", marker="Context compressed from 68% to 3%.")
        ],
    )
    session = store_session(parsed, alice, "chat.json")
    run = Compaction.objects.get(session=session)
    html = alice_client.get(reverse("compaction_detail", args=[run.public_id])).content.decode()
    assert "Gemini CLI&#x27;s own compaction" in html
    assert "Context compressed from 68% to 3%." in html
    assert "nothing to replay" in html
    # ...and a replay is refused in words, not a traceback.
    response = alice_client.post(reverse("compaction_replay", args=[run.public_id]), follow=True)
    assert response.status_code == 200
    assert "nothing to replay" in response.content.decode()
    assert not Compaction.objects.filter(replay_of=run).exists()


def test_replay_runs_our_engine_on_exactly_the_rows_the_agent_compacted(
    alice_client, claude_session
):
    _first, second = _runs(claude_session)
    response = alice_client.post(reverse("compaction_replay", args=[second.public_id]))
    assert response.status_code == 302
    query = parse_qs(urlparse(response["Location"]).query)
    assert query["a"] == [second.public_id]
    replays = list(Compaction.objects.filter(replay_of=second).order_by("pk"))
    assert [r.config["profile"] for r in replays] == ["hermes", "classic"]
    assert query["b"] == [replays[0].public_id]
    archived = [m.pk for m in second.archived_messages.order_by("position")]
    for run in replays:
        assert run.status == Compaction.Status.DRY_RUN
        assert run.trigger == Compaction.Trigger.WHAT_IF
        assert [m.pk for m in run.input_rows()] == archived
        assert len(run.report["message_tokens"]) == len(archived)
    # At the agent's window (200k) the hermes profile compacts these 15k tokens; the
    # classic profile's 20k-token tail keeps them all, and says so.
    assert replays[0].report["status"] == "compacted"
    assert replays[1].report["reason"] == "nothing_to_compact"
    # The session itself is untouched by the dry runs.
    assert Compaction.objects.filter(session=claude_session, status="committed").count() == 2


def test_compare_shows_both_summaries_and_the_facts_each_kept(alice_client, claude_session):
    _first, second = _runs(claude_session)
    response = alice_client.post(reverse("compaction_replay", args=[second.public_id]), follow=True)
    html = response.content.decode()
    assert response.status_code == 200
    assert "Left: Claude Code&#x27;s own compaction" in html
    assert "Right: our engine, profile hermes" in html
    assert 'id="facts-by-kind"' in html
    assert "file paths" in html
    assert "commands" in html
    replay = Compaction.objects.filter(replay_of=second, config__profile="hermes").get()
    assert replay.report["summary"].splitlines()[0][:40] in html.replace("&#x27;", "'")
    assert second.native_summary.splitlines()[0][:40] in html
    # Both profiles are reachable from the page.
    other = Compaction.objects.filter(replay_of=second, config__profile="classic").get()
    assert f"b={other.public_id}" in html
    # The agent has no profile of ours; a replay is there to compare, never to commit.
    assert '<td class="profile">Claude Code&#x27;s own</td>' in html
    assert reverse("commit_compaction", args=[replay.public_id]) not in html
    refused = alice_client.post(reverse("commit_compaction", args=[replay.public_id]))
    assert refused.status_code == 409
    assert not Compaction.objects.ours().filter(session=claude_session).real().exists()
    # Facts come from the conversation, not from the wrapper we put around a summary row.
    assert "REFERENCE ONLY" not in html.split('id="native-facts"')[1].split("</section>")[0]


def test_api_and_export_give_the_same_comparison(alice, alice_client, claude_session, settings):
    _first, second = _runs(claude_session)
    started = alice_client.post(f"/api/compactions/{second.public_id}/replay")
    assert started.status_code == 202, started.content
    body = started.json()
    assert [r["replay_of"] for r in body] == [second.public_id] * 2
    detail = alice_client.get(f"/api/compactions/{second.public_id}").json()
    assert detail["source"] == "claude-code"
    assert detail["tokens_before"] == 152_300
    api = alice_client.get(f"/api/compactions/{second.public_id}/compare").json()["replays"]
    out = StringIO()
    call_command("export_session", second.public_id, "--format", "report-json", stdout=out)
    document = json.loads(out.getvalue())
    assert document["compaction"]["source"] == "claude-code"
    assert document["native"]["tokens_before_recorded"] == 152_300
    assert document["replays"] == api
    hermes = next(r for r in api if r["profile"] == "hermes")
    assert hermes["summary"]["agent"] == second.native_summary
    assert hermes["summary"]["ours"]
    assert hermes["facts"]["total"] >= hermes["facts"]["agent"]
    assert hermes["facts"]["ours"] > 0
    assert hermes["tokens_after"]["ours"] > 0
    markdown = StringIO()
    call_command("export_session", second.public_id, "--format", "report-md", stdout=markdown)
    assert "152" in markdown.getvalue().replace(",", "")


def test_replay_api_refuses_our_own_compactions(alice_client, claude_session):
    _first, second = _runs(claude_session)
    alice_client.post(f"/api/compactions/{second.public_id}/replay")
    ours = Compaction.objects.filter(replay_of=second).first()
    refused = alice_client.post(f"/api/compactions/{ours.public_id}/replay")
    assert refused.status_code == 409
    assert "only an agent's own compaction" in refused.json()["detail"]


def test_codex_compaction_page_lists_the_kept_rows(alice, alice_client, tmp_path):
    path = write_lines(tmp_path / "rollout-web.jsonl", codex_lines())
    session = import_path(path, owner=alice).sessions[0]
    first, second = _runs(session)
    html = alice_client.get(reverse("compaction_detail", args=[first.public_id])).content.decode()
    kept = first.report["native"]["kept_positions"][0]
    assert 'id="native-kept"' in html
    assert reverse("message_detail", args=[session.public_id, kept]) in html
    html = alice_client.get(reverse("compaction_detail", args=[second.public_id])).content.decode()
    assert "encrypted" in html
    assert "272000" in html  # the window Codex recorded, shown with what was recorded


def test_conversation_timeline_and_tree_label_native_compactions(alice_client, claude_session):
    for name in ("conversation_detail", "conversation_timeline", "conversation_tree"):
        html = alice_client.get(reverse(name, args=[claude_session.public_id])).content.decode()
        assert "Claude Code&#x27;s own compaction" in html, name


def test_another_user_cannot_open_or_replay_it(bob_client, claude_session):
    _first, second = _runs(claude_session)
    assert bob_client.get(reverse("compaction_detail", args=[second.public_id])).status_code == 404
    assert bob_client.post(reverse("compaction_replay", args=[second.public_id])).status_code == 404
    assert not Compaction.objects.filter(replay_of=second).exists()


def test_summary_sections_by_the_headings_agents_write():
    text = (
        "Intro line\n## Files\na.py\n1. Pending Tasks:\n   none\n**Errors**\nKeyError\nAnalysis:\nx"
    )
    sections = native_sections(text)
    assert sections["preamble"] == "Intro line"
    # Beside Markdown headings a bare "Analysis:" line is text (ours quote such lines).
    assert [s["heading"] for s in sections["sections"]] == ["Files", "1. Pending Tasks", "Errors"]
    assert [s["heading"] for s in native_sections("Analysis:\nx\nSummary:\ny")["sections"]] == [
        "Analysis",
        "Summary",
    ]
    assert native_sections("no headings here")["sections"] == []
    assert native_sections("```\nNote:\n```")["sections"] == []
