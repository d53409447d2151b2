"""Conversation identity and context merging of the OpenAI-compatible endpoint (no server)."""

import pytest

from hermes_web.openai_compat.matching import canonical, extend_hash, prefix_hashes
from hermes_web.openai_compat.service import client_name_from, merge_repeated_results
from hermes_web.openai_compat.validation import ApiError, parse_request

CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}


def test_what_an_sdk_adds_or_drops_on_the_way_back_does_not_change_the_hash():
    stored = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    echoed = {
        "role": "assistant",
        "content": "",
        "refusal": None,
        "annotations": [],
        "tool_calls": [{**CALL, "index": 0}],
        "reasoning_content": "thinking that a client may keep or drop",
    }
    assert canonical(stored) == canonical(echoed)


@pytest.mark.parametrize(
    "changed",
    [
        {"role": "user", "content": "hello!"},
        {"role": "system", "content": "hello"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": ""}],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "hello"},
    ],
)
def test_what_the_model_reads_does_change_the_hash(changed):
    assert canonical({"role": "user", "content": "hello"}) != canonical(changed)


def test_parts_cannot_run_into_each_other():
    assert canonical({"role": "user", "content": "ab"}) != canonical(
        {"role": "use", "content": "rab"}
    )


def test_prefix_hashes_chain_and_extend():
    messages = [{"role": "user", "content": str(n)} for n in range(4)]
    hashes = prefix_hashes(messages)
    assert len(set(hashes)) == 4
    assert extend_hash(hashes[2], messages[3]) == hashes[3]
    assert prefix_hashes(messages[:2]) == hashes[:2]
    # The same message at another place in the history is another prefix.
    assert prefix_hashes([messages[1]])[0] != hashes[1]


def test_a_real_result_replaces_the_stub_a_compaction_gave_its_call():
    stub = {"role": "tool", "tool_call_id": "call_1", "content": "[stub]"}
    merged = merge_repeated_results(
        [
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            stub,
            {"role": "tool", "tool_call_id": "call_1", "content": "real output"},
            {"role": "user", "content": "next"},
        ]
    )
    assert [m.get("content") for m in merged] == [None, "real output", "next"]
    assert stub["content"] == "[stub]"  # inputs are not mutated


@pytest.mark.parametrize(
    ("agent", "name"),
    [
        ("OpenAI/Python 3.57.0", "OpenAI/Python 3.57.0"),
        ("tide-agent/0.4 (linux; python)", "tide-agent/0.4"),
        ("python-httpx/0.29.0", "python-httpx/0.29.0"),
        ("", ""),
    ],
)
def test_the_client_name_is_the_user_agents_product(agent, name):
    assert client_name_from(agent) == name


def test_tool_call_arguments_must_be_a_string():
    body = (
        b'{"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "assistant",'
        b' "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f",'
        b' "arguments": {"a": 1}}}]}, {"role": "tool", "tool_call_id": "c", "content": "r"}]}'
    )
    with pytest.raises(ApiError) as caught:
        parse_request(body)
    assert caught.value.code == "invalid_value"
    assert caught.value.param == "messages[1].tool_calls[0]"


def test_developer_messages_and_multi_part_content_are_accepted():
    request = parse_request(
        b'{"model": "m", "stream": true, "stream_options": {"include_usage": true},'
        b' "temperature": 0.2, "messages": [{"role": "developer", "content": "be brief"},'
        b' {"role": "user", "content": [{"type": "text", "text": "hi"}]}]}'
    )
    assert (request.stream, request.include_usage) == (True, True)
    assert request.params == {"temperature": 0.2}


@pytest.mark.django_db
def test_two_requests_continuing_one_history_at_once_do_not_interleave(alice, settings):
    """Both requests matched the same session; the second to store becomes a fork (a new
    session with its whole history) instead of appending after the first one's reply."""
    from hermes_web.models import ApiKey, Session
    from hermes_web.openai_compat.service import prepare, store
    from hermes_web.openai_compat.upstream import Reply

    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    key = ApiKey.issue(owner=alice, name="k")[0]
    first = parse_request(
        b'{"model": "openai/fake-chat", "messages": [{"role": "user", "content": "hi"}]}'
    )
    session, _ = store(prepare(key, first), Reply(content="hello"))
    follow_up = (
        b'{"model": "openai/fake-chat", "messages": [{"role": "user", "content": "hi"},'
        b' {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}]}'
    )
    a = prepare(key, parse_request(follow_up))
    b = prepare(key, parse_request(follow_up))
    assert a.match.session.pk == b.match.session.pk == session.pk
    landed_a, _ = store(a, Reply(content="answer A"))
    landed_b, _ = store(b, Reply(content="answer B"))
    assert landed_a.pk == session.pk
    assert landed_b.pk != session.pk
    assert [m.content for m in session.messages.order_by("position")] == [
        "hi",
        "hello",
        "again",
        "answer A",
    ]
    assert [m.content for m in landed_b.messages.order_by("position")] == [
        "hi",
        "hello",
        "again",
        "answer B",
    ]
    assert Session.objects.count() == 2


@pytest.mark.django_db
def test_a_request_adding_more_than_the_recent_window_still_continues_its_session(alice, settings):
    import json

    from hermes_web.models import ApiKey
    from hermes_web.openai_compat.matching import RECENT_PREFIXES
    from hermes_web.openai_compat.service import prepare, store
    from hermes_web.openai_compat.upstream import Reply

    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    key = ApiKey.issue(owner=alice, name="k")[0]
    history = [{"role": "user", "content": "start"}]
    session, _ = store(
        prepare(
            key,
            parse_request(json.dumps({"model": "openai/fake-chat", "messages": history}).encode()),
        ),
        Reply(content="ok"),
    )
    history.append({"role": "assistant", "content": "ok"})
    history += [
        {"role": "user" if n % 2 else "assistant", "content": f"m{n}"}
        for n in range(1, RECENT_PREFIXES + 12)
    ]
    body = json.dumps({"model": "openai/fake-chat", "messages": history}).encode()
    prepared = prepare(key, parse_request(body))
    assert prepared.match is not None
    assert (prepared.match.session.pk, prepared.match.covered) == (session.pk, 2)
    assert len(prepared.new_messages) == RECENT_PREFIXES + 11
