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


@pytest.mark.parametrize(
    "data",
    [
        b'{"id": "s", "started_at": ' + b"1" * 5000 + b', "messages": []}\n',
        b'{\n  "n": ' + b"9" * 5000 + b',\n  "messages": []\n}',
    ],
    ids=["jsonl-line", "document"],
)
def test_an_integer_past_4300_digits_is_read_in_a_child_process_without_crashing_it(tmp_path, data):
    """ijson's C parser killed the web worker (SIGSEGV) on such a number unless asked to read
    numbers as floats: run detection in a child so that a crash fails this test alone."""
    import subprocess
    import sys

    path = tmp_path / "bigint.jsonl"
    path.write_bytes(data)
    child = subprocess.run(
        [sys.executable, "-c",
         "import sys, django; django.setup(); "
         "from hermes_web.importers.detect import _top_level; "
         "print(_top_level(open(sys.argv[1], 'rb')))", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-500:]
    assert child.stdout.strip() == "None"  # not a readable object: refused later, by name
