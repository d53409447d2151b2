"""The whole loop with a real Celery worker process and a real local LLM server: chat turns
run in the worker, reported usage crosses the threshold, the worker compacts (its summarizer
call is slow), a message sent meanwhile is kept and answered after, with the summary."""

import json

import pytest

from compaction import PREFIX_OPENING
from hermes_web.models import AgentTurn, Compaction, Message
from hermes_web.services.chat import send_message, start_chat
from tests.conftest import WorkerProcess, point_app_at_broker, wait_for
from tests.fake_openai import FakeOpenAIServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MARKER = "OCELOT-MIDDLE-4411"


def tool_call(call_id, name, **args):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


@pytest.fixture
def chat_worker(tmp_path, settings):
    from hermes_web.celery import app

    workspace = tmp_path / "ws"
    workspace.mkdir()
    filler = "\n".join(f"row {i}: station TW-{i % 48:03d} level ok" for i in range(1200))
    (workspace / "a.txt").write_text(filler + f"\n{MARKER}\n" + filler)
    (workspace / "b.txt").write_text(filler)
    server = FakeOpenAIServer().start()
    env = {
        "HERMES_CHAT_MODEL": "openai/fake-chat",
        "HERMES_CHAT_API_BASE": server.base_url,
        "HERMES_CHAT_API_KEY": "x",
        "HERMES_LLM_MAX_RETRIES": "0",
        "HERMES_LLM_TIMEOUT": "20",
        "HERMES_CONTEXT_LENGTH": "128000",
        "HERMES_SUMMARY_MODEL": "",
        "HERMES_WORKSPACE": str(workspace),
    }
    for key, value in env.items():
        setattr(settings, key, value)
    settings.HERMES_CONTEXT_LENGTH = 128_000
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_TIMEOUT = 20
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    original = app.conf.broker_url
    broker = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    point_app_at_broker(broker)
    worker = WorkerProcess(broker, tmp_path / "worker.log", extra_env=env)
    try:
        yield server, worker
    finally:
        worker.stop()
        server.stop()
        point_app_at_broker(original)


def done(turn, worker):
    def check():
        turn.refresh_from_db()
        return turn.status in (AgentTurn.Status.DONE, AgentTurn.Status.FAILED)

    wait_for(
        check,
        timeout=60,
        message=lambda: f"turn {turn.status}\n{worker.log()[-3000:]}",
        worker=worker,
    )
    assert turn.status == AgentTurn.Status.DONE, turn.error
    return turn


def test_compaction_runs_in_the_worker_while_the_chat_goes_on(alice, chat_worker):
    server, worker = chat_worker
    server.enqueue(
        {"content": "Hi!", "prompt_tokens": 200},
        {"tool_calls": [tool_call("call_a", "read_file", path="a.txt")], "prompt_tokens": 500},
        {"content": "a.txt is a station log.", "prompt_tokens": 30_000},
        {"tool_calls": [tool_call("call_b", "read_file", path="b.txt")], "prompt_tokens": 31_000},
        # Over the 96,000 threshold of a 128K window (75 % under 512K, reference §10.1).
        {"content": "b.txt is similar.", "prompt_tokens": 100_000},
        # The summarizer's call: slow, so a message can arrive while the compaction runs.
        {
            "sleep": 3,
            "content": "## Active Task\nCompare a.txt and b.txt.\n\n## Goal\nUnderstand the logs.",
        },
        {"content": "Answered after the compaction.", "prompt_tokens": 9_000},
    )
    session = start_chat(owner=alice)
    done(send_message(session=session, text="hello"), worker)
    done(send_message(session=session, text="read a.txt"), worker)
    done(send_message(session=session, text="now b.txt"), worker)

    run = Compaction.objects.get(session=session)
    assert run.trigger == Compaction.Trigger.AUTO
    wait_for(
        lambda: (
            Compaction.objects.filter(pk=run.pk, status="running").exists()
            or len(server.requests) >= 6
        ),
        timeout=30,
        message="the compaction to start",
        worker=worker,
    )
    late = send_message(session=session, text="sent during the compaction")
    wait_for(
        lambda: Compaction.objects.get(pk=run.pk).is_finished,
        timeout=60,
        message=lambda: worker.log()[-3000:],
        worker=worker,
    )
    run.refresh_from_db()
    assert run.status == Compaction.Status.COMMITTED, run.error
    assert run.summarizer in ("main", "aux")

    late = done(late, worker)
    child = run.result_session
    assert late.session_id == child.pk
    assert Message.objects.filter(
        session=child, role="user", content="sent during the compaction"
    ).exists()
    assert Message.objects.filter(
        session=session, role="user", content="sent during the compaction"
    ).exists()
    # The summarizer request came before the late turn's call: the turn waited for it.
    final = server.requests[-1]["messages"]
    text = json.dumps(final, ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert "Compare a.txt and b.txt." in text
    assert MARKER not in text
    assert final[-1] == {"role": "user", "content": "sent during the compaction"}
    assert Message.objects.filter(
        session=child, role="assistant", content="Answered after the compaction."
    ).exists()
