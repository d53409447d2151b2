"""One validator of messages behind every entrance: the sessions API, the OpenAI endpoint, imports."""

import json

import pytest
from django.test import Client

from hermes_web import validation
from hermes_web.importers import import_path
from hermes_web.models import ApiKey, Message, Session

pytestmark = pytest.mark.django_db

NUL = "before\x00after"


def good_call(**function) -> dict:
    return {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read", "arguments": "{}", **function},
    }


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"role": "wizard"}, "unknown role 'wizard'"),
        ({"role": "user", "content": NUL}, "content: contains a NUL character (U+0000) at"),
        ({"role": "user", "content": [{"type": "input_text", "text": 5}]}, "content[0].text:"),
        ({"role": "user", "content": [{"type": ""}]}, "content[0]: must be an object"),
        (
            {"role": "assistant", "tool_calls": [good_call(arguments={"a": 1})]},
            "tool_calls[0].function.arguments: must be a string",
        ),
        ({"role": "user", "tool_calls": [good_call()]}, "tool_calls: a user message carries"),
        ({"role": "tool", "tool_call_id": 7}, "tool_call_id: must be a string"),
        ({"role": "user", "reasoning": {"x": [float("nan")]}}, "reasoning.x[0]: nan is not"),
        ({"role": "user", "extra": {"k": "\ud800"}}, "metadata.k: contains a lone surrogate"),
    ],
)
def test_check_message_names_the_field_and_the_place(fields, said):
    with pytest.raises(validation.Invalid) as caught:
        validation.check_message(**fields)
    assert str(caught.value).startswith(said), str(caught.value)


def test_a_clean_message_passes_and_deep_nesting_is_bounded():
    validation.check_message(
        role="assistant",
        content=[{"type": "text", "text": "é ok"}],
        tool_calls=[good_call()],
        extra={"deep": [[["fine"]]]},
    )
    deep: list = ["x"]
    for _ in range(validation.MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(validation.Invalid, match="nested more than"):
        validation.check_text(deep, "extra")


def test_the_same_nul_is_refused_by_the_api_and_kept_visibly_by_an_import(alice, tmp_path):
    _key, raw = ApiKey.issue(owner=alice, name="test")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    web = Client(raise_request_exception=False)
    session = Session.objects.create(owner=alice, title="x")

    api = web.post(
        f"/api/sessions/{session.public_id}/messages",
        json.dumps({"role": "user", "content": NUL}),
        content_type="application/json",
        **auth,
    )
    assert api.status_code == 422
    assert "content: contains a NUL character" in api.json()["detail"][0]["msg"]

    endpoint = web.post(
        "/v1/chat/completions",
        json.dumps({"model": "openai/fake-chat", "messages": [{"role": "user", "content": NUL}]}),
        content_type="application/json",
        **auth,
    )
    assert endpoint.status_code == 400
    error = endpoint.json()["error"]
    assert error["code"] == "invalid_value"
    assert error["message"].startswith("messages[0].content: contains a NUL character")

    export = tmp_path / "export.jsonl"
    line = {"id": "s1", "messages": [{"role": "user", "content": "hi"}, {"role": "user"}]}
    line["messages"][1]["content"] = NUL
    export.write_text(json.dumps(line) + "\n")
    report = import_path(export, owner=alice)
    assert report.errors == []  # an imported file is what the agent saw: shown, not refused
    assert report.sessions[0].fidelity["control_characters_replaced"] == 1

    stored = Message.objects.filter(session=report.sessions[0]).order_by("position")
    assert [m.content for m in stored] == ["hi", "before\u2400after"]
    assert Session.objects.count() == 2  # the API and endpoint stored nothing
