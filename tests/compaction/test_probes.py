"""Recall probes: a deterministic bank, gold answers literal in the removed region, no agent
boilerplate, and the needle check."""

import json

from compaction import generate_conversation
from compaction.probes import (
    DEFAULT_QUESTIONS,
    Probe,
    answers_in,
    draw_probes,
    message_text,
    normalize,
)


def test_the_bank_is_deterministic_and_answers_are_literal_in_the_region():
    messages = generate_conversation(120, seed=3)
    region = range(4, 90)
    bank = draw_probes(messages, region)
    assert bank == draw_probes([dict(m) for m in messages], region)
    assert len(bank) == DEFAULT_QUESTIONS
    assert len({normalize(p.answer) for p in bank}) == len(bank)
    for probe in bank:
        assert probe.index in region
        assert normalize(probe.answer) in normalize(message_text(messages[probe.index]))
        assert normalize(probe.answer) not in normalize(probe.question)
    # Several kinds, taken in turn.
    assert {"path", "command", "error"} <= {p.kind for p in bank}
    assert Probe.from_dict(json.loads(json.dumps(bank[0].to_dict()))) == bank[0]


def test_a_different_region_gives_a_different_bank():
    messages = generate_conversation(120, seed=3)
    assert draw_probes(messages, range(4, 40)) != draw_probes(messages, range(60, 110))


def _call(cid, name, args):
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


def test_agent_boilerplate_is_never_a_question():
    messages = [
        {"role": "user", "content": "Fix the login bug. You must never push to main."},
        _call("c1", "read_file", {"path": "src/auth/login_view.py"}),
        {"role": "tool", "tool_call_id": "c1", "content": "def login(): ..."},
        {
            "role": "user",
            "content": "<system-reminder>Always use /tmp/reminder_only_path.txt and never "
            "touch 0xdeadbeef</system-reminder>",
        },
        {
            "role": "user",
            "content": "Your task is to create a detailed summary of the conversation so far. "
            "Do NOT call any tools. You must only answer with text, see commit 9f3e2a1bc.",
        },
        {"role": "user", "content": "<command-name>/compact</command-name> you must obey 12345"},
        {
            "role": "user",
            "content": "This session is being continued from a previous conversation that ran "
            "out of context. Never lose ticket 777123.",
        },
    ]
    bank = draw_probes(messages)
    answers = {normalize(p.answer) for p in bank}
    assert "src/auth/login_view.py" in answers
    assert any("never push to main" in a for a in answers)
    for leaked in (
        "reminder_only_path",
        "0xdeadbeef",
        "9f3e2a1bc",
        "12345",
        "777123",
        "do not call",
    ):
        assert not any(leaked in a for a in answers), leaked


def test_needle_is_a_normalized_substring_check():
    probe = Probe(id="p", kind="path", question="?", answer="src/App/Parser.py", index=0)
    other = Probe(id="q", kind="path", question="?", answer="docs/missing.md", index=0)
    assert answers_in((probe, other), "the agent read `src/app/parser.py` then") == (True, False)
