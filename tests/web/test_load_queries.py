"""Issue #28, pages under load: what a warm view of the inspector costs in queries, and the
undo box's refusals (asked on every inspector view) still said, from one round trip."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from hermes_web.models import AgentTurn, Compaction, Session
from hermes_web.services.sessions import resolve_tip
from hermes_web.services.undo import UndoRefused, undo_compaction, undo_state
from tests.web.test_chat_undo import compacted

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_cache")]


def test_a_warm_inspector_view_of_a_committed_run_reads_two_queries(alice, alice_client):
    _, run, _ = compacted(alice, "rotation")
    url = reverse("compaction_detail", args=[run.public_id])
    assert alice_client.get(url).status_code == 200  # fills the panel cache
    with CaptureQueriesContext(connection) as queries:
        response = alice_client.get(url)
    assert response.status_code == 200
    assert "Undo" in response.content.decode()
    # The run, and the four refusals (later runs, one in progress, a turn answering, messages
    # added since) in one query; the undo history, a key of the report, is cached until an
    # undo or redo. Was 7 (a query per refusal, the live session read only for its id), then
    # 4 (the history and the added messages read on every view).
    assert len(queries) <= 2, [q["sql"][:120] for q in queries.captured_queries]


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_undo_is_refused_while_the_conversation_is_busy(alice, mode):
    session, run, _ = compacted(alice, mode)
    assert undo_state(run) == {"action": "undo", "reason": "", "added": 0}
    live = resolve_tip(Session.objects.get(pk=session.pk))

    turn = AgentTurn.objects.create(session=live, status=AgentTurn.Status.RUNNING)
    assert "still answering" in undo_state(run)["reason"]
    with pytest.raises(UndoRefused, match="still answering"):
        undo_compaction(run, user=alice)
    turn.status = AgentTurn.Status.DONE
    turn.save()

    other = Compaction.objects.create(session=live, status=Compaction.Status.RUNNING)
    assert "in progress" in undo_state(run)["reason"]
    with pytest.raises(UndoRefused, match="in progress"):
        undo_compaction(run, user=alice)
    other.delete()

    undone = undo_compaction(run, user=alice)
    assert undone.status == Compaction.Status.UNDONE
