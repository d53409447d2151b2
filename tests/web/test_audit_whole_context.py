"""The fact audit's "lost" means absent from the whole context after the compaction
(issue #37, item 3): a fact of the middle that the kept tail still says is kept, even when
the summary does not repeat it."""

import pytest
from django.urls import reverse

from hermes_web.models import Compaction
from hermes_web.services.compactions import request_compaction
from hermes_web.services.sessions import append_message, create_session

pytestmark = pytest.mark.django_db


def test_a_fact_the_tail_still_carries_is_not_lost(alice, alice_client):
    session = create_session(owner=alice, title="layout", context_length=200_000)
    append_message(session, role="system", content="You are a front-end agent.")
    append_message(session, role="user", content="Build the pricing card.")
    for n in range(30):
        call = {
            "id": f"c{n}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "src/card_{n}.css"}}'},
        }
        append_message(session, role="assistant", content="", tool_calls=[call])
        css = "".join(f".rule-{i} {{ margin: {i}px; }}\n" for i in range(40))
        append_message(
            session,
            role="tool",
            content=css + ".card { width: 480px; }\n",
            tool_call_id=f"c{n}",
            tool_name="read_file",
        )
        if n == 3:
            append_message(session, role="assistant", content="The card is 480px wide there.")
            append_message(session, role="user", content="Good, go on with the rules.")
    append_message(session, role="user", content="Remember: the card is 480px wide.")
    append_message(session, role="assistant", content="Noted, 480px it is.")
    run = request_compaction(
        session=session,
        requested_by=alice,
        trigger=Compaction.Trigger.WHAT_IF,
        config_overrides={"tail_token_budget": 60, "protect_first_n": 1},
        summarizer="deterministic",
        run_now=True,
    )
    run.refresh_from_db()
    report = run.report
    assert report["status"] == "compacted"
    start, end = report["boundaries"]["tail"]
    tail = [m.content for m in run.input_rows()[start:end]]
    assert any("480px" in str(text) for text in tail)
    audit = alice_client.get(reverse("compaction_audit", args=[run.public_id])).context["audit"]
    values = {f["value"] for f in audit["facts"]}
    assert any("480" in v for v in values)
    assert "480px" not in report["summary"]  # only the tail carries it
    assert not [f for f in audit["lost"] if "480" in f["value"]]
