"""``/v1/messages`` to an ``anthropic/`` model: a JSON request the service sends as written
goes to the model in Anthropic's own protocol (litellm's native Messages call) with the
client's body, the client gets the model's message as it came, and the session is stored as
the chat path stores it. Streamed and compacted requests stay translated."""

import copy
import json

import anthropic
import pytest

from hermes_web.models import Message, Session
from hermes_web.openai_compat import anthropic_native
from tests.web.anthropic_fake import serve_for
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5"
SIGNATURE = "EqQBCkYIBxgCKkBsigned=="
RUN = {
    "name": "run",
    "description": "Run a command",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
CACHED = {"type": "ephemeral"}


@pytest.fixture
def upstream(settings):
    server = serve_for(settings)  # a name litellm knows takes thinking
    yield server
    server.stop()


def claude(live_server, owner) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=live_server.url, api_key=issue_key(owner), max_retries=0, timeout=60
    )


def body() -> dict:
    """A Claude Code-like request: cached system prompt and turn, a signed thinking block
    and a tool call sent back, a function tool and a server tool."""
    return {
        "model": MODEL,
        "max_tokens": 2048,
        "system": [{"type": "text", "text": "You are a build agent.", "cache_control": CACHED}],
        "tools": [RUN, SEARCH],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "metadata": {"user_id": "user-42"},
        "stop_sequences": ["<halt>"],
        "messages": [
            {"role": "user", "content": "Build it."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Run make.", "signature": SIGNATURE},
                    {"type": "text", "text": "Running make."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "run",
                        "input": {"command": "make"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "built",
                        "cache_control": CACHED,
                    }
                ],
            },
        ],
    }


SEARCHED = [
    {"type": "thinking", "thinking": "Look it up.", "signature": SIGNATURE},
    {
        "type": "server_tool_use",
        "id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "gnu make"},
    },
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.org/make",
                "title": "Make",
                "encrypted_content": "Eo8Bsecret",
                "page_age": None,
            }
        ],
    },
    {"type": "text", "text": "The build passed."},
]
SEARCHED_TYPES = [block["type"] for block in SEARCHED]
CACHE_USAGE = {"cache_read_input_tokens": 1_500, "cache_creation_input_tokens": 300}


def test_the_model_gets_the_clients_body_and_the_client_gets_the_models_message(
    live_server, alice, upstream
):
    upstream.replies.append({"content": SEARCHED, "input_tokens": 60, "usage": CACHE_USAGE})
    sent = body()
    response = claude(live_server, alice).messages.with_raw_response.create(**copy.deepcopy(sent))
    message = response.parse()

    received = upstream.requests[-1]
    assert received.pop("model") == "claude-sonnet-4-5"
    assert received.pop("stream", False) is False
    del sent["model"]
    assert received == sent  # cache_control, the signature, the server tool: all as sent
    assert upstream.headers[-1]["x-api-key"] == "upstream-key"

    assert [block.type for block in message.content] == SEARCHED_TYPES
    assert message.content[0].signature == SIGNATURE
    assert message.content[2].content[0].encrypted_content == "Eo8Bsecret"
    assert message.usage.cache_read_input_tokens == 1_500
    assert message.usage.cache_creation_input_tokens == 300
    session = Session.objects.get()
    assert response.headers["X-Hermes-Session"] == session.public_id
    assert "upstream;dur=" in response.headers["Server-Timing"]
    answer = Message.objects.filter(session=session).order_by("position").last()
    assert (answer.role, answer.content, answer.reasoning) == (
        "assistant",
        "The build passed.",
        "Look it up.",
    )
    # The prompt the compaction trigger reads counts the cached tokens too.
    assert answer.provider_prompt_tokens == 60 + 1_500 + 300


def stored(session: Session) -> list[tuple]:
    return [
        (m.role, m.content, m.tool_calls, m.tool_call_id, m.reasoning)
        for m in Message.objects.filter(session=session, active=True).order_by("position")
    ]


def test_the_session_continues_and_is_stored_as_the_translated_way_stores_it(
    live_server, alice, upstream, monkeypatch
):
    """The same two turns, sent plainly (native), streamed (native) and streamed where the
    native stream cannot run (translated: litellm's proxy parts missing) are stored alike;
    each way's second request continues its first's session."""
    use = {"type": "tool_use", "id": "toolu_2", "name": "run", "input": {"command": "make test"}}
    turns = [
        {
            "content": [
                {"type": "thinking", "thinking": "Test next.", "signature": SIGNATURE},
                {"type": "text", "text": "Now the tests."},
                use,
            ]
        },
        {"content": [{"type": "text", "text": "All green."}]},
    ]
    sessions = []
    for way in ("json", "stream", "translated stream"):
        if way == "translated stream":
            monkeypatch.setattr(anthropic_native, "streams_natively", lambda: False)
        upstream.replies += copy.deepcopy(turns)
        client = claude(live_server, alice)
        messages = body()["messages"]
        options = {**body(), "messages": messages}
        for number in range(2):
            if way == "json":
                reply = client.messages.create(**copy.deepcopy(options))
            else:
                with client.messages.stream(**copy.deepcopy(options)) as stream:
                    reply = stream.get_final_message()
            if number == 0:
                messages += [
                    {
                        "role": "assistant",
                        "content": [b.model_dump(exclude_none=True) for b in reply.content],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "ok"}
                        ],
                    },
                ]
        assert reply.content[-1].text == "All green."
        sessions.append(Session.objects.exclude(pk__in=[s.pk for s in sessions]).get())
    native, streamed, translated = (stored(session) for session in sessions)
    assert native == streamed == translated
    assert [row[0] for row in native] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    # The native ways sent the client's turns as they are: the signed thinking went back.
    for second in (upstream.requests[1], upstream.requests[3]):
        assert second["messages"][3]["content"][0]["signature"] == SIGNATURE
        assert second["system"][0]["cache_control"] == CACHED
    assert upstream.requests[3]["stream"] is True
    # The translated stream did not: cache_control is not in it.
    assert "cache_control" not in json.dumps(upstream.requests[5])


def test_a_streamed_request_gets_the_models_frames_as_they_came(live_server, alice, upstream):
    upstream.replies.append({"content": SEARCHED, "input_tokens": 60, "usage": CACHE_USAGE})
    sent = body()
    with claude(live_server, alice).messages.stream(**copy.deepcopy(sent)) as stream:
        kinds = [event.type for event in stream]
        message = stream.get_final_message()

    received = upstream.requests[-1]
    assert received.pop("stream") is True
    del received["model"], sent["model"]
    assert received == sent  # cache_control, the signature, the server tool: all as sent
    # The fake's own event sequence, block by block (the SDK's text/thinking events aside).
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert kinds.count("content_block_start") == 4
    assert [block.type for block in message.content] == SEARCHED_TYPES
    assert message.content[0].signature == SIGNATURE
    assert message.content[1].input == {"query": "gnu make"}
    assert message.content[2].content[0].encrypted_content == "Eo8Bsecret"
    assert message.usage.cache_read_input_tokens == 1_500
    answer = Message.objects.filter(session=Session.objects.get()).order_by("position").last()
    assert (answer.role, answer.content, answer.reasoning) == (
        "assistant",
        "The build passed.",
        "Look it up.",
    )
    assert answer.provider_prompt_tokens == 60 + 1_500 + 300


def test_a_refused_streamed_request_is_an_error_response_and_stores_nothing(
    live_server, alice, upstream
):
    upstream.replies.append({"status": 429, "error": "slow down"})
    with (
        pytest.raises(anthropic.RateLimitError) as raised,
        claude(live_server, alice).messages.stream(**body()) as stream,
    ):
        stream.get_final_message()
    assert raised.value.body["error"]["type"] == "rate_limit_error"
    assert "Traceback" not in raised.value.message
    assert upstream.requests[-1]["stream"] is True
    assert upstream.requests[-1]["system"][0]["cache_control"] == CACHED  # the native call
    assert not Session.objects.exists()


def test_server_tool_blocks_sent_back_continue_the_session(live_server, alice, upstream):
    upstream.replies += [{"content": SEARCHED}, {"content": [{"type": "text", "text": "Done."}]}]
    client = claude(live_server, alice)
    options = body()
    reply = client.messages.create(**copy.deepcopy(options))
    options["messages"] += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
        {"role": "user", "content": "Thanks; now package it."},
    ]
    client.messages.create(**copy.deepcopy(options))
    assert Session.objects.count() == 1
    sent_back = upstream.requests[-1]["messages"][3]["content"]
    assert [block["type"] for block in sent_back] == SEARCHED_TYPES


@pytest.mark.parametrize(
    ("status", "expected", "kind"),
    [(429, 429, "rate_limit_error"), (401, 401, "authentication_error"), (529, 502, "api_error")],
)
def test_an_upstream_error_is_anthropic_shaped_and_stores_nothing(
    live_server, alice, upstream, status, expected, kind
):
    upstream.replies.append({"status": status, "error": "try later"})
    with pytest.raises(anthropic.APIStatusError) as raised:
        claude(live_server, alice).messages.create(**body())
    error = raised.value
    assert error.status_code == expected
    assert error.body["type"] == "error"
    assert error.body["error"]["type"] == kind
    assert "Traceback" not in error.message
    assert "/site-packages/" not in error.message
    assert not Session.objects.exists()
    # It was the native call that failed (the translation would have dropped the mark).
    assert upstream.requests[-1]["system"][0]["cache_control"] == CACHED


def test_a_model_slower_than_the_timeout_is_a_504(live_server, alice, upstream, settings):
    settings.HERMES_LLM_TIMEOUT = 1
    upstream.replies.append({"delay": 4})
    with pytest.raises(anthropic.APIStatusError) as raised:
        claude(live_server, alice).messages.create(**body())
    assert raised.value.status_code == 504
    assert raised.value.body["error"]["type"] == "timeout_error"
    assert not Session.objects.exists()
    assert upstream.requests[-1]["system"][0]["cache_control"] == CACHED  # the native call


def test_a_client_cannot_choose_where_the_call_goes(live_server, alice, upstream):
    options = {**body(), "extra_body": {"api_base": "http://127.0.0.1:9", "api_key": "theirs"}}
    claude(live_server, alice).messages.create(**options)
    assert upstream.headers[-1]["x-api-key"] == "upstream-key"
    assert "api_base" not in upstream.requests[-1]
    assert upstream.requests[-1]["system"][0]["cache_control"] == CACHED  # the native call


def test_the_clients_beta_flags_reach_the_model(live_server, alice, upstream):
    claude(live_server, alice).messages.create(
        **body(), extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"}
    )
    assert "interleaved-thinking-2025-05-14" in upstream.headers[-1].get("anthropic-beta", "")


def test_a_broken_stream_stores_nothing(live_server, alice, upstream):
    # The upstream stops after the first text delta: no content_block_stop, no message_stop.
    upstream.replies.append({"content": [{"type": "text", "text": "Half a reply"}], "cut_after": 4})
    with (
        pytest.raises(anthropic.APIError) as raised,
        claude(live_server, alice).messages.stream(**body()) as stream,
    ):
        for _ in stream:
            pass
    # An error event, in Anthropic's shape, ends the stream.
    assert raised.value.body["error"]["type"] == "api_error"
    assert "ended before" in raised.value.body["error"]["message"]
    assert not Session.objects.exists()
    assert upstream.requests[-1]["system"][0]["cache_control"] == CACHED  # the native call


KEEP_THINKING = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
CLEAR_TOOL_USES = {
    "edits": [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 1},
            "keep": {"type": "tool_uses", "value": 0},
        }
    ]
}


@pytest.mark.parametrize("streamed", [False, True])
def test_context_edits_that_clear_nothing_leave_the_request_native(
    live_server, alice, upstream, streamed
):
    """Claude Code sends ``context_management`` with every request. The edits are served
    here; when they clear nothing, the client's body (without them) goes to the model as
    written, and the reply reports no edit applied, as Anthropic's does."""
    options = {**body(), "extra_body": {"context_management": KEEP_THINKING}}
    client = claude(live_server, alice)
    if streamed:
        with client.messages.stream(**options) as stream:
            events = list(stream)
            message = stream.get_final_message()
        [delta] = [event for event in events if event.type == "message_delta"]
        reported = delta.context_management
    else:
        message = client.messages.create(**options)
        reported = message.context_management
    assert reported == {"applied_edits": []}  # the SDK keeps an unknown field as sent
    assert message.content[0].text == "Target 2 failed."
    received = upstream.requests[-1]
    assert "context_management" not in received  # served here, not sent on
    assert received["system"][0]["cache_control"] == CACHED  # the native call
    assert Session.objects.count() == 1


def test_context_edits_that_clear_something_are_translated(live_server, alice, upstream):
    """What the model reads is then ours (the tool result cleared): translated."""
    options = {**body(), "extra_body": {"context_management": CLEAR_TOOL_USES}}
    options["messages"][2]["content"][0]["content"] = "built target 1\n" * 200
    message = claude(live_server, alice).messages.create(**options)
    [applied] = message.context_management["applied_edits"]
    assert applied["type"] == "clear_tool_uses_20250919"
    received = upstream.requests[-1]
    assert "cache_control" not in json.dumps(received)  # translated
    assert "built target" not in json.dumps(received["messages"])  # the result was cleared
