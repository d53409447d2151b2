"""The chat through litellm against a real local OpenAI-compatible server (no worker here:
turns and compactions are run by calling their task bodies, as a worker would)."""

import json

import pytest
from django.urls import reverse

from compaction import PREFIX_OPENING
from hermes_web.agent.loop import run_turn
from hermes_web.models import AgentTurn, Compaction, Message, Session
from hermes_web.services.chat import send_message, start_chat
from hermes_web.services.compactions import request_compaction, run_compaction

pytestmark = pytest.mark.django_db

MIDDLE_MARKER = "ZEBRA-QUARTZ-MIDDLE-7731"


@pytest.fixture
def workspace(tmp_path, settings):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\n\nThe deploy key rotates on Fridays.\n")
    filler = "\n".join(
        f"line {i}: the ingest loop batches readings and acknowledges them" for i in range(900)
    )
    (root / "big_a.txt").write_text(filler + f"\n{MIDDLE_MARKER}\n" + filler)
    (root / "big_b.txt").write_text(filler.replace("ingest", "writer"))
    settings.HERMES_WORKSPACE = root
    return root


def tool_call(call_id, name, **args):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def turn_for(session, text):
    turn = send_message(session=session, text=text)
    assert run_turn(turn.pk) is None
    turn.refresh_from_db()
    return turn


def test_multi_turn_chat_runs_tools_in_the_workspace(alice, workspace, llm):
    llm.enqueue(
        {
            "tool_calls": [
                tool_call("call_1", "read_file", path="notes.md"),
                tool_call("call_2", "list_files", path="."),
            ],
            "prompt_tokens": 900,
        },
        {"content": "The deploy key rotates on **Fridays**.", "prompt_tokens": 1_400},
        {"content": "You asked about the deploy key.", "prompt_tokens": 1_600},
    )
    session = start_chat(owner=alice)
    turn = turn_for(session, "When does the deploy key rotate?")
    assert turn.status == AgentTurn.Status.DONE, turn.error
    rows = list(Message.objects.filter(session=session).active())
    assert [r.role for r in rows] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [r.tool_call_id for r in rows[3:5]] == ["call_1", "call_2"]
    assert "     3|The deploy key rotates on Fridays." in json.loads(rows[3].content)["content"]
    assert rows[2].provider_prompt_tokens == 900
    assert rows[5].provider_prompt_tokens == 1_400
    assert turn.usage["prompt_tokens"] == 1_400
    # The second model call carried the tool results back with matching ids.
    second = llm.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert second[3]["tool_call_id"] == "call_1"
    assert llm.requests[0]["stream"] is True
    assert {t["function"]["name"] for t in llm.requests[0]["tools"]} >= {
        "read_file",
        "search_files",
        "list_files",
    }

    turn_for(session, "What did I ask?")
    third = llm.requests[2]["messages"]
    assert [m["role"] for m in third][-2:] == ["assistant", "user"]
    assert third[-1]["content"] == "What did I ask?"


def test_crossing_the_threshold_queues_a_compaction_and_the_next_call_sends_the_summary(
    alice, workspace, llm
):
    session = start_chat(owner=alice)
    llm.enqueue({"content": "Hello!", "prompt_tokens": 300})
    turn_for(session, "hi")
    llm.enqueue(
        {
            "tool_calls": [tool_call("call_a", "read_file", path="big_a.txt")],
            "prompt_tokens": 1_000,
        },
        {"content": "Read big_a.", "prompt_tokens": 30_000},
        {
            "tool_calls": [tool_call("call_b", "read_file", path="big_b.txt")],
            "prompt_tokens": 31_000,
        },
        # Over the 96,000 threshold of a 128K window (75 % under 512K, reference §10.1).
        {"content": "Read big_b.", "prompt_tokens": 100_000},
    )
    turn_for(session, "read big_a.txt")
    assert not Compaction.objects.exists()  # 30,000 is below the threshold
    turn_for(session, "now read big_b.txt")
    run = Compaction.objects.get()
    assert (run.trigger, run.status) == (Compaction.Trigger.AUTO, Compaction.Status.QUEUED)

    run = run_compaction(run.pk)
    assert run.status == Compaction.Status.COMMITTED, run.error
    child = run.result_session
    assert child.parent_id == session.pk

    llm.enqueue({"content": "Still here.", "prompt_tokens": 12_000})
    turn = turn_for(session, "what next?")  # sent to the old session: lands on the child
    assert turn.session_id == child.pk
    sent = llm.requests[-1]["messages"]
    text = json.dumps(sent, ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert MIDDLE_MARKER not in text
    assert sent[-1] == {"role": "user", "content": "what next?"}


def test_a_message_sent_during_a_compaction_is_kept_and_answered_after_it(alice, workspace, llm):
    session = start_chat(owner=alice)
    llm.enqueue({"content": "one", "prompt_tokens": 100})
    turn_for(session, "first")
    for name in ("big_a.txt", "big_b.txt"):
        llm.enqueue(
            {"tool_calls": [tool_call(f"call_{name}", "read_file", path=name)]},
            {"content": f"read {name}"},
        )
        turn_for(session, f"read {name}")
    run = request_compaction(session=session, requested_by=alice, focus="deploys")
    turn = send_message(session=session, text="sent while compacting")
    # The turn waits (its task comes back later) while the compaction is queued or running.
    assert run_turn(turn.pk) == 1.0
    turn.refresh_from_db()
    assert turn.status == AgentTurn.Status.QUEUED
    assert len(llm.requests) == 5

    run = run_compaction(run.pk)
    assert run.status == Compaction.Status.COMMITTED, run.error
    child = run.result_session
    assert child.messages.filter(role="user", content="sent while compacting").exists()

    llm.enqueue({"content": "answered", "prompt_tokens": 200})
    assert run_turn(turn.pk) is None
    turn.refresh_from_db()
    assert turn.status == AgentTurn.Status.DONE
    assert turn.session_id == child.pk
    sent = llm.requests[-1]["messages"]
    assert sent[-1] == {"role": "user", "content": "sent while compacting"}
    assert PREFIX_OPENING in json.dumps(sent, ensure_ascii=False)


@pytest.mark.parametrize(
    ("reply", "kind", "words"),
    [
        ({"status": 401, "error": "bad key"}, "auth", "refused the credentials"),
        ({"status": 429, "error": "slow down"}, "rate_limit", "rate limiting"),
        ({"sleep": 3, "content": "late"}, "timeout", "did not answer within 1 s"),
        ({"status": 400, "error": "messages are broken"}, "bad_request", "rejected the request"),
    ],
)
def test_provider_errors_fail_the_turn_clearly_and_keep_the_message(
    alice, alice_client, workspace, llm, settings, reply, kind, words
):
    settings.HERMES_LLM_TIMEOUT = 1
    llm.enqueue(reply)
    session = start_chat(owner=alice)
    turn = turn_for(session, "are you there?")
    assert turn.status == AgentTurn.Status.FAILED
    assert turn.error_kind == kind
    assert words in turn.error
    assert Message.objects.filter(session=session, role="user", content="are you there?").exists()
    assert not Message.objects.filter(session=session, role="assistant").exists()
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert words in page
    assert "are you there?" in page
    assert "Traceback" not in page


def test_an_unreachable_server_is_a_connection_error(alice, workspace, llm, settings):
    settings.HERMES_CHAT_API_BASE = "http://127.0.0.1:9/v1"
    turn = turn_for(start_chat(owner=alice), "hello?")
    assert (turn.status, turn.error_kind) == (AgentTurn.Status.FAILED, "connection")
    assert "Could not reach" in turn.error


def test_markdown_and_tool_output_payloads_are_inert(alice, alice_client, workspace, llm):
    (workspace / "evil.md").write_text(
        '<script>alert("tool")</script><img src=x onerror="alert(2)">'
    )
    llm.enqueue(
        {"tool_calls": [tool_call("call_x", "read_file", path="evil.md")]},
        {
            "content": "**bold** <script>alert('reply')</script> [click](javascript:alert(1)) "
            '<img src=x onerror=alert(3)> <a href="https://example.com" onclick="x()">ok</a>'
        },
    )
    session = start_chat(owner=alice)
    turn_for(session, "<b>user</b><script>alert('user')</script>")
    page = alice_client.get(reverse("chat_detail", args=[session.public_id])).content.decode()
    assert "<strong>bold</strong>" in page  # Markdown still renders
    assert "<script>alert" not in page
    assert "onerror=" not in page.replace("onerror=&quot;", "").replace("onerror=alert(3)&gt;", "")
    assert "javascript:alert" not in page
    assert "onclick" not in page
    assert (
        "&lt;script&gt;alert(&quot;tool&quot;)" in page
        or "&lt;script&gt;alert(\\&quot;tool" in page
    )
    assert "&lt;b&gt;user&lt;/b&gt;" in page


def test_the_demo_model_runs_through_litellm_with_honest_usage(alice, settings):
    import litellm

    from compaction import CompactionConfig, count_messages_tokens
    from hermes_web.agent import demo_model

    demo_model.register()
    messages = [
        {"role": "system", "content": "You are Hermes."},
        {"role": "user", "content": "Why did the ingest fail?"},
    ]
    response = litellm.completion(model="hermes-demo/agent", messages=messages)
    call_names = [c.function.name for c in response.choices[0].message.tool_calls]
    assert call_names == ["list_files", "search_files"]
    expected = sum(count_messages_tokens(messages, CompactionConfig(model="gpt-4o-mini")))
    assert response.usage.prompt_tokens == expected
    assert expected > 10


def test_the_demo_model_explores_the_workspace_and_crosses_the_threshold(alice, settings):
    from hermes_web.agent import demo_model

    settings.HERMES_CHAT_MODEL = ""
    demo_model.STREAM_DELAY = 0
    session = start_chat(owner=alice)
    assert session.context_length == 64_000
    prompts = []
    for question in [
        "What is in this workspace?",
        "Why did ingest fail on March 14?",
        "Tell me about the readings csv",
    ]:
        turn = turn_for(Session.objects.get(pk=session.pk), question)
        assert turn.status == AgentTurn.Status.DONE, turn.error
        prompts.append(turn.usage["prompt_tokens"])
    assert prompts == sorted(prompts)
    # Past the 54,400-token threshold, never past its own 64,000-token window.
    assert 54_400 < prompts[-1] <= 64_000
    run = Compaction.objects.get(session=session)
    assert run.trigger == Compaction.Trigger.AUTO
    tools = set(
        Message.objects.filter(session=session, role="tool").values_list("tool_name", flat=True)
    )
    assert tools == {"list_files", "search_files", "read_file"}
    reply = Message.objects.filter(session=session, role="assistant").last()
    assert "Demo model (offline)" in reply.content
