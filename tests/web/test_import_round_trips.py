"""Round trips through the formats hermes-web exports (issue #25): any conversation exported as
OpenAI JSON or hermes-jsonl and imported again holds the same messages: text, tool calls and
each tool result paired with its call."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_web.exporters import export_session_text
from hermes_web.importers import import_path
from hermes_web.services.sessions import openai_messages

pytestmark = pytest.mark.django_db

# Text as people and tools write it: any printable character, newlines, quotes, emoji, the
# odd control character (kept visibly, so NUL is left out: it would be shown as U+2400).
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=60,
).filter(lambda t: t.strip())
NAMES = st.sampled_from(["read_file", "terminal", "search_files", "patch"])


@st.composite
def conversations(draw) -> list[dict]:
    """A provider-valid conversation: user turns, tool rounds (calls answered in order by
    their results), replies."""
    messages: list[dict] = (
        [{"role": "system", "content": draw(TEXT)}] if draw(st.booleans()) else []
    )
    call_number = 0
    for _ in range(draw(st.integers(1, 4))):
        messages.append({"role": "user", "content": draw(TEXT)})
        for _ in range(draw(st.integers(0, 2))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                call_number += 1
                arguments = json.dumps({"arg": draw(TEXT)}, ensure_ascii=False)
                calls.append(
                    {
                        "id": f"call_{call_number}",
                        "type": "function",
                        "function": {"name": draw(NAMES), "arguments": arguments},
                    }
                )
            said = draw(st.one_of(st.none(), TEXT))
            messages.append({"role": "assistant", "content": said, "tool_calls": calls})
            for c in calls:
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": draw(TEXT)})
        messages.append({"role": "assistant", "content": draw(TEXT)})
    return messages


def _essence(messages: list[dict]) -> list[tuple]:
    """What must survive: role, text, calls (id, name, arguments), the call a result answers."""
    out = []
    for m in messages:
        calls = tuple(
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in m.get("tool_calls") or ()
        )
        out.append((m["role"], m.get("content") or "", calls, m.get("tool_call_id") or ""))
    return out


def _import(path, owner, fmt):
    report = import_path(path, owner=owner, fmt=fmt)
    assert report.ok, report.refused
    (session,) = report.sessions
    return session


_users = iter(range(10**6))


@pytest.mark.parametrize("fmt", ["openai", "hermes-jsonl"])
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(conversation=conversations())
def test_export_then_import_keeps_every_message(fmt, conversation, tmp_path):
    with transaction.atomic():  # each example leaves nothing behind
        first_owner = get_user_model().objects.create_user(f"rt{next(_users)}")
        second_owner = get_user_model().objects.create_user(f"rt{next(_users)}")
        source = tmp_path / "conversation.json"
        source.write_text(json.dumps(conversation, ensure_ascii=False), encoding="utf-8")
        first = _import(source, first_owner, "openai")
        assert _essence(openai_messages(first)) == _essence(conversation)

        exported = tmp_path / f"export.{'jsonl' if fmt == 'hermes-jsonl' else 'json'}"
        exported.write_text(export_session_text(first, fmt), encoding="utf-8")
        second = _import(exported, second_owner, "auto")
        assert _essence(openai_messages(second)) == _essence(conversation)
        transaction.set_rollback(True)
