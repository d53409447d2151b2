"""Our replies to the providers' compaction requests have the shapes their documentation
publishes (tests/fixtures/provider_shapes/): every key of the documented example is in our
reply, with a value of the same JSON type, recursively; list items are matched by their
``type``. Values are compared by the behaviour tests (test_v1_compaction_api.py), not here."""

import json
from pathlib import Path

import anthropic
import pytest

from tests.web import test_v1_compaction_api as api
from tests.web.test_v1_compaction_api import (
    CLEARING_BETA,
    COMPACT_BETA,
    READ_FILE,
    THRESHOLD_BETA,
    TOOL,
    claude_conversation,
    conversation,
    thinking_turns,
    threshold_edit,
)
from tests.web.v1_helpers import issue_key

pytestmark = pytest.mark.django_db(transaction=True)
# The fixtures of the behaviour tests: the live server's SDK clients and the fake upstream.
sdk, claude, upstream, claude_upstream = api.sdk, api.claude, api.upstream, api.claude_upstream
SHAPES = Path(__file__).resolve().parents[1] / "fixtures" / "provider_shapes"


def documented(name: str):
    return json.loads((SHAPES / f"{name}.json").read_text())


def kind(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}[type(value)]


def differences(ours, doc, where: str = "") -> list[str]:
    """Where ``ours`` lacks a key of ``doc`` or holds another JSON type there."""
    if kind(ours) != kind(doc):
        return [f"{where or 'the reply'}: {kind(ours)}, documented {kind(doc)}"]
    found: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key not in ours:
                found.append(f"{where}.{key}: missing")
            else:
                found += differences(ours[key], value, f"{where}.{key}")
    elif isinstance(doc, list):
        for index, item in enumerate(doc):
            typed = isinstance(item, dict) and "type" in item
            match = (
                [o for o in ours if isinstance(o, dict) and o.get("type") == item["type"]]
                if (typed)
                else ours[index : index + 1]
            )
            label = f"{where}[{item['type'] if typed else index}]"
            if not match:
                found.append(f"{label}: missing")
            else:
                found += differences(match[0], item, label)
    return found


def test_the_comparison_itself_finds_a_missing_key_a_wrong_type_and_a_missing_item():
    doc = {"a": 1, "b": [{"type": "x", "n": 1}], "c": "s"}
    assert differences({"a": 2, "b": [{"type": "x", "n": 5}], "c": "t", "extra": 1}, doc) == []
    assert differences({"a": "2", "b": [{"type": "y"}]}, doc) == [
        ".a: string, documented number",
        ".b[x]: missing",
        ".c: missing",
    ]


def test_anthropic_on_demand_compaction_has_the_documented_shape(claude):
    raw = claude.beta.messages.with_raw_response.create(
        model="fake-chat",
        max_tokens=1024,
        system="You read files.",
        messages=claude_conversation(),
        compaction={"type": "summarize"},
        betas=COMPACT_BETA,
    )
    assert differences(raw.http_response.json(), documented("anthropic_on_demand_compaction")) == []


def test_anthropic_threshold_compaction_has_the_documented_shape(claude, upstream):
    upstream.enqueue({"content": "Gateway 3 is the busiest.", "prompt_tokens": 9_000})
    raw = claude.beta.messages.with_raw_response.create(
        model="fake-chat",
        max_tokens=1024,
        system="You read files.",
        tools=[TOOL],
        messages=claude_conversation(14),  # past the 50,000-token trigger
        context_management=threshold_edit(),
        betas=THRESHOLD_BETA,
    )
    assert differences(raw.http_response.json(), documented("anthropic_threshold_compaction")) == []


def documented_edit(kind: str) -> dict:
    """The documented reply with the one applied edit of ``kind``."""
    doc = documented("anthropic_context_editing")
    edits = doc["context_management"]["applied_edits"]
    doc["context_management"]["applied_edits"] = [e for e in edits if e["type"] == kind]
    return doc


def test_anthropic_clear_tool_uses_reports_the_documented_shape(claude, upstream):
    upstream.enqueue({"content": "Done.", "prompt_tokens": 9_000})
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 10_000},
        "keep": {"type": "tool_uses", "value": 2},
    }
    raw = claude.beta.messages.with_raw_response.create(
        model="fake-chat",
        max_tokens=1024,
        tools=[TOOL],
        messages=claude_conversation(6),
        context_management={"edits": [edit]},
        betas=CLEARING_BETA,
    )
    body = raw.http_response.json()
    assert differences(body, documented_edit("clear_tool_uses_20250919")) == []


def test_anthropic_clear_thinking_reports_the_documented_shape(live_server, alice, claude_upstream):
    client = anthropic.Anthropic(base_url=live_server.url, api_key=issue_key(alice), max_retries=0)
    edit = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
    raw = client.beta.messages.with_raw_response.create(
        model="claude-sonnet-4-5",
        max_tokens=2048,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=thinking_turns(3),
        context_management={"edits": [edit]},
        betas=CLEARING_BETA,
    )
    body = raw.http_response.json()
    assert differences(body, documented_edit("clear_thinking_20251015")) == []


def test_openai_responses_compact_has_the_documented_shape(sdk):
    raw = sdk.responses.with_raw_response.compact(model="fake-chat", input=conversation())
    assert differences(raw.http_response.json(), documented("openai_responses_compact")) == []


def test_openai_context_management_item_has_the_documented_shape(sdk, upstream):
    upstream.enqueue({"content": "Gateway 3 is the busiest.", "prompt_tokens": 9_000})
    raw = sdk.responses.with_raw_response.create(
        model="fake-chat",
        input=conversation(),
        tools=[READ_FILE],
        context_management=[{"type": "compaction", "compact_threshold": 10_000}],
    )
    [item] = [i for i in raw.http_response.json()["output"] if i["type"] == "compaction"]
    assert differences(item, documented("openai_context_management_item")) == []
