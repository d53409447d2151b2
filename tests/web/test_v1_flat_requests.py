"""Work a request repeats for the history its conversation already sent is done once per
process: the pairing of tool calls is checked for what the client added (the remembered
history had every call answered), the history is compared with the remembered one once."""

from __future__ import annotations

import copy

import pytest

from hermes_web.openai_compat import matching, validation
from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.matching import RecentHistories, prefix_hashes
from hermes_web.openai_compat.validation import request_from
from tests.web.test_v1_recent_histories import history


@pytest.fixture
def recent(monkeypatch):
    fresh = RecentHistories()
    monkeypatch.setattr(matching, "RECENT", fresh)
    monkeypatch.setattr(validation, "RECENT", fresh)
    return fresh


@pytest.fixture
def paired(monkeypatch):
    """The length of every list whose tool pairing is checked."""
    lengths: list[int] = []
    real = validation.validate_tool_pairs

    def counting(messages):
        lengths.append(len(messages))
        return real(messages)

    monkeypatch.setattr(validation, "validate_tool_pairs", counting)
    return lengths


def test_a_grown_history_has_only_its_added_messages_paired(recent, paired):
    request_from({"model": "m", "messages": history(50)})
    grown = copy.deepcopy(history(52))
    request = request_from({"model": "m", "messages": grown})
    assert paired == [102, 4]
    # What it knew is handed on: the prefix hashes are the same as computed from scratch.
    assert recent.prefix_hashes(grown, request.known) == prefix_hashes(grown)


def test_a_broken_pair_after_the_remembered_history_is_refused_and_named_in_place(recent):
    messages = history(10)
    request_from({"model": "m", "messages": messages})
    # A second result for a call the remembered part already answered.
    again = copy.deepcopy(messages) + [{"role": "tool", "tool_call_id": "call_9", "content": "x"}]
    with pytest.raises(ApiError) as refused:
        request_from({"model": "m", "messages": again})
    assert "message 22: tool result 'call_9' does not follow its call" in str(
        refused.value.payload()
    )
    # A call whose result the request does not hold.
    pending = copy.deepcopy(history(11))[:-1]
    with pytest.raises(ApiError) as refused:
        request_from({"model": "m", "messages": pending})
    assert "end: calls ['call_10'] have no result" in str(refused.value.payload())


def test_a_history_that_differs_inside_the_remembered_one_is_paired_whole(recent, paired):
    request_from({"model": "m", "messages": history(10)})
    changed = copy.deepcopy(history(11))
    changed[5]["content"] = "another result"
    request_from({"model": "m", "messages": changed})
    assert paired == [22, 24]


def test_the_characters_kept_grow_by_what_each_request_added(recent):
    first = history(20)
    recent.prefix_hashes(first)
    grown = copy.deepcopy(history(21))
    recent.prefix_hashes(grown, recent.lookup(grown))
    assert recent._chars == sum(matching._size(m.get("content")) for m in grown)
