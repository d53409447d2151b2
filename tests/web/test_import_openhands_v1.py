"""OpenHands V1 (software-agent SDK) conversation folders (issue #25): ``base_state.json`` and
``events/event-<n>-<uuid>.json`` with ``kind``-tagged events, imported with --format auto,
the condensation a native compaction. The folder in tests/fixtures/agents/openhands/v1 is our
own, in the SDK 1.x layout."""

import hashlib
import json
import shutil
from io import StringIO

import pytest
from django.core.management import call_command

from hermes_web.importers.formats import openhands
from hermes_web.models import Compaction, Message, Session

from .agent_import_helpers import AGENTS, imported, pairs_ok, parsed

pytestmark = pytest.mark.django_db

CONVERSATION = AGENTS / "openhands" / "v1" / "c7a1e0d24b9f4e6a8d3c5b7a9e1f2d40"
EVENTS = sorted((CONVERSATION / "events").glob("event-*.json"))


def test_events_become_turns_parallel_calls_results_and_the_finish():
    (session,) = parsed(openhands.parse, EVENTS[0])
    rows = session.messages
    pairs_ok(rows)
    assert rows[0].role == "system"
    assert rows[1].role == "user"
    assert "rounds wrong" in rows[1].content
    parallel = next(m for m in rows if m.tool_calls and len(m.tool_calls) == 2)
    assert [c["id"] for c in parallel.tool_calls] == ["toolu_01VIEW", "toolu_02TEST"]
    assert json.loads(parallel.tool_calls[1]["function"]["arguments"]) == {
        "command": "pytest -q tests/test_total.py"
    }
    assert parallel.content == "I'll read the file and run the failing test."
    error = next(m for m in rows if m.tool_call_id == "toolu_03BAD")
    assert error.content == "Command timed out after 120 seconds"
    assert rows[-1].content == "Fixed the rounding in src/billing/total.py."
    assert session.public_id == CONVERSATION.name
    assert session.skipped["null event"] == 1  # the state update


def test_the_condensation_is_a_native_compaction_with_its_summary_in_place():
    (session,) = parsed(openhands.parse, EVENTS[0])
    (native,) = session.native_compactions
    assert native.source == "openhands"
    assert native.summary.startswith("USER_CONTEXT: fix rounding")
    archived = [m for m in session.messages if m.archived]
    assert {m.tool_call_id for m in archived if m.role == "tool"} == {
        "toolu_01VIEW",
        "toolu_02TEST",
    }
    active = [m for m in session.messages if m.active and not m.meta]
    # summary_offset 2: after the system prompt and the user's request
    assert active[2].is_summary
    assert [m.role for m in active[:2]] == ["system", "user"]


def test_the_folder_imports_once_with_format_auto_and_stays_unchanged(alice, tmp_path):
    folder = tmp_path / CONVERSATION.name
    shutil.copytree(CONVERSATION, folder)
    before = {
        p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }
    out = StringIO()
    call_command("import_sessions", str(folder), user=alice.username, stdout=out)
    (session,) = Session.objects.filter(owner=alice)
    assert session.source == Session.Source.IMPORT_OPENHANDS
    rows = Message.objects.filter(session=session).order_by("position")
    pairs_ok(rows)
    assert Compaction.objects.filter(session=session).count() == 1
    after = {
        p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }
    assert after == before


def test_an_event_file_is_detected_as_openhands(alice):
    (session,) = imported(EVENTS[0], alice, "openhands")
    assert session.extra["openhands"]["sdk"] == "v1"
