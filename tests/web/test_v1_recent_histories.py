"""RecentHistories: a request's per-message work (checks, canonical hashing) is done for the
messages the client added since its previous request, never again for the whole history,
and it never changes a result: the hashes always equal a fresh ``prefix_hashes``."""

from __future__ import annotations

import copy
import json

import pytest

from hermes_web.openai_compat import matching
from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.matching import RecentHistories, prefix_hashes
from hermes_web.openai_compat.validation import request_from


def history(turns: int, *, opening: str = "Trace the router.") -> list[dict]:
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": opening},
    ]
    for turn in range(turns):
        call = {"id": f"call_{turn}", "type": "function"}
        call["function"] = {"name": "read", "arguments": json.dumps({"path": f"f{turn}.py"})}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": f"x{turn}"})
    return messages


@pytest.fixture
def canonical_calls(monkeypatch):
    """How many messages were canonicalised (the per-message work that must not grow)."""
    calls = []
    real = matching.canonical

    def counting(message):
        calls.append(message)
        return real(message)

    monkeypatch.setattr(matching, "canonical", counting)
    return calls


def test_a_grown_history_hashes_only_the_messages_it_added(canonical_calls):
    recent = RecentHistories()
    first = history(50)
    assert recent.prefix_hashes(first) == prefix_hashes(first)
    grown = copy.deepcopy(first) + history(52)[-4:]  # new dicts, as a new request parses them
    canonical_calls.clear()
    hashes = recent.prefix_hashes(grown)
    # The 4 new messages, and the first two (the conversation's key) for the lookup and
    # for remembering it; not the 102 it already hashed.
    assert len(canonical_calls) == 4 + 2 + 2
    assert hashes == prefix_hashes(grown)


def test_a_history_changed_in_the_middle_is_hashed_again_from_the_change():
    recent = RecentHistories()
    first = history(20)
    recent.prefix_hashes(first)
    changed = copy.deepcopy(first)
    changed[9]["content"] = "another result"
    assert recent.known(changed)[0] == 9
    assert recent.prefix_hashes(changed) == prefix_hashes(changed)
    assert recent.prefix_hashes(changed)[8] == prefix_hashes(first)[8]
    assert recent.prefix_hashes(changed)[9] != prefix_hashes(first)[9]


def test_two_conversations_are_remembered_apart():
    recent = RecentHistories()
    one, other = history(5), history(5, opening="Fix the parser.")
    recent.prefix_hashes(one)
    recent.prefix_hashes(other)
    assert recent.known(copy.deepcopy(one))[0] == len(one)
    assert recent.known(copy.deepcopy(other))[0] == len(other)
    assert recent.known(history(5, opening="Something else."))[0] == 0


def test_what_it_keeps_is_bounded_by_conversations_and_characters():
    recent = RecentHistories(size=2, max_chars=10_000)
    for opening in ("a", "b", "c"):
        recent.prefix_hashes(history(3, opening=opening))
    assert recent.known(history(3, opening="a"))[0] == 0  # the oldest went first
    assert recent.known(history(3, opening="c"))[0] == 8
    big = history(1, opening="big") + [{"role": "user", "content": "y" * 20_000}]
    recent.prefix_hashes(big)
    assert recent.known(big)[0] == 0  # larger than the budget: not kept
    assert recent.known(history(3, opening="c"))[0] == 8


def test_a_request_still_has_its_added_messages_checked():
    messages = history(10)
    request_from({"model": "m", "messages": messages})  # remembered as checked
    bad = copy.deepcopy(messages) + [{"role": "user", "content": "a\x00b"}]
    with pytest.raises(ApiError) as refused:
        request_from({"model": "m", "messages": bad})
    assert "messages[22]" in str(refused.value.payload())
    broken = copy.deepcopy(messages)[:-1]  # a tool call left without its result
    with pytest.raises(ApiError):
        request_from({"model": "m", "messages": broken})


def test_messages_it_cannot_read_are_no_key():
    recent = RecentHistories()
    assert recent.known([1, 2]) == (0, [])  # type: ignore[list-item]
    recent.remember([{"role": "user", "tool_calls": 3}])  # canonical cannot read it
    assert recent.known([{"role": "user", "tool_calls": 3}]) == (0, [])
