"""Issue #39's hostile import probe, closed by mechanisms of the shared pipeline: parent
walks that cannot loop (importers/graph.py), an amplification budget per import
(importers/budget.py), one boundary that says an importer's exception in plain words with
its file and line (base.records_of), and Claude Code records written twice stored once."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from hermes_web.importers import import_path
from hermes_web.importers.base import ImportProblem
from hermes_web.importers.graph import Cycle, top_of, walk_up
from hermes_web.models import Message, Session

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PYTHON_WORDS = ("Error", "Traceback", "surrogates not allowed", "unhashable", "codec", "/tmp/")


def _counts():
    return Session.objects.count(), Message.objects.count()


def _lines(*records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _plain(problem: ImportProblem) -> None:
    """A problem a person reads: no Python words, no exception text, no server path."""
    for word in PYTHON_WORDS:
        assert word not in str(problem), str(problem)


# --- 1. parent walks: a cycle is refused, never followed forever ---------------------------

PI_HEADER = {"type": "session", "version": 3, "id": "pi-cycle", "timestamp": "2026-03-02T09:00Z"}


def _pi_entry(entry_id: str, parent: str | None, text: str = "hi") -> dict:
    role = "user" if text.startswith("q") else "assistant"
    content = [{"type": "text", "text": text}]
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "message": {"role": role, "content": content},
    }


@pytest.mark.parametrize(
    ("entries", "looping", "line"),
    [
        # a -> b -> a: every entry has a child, the last one walks round the loop
        ([("a", "b", "q1"), ("b", "a", "r1")], "b", 3),
        # one entry that is its own parent, after a healthy root
        ([("r", None, "q1"), ("s", "s", "r1")], "s", 3),
        # a healthy chain whose top joins a loop further up
        ([("x", "y", "q1"), ("y", "x", "r1"), ("z", "y", "q2")], "y", 3),
    ],
)
def test_a_pi_session_whose_entries_form_a_parent_cycle_is_refused(
    alice, tmp_path, entries, looping, line
):
    path = tmp_path / "cycle.jsonl"
    path.write_bytes(_lines(PI_HEADER, *(_pi_entry(*e) for e in entries)))
    before = _counts()
    report = import_path(path, owner=alice, fmt="pi")
    (problem,) = report.errors
    assert problem.file == "cycle.jsonl"
    assert problem.line == line
    assert problem.problem == f"entry {looping!r} is its own ancestor (parent cycle)"
    assert report.sessions == []
    assert _counts() == before


def test_the_walk_stops_where_asked_and_names_the_node_that_came_back():
    parents = {"c": "b", "b": "a", "a": None}
    assert walk_up("c", parents.get) == (["c", "b", "a"], None)
    assert walk_up("c", parents.get, stop=lambda n: n == "a") == (["c", "b"], "a")
    with pytest.raises(Cycle) as caught:
        walk_up(1, {1: 2, 2: 3, 3: 2}.get)
    assert caught.value.node == 2
    assert caught.value.path == [1, 2, 3]
    assert top_of(1, {1: 2, 2: 1}.get) == 2  # stored data may loop: the last before it does


# --- 2. the amplification budget ----------------------------------------------------------

SID = "5a1b2c3d-0000-4000-8000-00000000abcd"
STUB = (
    "<persisted-output>\nOutput too large (512KB). Full output saved to: "
    "/home/u/.claude/projects/p/{sid}/tool-results/big.txt\n\nPreview:\nxxx\n</persisted-output>"
)


def _cc(kind: str, uuid: str, message: dict, **fields) -> dict:
    return {
        "type": kind,
        "uuid": uuid,
        "sessionId": SID,
        "timestamp": "2026-03-02T10:00:00.000Z",
        "message": message,
        **fields,
    }


def _transcript(stubs: int, prefix: str, **fields) -> list[dict]:
    """A user turn, then ``stubs`` tool calls whose results are stubs naming big.txt."""
    records = [_cc("user", f"{prefix}-u", {"role": "user", "content": "read it"}, **fields)]
    for n in range(stubs):
        call = {"type": "tool_use", "id": f"{prefix}-t{n}", "name": "Bash", "input": {}}
        records.append(
            _cc(
                "assistant",
                f"{prefix}-a{n}",
                {"id": f"{prefix}-m{n}", "role": "assistant", "content": [call]},
                **fields,
            )
        )
        result = {
            "type": "tool_result",
            "tool_use_id": f"{prefix}-t{n}",
            "content": STUB.format(sid=SID),
        }
        records.append(
            _cc("user", f"{prefix}-r{n}", {"role": "user", "content": [result]}, **fields)
        )
    return records


def _folder(root: Path, main_stubs: int, agents: int, agent_stubs: int, size: int) -> Path:
    """A Claude Code session folder whose stubs all name one ``size``-byte tool-results file."""
    (root / SID / "tool-results").mkdir(parents=True)
    (root / SID / "subagents").mkdir()
    (root / SID / "tool-results" / "big.txt").write_bytes(b"0123456789abcdef" * (size // 16))
    (root / f"{SID}.jsonl").write_bytes(_lines(*_transcript(main_stubs, "main")))
    for n in range(agents):
        records = _transcript(agent_stubs, f"ag{n}", isSidechain=True, agentId=f"a{n}")
        (root / SID / "subagents" / f"agent-a{n}.jsonl").write_bytes(_lines(*records))
    return root


def _zip(root: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, f"proj/{path.relative_to(root).as_posix()}")
    return buffer.getvalue()


@pytest.fixture
def small_budget(settings):
    settings.HERMES_IMPORT_AMPLIFICATION = 4
    settings.HERMES_IMPORT_AMPLIFICATION_FLOOR = 1024 * 1024


def test_a_zip_whose_stubs_all_name_one_file_is_refused_with_nothing_stored(
    alice, alice_client, tmp_path, small_budget
):
    """The probe's 23 KB zip in small: 20 stubs and 10 sub-agents naming one 512 KiB file."""
    data = _zip(_folder(tmp_path / "p", main_stubs=20, agents=10, agent_stubs=2, size=512 * 1024))
    assert len(data) < 20_000
    before = _counts()
    response = alice_client.post("/api/import", {"file": SimpleUploadedFile("s.zip", data)})
    assert response.status_code == 400
    body = response.json()
    assert body["imported"] == []
    (error,) = body["errors"]
    assert "would store over" in error["problem"]
    assert "MB from 0.5 MB read: over the 4× limit" in error["problem"]
    assert "HERMES_IMPORT_AMPLIFICATION" in error["problem"]
    assert _counts() == before


def test_the_budget_counts_every_session_of_the_import_not_each_alone(
    alice, tmp_path, small_budget
):
    """One stub each: the main transcript and the first sub-agents fit, together they do
    not; what was stored before the budget ran out is deleted."""
    from hermes_web.importers import import_folder
    from hermes_web.importers.directory import plan_directory

    root = _folder(tmp_path / "p", main_stubs=1, agents=10, agent_stubs=1, size=512 * 1024)
    (folder,) = plan_directory(root).folders
    before = _counts()
    report = import_folder(folder, owner=alice)
    assert report.sessions == []
    (problem,) = report.errors
    assert "over the 4× limit" in problem.problem
    assert _counts() == before


def test_an_import_within_its_budget_is_unchanged(alice, tmp_path, small_budget):
    root = _folder(tmp_path / "p", main_stubs=2, agents=1, agent_stubs=1, size=512 * 1024)
    from hermes_web.importers import import_folder
    from hermes_web.importers.directory import plan_directory

    (folder,) = plan_directory(root).folders
    report = import_folder(folder, owner=alice)
    assert report.errors == []
    assert len(report.sessions) == 2
    big = Message.objects.filter(role="tool", extra__tool_result_file="big.txt")
    assert big.count() == 3


# --- 3. an importer's exception said in plain words, with file and line ------------------


def test_a_lone_surrogate_in_an_id_is_a_plain_refusal(alice, tmp_path):
    path = tmp_path / "s.jsonl"
    header = json.dumps({**PI_HEADER, "id": "x"}).replace('"x"', '"\\ud800"')
    path.write_bytes(header.encode() + b"\n" + _lines(_pi_entry("a", None, "q1")))
    before = _counts()
    report = import_path(path, owner=alice, fmt="pi")
    (problem,) = report.errors
    _plain(problem)
    assert problem.file == "s.jsonl"
    assert problem.line == 1  # the header, where the id is
    assert "not valid Unicode" in problem.problem
    assert _counts() == before


def _set(record, path, value):
    target = record
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


@pytest.mark.parametrize(
    ("fixture", "record", "path", "value", "line"),
    [
        # a list where a message's role was: "TypeError: unhashable type: 'list'" before
        ("openai_list.json", 0, (2, "tool_calls", 0, "id"), ["x"], 1),
        # the record's type as an object, read while the format is detected
        ("codex_rollout.jsonl", 3, ("type",), {"k": 1}, 4),
        # a list where a step's role was (SWE-agent)
        (
            "agents/swe_agent/marshmallow-code__marshmallow-1867.traj",
            0,
            ("history", 1, "role"),
            [["x"]],
            None,
        ),
        # a number where a text block's text was ("sequence item 0: expected str instance")
        (
            "agents/cline/tasks/1767644899093/api_conversation_history.json",
            0,
            (2, "content", 0, "content", 0, "text"),
            7,
            None,
        ),
    ],
)
def test_json_of_the_wrong_types_is_a_plain_refusal_naming_the_record(
    alice, tmp_path, fixture, record, path, value, line
):
    source = FIXTURES / fixture
    text = source.read_text()
    lines = fixture.endswith(".jsonl")
    records = [json.loads(x) for x in text.splitlines()] if lines else [json.loads(text)]
    _set(records[record], path, value)
    target = tmp_path / source.name
    if source.name == "api_conversation_history.json":  # cline reads its task folder
        target = tmp_path / "tasks" / "1767644899093" / source.name
        target.parent.mkdir(parents=True)
    target.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    before = _counts()
    report = import_path(target, owner=alice)
    (problem,) = report.errors
    _plain(problem)
    assert problem.file == source.name
    if line is not None:
        assert problem.line == line
    assert report.sessions == []
    assert _counts() == before


def test_the_cli_says_the_same_plain_refusal(alice, tmp_path, capsys):
    path = tmp_path / "s.jsonl"
    header = json.dumps({**PI_HEADER, "id": "x"}).replace('"x"', '"\\udfff"')
    path.write_bytes(header.encode() + b"\n" + _lines(_pi_entry("a", None, "q1")))
    with pytest.raises(CommandError):  # the command exits non-zero on a failed import
        call_command("import_sessions", str(path), "--user", "alice", "--format", "pi")
    out = capsys.readouterr()
    text = out.out + out.err
    assert "not valid Unicode" in text
    assert "surrogates not allowed" not in text
    assert "UnicodeEncodeError" not in text


def test_the_page_and_the_api_say_the_same_plain_refusal(alice_client):
    header = json.dumps({**PI_HEADER, "id": "x"}).replace('"x"', '"\\ud800"')
    data = header.encode() + b"\n" + _lines(_pi_entry("a", None, "q1"))
    page = alice_client.post("/import/", {"file": SimpleUploadedFile("p.jsonl", data)})
    html = page.content.decode()
    assert "not valid Unicode" in html
    assert "surrogates not allowed" not in html
    assert "UnicodeEncodeError" not in html
    api = alice_client.post("/api/import", {"file": SimpleUploadedFile("p.jsonl", data)})
    assert api.status_code == 400
    assert api.json()["detail"].startswith("p.jsonl, line ")
    assert "not valid Unicode" in api.json()["detail"]
    assert "Error" not in api.content.decode()
    assert not Session.objects.exists()


def test_a_json_error_says_at_column_once(alice, tmp_path):
    path = tmp_path / "s.json"
    path.write_bytes(b'[{"role": "user", "content": "unterminated}]')
    report = import_path(path, owner=alice, fmt="openai")
    (problem,) = report.errors
    assert "Unterminated string starting at column" in problem.problem
    assert "at at" not in problem.problem


# --- 4. a Claude Code record written twice is stored once ---------------------------------


def test_a_claude_code_record_repeated_with_its_uuid_is_stored_once(alice, tmp_path):
    lines = (FIXTURES / "claude_code_session.jsonl").read_bytes().splitlines(keepends=True)
    once = tmp_path / "once.jsonl"
    once.write_bytes(b"".join(lines))
    twice = tmp_path / "twice.jsonl"
    records = [json.loads(line) for line in lines]
    repeated = [i for i, r in enumerate(records) if r.get("type") in ("user", "assistant")][:3]
    twice.write_bytes(b"".join(lines) + b"".join(lines[i] for i in repeated))
    (first,) = import_path(once, owner=alice).sessions
    rows = list(Message.objects.filter(session=first).values_list("role", "content"))
    Session.objects.all().delete()
    report = import_path(twice, owner=alice)
    (again,) = report.sessions
    assert list(Message.objects.filter(session=again).values_list("role", "content")) == rows
    skipped = again.fidelity["skipped"]
    assert any("duplicate record" in why and n == 3 for why, n in skipped.items()), skipped
