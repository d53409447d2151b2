"""While agents stream through ``make run``'s web processes, its pages still answer: a
streamed ``/v1`` reply waits on the model for as long as it writes, and the Procfile's web
must not give each such wait a whole process (with sync workers, as many agents streaming as
processes left none for the pages)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.fake_openai import FakeOpenAIServer
from tests.web.procfile_web import ROOT, start_web


def _api_key(tmp_path: Path, env_extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(HERMES_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="hermes_web.settings")
    env.update(env_extra)
    script = (
        "import django; django.setup()\n"
        "from django.contrib.auth import get_user_model\n"
        "from hermes_web.models import ApiKey\n"
        "user = get_user_model().objects.create_user('agent', 'a@example.org', 'pw-agent-7x!')\n"
        "print(ApiKey.issue(owner=user, name='agent')[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("streams", [2, 6], ids=["two-agents", "more-agents-than-processes"])
def test_pages_answer_while_agents_stream_through_make_runs_web(tmp_path, streams):
    # Each reply streams for about 5 s (20 pieces, 0.25 s apart), through the Procfile's
    # default web (2 sync processes: two streams held both; 4 sync processes: six streams
    # held all four and two waited for one to end): all the streams are open at once, and the
    # page comes back while they still are.
    upstream = FakeOpenAIServer(default_reply={"content": "word " * 20, "chunk_sleep": 0.25})
    upstream.start()
    extra = {
        "HERMES_CHAT_MODEL": "openai/fake-chat",
        "HERMES_CHAT_API_BASE": upstream.base_url,
        "HERMES_CHAT_API_KEY": "upstream-key",
        "HERMES_LLM_MAX_RETRIES": "0",
        "HERMES_WEB_PRELOAD_LITELLM": "0",
        "HERMES_RUN_WEB_PROCESSES": "",  # the Procfile's default
    }
    web, port = start_web(tmp_path, **extra)
    base = f"http://127.0.0.1:{port}"
    try:
        key = _api_key(tmp_path, extra)
        assert httpx.get(f"{base}/accounts/login/", timeout=60).status_code == 200
        ended: list[float] = []
        texts: list[str] = []

        def agent(number: int) -> None:
            text = ""
            with httpx.stream(
                "POST",
                f"{base}/v1/chat/completions",
                headers={"Authorization": f"Bearer {key}"},
                json={
                    "model": "openai/fake-chat",
                    "stream": True,
                    "messages": [{"role": "user", "content": f"agent {number}: go"}],
                },
                timeout=120,
            ) as response:
                assert response.status_code == 200
                for line in response.iter_lines():
                    if line.startswith("data: {"):
                        text += line
            texts.append(text)
            ended.append(time.monotonic())

        agents = [threading.Thread(target=agent, args=(n,)) for n in range(streams)]
        for thread in agents:
            thread.start()
        # Every stream is open once the upstream has been asked once per agent (with too few
        # processes, the last ones are asked only after a stream has ended).
        deadline = time.monotonic() + 60
        while len(upstream.requests) < streams:
            assert time.monotonic() < deadline, "the streams did not start"
            time.sleep(0.05)
        page = httpx.get(f"{base}/accounts/login/", timeout=120)
        answered = time.monotonic()
        for thread in agents:
            thread.join(120)
        assert page.status_code == 200
        assert len(ended) == streams
        assert all('"word' in text for text in texts)
        assert answered < min(ended)  # the page did not wait for a stream to end
    finally:
        os.killpg(web.pid, 15)
        web.wait(30)
        upstream.stop()
