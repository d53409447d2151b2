"""A big OpenAI JSON import is read and stored incrementally: memory bounded by a batch, not
the file, and still all or nothing per session."""

import io
import json
import tracemalloc

import pytest

from hermes_web.importers import count_tokens, import_path
from hermes_web.importers.base import ParsedMessage
from hermes_web.importers.formats import openai
from hermes_web.llm_models import context_length_for
from hermes_web.models import Message, Session
from hermes_web.validation import MAX_DEPTH

pytestmark = pytest.mark.django_db


def _conversation(n: int, output: int = 60) -> list[dict]:
    """``n`` messages of a provider-valid agent session with tool rounds (tool outputs of
    ``output`` words)."""
    out: list[dict] = [{"role": "system", "content": "You are a coding agent."}]
    turn = 0
    while len(out) < n:
        turn += 1
        out.append({"role": "user", "content": f"turn {turn}: run the tests " + "x" * 80})
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": "terminal", "arguments": '{"command": "pytest -q"}'},
        }
        out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": "ok " * output})
        out.append({"role": "assistant", "content": f"All green in turn {turn}."})
    return out[:n]


class _Reads(io.BytesIO):
    """A file that remembers how far the parser has read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.furthest = 0

    def read(self, size=-1):
        data = super().read(size)
        self.furthest = max(self.furthest, self.tell())
        return data


@pytest.mark.parametrize("shape", ["list", "object"])
def test_the_parser_reads_the_file_as_messages_are_taken(shape):
    messages = _conversation(20_000)
    doc = messages if shape == "list" else {"title": "t", "model": "gpt-4o", "messages": messages}
    data = json.dumps(doc).encode()
    stream = _Reads(data)
    (parsed,) = list(openai.parse(stream, "big.json"))
    first = next(parsed.stream)
    assert first.role == "system"
    assert stream.furthest < len(data) // 4  # not the whole file before the first message
    assert sum(1 for _ in parsed.stream) == len(messages) - 1
    assert stream.furthest == len(data)
    if shape == "object":
        assert (parsed.title, parsed.model) == ("t", "gpt-4o")


def test_import_memory_is_bounded_by_a_batch_not_the_file(alice, tmp_path):
    messages = _conversation(24_000, output=600)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(messages))
    size = path.stat().st_size
    # Warm the one-off caches: the tokenizer and litellm's model map (5 MB, read once).
    count_tokens([ParsedMessage(role="user", content="warm the tokenizer")], "")
    context_length_for("")
    tracemalloc.start()
    try:
        report = import_path(path, owner=alice)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.ok, [str(e) for e in report.errors]
    assert Message.objects.filter(session=report.sessions[0]).count() == len(messages)
    # Parsed whole, the bytes, the text and the list take several times the file; streamed,
    # a batch of messages and the ids of the tool calls seen so far.
    assert peak < size // 2, (peak, size)


def test_a_bad_message_late_in_a_big_file_stores_nothing(alice, tmp_path):
    messages = _conversation(9_000)
    messages[8_500] = {"role": "robot", "content": "beep"}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(messages))
    report = import_path(path, owner=alice)
    assert len(report.errors) == 1
    assert "message 8501" in report.errors[0].problem
    assert "unknown role 'robot'" in report.errors[0].problem
    assert not Session.objects.exists()
    assert not Message.objects.exists()


def test_a_file_cut_short_late_stores_nothing(alice, tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(_conversation(9_000))[:-500])
    report = import_path(path, owner=alice)
    assert len(report.errors) == 1
    assert "broken JSON" in report.errors[0].problem
    assert not Session.objects.exists()
    assert not Message.objects.exists()


def test_the_streamed_import_keeps_order_pairs_and_counts(alice, tmp_path):
    messages = _conversation(5_000)
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"model": "gpt-4o", "messages": messages, "title": "late title"}))
    report = import_path(path, owner=alice)
    assert report.ok, [str(e) for e in report.errors]
    session = report.sessions[0]
    assert (session.title, session.model) == ("late title", "gpt-4o")
    rows = list(Message.objects.filter(session=session).order_by("position"))
    assert [r.position for r in rows] == list(range(len(messages)))
    assert [r.role for r in rows] == [m["role"] for m in messages]
    assert all(r.token_count > 0 for r in rows)
    assert session.fidelity["tool_calls"] == session.fidelity["tool_results_paired"] > 1000


DEEP = 100_000


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "doc",
    [
        b"[" * DEEP + b"]" * DEEP,
        b'[{"role": "user", "content": ' + b"[" * DEEP + b"]" * DEEP + b"}]",
        b'{"title": "t", "meta": ' + b"[" * DEEP + b"]" * DEEP + b', "messages": []}',
    ],
    ids=["list", "content", "object"],
)
def test_a_file_nested_100000_deep_is_refused_after_reading_only_its_start(doc):
    """ijson's path per event costs quadratic time on deep nesting (minutes here): the
    depth is counted on the raw events and the file refused at MAX_NESTING levels."""
    stream = _Reads(doc)
    (parsed,) = list(openai.parse(stream, "deep.json"))
    with pytest.raises(openai.ImportProblem) as refused:
        list(parsed.stream)
    assert f"nested more than {openai.MAX_NESTING} levels deep" in refused.value.problem
    assert refused.value.file == "deep.json"
    assert stream.furthest < len(doc) // 2  # stopped long before the end of the file


def test_a_deep_upload_is_refused_with_the_file_and_nothing_stored(alice, tmp_path):
    path = tmp_path / "deep.json"
    path.write_bytes(b"[" * DEEP + b"]" * DEEP)
    report = import_path(path, owner=alice)
    assert [(e.file, e.problem) for e in report.errors] == [
        (
            "deep.json",
            f"JSON nested more than {openai.MAX_NESTING} levels deep "
            "(0 messages read before it); refused",
        )
    ]
    assert not Session.objects.exists()


def test_nesting_up_to_the_limit_is_read(alice, tmp_path):
    """The parser's limit leaves room for what a message may hold (the validator's MAX_DEPTH
    inside a part, under the file's own levels)."""
    part = {"type": "text", "text": "deep", "meta": 0}
    for _ in range(MAX_DEPTH - 3):  # + the part, the content list, the message, the file
        part = {"type": "text", "text": "deep", "meta": part}
    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": [part]}]}))
    report = import_path(path, owner=alice)
    assert report.ok, [str(e) for e in report.errors]


def test_a_lone_surrogate_escape_is_refused_not_turned_into_a_question_mark(alice, tmp_path):
    """yajl reads a lone ``\\ud800`` as "?"; the stdlib keeps it and validation refuses it."""
    path = tmp_path / "surrogate.json"
    path.write_bytes(b'[{"role": "user", "content": "ok"}, {"role": "user", "content": "\\ud800"}]')
    report = import_path(path, owner=alice)
    assert [e.problem for e in report.errors] == [
        "text that is not valid Unicode (a lone surrogate \\ud800); refused"
    ]
    assert not Session.objects.exists()


@pytest.mark.parametrize("shift", range(-8, 9, 2))
def test_a_surrogate_pair_split_between_two_reads_is_one_character(alice, tmp_path, shift):
    """ijson reads 64 KiB at a time: the pair's halves may arrive in two reads."""
    prefix = b'[{"role": "user", "content": "'
    pad = b"a" * (65536 - len(prefix) - 6 + shift)
    path = tmp_path / "emoji.json"
    path.write_bytes(prefix + pad + b'\\ud83d\\ude00 \\\\ud800 is text"}]')
    report = import_path(path, owner=alice)
    assert report.ok, [str(e) for e in report.errors]
    content = Message.objects.get(session=report.sessions[0]).content
    assert content.endswith("a\U0001f600 \\ud800 is text")
