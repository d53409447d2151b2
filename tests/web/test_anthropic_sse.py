"""``MessageStream``: a Messages SSE stream read in pieces cut anywhere gives back its frames
unchanged and the message they stream, equal to the message the same reply is as JSON."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_web.openai_compat.anthropic_sse import MessageStream, event
from hermes_web.openai_compat.errors import ApiError
from tests.web.anthropic_fake import events, message

texts = st.text(min_size=1, max_size=40)  # any character, "\n\n" and non-ASCII included
blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(
        lambda t, s: {"type": "thinking", "thinking": t, "signature": s},
        texts,
        st.text(alphabet="abcXYZ=+/", min_size=1, max_size=20),
    ),
    st.builds(
        lambda n, i: {"type": "tool_use", "id": f"toolu_{n}", "name": "run", "input": i},
        st.integers(0, 99),
        st.dictionaries(st.text(max_size=8), st.one_of(texts, st.integers()), max_size=3),
    ),
    st.just(
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://example.org/é"}],
        }
    ),
)


def wire(reply: dict, newline: str = "\n") -> bytes:
    frames = [
        f"event: {name}{newline}data: {json.dumps(payload, ensure_ascii=False)}{newline}{newline}"
        for name, payload in events(reply)
    ]
    return "".join(frames).encode()


def read(data: bytes, cuts: list[int]) -> tuple[MessageStream, list[tuple[str, bytes]]]:
    stream, frames, start = MessageStream(), [], 0
    for cut in sorted(cuts) + [len(data)]:
        frames += stream.frames(data[start:cut])
        start = max(start, cut)
    return stream, frames


@given(
    content=st.lists(blocks, min_size=1, max_size=5),
    cut_fractions=st.lists(st.floats(0, 1), max_size=12),
    newline=st.sampled_from(["\n", "\r\n"]),
)
def test_a_stream_cut_anywhere_gives_its_frames_and_the_message_as_json(
    content, cut_fractions, newline
):
    reply = {"content": content, "input_tokens": 17, "usage": {"cache_read_input_tokens": 3}}
    data = wire(reply, newline)
    stream, frames = read(data, [int(f * len(data)) for f in cut_fractions])
    assert b"".join(frame for _, frame in frames) == data  # relayed byte for byte
    assert [kind for kind, _ in frames] == [name for name, _ in events(reply)]
    assert stream.finished() == message(reply)
    assert stream.error is None


def test_a_stream_without_message_stop_is_incomplete():
    reply = {"content": [{"type": "text", "text": "Half"}], "cut_after": 4}
    stream, _ = read(wire(reply), [])
    with pytest.raises(ApiError) as raised:
        stream.finished()
    assert raised.value.status == 502
    assert raised.value.code == "upstream_stream_incomplete"


def test_the_models_error_event_is_kept():
    stream = MessageStream()
    data = event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
    [(kind, frame)] = stream.frames(data)
    assert (kind, frame) == ("error", data)
    assert stream.error == {"type": "overloaded_error", "message": "Overloaded"}


def test_a_frame_that_is_not_json_is_a_502():
    with pytest.raises(ApiError) as raised:
        MessageStream().frames(b"event: message_start\ndata: {not json\n\n")
    assert raised.value.status == 502


def test_tool_input_that_is_not_json_is_a_502():
    tool = {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}}
    stream = MessageStream()
    stream.frames(wire({"content": [tool]}).split(b"content_block_delta")[0][: -len("event: ")])
    piece = {"type": "input_json_delta", "partial_json": '{"command": "ma'}
    stream.frames(event("content_block_delta", {"index": 0, "delta": piece}))
    with pytest.raises(ApiError) as raised:
        stream.frames(event("content_block_stop", {"index": 0}))
    assert raised.value.status == 502
