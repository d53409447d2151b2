"""A compaction dates the actions it summarizes by each row's own time (an imported session's
rows keep the tool's timestamps), not by the day the compaction ran."""

import datetime as dt

from hermes_web.models import Compaction, Message
from hermes_web.services.compactions import request_compaction
from tests.web.compaction_helpers import SMALL_TAIL, conversation

LONG_AGO = dt.datetime(2024, 3, 14, 9, 30, tzinfo=dt.UTC)


def test_summarized_actions_carry_the_date_of_their_own_rows(alice):
    session = conversation(alice)
    Message.objects.filter(session=session).update(created_at=LONG_AGO)
    run = request_compaction(
        session=session, trigger="what_if", config_overrides=SMALL_TAIL, run_now=True
    )
    assert run.status == Compaction.Status.DRY_RUN
    summary = run.report["summary"]
    assert "2024-03-14" in summary
    today = dt.date.today().isoformat()
    # The day of the run is only the compaction's own line, never an action's date.
    assert all(today not in line for line in summary.splitlines() if "Compacted on" not in line)


def test_the_row_time_is_not_stored_on_committed_rows(alice):
    session = conversation(alice)
    Message.objects.filter(session=session).update(created_at=LONG_AGO)
    run = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    assert run.status == Compaction.Status.COMMITTED
    child = run.result_session
    assert child is not None
    assert not [m.pk for m in child.messages.all() if "timestamp" in (m.extra or {})]
