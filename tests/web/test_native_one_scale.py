"""An agent's compaction and our replay of it on one scale (issue #37, item 2): every
before/after pair is our tiktoken count of the stored rows, the agent's own figures are
shown beside it, labelled, and "not recorded" where the transcript has none; the hermes
replay aims at the agent's retained budget; the timeline draws no threshold of ours
against an agent's compaction."""

import html as html_lib
import json

import pytest
from django.urls import reverse

from hermes_web.importers import import_path
from hermes_web.models import Compaction
from hermes_web.presenters.inspector import card_context
from hermes_web.services.native import agent_budget, replay_native
from tests.web.native_fixtures import claude_code_lines, write_lines

pytestmark = pytest.mark.django_db


@pytest.fixture
def natives(alice, tmp_path):
    path = write_lines(tmp_path / "cc-scale.jsonl", claude_code_lines(compacts=2, rounds=8))
    session = import_path(path, owner=alice).sessions[0]
    return list(Compaction.objects.filter(session=session).order_by("queued_at", "pk"))


def _text(response) -> str:
    assert response.status_code == 200
    return html_lib.unescape(response.content.decode())


def test_the_card_of_an_agents_compaction_counts_both_sides_with_our_tokenizer(natives):
    first, _second = natives
    card = card_context(first)
    counted = first.report["tokens"]
    assert first.tokens_before == 41_000  # the agent's figure
    assert first.tokens_after is None  # ...and none after
    assert card["tokens"]["before"] == counted["counted_before"]
    assert card["tokens"]["after"] == counted["counted_after"]
    assert card["tokens"]["recorded_before"] == 41_000
    assert card["tokens"]["recorded_after"] is None
    after, before = counted["counted_after"], counted["counted_before"]
    assert card["saved_percent"] == round(100 * (1 - after / before), 1)
    # The split bar's parts are shares of the same total: they add up to the whole bar.
    assert sum(p["percent"] for p in card["split"]["parts"]) == pytest.approx(100, abs=0.1)


def test_compare_shows_the_agents_figures_labelled_and_not_recorded_in_words(
    alice, alice_client, natives
):
    first, _second = natives
    page = _text(
        alice_client.post(reverse("compaction_replay", args=[first.public_id]), follow=True)
    )
    counted = first.report["tokens"]
    assert f"{counted['counted_before']:,} → {counted['counted_after']:,}" in page
    assert "As Claude Code recorded" in page
    assert "41,000 → not recorded" in page
    assert "→ None" not in page
    # The facts headline says the size of each side.
    assert 'id="facts-a-tokens">' in page
    inspector = _text(alice_client.get(reverse("compaction_detail", args=[first.public_id])))
    assert "None" not in inspector.split('id="numbers"')[1].split("</section>")[0]
    conversation = _text(
        alice_client.get(reverse("conversation_detail", args=[first.session.public_id]))
    )
    assert "→ None" not in conversation
    assert "41,000 → not recorded" in conversation


def test_the_hermes_replay_aims_at_the_agents_retained_budget(alice, natives):
    _first, second = natives
    budget = agent_budget(second)
    assert budget == second.report["native"]["tokens_after_counted"]
    hermes, classic = replay_native(second, requested_by=alice)
    for run in (hermes, classic):
        run.refresh_from_db()
    assert hermes.config["protect_first_n"] == 0
    assert hermes.report["status"] == "compacted"
    aimed = hermes.report["tokens"]["after"]
    # Our defaults keep ~5,000 tokens of these 14,774. The agent kept 67, less than our
    # prefix alone: the replay goes to the smallest summary bound there is (below the
    # defaults' 1,000-character floor) and keeps the smallest context it can.
    assert hermes.config["resume_summary_max_chars"] == 1
    assert budget < aimed < 500
    assert classic.config["protect_first_n"] == 3  # the second column keeps our defaults
    # The card says the budget was out of reach, and by how much, rather than "aimed at" alone.
    aim = card_context(hermes)["aim"]
    assert aim["budget"] == budget
    assert aim["after"] == aimed
    assert not aim["within"]
    assert aim["off"] == round(100 * (aimed - budget) / budget, 1)


def test_compare_says_whether_the_replay_reached_the_agents_budget(alice, alice_client, natives):
    _first, second = natives
    page = _text(
        alice_client.post(reverse("compaction_replay", args=[second.public_id]), follow=True)
    )
    aim = page.split('class="tokens-aim">')[1].split("</dd>")[0]
    assert f"{agent_budget(second):,} tokens (our count)" in aim
    assert "out of reach" in aim
    assert "% over" in aim


def _longer_summaries(lines: list[str], sentences: int) -> list[str]:
    """The fixture's Claude Code summaries with ``sentences`` more lines: the sizes real
    summaries have (a few hundred to a few thousand tokens)."""
    out = []
    for line in lines:
        record = json.loads(line)
        if record.get("isCompactSummary"):
            more = "\n".join(
                f"   - src/module_{i}.py: the total was off by {i}; fixed and tested."
                for i in range(sentences)
            )
            record["message"]["content"] += "\n4. Files:\n" + more
        out.append(json.dumps(record))
    return out


@pytest.mark.parametrize("sentences", [30, 40, 80])
def test_the_hermes_replay_keeps_the_agents_retained_budget_within_5_percent(
    alice, tmp_path, sentences
):
    """Both sides on one tokenizer (our count of the session's token model): the tokens
    the agent's summary and kept rows hold, and the tokens our replay keeps of the same
    rows."""
    lines = _longer_summaries(claude_code_lines(compacts=2, rounds=8), sentences)
    session = import_path(write_lines(tmp_path / "cc.jsonl", lines), owner=alice).sessions[0]
    for native in Compaction.objects.filter(session=session).order_by("queued_at", "pk"):
        budget = agent_budget(native)
        assert budget is not None
        assert budget > 500
        hermes, classic = replay_native(native, requested_by=alice)
        hermes.refresh_from_db()
        kept = hermes.report["tokens"]["after"]
        assert abs(kept - budget) <= 0.05 * budget, (budget, kept)
        assert card_context(hermes)["aim"]["within"]
        assert classic.config["resume_summary_max_chars"] == 40_000  # our defaults


def test_the_timeline_of_an_imported_chain_is_on_our_scale_without_our_threshold(
    alice_client, natives
):
    first, second = natives
    page = _text(alice_client.get(reverse("conversation_timeline", args=[first.session.public_id])))
    assert "limit-threshold" not in page
    assert 'id="agent-threshold"' in page
    table = page.split("<tbody>", 1)[1]
    for run in (first, second):
        counted = run.report["tokens"]
        assert f'<td class="num">{counted["counted_before"]:,}</td>' in table
    assert "152,300" not in table  # the agent's own figure is not mixed into our scale
