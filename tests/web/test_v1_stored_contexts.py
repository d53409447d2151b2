"""The compacted context kept between requests (``openai_compat.contexts``): a compacted
session's rows are read once, then only the rows each request appended; whatever else
changes the session (a compaction committed or undone, a row rewritten, a fork) makes the
next request read them anew, so the model always receives what a fresh read gives."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from compaction import PREFIX_OPENING, validate_tool_pairs
from hermes_web.models import ApiKey, Compaction, Message, Session
from hermes_web.openai_compat import contexts, service
from hermes_web.openai_compat.contexts import CONTEXTS
from hermes_web.openai_compat.service import merge_repeated_results
from hermes_web.openai_compat.upstream import Reply
from hermes_web.openai_compat.validation import parse_request
from hermes_web.services.compactions import request_compaction
from hermes_web.services.sessions import openai_messages, resolve_tip
from hermes_web.services.undo import undo_compaction
from tests.web.test_openai_endpoint import MIDDLE_MARKER, TOOLS, call, file_text, without_nulls
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def agent(alice, upstream):
    return Agent(Client(), issue_key(alice), upstream)


@pytest.fixture
def reads(monkeypatch):
    """Every full read of a compacted session's rows (the work kept between requests)."""
    calls: list[int] = []
    real = contexts.read

    def counting(session, compaction):
        calls.append(session.pk)
        return real(session, compaction)

    monkeypatch.setattr(contexts, "read", counting)
    return calls


class Agent:
    """A chat-completions agent that sends its whole history each turn (Django's client)."""

    def __init__(self, client: Client, key: str, upstream, mode: str = "") -> None:
        self.client, self.upstream = client, upstream
        self.headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        if mode:
            self.headers["HTTP_X_HERMES_COMPACTION_MODE"] = mode
        self.messages: list[dict] = [
            {"role": "system", "content": "You are a careful agent."},
            {"role": "user", "content": "Read the sources and tell me what batches readings."},
        ]
        self.turns = 0

    def send(self, reply: dict) -> dict:
        """One request of the whole history; returns the response's headers."""
        self.upstream.enqueue(reply)
        response = self.client.post(
            "/v1/chat/completions",
            json.dumps({"model": "openai/fake-chat", "messages": self.messages, "tools": TOOLS}),
            content_type="application/json",
            **self.headers,
        )
        assert response.status_code == 200, response.content[:300]
        self.messages.append(response.json()["choices"][0]["message"])
        return dict(response.headers)

    def tool_turn(self, *, results: bool = True) -> dict:
        """The model calls a tool; its result joins the history (unless ``results`` is off:
        the client has not run it yet)."""
        path = f"src/{self.turns}.txt"
        headers = self.send({"tool_calls": [call(f"call_{self.turns}", path)]})
        if results:
            self.give_result()
        self.turns += 1
        return headers

    def answer(self) -> None:
        """The model answers in words; the user asks on."""
        self.send({"content": f"Answer {self.turns}."})
        self.messages.append({"role": "user", "content": f"Go on ({self.turns})."})
        self.turns += 1

    def give_result(self) -> None:
        path = f"src/{self.turns}.txt"
        marker = MIDDLE_MARKER if self.turns == 2 else ""
        self.messages.append(
            {
                "role": "tool",
                "tool_call_id": self.messages[-1]["tool_calls"][0]["id"],
                "content": file_text(path, marker),
            }
        )

    def sent(self) -> list[dict]:
        return self.upstream.requests[-1]["messages"]


def expected(session: Session, new: list[dict]) -> list[dict]:
    """What the model should receive for the next request: the session's rows as a fresh
    read gives them now, then the messages the client added (the stored context without any
    cache; a result the client sends takes its stub's place). Called before the request."""
    return [without_nulls(m) for m in merge_repeated_results(openai_messages(session) + new)]


def compact(session: Session, mode: str = "rotation") -> Compaction:
    run = request_compaction(session=session, mode=mode, run_now=True)
    assert run.status == Compaction.Status.COMMITTED, run.error
    return run


def live() -> Session:
    return resolve_tip(Session.objects.order_by("pk").first())


def test_a_compacted_session_is_read_once_then_only_the_rows_each_request_appended(agent, reads):
    for _ in range(6):
        agent.tool_turn()
    agent.answer()  # the snapshot ends with a reply: no stub for a pending call
    run = compact(live())
    assert reads == []
    for turn in range(4):
        want = expected(live(), agent.messages[-1:])  # and the message the client added
        headers = agent.tool_turn()
        assert headers["X-Hermes-Compaction"].endswith(f"/compactions/{run.public_id}/")
        assert agent.sent() == want, f"turn {turn}"
        assert MIDDLE_MARKER not in json.dumps(agent.sent())
    # One full read for four requests; the cache holds what a fresh read holds.
    assert reads == [run.result_session_id]
    kept = CONTEXTS.get(live(), run)
    assert list(kept.messages) == openai_messages(live())
    assert kept.paired is (validate_tool_pairs(openai_messages(live())) == [])


def test_a_second_compaction_in_place_is_read_anew(agent, reads):
    agent = in_place(agent)
    for _ in range(6):
        agent.tool_turn()
    agent.answer()
    session = live()
    first = compact(session, "in_place")
    agent.tool_turn()
    agent.answer()
    assert len(reads) == 1
    second = compact(session, "in_place")  # the same session: only its version tells
    assert live().pk == session.pk
    want = expected(session, agent.messages[-1:])
    headers = agent.tool_turn()
    assert headers["X-Hermes-Compaction"].endswith(f"/compactions/{second.public_id}/")
    assert agent.sent() == want
    assert len(reads) == 2
    summaries = [m for m in agent.sent() if PREFIX_OPENING in str(m.get("content"))]
    assert len(summaries) == 1
    assert first.public_id != second.public_id
    assert validate_tool_pairs(agent.sent()) == []


def test_undoing_the_latest_compaction_sends_the_context_it_replaced(agent, reads):
    agent = in_place(agent)
    for _ in range(6):
        agent.tool_turn()
    agent.answer()
    session = live()
    first = compact(session, "in_place")
    for _ in range(3):
        agent.tool_turn()
    agent.answer()
    second = compact(session, "in_place")
    agent.tool_turn()
    undo_compaction(Compaction.objects.get(pk=second.pk), carry_over=True)
    # The same session; its latest committed compaction is the first one again.
    want = expected(session, agent.messages[-1:])
    headers = agent.tool_turn()
    assert headers["X-Hermes-Compaction"].endswith(f"/compactions/{first.public_id}/")
    assert agent.sent() == want
    assert reads == [session.pk] * 3


def test_a_row_changed_between_a_requests_prepare_and_its_store_is_read_anew(agent, reads):
    for _ in range(6):
        agent.tool_turn()
    agent.answer()
    compact(live())
    agent.tool_turn()
    key = ApiKey.objects.get()
    prepared = service.prepare(key, parse_request(json.dumps(body(agent)).encode()))
    assert prepared.context is not None
    rewrite_a_tool_result(live())  # meanwhile, by another writer
    service.store(prepared, Reply(content="stored after the rewrite"))
    agent.messages.append({"role": "assistant", "content": "stored after the rewrite"})
    agent.messages.append({"role": "user", "content": "And now?"})
    want = expected(live(), agent.messages[-1:])
    agent.tool_turn()
    assert agent.sent() == want
    assert "rewritten elsewhere" in [m.get("content") for m in agent.sent()]


def rewrite_a_tool_result(session: Session) -> None:
    """Another writer (the conversation page, another process) rewrites a stored row and
    touches the session, as every writer does."""
    row = (
        Message.objects.filter(session=session, role="tool", active=True)
        .order_by("-position")
        .first()
    )
    row.content = "rewritten elsewhere"
    row.save(update_fields=["content"])
    session.touch()


def test_a_row_another_writer_changed_is_read_anew(agent, reads):
    for _ in range(6):
        agent.tool_turn()
    agent.answer()
    compact(live())
    agent.tool_turn()
    session = live()
    rewrite_a_tool_result(session)
    want = expected(session, agent.messages[-1:])
    agent.tool_turn()
    assert agent.sent() == want
    assert "rewritten elsewhere" in [m.get("content") for m in agent.sent()]
    assert len(reads) == 2


def test_a_result_that_replaces_its_stub_is_sent_on_the_next_requests_too(agent, reads):
    for _ in range(6):
        agent.tool_turn()
    agent.tool_turn(results=False)  # the snapshot holds a call without its result
    compact(live())
    agent.give_result()  # ... which arrives now and replaces the stub the compaction gave it
    real = agent.messages[-1]
    agent.tool_turn()
    assert real in agent.sent()
    want = expected(live(), agent.messages[-1:])
    agent.tool_turn()
    assert agent.sent() == want
    assert [m["content"] for m in want if m.get("tool_call_id") == real["tool_call_id"]] == [
        real["content"]
    ]


def test_a_fork_does_not_extend_the_context_it_forked_from(agent):
    for _ in range(6):
        agent.tool_turn()
    agent.answer()
    run = compact(live())
    agent.tool_turn()
    # Two requests continuing the same history at once: the second stored is a fork.
    key = ApiKey.objects.get()
    first = service.prepare(key, parse_request(json.dumps(body(agent)).encode()))
    second = service.prepare(key, parse_request(json.dumps(body(agent)).encode()))
    assert first.context is not None
    assert second.context is not None
    service.store(first, Reply(content="first"))
    forked, _ = service.store(second, Reply(content="second"))
    assert forked.pk != run.result_session_id
    # The first conversation goes on with what a fresh read of its session gives.
    agent.messages.append({"role": "assistant", "content": "first"})
    agent.messages.append({"role": "user", "content": "And now?"})
    continued = Session.objects.get(pk=run.result_session_id)
    want = expected(continued, agent.messages[-1:])
    headers = agent.tool_turn()
    assert headers["X-Hermes-Session"] == continued.public_id
    assert agent.sent() == want
    assert "second" not in [m.get("content") for m in agent.sent()]


def body(agent: Agent) -> dict:
    return {"model": "openai/fake-chat", "messages": agent.messages, "tools": TOOLS}


def in_place(agent: Agent) -> Agent:
    """The same client, asking for in-place compaction (one session throughout)."""
    key = agent.headers["HTTP_AUTHORIZATION"].removeprefix("Bearer ")
    return Agent(agent.client, key, agent.upstream, "in-place")
