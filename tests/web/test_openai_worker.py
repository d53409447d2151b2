"""The endpoint with a real Celery worker: an agent's requests cross the threshold, the
endpoint only queues the compaction, the worker process commits it, and the agent's next
request reaches the model compacted."""

import json

import openai
import pytest

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import ApiKey, Compaction
from tests.conftest import WorkerProcess, point_app_at_broker, wait_for
from tests.fake_openai import FakeOpenAIServer
from tests.web.test_openai_endpoint import MIDDLE_MARKER, agent_loop, create

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def upstream_and_worker(tmp_path, settings):
    from hermes_web.celery import app

    server = FakeOpenAIServer().start()
    env = {
        "HERMES_CHAT_MODEL": "openai/fake-chat",
        "HERMES_CHAT_API_BASE": server.base_url,
        "HERMES_CHAT_API_KEY": "x",
        "HERMES_LLM_MAX_RETRIES": "0",
        "HERMES_LLM_TIMEOUT": "20",
        # The trigger is the 64,000-token floor (75 % of 85K is under it, reference §10.1).
        "HERMES_CONTEXT_LENGTH": "85000",
        "HERMES_SUMMARY_MODEL": "",
    }
    for key, value in env.items():
        setattr(settings, key, value)
    settings.HERMES_CONTEXT_LENGTH = 85_000
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_TIMEOUT = 20
    settings.HERMES_API_MODELS = []
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


def test_the_worker_compacts_and_the_next_request_is_sent_compacted(
    live_server, alice, upstream_and_worker
):
    upstream, worker = upstream_and_worker
    sdk = openai.OpenAI(
        base_url=f"{live_server.url}/v1",
        api_key=ApiKey.issue(owner=alice, name="agent")[1],
        max_retries=0,
        timeout=60,
    )
    messages = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Read the sources."},
    ]
    agent_loop(sdk, upstream, messages, 10)

    def committed():
        run = Compaction.objects.filter(status__in=Compaction.FINISHED).first()
        return run if run is not None and run.status == Compaction.Status.COMMITTED else None

    run = wait_for(
        committed,
        timeout=90,
        message=lambda: (
            f"{list(Compaction.objects.values('status', 'error'))}\n{worker.log()[-3000:]}"
        ),
        worker=worker,
    )
    assert run.trigger == Compaction.Trigger.AUTO
    assert run.summarizer in ("aux", "main")  # written by the fake model, in the worker
    assert run.result_session_id != run.session_id  # rotation (the default mode)
    continuation, parent = run.result_session, run.session  # keeps the client's name
    assert parent.client_name.startswith("OpenAI/Python")
    assert (continuation.client_name, continuation.api_key_id) == (
        parent.client_name,
        parent.api_key_id,
    )
    messages.append({"role": "user", "content": "What did you find?"})
    upstream.enqueue({"content": "Batches everywhere."})
    completion, headers = create(sdk, messages)
    assert completion.choices[0].message.content == "Batches everywhere."
    assert headers["x-hermes-compaction"].endswith(f"/compactions/{run.public_id}/")
    sent = upstream.requests[-1]["messages"]
    assert PREFIX_OPENING in json.dumps(sent, ensure_ascii=False)
    assert MIDDLE_MARKER not in json.dumps(sent)
    assert validate_tool_pairs(sent) == []
    assert sent[-1] == {"role": "user", "content": "What did you find?"}
