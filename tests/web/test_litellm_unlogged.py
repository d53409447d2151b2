"""A ``/v1`` call to the model does not run litellm's success logging: no callback of ours
reads it, and it costs every request a logging payload and a cost calculation (on the native
Messages call, on the request's own path). Each test first shows the spy sees litellm's
logging on a plain call, so it fails when ``unlogged_calls`` stops switching it off."""

import asyncio
import concurrent.futures

import anthropic
import litellm
import litellm.utils
import openai
import pytest
from litellm.litellm_core_utils.litellm_logging import Logging

from hermes_web.llm_models import unlogged_calls
from tests.web.anthropic_fake import serve_for
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5"
TURN = [{"role": "user", "content": "Build it."}]


@pytest.fixture
def upstream(settings):
    server = serve_for(settings)
    yield server
    server.stop()


@pytest.fixture
def logged(monkeypatch) -> list[str]:
    """Names of the success logging litellm started: its thread-pool handler of a
    synchronous call, its claim of the asynchronous one."""
    seen: list[str] = []
    executor = litellm.utils.executor

    class Recording:
        def submit(self, fn, *args, **kwargs):
            target = args[0] if args and fn.__name__ == "run" else fn
            seen.append(getattr(target, "__name__", repr(target)))
            return executor.submit(fn, *args, **kwargs)

        def __getattr__(self, name):
            return getattr(executor, name)

    claim = Logging.claim_async_success_log

    def claiming(self):
        seen.append("async_success_log")
        return claim(self)

    monkeypatch.setattr(litellm.utils, "executor", Recording())
    monkeypatch.setattr(Logging, "claim_async_success_log", claiming)
    return seen


def plain_completion():
    return litellm.completion(model="openai/spy", messages=TURN, mock_response="ok")


def test_a_plain_call_is_logged_and_an_unlogged_one_is_not(logged):
    plain_completion()
    assert "success_handler" in logged
    logged.clear()
    with unlogged_calls():
        plain_completion()
    assert logged == []


def test_a_chat_completion_through_the_gateway_is_not_logged(live_server, alice, upstream, logged):
    client = openai.OpenAI(
        base_url=f"{live_server.url}/v1", api_key=issue_key(alice), max_retries=0
    )
    reply = client.chat.completions.create(model=MODEL, messages=TURN)
    assert reply.choices[0].message.content == "Target 2 failed."
    assert len(upstream.requests) == 1
    assert "success_handler" not in logged


def test_a_native_messages_call_is_not_logged(live_server, alice, upstream, logged):
    async def direct():
        return await litellm.anthropic_interface.messages.acreate(
            model=f"anthropic/{MODEL}",
            messages=TURN,
            max_tokens=10,
            api_base=upstream.base_url,
            api_key="upstream-key",
        )

    # On a thread of its own: a test before this one may leave a loop running on this one.
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, direct()).result()
    assert "async_success_log" in logged  # litellm's own call, as the test sees it
    logged.clear()
    client = anthropic.Anthropic(
        base_url=live_server.url, api_key=issue_key(alice), max_retries=0, timeout=60
    )
    message = client.messages.create(model=MODEL, max_tokens=100, messages=TURN)
    assert message.content[0].text == "Target 2 failed."
    assert len(upstream.requests) == 2
    assert logged == []
