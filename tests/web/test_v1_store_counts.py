"""A ``/v1`` request's rows are tokenized before the transaction that stores them.

On SQLite the write lock is held from a transaction's first statement to its commit, so
whatever runs inside it makes every other writer (another agent's request, an import)
wait. Counting a long tool output, or a new conversation's whole history, is the
request's largest piece of storage work: it happens before the lock, and the counts
stored are still exact and under the session's own tokenizer."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import Client

from compaction import CompactionConfig, count_message_tokens
from hermes_web.models import Message, Session
from hermes_web.services import sessions
from hermes_web.services.sessions import append_messages, count_items, create_session
from tests.web.test_openai_endpoint import TOOLS, call
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)

# Long enough that counting it is real work (a file read back whole).
LONG_RESULT = "\n".join(
    f"{i:>6}  def handler_{i}(event): return route(event, shard={i})" for i in range(3000)
)


@pytest.fixture
def counted_in_transaction(monkeypatch):
    """For each count of a row to store: whether a transaction was open at the time."""
    seen: list[bool] = []
    real = sessions.count_message_tokens

    def spy(message, config, counter=None):
        seen.append(connection.in_atomic_block)
        return real(message, config, counter)

    monkeypatch.setattr(sessions, "count_message_tokens", spy)
    return seen


def _post(client: Client, key: str, messages: list[dict]) -> dict:
    response = client.post(
        "/v1/chat/completions",
        json.dumps({"model": "openai/fake-chat", "messages": messages, "tools": TOOLS}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 200, response.content[:300]
    return response.json()["choices"][0]["message"]


def test_rows_are_counted_before_the_storing_transaction(alice, upstream, counted_in_transaction):
    key, client = issue_key(alice), Client()
    messages = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Find where events are routed."},
        {"role": "assistant", "content": None, "tool_calls": [call("c0", "src/router.py")]},
        {"role": "tool", "tool_call_id": "c0", "content": LONG_RESULT},
    ]
    # A new conversation: its whole history and the reply are stored.
    upstream.enqueue({"tool_calls": [call("c1", "src/shards.py")]})
    messages.append(_post(client, key, messages))
    first = len(counted_in_transaction)
    assert first == len(messages)
    # The next turn: only its new rows are stored, and counted.
    messages.append({"role": "tool", "tool_call_id": "c1", "content": LONG_RESULT + "\n# shards"})
    upstream.enqueue({"content": "Events are routed by shard."})
    messages.append(_post(client, key, messages))
    assert len(counted_in_transaction) == first + 2
    assert not any(counted_in_transaction)

    (session,) = Session.objects.all()
    config = CompactionConfig(model=sessions.token_model(session))
    rows = list(Message.objects.filter(session=session).order_by("position"))
    assert len(rows) == len(messages)
    for row in rows:
        assert row.token_count == count_message_tokens(row.to_openai(), config)
    assert rows[3].token_count > 20_000


def test_a_count_under_another_tokenizer_is_taken_again(alice):
    # "gpt-4" counts with cl100k_base, "gpt-4o" with o200k_base: they differ on this text.
    text = "Ранее события маршрутизировались по шардам; теперь — по ключу. " * 40
    config_old, config_new = CompactionConfig(model="gpt-4"), CompactionConfig(model="gpt-4o")
    row = {"role": "user", "content": text}
    assert count_message_tokens(row, config_old) != count_message_tokens(row, config_new)
    session = create_session(owner=alice, title="t", model="gpt-4o")
    items = [{"role": "user", "content": text}]
    count_items(items, "gpt-4")
    (stored,) = append_messages(session, items)
    assert stored.token_count == count_message_tokens(row, config_new)
    same = [{"role": "user", "content": text}]
    count_items(same, "gpt-4o")
    (again,) = append_messages(session, same)
    assert again.token_count == count_message_tokens(row, config_new)
