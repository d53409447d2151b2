"""The OpenAI-compatible endpoint driven by the official ``openai`` SDK against a live server,
with litellm calling the local fake upstream (tests/fake_openai.py).

Background compactions are queued by the endpoint and run here by calling the task body, as a
worker would; the endpoint itself never runs one.
"""

import json

import httpx
import openai
import pytest

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import ApiKey, Compaction, Message, Session
from hermes_web.services.compactions import request_compaction, run_compaction
from tests.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.django_db(transaction=True)

MIDDLE_MARKER = "OKAPI-LANTERN-MIDDLE-5521"
AGENT_UA = "tide-agent/0.4 (linux; python)"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


@pytest.fixture
def upstream(settings):
    server = FakeOpenAIServer().start()
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    settings.HERMES_CHAT_API_BASE = server.base_url
    settings.HERMES_CHAT_API_KEY = "upstream-key"
    settings.HERMES_API_MODELS = ["openai/fake-other"]
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_LLM_TIMEOUT = 5
    # A small window for the session: the trigger is its 64,000-token floor (75 % of an
    # 85K window is under it; of a 100K window it would be 75,000, reference §10.1).
    settings.HERMES_CONTEXT_LENGTH = 85_000
    settings.HERMES_SUMMARY_MODEL = ""
    yield server
    server.stop()


@pytest.fixture
def raw_key(alice):
    return ApiKey.issue(owner=alice, name="agent")[1]


@pytest.fixture
def sdk(live_server, raw_key, upstream):
    return openai.OpenAI(
        base_url=f"{live_server.url}/v1",
        api_key=raw_key,
        max_retries=0,
        timeout=30,
        default_headers={"User-Agent": AGENT_UA},
    )


def file_text(path: str, marker: str = "") -> str:
    """A tool output of about 4,000 tokens, different per path."""
    lines = [
        f"{path}:{n}: the sensor {n % 17} batches readings for gateway {n % 5}" for n in range(300)
    ]
    if marker:
        lines.insert(150, marker)
    return "\n".join(lines)


def call(call_id: str, path: str) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
    }


def create(sdk, messages, **kwargs):
    """One request; returns (the parsed completion, the response headers)."""
    raw = sdk.chat.completions.with_raw_response.create(
        model="openai/fake-chat", messages=messages, tools=TOOLS, **kwargs
    )
    return raw.parse(), raw.headers


def stream(sdk, messages, **kwargs):
    """One streamed request gathered the way an agent does: (message dict, usage, headers)."""
    raw = sdk.chat.completions.with_raw_response.create(
        model="openai/fake-chat",
        messages=messages,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
        **kwargs,
    )
    content, calls, usage, finish = "", {}, None, None
    for chunk in raw.parse():
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            content += choice.delta.content or ""
            for piece in choice.delta.tool_calls or ():
                slot = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = piece.id or slot["id"]
                if piece.function is not None:
                    slot["name"] = piece.function.name or slot["name"]
                    slot["arguments"] += piece.function.arguments or ""
    message = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(calls.items())
        ]
    return message, usage, raw.headers, finish


def run_tool(message) -> list[dict]:
    results = []
    for tool_call in message["tool_calls"]:
        path = json.loads(tool_call["function"]["arguments"])["path"]
        marker = MIDDLE_MARKER if path == "src/2.txt" else ""
        results.append(
            {"role": "tool", "tool_call_id": tool_call["id"], "content": file_text(path, marker)}
        )
    return results


def as_dict(message) -> dict:
    """What an agent appends after a non-streamed reply (the SDK's own serialization)."""
    return message.model_dump(exclude_none=True)


def without_nulls(message: dict) -> dict:
    # litellm leaves a null content out of what it sends.
    return {k: v for k, v in message.items() if v is not None}


def agent_loop(sdk, upstream, messages, rounds, *, streamed=False, first_prompt=2_000):
    """Tool rounds driven by the fake model, the client keeping its whole history; returns
    the headers of the last response."""
    headers = None
    for number in range(rounds):
        upstream.enqueue(
            {
                "tool_calls": [call(f"call_{len(messages)}", f"src/{number}.txt")],
                "prompt_tokens": first_prompt + 7_000 * number,
            }
        )
        if streamed:
            message, usage, headers, finish = stream(sdk, messages)
            assert finish == "tool_calls"
            assert usage.prompt_tokens == first_prompt + 7_000 * number
        else:
            completion, headers = create(sdk, messages)
            assert completion.choices[0].finish_reason == "tool_calls"
            message = as_dict(completion.choices[0].message)
        messages.append(message)
        messages.extend(run_tool(message))
    return headers


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
def test_an_agent_loop_compacts_and_the_model_then_receives_the_compacted_context(
    sdk, upstream, alice, streamed
):
    messages = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Read the sources and tell me what batches readings."},
    ]
    headers = agent_loop(sdk, upstream, messages, 10, streamed=streamed)
    session = Session.objects.get()
    assert headers["x-hermes-session"] == session.public_id
    assert "x-hermes-compaction" not in headers
    assert (session.source, session.client_name) == (Session.Source.API, "tide-agent/0.4")
    # Every request was sent upstream as the client sent it, and everything was stored.
    assert upstream.requests[-1]["messages"] == [without_nulls(m) for m in messages[:-2]]
    stored = [m.to_openai() for m in Message.objects.filter(session=session).active()]
    # All but the newest tool result, which the client has not sent yet.
    assert [m["role"] for m in stored] == [m["role"] for m in messages[:-1]]
    assert stored[-2]["content"] == messages[-3]["content"]
    assert stored[-1]["tool_calls"] == messages[-2]["tool_calls"]
    replies = Message.objects.filter(session=session, role="assistant").order_by("position")
    assert [r.provider_prompt_tokens for r in replies][-1] == 2_000 + 7_000 * 9

    # 65,000 ≥ the 64,000 threshold: the request queued a compaction and did not wait for it.
    run = Compaction.objects.get()
    assert (run.trigger, run.status) == (Compaction.Trigger.AUTO, Compaction.Status.QUEUED)
    run = run_compaction(run.pk)  # what the worker does
    assert run.status == Compaction.Status.COMMITTED, run.error
    upstream.clear()

    messages.append({"role": "user", "content": "Which gateway is busiest?"})
    upstream.enqueue({"content": "Gateway 3.", "prompt_tokens": 9_000})
    if streamed:
        reply, _, headers, _ = stream(sdk, messages)
    else:
        completion, headers = create(sdk, messages)
        reply = as_dict(completion.choices[0].message)
    assert reply["content"] == "Gateway 3."
    sent = upstream.requests[-1]["messages"]
    text = json.dumps(sent, ensure_ascii=False)
    assert PREFIX_OPENING in text
    assert MIDDLE_MARKER not in text
    assert MIDDLE_MARKER in json.dumps(messages)  # the client still holds its full history
    assert len(sent) < len(messages)
    assert validate_tool_pairs(sent) == []
    assert sent[-1] == {"role": "user", "content": "Which gateway is busiest?"}
    assert sent[0]["content"].startswith("You are a careful agent.")
    live = run.result_session
    assert headers["x-hermes-session"] == live.public_id
    assert headers["x-hermes-compaction"].endswith(f"/compactions/{run.public_id}/")

    # The next turn continues the compacted session (the client still sends everything).
    messages.append(reply)
    messages.append({"role": "user", "content": "Thanks."})
    upstream.enqueue({"content": "You're welcome.", "prompt_tokens": 9_500})
    _, headers = create(sdk, messages)
    assert headers["x-hermes-session"] == live.public_id
    sent = upstream.requests[-1]["messages"]
    assert PREFIX_OPENING in json.dumps(sent, ensure_ascii=False)
    assert sent[-3:] == [
        {"role": "user", "content": "Which gateway is busiest?"},
        {"role": "assistant", "content": "Gateway 3."},
        {"role": "user", "content": "Thanks."},
    ]
    assert Session.objects.filter(owner=alice).count() == 2  # the root and its continuation
    assert live.messages.filter(role="user", content="Thanks.").count() == 1


# -- identity ----------------------------------------------------------------------------------


def test_each_history_finds_its_own_session_and_the_header_names_one(sdk, upstream, alice):
    upstream.enqueue({"content": "A1"}, {"content": "B1"}, {"content": "A2"}, {"content": "A3"})
    a = [{"role": "user", "content": "conversation A"}]
    b = [{"role": "user", "content": "conversation B"}]
    first, a_headers = create(sdk, a)
    _, b_headers = create(sdk, b)
    assert a_headers["x-hermes-session"] != b_headers["x-hermes-session"]
    a += [as_dict(first.choices[0].message), {"role": "user", "content": "more A"}]
    second, headers = create(sdk, a)
    assert headers["x-hermes-session"] == a_headers["x-hermes-session"]
    # The header names the session outright (here: the same history, so it matches).
    a += [as_dict(second.choices[0].message), {"role": "user", "content": "even more A"}]
    raw = sdk.chat.completions.with_raw_response.create(
        model="openai/fake-chat",
        messages=a,
        extra_headers={"X-Hermes-Session": a_headers["x-hermes-session"]},
    )
    assert raw.headers["x-hermes-session"] == a_headers["x-hermes-session"]
    session = Session.objects.get(public_id=a_headers["x-hermes-session"])
    assert [m.content for m in session.messages.order_by("position")] == [
        "conversation A",
        "A1",
        "more A",
        "A2",
        "even more A",
        "A3",
    ]
    assert Session.objects.filter(owner=alice).count() == 2


def test_a_named_session_the_history_does_not_continue_is_refused(sdk, upstream):
    upstream.enqueue({"content": "A1"})
    _, headers = create(sdk, [{"role": "user", "content": "conversation A"}])
    stored = Message.objects.count()
    with pytest.raises(openai.ConflictError) as caught:
        sdk.chat.completions.create(
            model="openai/fake-chat",
            messages=[{"role": "user", "content": "something else entirely"}],
            extra_headers={"X-Hermes-Session": headers["x-hermes-session"]},
        )
    assert caught.value.code == "session_history_mismatch"
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.chat.completions.create(
            model="openai/fake-chat",
            messages=[{"role": "user", "content": "x"}],
            extra_headers={"X-Hermes-Session": "no-such-session"},
        )
    assert caught.value.code == "session_not_found"
    assert Message.objects.count() == stored
    assert len(upstream.requests) == 1


def test_another_keys_identical_history_is_a_different_session(sdk, upstream, live_server, bob):
    bob_key = ApiKey.issue(owner=bob, name="bob's agent")[1]
    other = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=bob_key, max_retries=0)
    upstream.enqueue({"content": "hello"}, {"content": "hello"})
    history = [{"role": "user", "content": "same words"}]
    _, mine = create(sdk, history)
    theirs = other.chat.completions.with_raw_response.create(
        model="openai/fake-chat", messages=history
    ).headers
    assert mine["x-hermes-session"] != theirs["x-hermes-session"]
    assert Session.objects.get(public_id=theirs["x-hermes-session"]).owner == bob


def test_in_place_mode_keeps_one_session_and_sends_the_compacted_context(sdk, upstream):
    messages = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Read the sources."},
    ]
    upstream.enqueue({"tool_calls": [call("call_first", "src/0.txt")], "prompt_tokens": 1_000})
    raw = sdk.chat.completions.with_raw_response.create(
        model="openai/fake-chat",
        messages=messages,
        tools=TOOLS,
        extra_headers={"X-Hermes-Compaction-Mode": "in-place"},
    )
    message = as_dict(raw.parse().choices[0].message)
    messages += [message, *run_tool(message)]
    agent_loop(sdk, upstream, messages, 9, first_prompt=9_000)
    session = Session.objects.get()
    assert session.compaction_mode == Session.Mode.IN_PLACE
    run = run_compaction(Compaction.objects.get().pk)
    assert (run.status, run.result_session_id) == (Compaction.Status.COMMITTED, session.pk)
    messages.append({"role": "user", "content": "Summarize."})
    upstream.enqueue({"content": "Done."})
    _, headers = create(sdk, messages)
    assert headers["x-hermes-session"] == session.public_id
    assert headers["x-hermes-compaction"].endswith(f"/compactions/{run.public_id}/")
    sent = upstream.requests[-1]["messages"]
    assert PREFIX_OPENING in json.dumps(sent, ensure_ascii=False)
    assert MIDDLE_MARKER not in json.dumps(sent)
    assert validate_tool_pairs(sent) == []
    # The newest tool result arrived after the snapshot: it replaced its stub, once.
    last_call = messages[-3]["tool_calls"][0]["id"]
    results = [m for m in sent if m.get("tool_call_id") == last_call]
    assert [r["content"] for r in results] == [messages[-2]["content"]]
    assert Message.objects.filter(session=session, archived=True).exists()


# -- streaming details, models, the demo model -------------------------------------------------


def test_usage_is_streamed_only_when_asked_and_always_recorded(sdk, upstream):
    upstream.enqueue({"content": "Plain streamed words.", "prompt_tokens": 321})
    chunks = list(
        sdk.chat.completions.create(
            model="openai/fake-chat",
            messages=[{"role": "user", "content": "stream please"}],
            stream=True,
        )
    )
    assert all(chunk.usage is None for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "Plain streamed words."
    )
    assert upstream.requests[-1]["stream_options"] == {"include_usage": True}
    reply = Message.objects.get(role="assistant")
    assert (reply.content, reply.provider_prompt_tokens) == ("Plain streamed words.", 321)


def test_models_lists_what_a_client_may_ask_for(sdk, upstream):
    ids = [model.id for model in sdk.models.list()]
    assert ids == ["openai/fake-chat", "openai/fake-other", "hermes-demo/agent"]
    upstream.enqueue({"content": "from the other model"})
    completion = sdk.chat.completions.create(
        model="openai/fake-other", messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.model == "openai/fake-other"
    assert upstream.requests[-1]["model"] == "fake-other"
    # An agent written for OpenAI sends the bare name: it reaches the allowed provider model.
    upstream.enqueue({"content": "bare name"})
    completion = sdk.chat.completions.create(
        model="fake-chat", messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.model == "fake-chat"
    assert upstream.requests[-1]["model"] == "fake-chat"
    assert Session.objects.filter(title="hi", model="openai/fake-chat").count() == 1


def test_the_demo_model_answers_offline(sdk, upstream):
    completion = sdk.chat.completions.create(
        model="hermes-demo/agent", messages=[{"role": "user", "content": "hello there"}]
    )
    assert completion.choices[0].message.content
    assert completion.usage.prompt_tokens > 0
    assert upstream.requests == []
    session = Session.objects.get()
    assert session.model == "hermes-demo/agent"
    assert session.messages.count() == 2


# -- errors ------------------------------------------------------------------------------------


def nothing_stored() -> bool:
    return not Session.objects.exists() and not Message.objects.exists()


def test_a_missing_or_revoked_key_gets_401(live_server, upstream, alice):
    client = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key="hk_wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        client.chat.completions.create(
            model="openai/fake-chat", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.code == "invalid_api_key"
    assert caught.value.body["type"] == "invalid_request_error"
    assert upstream.requests == []


def test_invalid_json_gets_a_400_in_openais_shape(live_server, raw_key, upstream):
    response = httpx.post(
        f"{live_server.url}/v1/chat/completions",
        content=b'{"model": "openai/fake-chat", "messages": [',
        headers={"Authorization": f"Bearer {raw_key}", "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    assert set(error) == {"message", "type", "param", "code"}
    assert nothing_stored()


@pytest.mark.parametrize(
    ("body", "error_class", "code"),
    [
        (
            {"model": "gpt-unknown", "messages": [{"role": "user", "content": "hi"}]},
            openai.NotFoundError,
            "model_not_found",
        ),
        ({"model": "openai/fake-chat"}, openai.BadRequestError, "missing_required_parameter"),
        ({"model": "openai/fake-chat", "messages": []}, openai.BadRequestError, "invalid_type"),
        (
            {"model": "openai/fake-chat", "messages": [{"role": "robot", "content": "x"}]},
            openai.BadRequestError,
            "invalid_value",
        ),
        (
            {
                "model": "openai/fake-chat",
                "messages": [
                    {"role": "user", "content": "read it"},
                    {"role": "tool", "tool_call_id": "call_nowhere", "content": "orphan"},
                ],
            },
            openai.BadRequestError,
            "invalid_tool_pairs",
        ),
        (
            {
                "model": "openai/fake-chat",
                "messages": [
                    {"role": "user", "content": "read it"},
                    {"role": "assistant", "content": None, "tool_calls": [call("call_x", "a.txt")]},
                    {"role": "user", "content": "never answered the call"},
                ],
            },
            openai.BadRequestError,
            "invalid_tool_pairs",
        ),
    ],
    ids=[
        "unknown-model",
        "missing-messages",
        "empty-messages",
        "bad-role",
        "orphan-result",
        "call-without-result",
    ],
)
def test_bad_requests_get_openai_errors_and_store_nothing(sdk, upstream, body, error_class, code):
    with pytest.raises(error_class) as caught:
        sdk.post("/chat/completions", body=body, cast_to=httpx.Response)
    assert caught.value.code == code
    assert caught.value.body["message"]
    assert upstream.requests == []
    assert nothing_stored()


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize(
    ("reply", "error_class", "status", "code"),
    [
        (
            {"status": 401, "error": "bad upstream key"},
            openai.AuthenticationError,
            401,
            "upstream_authentication_failed",
        ),
        (
            {"status": 429, "error": "slow down"},
            openai.RateLimitError,
            429,
            "upstream_rate_limited",
        ),
        ({"sleep": 3, "content": "too late"}, openai.InternalServerError, 504, "upstream_timeout"),
    ],
    ids=["401", "429", "timeout"],
)
def test_upstream_failures_are_passed_on_and_nothing_is_stored(
    sdk, upstream, settings, reply, error_class, status, code, streamed
):
    settings.HERMES_LLM_TIMEOUT = 1
    upstream.enqueue({"content": "first answer"})
    history = [{"role": "user", "content": "a question"}]
    first = sdk.chat.completions.create(model="openai/fake-chat", messages=history)
    history += [as_dict(first.choices[0].message), {"role": "user", "content": "a follow-up"}]
    before = list(Message.objects.values_list("pk", "content"))
    upstream.enqueue(reply)
    with pytest.raises(error_class) as caught:
        sdk.chat.completions.create(model="openai/fake-chat", messages=history, stream=streamed)
    assert caught.value.status_code == status
    assert caught.value.code == code
    assert list(Message.objects.values_list("pk", "content")) == before
    # The client can simply send the same request again.
    upstream.enqueue({"content": "second answer"})
    again = sdk.chat.completions.create(model="openai/fake-chat", messages=history)
    assert again.choices[0].message.content == "second answer"
    assert Session.objects.count() == 1
    assert Message.objects.count() == len(before) + 2


def test_a_call_the_compaction_stripped_while_its_result_was_pending_comes_back(sdk, upstream):
    messages = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Read the sources."},
    ]
    agent_loop(sdk, upstream, messages, 10)
    session = Session.objects.get()
    Compaction.objects.all().delete()
    # Hermes's newer sanitizer removes a call whose result is missing, instead of a stub.
    run = request_compaction(
        session=session,
        trigger=Compaction.Trigger.MANUAL,
        config_overrides={"sanitize_mode": "strip"},
    )
    run = run_compaction(run.pk)
    assert run.status == Compaction.Status.COMMITTED, run.error
    pending = messages[-2]["tool_calls"][0]["id"]
    stored = [m.to_openai() for m in run.result_session.messages.active()]
    assert pending not in json.dumps(stored)  # the snapshot ended with the unanswered call
    messages.append({"role": "user", "content": "Go on."})
    upstream.enqueue({"content": "Done."})
    _, headers = create(sdk, messages)
    assert headers["x-hermes-compaction"].endswith(f"/compactions/{run.public_id}/")
    sent = upstream.requests[-1]["messages"]
    assert validate_tool_pairs(sent) == []
    assert [m.get("content") for m in sent if m.get("tool_call_id") == pending] == [
        messages[-2]["content"]
    ]
    stored = [m.to_openai() for m in run.result_session.messages.active()]
    assert validate_tool_pairs(stored) == []


def test_a_stream_cut_off_mid_reply_ends_with_an_error_and_stores_nothing(sdk, upstream):
    upstream.enqueue({"content": "first answer"})
    history = [{"role": "user", "content": "a question"}]
    first = sdk.chat.completions.create(model="openai/fake-chat", messages=history)
    history += [as_dict(first.choices[0].message), {"role": "user", "content": "go on"}]
    before = list(Message.objects.values_list("pk", "content"))
    upstream.enqueue({"content": "a long reply that never arrives whole", "break_after": 1})
    stream = sdk.chat.completions.create(model="openai/fake-chat", messages=history, stream=True)
    received = []

    def read_all():
        for chunk in stream:
            received.extend(c.delta.content or "" for c in chunk.choices)

    with pytest.raises(openai.APIError) as caught:
        read_all()
    assert "".join(received).startswith("a long")  # the client saw the start of the reply...
    assert "upstream" in caught.value.code
    assert list(Message.objects.values_list("pk", "content")) == before  # ...nothing half stored


def test_a_streamed_reply_is_built_from_its_chunks_once(sdk, upstream, monkeypatch):
    # litellm builds the whole reply from the chunks (and works out its cost, and runs its
    # success logging) when the stream ends; asked for one more chunk after its usage
    # chunk, it did all of that a second time before it stopped.
    import litellm

    builds = []
    real = litellm.stream_chunk_builder

    def counted(*args, **kwargs):
        builds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(litellm, "stream_chunk_builder", counted)
    upstream.enqueue({"content": "Streamed once.", "prompt_tokens": 1_200})
    message, usage, _, finish = stream(sdk, [{"role": "user", "content": "hello"}])
    assert message["content"] == "Streamed once."
    assert finish == "stop"
    assert usage.prompt_tokens == 1_200
    assert len(builds) == 1
    stored = Message.objects.filter(role="assistant").latest("id")
    assert stored.content == "Streamed once."
