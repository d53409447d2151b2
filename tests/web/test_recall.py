"""The recall tool: after a compaction the agent fetches a folded output back verbatim.

End to end through the real turn loop: a fake OpenAI model (tests/fake_openai.py through
litellm) and the offline demo model each call ``recall`` with a ``[ref:N]`` they see in the
compacted context, and the tool returns the original stored message.
"""

import json
import re

import pytest

from compaction.messages import content_text
from hermes_web.agent.loop import run_turn
from hermes_web.agent.tools import run_tool
from hermes_web.models import AgentTurn, Compaction, Message, Session
from hermes_web.services.chat import send_message, start_chat
from hermes_web.services.compactions import request_compaction

pytestmark = pytest.mark.django_db

MARKER = "ZEBRA-QUARTZ-RECALL-4417"
REF = re.compile(r"\[ref:(\d+)\]")


@pytest.fixture
def workspace(tmp_path, settings):
    root = tmp_path / "ws"
    root.mkdir()
    filler = "\n".join(f"line {i}: the ingest loop batches readings" for i in range(900))
    (root / "big_a.txt").write_text(filler + f"\n{MARKER}\n" + filler)
    (root / "big_b.txt").write_text(filler.replace("ingest", "writer"))
    settings.HERMES_WORKSPACE = root
    return root


def call(call_id, name, **args):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def turn_for(session, text):
    turn = send_message(session=Session.objects.get(pk=session.pk), text=text)
    assert run_turn(turn.pk) is None
    turn.refresh_from_db()
    assert turn.status == AgentTurn.Status.DONE, turn.error
    return turn


def _ref_for(session, needle):
    """The N of the [ref:N] on the line of the live context that mentions ``needle``."""
    for row in Message.objects.filter(session=session).active():
        for line in content_text(row.content).splitlines():
            if needle in line and REF.search(line):
                return int(REF.search(line).group(1))
    raise AssertionError(f"no [ref:N] next to {needle!r} in the compacted context")


def test_a_fake_model_recalls_a_folded_read_verbatim_after_a_compaction(alice, workspace, llm):
    session = start_chat(owner=alice)
    llm.enqueue(
        {"tool_calls": [call("call_a", "read_file", path="big_a.txt")], "prompt_tokens": 1_000},
        {"content": "Read big_a.", "prompt_tokens": 30_000},
    )
    turn_for(session, "read big_a.txt")
    original = Message.objects.get(session=session, role="tool", tool_call_id="call_a")
    assert MARKER in original.content
    for i in range(3):
        llm.enqueue({"content": f"noted {i}", "prompt_tokens": 31_000 + i})
        turn_for(session, f"note {i}")
    run = request_compaction(session=session, summarizer="deterministic", run_now=True)
    assert run.status == Compaction.Status.COMMITTED, (run.status, run.reason, run.error)
    child = run.result_session
    live = json.dumps([m.content for m in Message.objects.filter(session=child).active()])
    assert MARKER not in live  # the read was folded away ...
    ref = _ref_for(child, "big_a.txt")  # ... and its fold line names the reference

    llm.enqueue(
        {"tool_calls": [call("call_r", "recall", ref=ref)], "prompt_tokens": 5_000},
        {"content": "Here it is again.", "prompt_tokens": 30_000},
    )
    turn = turn_for(child, "show me the full big_a.txt read again")
    assert turn.session_id == child.pk
    recalled = Message.objects.get(session=child, role="tool", tool_call_id="call_r")
    payload = json.loads(recalled.content)
    assert payload["ref"] == ref
    assert payload["content"] == original.content  # verbatim
    assert payload["message"] == original.pk
    assert not payload["truncated"]
    # The model got the full text back in its next call.
    assert MARKER in json.dumps(llm.requests[-1]["messages"])


def test_the_demo_model_recalls_a_folded_output_verbatim(alice, settings):
    from hermes_web.agent import demo_model

    settings.HERMES_CHAT_MODEL = ""
    demo_model.STREAM_DELAY = 0
    session = start_chat(owner=alice)
    for question in ["What is in this workspace?", "Why did ingest fail on March 14?"]:
        turn_for(session, question)
    run = request_compaction(session=session, summarizer="deterministic", run_now=True)
    assert run.status == Compaction.Status.COMMITTED, (run.status, run.reason, run.error)
    child = run.result_session
    turn_for(child, "Please recall the folded output")
    recalled = Message.objects.filter(session=child, role="tool", tool_name="recall").get()
    payload = json.loads(recalled.content)
    assert "error" not in payload, payload
    rows = list(run.input_rows())
    source = content_text(rows[payload["ref"]].content)
    assert payload["total_chars"] == len(source) > 200
    # A long text comes in pages: offset fetches the rest, and the pages add up verbatim.
    pages = [payload["content"]]
    while payload["truncated"]:
        offset = payload["offset"] + len(payload["content"])
        payload = json.loads(
            run_tool("recall", {"ref": payload["ref"], "offset": offset}, session=child)
        )
        pages.append(payload["content"])
    assert "".join(pages) == source
    reply = Message.objects.filter(session=child, role="assistant").last()
    assert f"[ref:{payload['ref']}]" in reply.content
    assert source[:200] in reply.content


def test_recall_resolves_in_place_runs_searches_history_and_refuses_other_chains(
    alice, bob, workspace, llm
):
    session = start_chat(owner=alice)
    session.compaction_mode = Session.Mode.IN_PLACE
    session.save()
    llm.enqueue(
        {"tool_calls": [call("call_a", "read_file", path="big_a.txt")], "prompt_tokens": 1_000},
        {"content": "Read big_a.", "prompt_tokens": 30_000},
    )
    turn_for(session, "read big_a.txt")
    for i in range(3):
        llm.enqueue({"content": f"noted {i}", "prompt_tokens": 31_000 + i})
        turn_for(session, f"note {i}")
    run = request_compaction(session=session, summarizer="deterministic", run_now=True)
    assert (run.status, run.mode) == (Compaction.Status.COMMITTED, Compaction.Mode.IN_PLACE)
    ref = _ref_for(session, "big_a.txt")
    out = json.loads(run_tool("recall", {"ref": ref}, session=session))
    assert MARKER in out["content"]
    assert Message.objects.get(pk=out["message"]).archived_by_id == run.pk

    found = json.loads(run_tool("recall", {"query": MARKER.lower()}, session=session))
    assert found["matches"]
    hit = found["matches"][0]
    assert MARKER in hit["snippet"]
    again = json.loads(run_tool("recall", {"message": hit["message"]}, session=session))
    assert MARKER in again["content"]

    other = start_chat(owner=bob)
    refused = json.loads(run_tool("recall", {"message": hit["message"]}, session=other))
    assert "error" in refused
    missing = json.loads(run_tool("recall", {"ref": 10_000}, session=session))
    assert "error" in missing
    nothing = json.loads(run_tool("recall", {"ref": 1}, session=other))
    assert "no compaction" in nothing["error"]
