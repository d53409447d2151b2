"""The agent's workspace tools: Hermes-shaped results, and no way out of the workspace."""

import json
import os

import pytest

from hermes_web.agent.tools import run_tool, tool_schemas


@pytest.fixture
def workspace(tmp_path, settings):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\n\ndef main():\n    return 'hello'\n")
    (root / "README.md").write_text("# Demo\n\nSay hello to the app.\n")
    outside = tmp_path / "secret.txt"
    outside.write_text("TOP SECRET\n")
    settings.HERMES_WORKSPACE = root
    settings.HERMES_ENABLE_TERMINAL = False
    return root


def call(name, **args):
    return json.loads(run_tool(name, json.dumps(args)))


def test_read_file_numbers_lines(workspace):
    result = call("read_file", path="src/app.py")
    assert result["content"].splitlines()[2] == "     3|def main():"
    assert result["total_lines"] == 4
    assert (
        call("read_file", path="src/app.py", offset=3, limit=1)["content"] == "     3|def main():"
    )


def test_search_files_reports_total_count_and_matches(workspace):
    result = call("search_files", pattern="hello")
    assert result["total_count"] == 2
    assert {m["path"] for m in result["matches"]} == {"README.md", "src/app.py"}
    assert call("search_files", pattern="*.py", target="files")["files"] == ["src/app.py"]


def test_list_files_lists_sizes(workspace):
    entries = {e["path"]: e for e in call("list_files")["entries"]}
    assert entries["src/"]["type"] == "dir"
    assert entries["README.md"]["size"] == (workspace / "README.md").stat().st_size


def test_write_and_patch_stay_in_the_workspace(workspace):
    assert call("write_file", path="notes/todo.txt", content="one\ntwo\n")["bytes_written"] == 8
    assert (workspace / "notes" / "todo.txt").read_text() == "one\ntwo\n"
    result = call("patch", path="notes/todo.txt", old_string="two", new_string="three")
    assert result["replacements"] == 1
    assert "+three" in result["diff"]
    assert (workspace / "notes" / "todo.txt").read_text() == "one\nthree\n"
    assert (
        "not found"
        in call("patch", path="notes/todo.txt", old_string="nine", new_string="x")["error"]
    )


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "../secret.txt"}),
        ("read_file", {"path": "src/../../secret.txt"}),
        ("read_file", {"path": "/etc/passwd"}),
        ("list_files", {"path": ".."}),
        ("search_files", {"pattern": "SECRET", "path": "../"}),
        ("write_file", {"path": "../evil.txt", "content": "x"}),
        ("patch", {"path": "../secret.txt", "old_string": "TOP", "new_string": "NOT"}),
    ],
)
def test_paths_outside_the_workspace_are_refused(workspace, tool, args):
    result = call(tool, **args)
    assert "outside the workspace" in result["error"] or "absolute" in result["error"]
    assert (workspace.parent / "secret.txt").read_text() == "TOP SECRET\n"
    assert not (workspace.parent / "evil.txt").exists()


def test_symlinks_pointing_outside_are_refused(workspace):
    os.symlink(workspace.parent / "secret.txt", workspace / "link.txt")
    os.symlink(workspace.parent, workspace / "up")
    assert "outside the workspace" in call("read_file", path="link.txt")["error"]
    assert "outside the workspace" in call("read_file", path="up/secret.txt")["error"]
    assert "outside the workspace" in call("write_file", path="up/evil.txt", content="x")["error"]
    assert not (workspace.parent / "evil.txt").exists()
    # Searching the whole workspace never follows the links out.
    assert call("search_files", pattern="TOP SECRET")["total_count"] == 0


def test_terminal_is_off_unless_enabled(workspace, settings):
    assert "terminal" not in [s["function"]["name"] for s in tool_schemas()]
    assert "disabled" in call("terminal", command="echo hi")["error"]
    settings.HERMES_ENABLE_TERMINAL = True
    assert "terminal" in [s["function"]["name"] for s in tool_schemas()]
    result = call("terminal", command="pwd; ls; exit 3")
    assert result["exit_code"] == 3
    assert str(workspace.resolve()) in result["output"]
    assert "README.md" in result["output"]


def test_terminal_times_out_and_caps_output(workspace, settings):
    settings.HERMES_ENABLE_TERMINAL = True
    slow = call("terminal", command="sleep 5", timeout=1)
    assert slow["exit_code"] == 124
    assert "timed out" in slow["error"]
    big = call("terminal", command="python3 -c \"print('x' * 200000)\"")
    assert big["exit_code"] == 0
    assert len(big["output"]) < 60_000
    assert "omitted" in big["output"]


def test_bad_calls_come_back_as_tool_errors(workspace):
    assert "does not exist" in call("rm_rf")["error"]
    assert "not valid JSON" in json.loads(run_tool("read_file", "{nope"))["error"]
    assert "bad arguments" in call("read_file", path="README.md", colour="red")["error"]
    assert "file not found" in call("read_file", path="missing.txt")["error"]
