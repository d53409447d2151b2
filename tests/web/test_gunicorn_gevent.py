"""``make run``'s web processes are gevent workers (a streamed ``/v1`` reply waits on the model
without holding a process): the gunicorn config module patches the standard library in the
master, before ``--preload`` imports the app, and only when the command line asks for gevent."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from hermes_web.gunicorn_hooks import gevent_workers
from tests.web.procfile_web import start_web


@pytest.mark.parametrize(
    ("argv", "cmd_args", "expected"),
    [
        (["/venv/bin/gunicorn", "app", "--worker-class", "gevent"], "", True),
        (["gunicorn", "app", "--worker-class=gevent"], "", True),
        (["gunicorn", "app", "-k", "gunicorn.workers.ggevent.GeventWorker"], "", True),
        (["gunicorn", "app", "-kgevent"], "", True),
        (["gunicorn", "app"], "--workers 2 -k gevent", True),
        (["gunicorn", "app", "--worker-class", "sync", "--keep-alive", "0"], "", False),
        (["gunicorn", "app", "-k", "gevent", "-k", "sync"], "", False),  # the last one counts
        (["gunicorn", "app", "--worker-class"], "", False),
        (["/venv/lib/gunicorn/__main__.py", "app", "-k", "gevent"], "", True),  # -m gunicorn
        # Not gunicorn: importing the hooks in a test run (pytest -k gevent) patches nothing.
        (["/venv/bin/pytest", "-k", "gevent"], "--worker-class gevent", False),
    ],
)
def test_gevent_workers_are_read_from_gunicorns_command_line(argv, cmd_args, expected):
    assert gevent_workers(argv, {"GUNICORN_CMD_ARGS": cmd_args}) is expected


@pytest.mark.slow
@pytest.mark.parametrize("worker_class", ["", "sync"], ids=["procfile-default", "sync"])
def test_make_runs_web_answers_with_litellm_preloaded_and_warmed(tmp_path, worker_class):
    # With litellm imported by the --preload master (the default) and gevent's patching left
    # to the worker after the fork, the worker's warm-up call hung on a lock the master had
    # made before patching: the worker never took a connection.
    log = tmp_path / "gunicorn.log"
    web, port = start_web(tmp_path, stderr=log.open("wb"), HERMES_RUN_WEB_WORKER_CLASS=worker_class)
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=60)
        assert answer.status_code in (200, 503)  # 503: no Celery worker runs in this test
        assert answer.json()["status"]
    finally:
        os.killpg(web.pid, 15)
        web.wait(30)
    text = Path(log).read_text(errors="replace")
    assert f"Using worker: {worker_class or 'gevent'}" in text, text[-3000:]
    assert "litellm warmed in" in text, text[-3000:]
    assert "MonkeyPatchWarning" not in text, text[-3000:]


@pytest.mark.slow
def test_a_native_anthropic_call_runs_in_a_gevent_worker(tmp_path):
    # The native Messages call runs litellm's async client on an event loop thread of the
    # process (anthropic_native); under gevent that thread is a greenlet and its selector
    # gevent's. Two requests: the loop is made by the first and reused by the second.
    from tests.web.anthropic_fake import FakeAnthropic
    from tests.web.test_make_run_streams import _api_key

    fake = FakeAnthropic()
    fake.replies += [
        {"content": [{"type": "text", "text": "first"}, _SERVER_TOOL_USE, _SEARCH_RESULT]},
        {"content": [{"type": "text", "text": "second"}]},
        {"content": [{"type": "text", "text": "third"}, _SERVER_TOOL_USE, _SEARCH_RESULT]},
    ]
    extra = {
        "HERMES_CHAT_MODEL": "anthropic/claude-sonnet-4-5",
        "HERMES_CHAT_API_BASE": fake.base_url,
        "HERMES_CHAT_API_KEY": "upstream-key",
        "HERMES_LLM_MAX_RETRIES": "0",
        "HERMES_LLM_TIMEOUT": "30",
    }
    web, port = start_web(tmp_path, **extra)
    try:
        key = _api_key(tmp_path, extra)
        messages = [{"role": "user", "content": "search it"}]
        answers = []
        for _ in range(2):
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/messages",
                headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
                json={"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            answers.append(answer.json())
            messages = [
                *messages,
                {"role": "assistant", "content": answer.json()["content"]},
                {"role": "user", "content": "and then?"},
            ]
        # Streamed: the model's frames as they came, through litellm's native stream.
        with httpx.stream(
            "POST",
            f"http://127.0.0.1:{port}/v1/messages",
            headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
            json={
                "model": "claude-sonnet-4-5",
                "max_tokens": 100,
                "messages": messages,
                "stream": True,
            },
            timeout=60,
        ) as streamed:
            assert streamed.status_code == 200
            frames = streamed.read().decode()
        session = streamed.headers["X-Hermes-Session"]
    finally:
        os.killpg(web.pid, 15)
        web.wait(30)
        fake.stop()
    # The model's own message came back: a block the chat translation does not carry.
    assert [block["type"] for block in answers[0]["content"]] == [
        "text", "server_tool_use", "web_search_tool_result",
    ]  # fmt: skip
    assert answers[1]["content"][0]["text"] == "second"
    assert '"type": "web_search_tool_result"' in frames
    assert frames.rstrip().endswith('data: {"type": "message_stop"}')
    assert session == answer.headers["X-Hermes-Session"]  # the same conversation, continued
    assert len(fake.requests) == 3
    assert fake.requests[2]["stream"] is True
    # litellm's native call (1.110.2) sends a web search result back as text.
    assert fake.requests[1]["messages"][1]["content"][0] == {"type": "text", "text": "first"}


_SERVER_TOOL_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "x"},
}
_SEARCH_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
