"""The layouts real tools write (issue #14), each reproduced by a fixture of our own:
Claude Code's leading snapshot records, split parallel calls, meta records, compact
summaries and sub-agent transcripts; Codex's context blocks, images, interleaved outputs
and compaction; Hermes transcripts, JSON exports with ``""`` columns and session_meta rows.
"""

import hashlib
import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from compaction import PREFIX_OPENING
from compaction.summary import is_summary_message
from hermes_web.importers import detect_format, import_path
from hermes_web.models import Message, Session
from hermes_web.services.compactions import _load_active
from hermes_web.services.sessions import openai_messages, session_tree

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CC = FIXTURES / "claude_code"
SID = "7c1e9a52-3b0d-4f8e-a6c4-91d2e5f0b7a3"
MAIN = CC / f"{SID}.jsonl"
AGENT = CC / SID / "subagents" / "agent-a5f19c2.jsonl"
CODEX = FIXTURES / "codex_rollout_current.jsonl"
TRANSCRIPT = FIXTURES / "hermes_sessions" / "20260404_110946_8657dc.jsonl"
EXPORT = FIXTURES / "hermes_session_export.json"


def _ok(report):
    assert report.refused == [], [str(e) for e in report.refused]
    return report


def _only(report):
    _ok(report)
    assert len(report.sessions) == 1
    return report.sessions[0]


def _pairs_ok(messages):
    """Every assistant call is followed directly by its results, in call order."""
    i = 0
    while i < len(messages):
        calls = [c["id"] for c in messages[i].get("tool_calls") or ()]
        results = []
        j = i + 1
        while j < len(messages) and messages[j]["role"] == "tool":
            results.append(messages[j]["tool_call_id"])
            j += 1
        if calls or results:
            assert results == calls, (i, calls, results)
        i = j if j > i + 1 else i + 1


# --- Claude Code ------------------------------------------------------------------------


def test_claude_code_detected_past_the_leading_snapshot_records():
    assert MAIN.read_text().startswith('{"type": "file-history-snapshot"')
    assert detect_format(MAIN, MAIN.name) == "claude-code"
    assert detect_format(AGENT, AGENT.name) == "claude-code"


def test_claude_code_split_parallel_calls_are_one_message_then_results_in_order(alice):
    session = _only(import_path(MAIN, owner=alice))
    rows = list(Message.objects.filter(session=session).order_by("position"))
    merged = next(m for m in rows if m.tool_calls and len(m.tool_calls) == 2)
    assert [c["id"] for c in merged.tool_calls] == ["toolu_01CART", "toolu_01DISC"]
    assert merged.content == "I'll read both files."
    assert merged.reasoning == "Read the cart and the discount code together."
    assert merged.extra["thinking_signatures"] == ["EqQBCkYIBRgCKkBsig1"]
    after = [r for r in rows if r.position > merged.position][:2]
    assert [(r.role, r.tool_call_id) for r in after] == [
        ("tool", "toolu_01CART"),
        ("tool", "toolu_01DISC"),
    ]
    assert after[0].tool_name == "Read"
    _pairs_ok(openai_messages(session))
    assert session.fidelity["tool_results_paired"] == session.fidelity["tool_calls"] == 4


def test_claude_code_meta_records_are_marked_rows_never_turns(alice):
    session = _only(import_path(MAIN, owner=alice))
    meta = {
        m.extra["meta"]: m for m in Message.objects.filter(session=session, extra__has_key="meta")
    }
    assert set(meta) == {"meta", "command", "command_output"}
    assert all(not m.active and not m.archived for m in meta.values())
    output = Message.objects.filter(session=session, extra__meta="command_output").first()
    assert "\x1b" not in output.content  # ANSI escapes stripped for display
    assert "opus (claude-opus-4-6)" in output.content
    texts = [str(m["content"]) for m in openai_messages(session)]
    assert not any(
        t.lstrip().startswith(("<command-name>", "<local-command", "Caveat:")) for t in texts
    )
    assert session.title == "The checkout total ignores the discount. Find out why and fix it."
    assert session.extra["claude_code"]["cli_version"] == "2.1.39"


def test_meta_rows_never_reach_the_model_or_the_engine(alice):
    session = _only(import_path(MAIN, owner=alice))
    assert Message.objects.filter(session=session, extra__has_key="meta").count() >= 4
    for messages in (openai_messages(session), _load_active(session.pk)[0]):
        assert not any("<local-command" in str(m["content"]) for m in messages)
        assert not any("<command-name>" in str(m["content"]) for m in messages)


def test_claude_code_compact_summary_is_the_previous_summary(alice):
    session = _only(import_path(MAIN, owner=alice))
    active = openai_messages(session)
    assert active[0]["content"].startswith(PREFIX_OPENING)
    assert is_summary_message(active[0])  # the engine's own test for an earlier summary
    assert "checkout.py calls cart.total()" in session.previous_summary
    summary = Message.objects.get(session=session, is_summary=True)
    replaced = Message.objects.filter(session=session, position__lt=summary.position)
    assert replaced.filter(active=True).count() == 0
    assert replaced.filter(archived=True).count() >= 8
    # The screenshot sent before the compaction is kept (archived) as an image part.
    image = next(
        m for m in replaced if isinstance(m.content, list) and m.content[1]["type"] == "image_url"
    )
    assert image.content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert [m["role"] for m in active] == ["user", "user", "assistant", "tool", "assistant"]
    assert session.fidelity["summaries"] == 1


@pytest.mark.parametrize("order", ["main first", "sub-agent first"])
def test_sub_agent_is_its_own_session_linked_to_the_parent(alice, order):
    files = [MAIN, AGENT] if order == "main first" else [AGENT, MAIN]
    for path in files:
        _ok(import_path(path, owner=alice))
    main = Session.objects.get(public_id=f"{SID}.{alice.pk}")
    agent = Session.objects.get(public_id=f"{SID}.agent-a5f19c2.{alice.pk}")
    assert agent.parent == main
    assert agent.root == agent  # a child, not a rotation: a tree of its own (issue #25)
    assert agent.compression_count == 0
    assert agent.extra["spawned_by_call"] == "toolu_01TASK"
    assert agent.extra["claude_code"]["agent_id"] == "a5f19c2"
    assert agent.extra["import_report"]["kind"] == "sub-agent"
    assert "sub_agent" in agent.extra
    assert [s.pk for s in session_tree(main)] == [main.pk]
    assert main.title.startswith("The checkout total")
    assert [m["role"] for m in openai_messages(agent)] == ["user", "assistant", "tool", "assistant"]


def test_cli_reports_duplicates_with_a_failing_exit_unless_skip_existing(alice, tmp_path):
    tree = tmp_path / "projects"
    shutil.copytree(CC, tree)
    out = StringIO()
    call_command("import_sessions", str(tree), user="alice", stdout=out)
    printed = out.getvalue()
    assert printed.count("imported ") == 2
    assert "4/4 tool calls paired" in printed
    assert "not a message: " in printed
    assert "progress record" in printed
    err = StringIO()
    with pytest.raises(CommandError, match="already imported"):
        call_command("import_sessions", str(tree), user="alice", stdout=StringIO(), stderr=err)
    assert err.getvalue().count("duplicate: ") == 2
    quiet = StringIO()
    call_command("import_sessions", str(tree), user="alice", skip_existing=True, stdout=quiet)
    assert quiet.getvalue().count("skipped ") == 2
    assert Session.objects.count() == 2


def test_the_source_files_are_left_untouched(alice, tmp_path):
    tree = tmp_path / "projects"
    shutil.copytree(CC, tree)
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in tree.rglob("*") if p.is_file()}
    for path in sorted(before, key=str):
        _ok(import_path(path, owner=alice))
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in tree.rglob("*") if p.is_file()}
    assert after == before


# --- Codex ------------------------------------------------------------------------------


def test_codex_context_blocks_are_metadata_and_images_are_kept(alice):
    session = _only(import_path(CODEX, owner=alice))
    assert session.extra["codex"]["cli_version"] == "0.104.0-alpha.1"
    assert session.extra["codex"]["git"]["branch"] == "main"
    assert session.extra["codex"]["cwd"] == "/home/dev/shop"
    assert session.model == "gpt-5.3-codex"
    kinds = set(
        Message.objects.filter(session=session, extra__has_key="meta").values_list(
            "extra__meta", flat=True
        )
    )
    assert {"user_instructions", "environment_context", "ide_context", "turn_aborted"} <= kinds
    rows = Message.objects.filter(session=session).order_by("position")
    request = next(m for m in rows if m.role == "user" and isinstance(m.content, list))
    assert request.content[0] == {
        "type": "text",
        "text": "Why is the total wrong? See the screenshot.",
    }
    assert request.content[1]["type"] == "image_url"
    assert session.title == "Why is the total wrong? See the screenshot."
    for message in rows.filter(role="user").exclude(extra__has_key="meta"):
        text = message.content if isinstance(message.content, str) else message.content[0]["text"]
        assert not text.startswith(("<environment_context>", "# AGENTS.md", "# Context from"))


def test_codex_outputs_follow_their_calls_and_compaction_archives(alice):
    session = _only(import_path(CODEX, owner=alice))
    rows = list(Message.objects.filter(session=session).order_by("position"))
    first = next(m for m in rows if m.tool_calls)
    assert [c["id"] for c in first.tool_calls] == ["call_A1", "call_B2"]
    assert first.reasoning == "**Reading the checkout code**"
    assert first.extra["codex_reasoning_items"] == [{"encrypted_content": "gAAAAB-opaque"}]
    nxt = rows[rows.index(first) + 1 : rows.index(first) + 3]
    assert [m.tool_call_id for m in nxt] == ["call_A1", "call_B2"]
    stub = next(m for m in rows if m.tool_call_id == "call_D4")
    assert stub.extra["synthetic"]  # the interrupted call got a marked stub result
    active = openai_messages(session)
    _pairs_ok(active)
    assert is_summary_message(active[0])
    assert [m["role"] for m in active] == ["user", "user", "assistant"]
    assert session.fidelity["stub_results"] == 1
    assert session.fidelity["images"] == 1


# --- Hermes -----------------------------------------------------------------------------


def test_hermes_session_transcript(alice):
    assert detect_format(TRANSCRIPT, TRANSCRIPT.name) == "hermes-jsonl"
    session = _only(import_path(TRANSCRIPT, owner=alice))
    assert session.extra["source_id"] == "20260404_110946_8657dc"
    assert session.model == "anthropic/claude-opus-4.6"
    metas = session.extra["hermes"]["session_meta"]
    assert len(metas) == 2
    assert metas[0]["tool_names"] == ["terminal", "read_file"]
    messages = openai_messages(session)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["id"] == messages[2]["tool_call_id"] == "toolu_h1"
    assert session.fidelity["skipped"] == {"session_meta row (kept as session metadata)": 2}


def test_hermes_json_export_with_empty_string_columns(alice):
    assert detect_format(EXPORT, EXPORT.name) == "hermes-jsonl"
    session = _only(import_path(EXPORT, owner=alice))
    rows = list(Message.objects.filter(session=session).order_by("position"))
    # Rows come back in Hermes's id order; "" columns are absent values.
    assert [r.extra.get("meta") or r.content[:12] for r in rows] == [
        "tool_result_unknown",
        "hello",
        "Which files ",
        "",
        "config.yaml\n",
        "Copy config.",
    ]
    assert rows[1].active is False
    assert rows[3].tool_calls[0]["id"] == "call_ls"
    assert rows[2].tool_calls is None
    _pairs_ok(openai_messages(session))


# --- hostile ids ------------------------------------------------------------------------


def test_a_session_id_with_a_slash_never_breaks_the_pages(alice, alice_client, tmp_path):
    line = json.loads((FIXTURES / "hermes_export.jsonl").read_text().splitlines()[2])
    line["id"] = "../a/b c?"
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(line) + "\n")
    session = _only(import_path(path, owner=alice))
    assert "/" not in session.public_id
    assert "?" not in session.public_id
    assert " " not in session.public_id
    assert alice_client.get("/conversations/").status_code == 200
    assert alice_client.get("/import/").status_code == 200
    assert alice_client.get(f"/conversations/{session.public_id}/").status_code == 200
    assert alice_client.delete(f"/api/sessions/{session.public_id}").status_code in (200, 204)
    assert not Session.objects.filter(pk=session.pk).exists()


def test_a_claude_code_file_name_never_becomes_a_path(alice, tmp_path):
    path = tmp_path / "..jsonl"
    path.write_bytes(AGENT.read_bytes())
    session = _only(import_path(path, owner=alice))
    assert "/" not in session.public_id


def test_json_array_fixture_is_unchanged_by_detection():
    text = EXPORT.read_text()
    assert json.loads(text)["messages"][0]["tool_calls"] == ""


def test_meta_rows_are_badged_on_the_conversation_page(alice, alice_client):
    session = _only(import_path(MAIN, owner=alice))
    plain = alice_client.get(f"/conversations/{session.public_id}/").content.decode()
    assert "meta: command" not in plain  # inactive: not in the conversation by default
    html = alice_client.get(f"/conversations/{session.public_id}/?archived=1").content.decode()
    assert "meta: command_output" in html
    assert "never sent to the model" in html


def test_a_transcript_whose_first_line_is_longer_than_the_sniff_window(alice, tmp_path):
    """Hermes writes the whole tool list into the session_meta line: often > 1 MB."""
    lines = TRANSCRIPT.read_text().splitlines()
    meta = json.loads(lines[0])
    meta["tools"] = meta["tools"] * 8000  # ~1.5 MB
    path = tmp_path / TRANSCRIPT.name
    path.write_text("\n".join([json.dumps(meta), *lines[1:]]) + "\n")
    assert path.stat().st_size > 2**20
    assert detect_format(path, path.name) == "hermes-jsonl"
    session = _only(import_path(path, owner=alice))
    assert [m["role"] for m in openai_messages(session)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_claude_code_whose_first_snapshot_is_longer_than_the_sniff_window(alice, tmp_path):
    lines = MAIN.read_text().splitlines()
    snapshot = json.loads(lines[0])
    snapshot["snapshot"]["trackedFileBackups"] = {f"/f{i}.py": "x" * 100 for i in range(12_000)}
    path = tmp_path / MAIN.name
    path.write_text("\n".join([json.dumps(snapshot), *lines[1:]]) + "\n")
    assert path.stat().st_size > 2**20
    assert detect_format(path, path.name) == "claude-code"
    assert _only(import_path(path, owner=alice)).fidelity["tool_calls"] == 4
