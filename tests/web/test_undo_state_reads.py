"""The undo button's state reads how many rows came after a compaction and the newest one,
never the rows themselves: the inspector and the chat page ask on every view, and a run early
in a long conversation has thousands of rows after it."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hermes_web.models import Session
from hermes_web.services.sessions import append_messages, resolve_tip
from hermes_web.services.undo import undo_state
from tests.web.test_chat_undo import compacted

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_the_state_of_a_run_with_many_rows_after_it_reads_two_of_them(alice, mode):
    session, run, _ = compacted(alice, mode)
    live = resolve_tip(Session.objects.get(pk=session.pk))
    rows = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"later turn {i} **bold**"}
        for i in range(1_500)
    ]
    append_messages(live, rows)
    with CaptureQueriesContext(connection) as queries:
        state = undo_state(run)
    assert state["action"] == "undo"
    assert state["added"] == 1_500
    assert "1,500 messages were added after this compaction" in state["reason"]
    assert "the reply “later turn 1499 bold”" in state["reason"]
    # Each read of the message table is a count, an existence test or a single row.
    reads = [q["sql"] for q in queries.captured_queries if '"hermes_web_message"' in q["sql"]]
    assert reads
    for sql in reads:
        assert re.search(r"COUNT\(|EXISTS|LIMIT 1\b", sql), sql
