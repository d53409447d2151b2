"""A pretty-printed JSON document is recognised by its own top-level keys, never by words
inside its strings: a real Hermes session export whose system prompt quoted ``"sessionId"``
was read as Claude Code JSONL and refused ("broken JSON … at column 1")."""

import json

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.detect import detect_format

pytestmark = pytest.mark.django_db


def _session_document(tmp_path, prompt):
    document = {
        "session_id": "20260509_015035_a888aa",
        "model": "stepfun-ai/step-3.5-flash",
        "system_prompt": prompt,
        "tools": [{"type": "function", "function": {"name": "terminal", "parameters": {}}}],
        "message_count": 2,
        "messages": [
            {"role": "user", "content": "look in the shared folder"},
            {"role": "assistant", "content": "Done."},
        ],
    }
    path = tmp_path / "session_20260509_015035_a888aa.json"
    path.write_text(json.dumps(document, indent=2))
    return path


def test_a_document_quoting_claude_code_keys_in_its_text_is_read_by_its_own_keys(tmp_path, alice):
    prompt = 'Logs look like {"sessionId": "x", "parentUuid": null} ' + "padding " * 5_000
    path = _session_document(tmp_path, prompt)
    assert detect_format(path, path.name) == "openai"
    report = import_path(path, owner=alice)
    assert not report.errors, [str(e) for e in report.errors]
    assert [s.message_total for s in report.sessions] == [2]


def test_jsonl_whose_first_record_is_cut_by_the_sniff_window_is_still_jsonl(tmp_path):
    # A JSONL file's first record, read by its keys: Codex's session_meta.
    first = {"type": "session_meta", "payload": {"id": "x", "instructions": "y" * 2_000_000}}
    path = tmp_path / "rollout.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps({"type": "turn_context"}) + "\n")
    assert detect_format(path, path.name) == "codex"
