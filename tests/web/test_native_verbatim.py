"""An agent's own summary shown exactly as the agent wrote it (issue #37, item 1): the
conversation and message pages, the inspector's final list and its summary panel, and the
Compare card's section count read the agent's text, not the wrapper our engine reads."""

import html as html_lib

import pytest
from django.urls import reverse

from compaction import END_MARKER, PREFIX_OPENING
from hermes_web.importers import import_path
from hermes_web.models import Compaction, Message
from tests.web.native_fixtures import claude_code_lines, codex_lines, write_lines

pytestmark = pytest.mark.django_db


def _page(client, name, *args) -> str:
    response = client.get(reverse(name, args=args))
    assert response.status_code == 200
    return html_lib.unescape(response.content.decode())


@pytest.fixture
def claude_session(alice, tmp_path):
    path = write_lines(tmp_path / "cc-verbatim.jsonl", claude_code_lines(compacts=2, rounds=3))
    report = import_path(path, owner=alice)
    assert report.refused == []
    return report.sessions[0]


def _summary_rows(session):
    return list(Message.objects.filter(session=session, is_summary=True).order_by("position"))


@pytest.mark.parametrize("lines", [claude_code_lines, codex_lines])
def test_the_conversation_and_message_pages_show_the_agents_words(
    alice, alice_client, tmp_path, lines
):
    path = write_lines(tmp_path / "agent.jsonl", lines())
    session = import_path(path, owner=alice).sessions[0]
    rows = _summary_rows(session)
    assert rows
    for row in rows:
        native = Compaction.objects.get(public_id=row.extra["native_compaction"])
        shown = _page(alice_client, "message_detail", session.public_id, row.position)
        body = shown.split('<pre class="content" tabindex="0">', 1)[1].split("</pre>", 1)[0]
        assert body == native.native_summary
        assert PREFIX_OPENING not in shown
        assert END_MARKER not in shown
    conversation = _page(alice_client, "conversation_detail", session.public_id)
    assert PREFIX_OPENING not in conversation
    assert END_MARKER not in conversation


def test_the_inspector_shows_the_summary_verbatim_and_its_final_list_unwrapped(
    alice_client, claude_session
):
    _first, second = Compaction.objects.filter(session=claude_session).order_by("queued_at", "pk")
    page = _page(alice_client, "compaction_detail", second.public_id)
    verbatim = page.split('id="native-summary-text">', 1)[1].split("</pre>", 1)[0]
    assert verbatim == second.native_summary
    assert "\nAnalysis:\nThe user asked for edits." in verbatim
    assert PREFIX_OPENING not in page


def test_compare_counts_the_agents_sections_as_the_inspector_does(alice_client, claude_session):
    _first, second = Compaction.objects.filter(session=claude_session).order_by("queued_at", "pk")
    inspector = _page(alice_client, "compaction_detail", second.public_id)
    # Analysis, Summary and the three numbered headings of the fixture's summary.
    assert inspector.count("<li>", inspector.index("Its headings")) >= 5
    response = alice_client.post(reverse("compaction_replay", args=[second.public_id]), follow=True)
    compare = html_lib.unescape(response.content.decode())
    assert "Summary (5 sections)" in compare
    assert "Summary (0 sections)" not in compare.split("Right:")[0]


def test_the_engine_reads_an_agents_stored_summary_wrapped_and_counted_as_wrapped(claude_session):
    """The row is stored as the agent wrote it; the input our engine gets (a replay of the
    second compaction holds the first summary) and a prompt of the session carry our prefix
    and end marker, and the engine's token count is of the row as it reads it."""
    from compaction import count_message_tokens
    from compaction.summary import is_summary_message
    from hermes_web.services.compaction_run import _load_rows
    from hermes_web.services.sessions import compaction_config_for, openai_messages

    first, second = Compaction.objects.filter(session=claude_session).order_by("queued_at", "pk")
    stored = Message.objects.get(
        session=claude_session, position=first.report["native"]["summary_position"]
    )
    assert stored.content == first.native_summary
    config = compaction_config_for(claude_session)
    messages, counts, _, _ = _load_rows(second.input_rows(), config)
    rows = list(second.input_rows())
    at = next(i for i, row in enumerate(rows) if row.pk == stored.pk)
    assert messages[at]["content"].startswith(PREFIX_OPENING)
    assert messages[at]["content"].endswith(END_MARKER)
    assert first.native_summary.strip() in messages[at]["content"]
    assert is_summary_message(messages[at])
    assert counts[at] == count_message_tokens(messages[at], config) > stored.token_count
    prompt = openai_messages(claude_session)
    assert any(is_summary_message(m) for m in prompt)
