"""Claude Code session folders (issue #25, item 4): ``<id>.jsonl`` with ``<id>/subagents/``
(transcripts and their ``.meta.json``) and ``<id>/tool-results/`` (outputs too large for the
transcript, named by a stub in it), imported as the tool lays them out, from a directory or a
``.zip`` / ``.tar.gz`` upload. The folder in tests/fixtures/claude_code_folder is our own,
in the layout of Claude Code 2.1."""

import hashlib
import io
import json
import shutil
import tarfile
import zipfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from hermes_web.importers.base import NativeCompaction, epoch
from hermes_web.importers.formats import claude_code
from hermes_web.importers.formats.claude_code_folder import (
    _summarizer,
    attach_compaction_agents,
)
from hermes_web.models import Compaction, Message, Session
from hermes_web.services.sessions import openai_messages, session_tree

pytestmark = pytest.mark.django_db

PROJECT = Path(__file__).resolve().parent.parent / "fixtures" / "claude_code_folder"
SID = "3f2b8c1d-5e6a-4b7c-9d0e-1a2b3c4d5e6f"
FOLDER = PROJECT / "-home-dev-shop" / SID
MAIN = PROJECT / "-home-dev-shop" / f"{SID}.jsonl"
COMPACTION_AGENT = FOLDER / "subagents" / "agent-acompact-4e5f6a.jsonl"


def _tree(tmp_path) -> Path:
    tree = tmp_path / "projects"
    shutil.copytree(PROJECT, tree)
    return tree


def _snapshot(root: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()}


def _import_dir(tree: Path) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("import_sessions", str(tree), user="alice", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _sessions(owner):
    main = Session.objects.get(public_id=f"{SID}.{owner.pk}")
    explore = Session.objects.get(public_id=f"{SID}.agent-a1b2c3d.{owner.pk}")
    fixer = Session.objects.get(public_id=f"{SID}.agent-a9f8e7d.{owner.pk}")
    return main, explore, fixer


def test_the_cli_imports_a_session_folder_and_leaves_it_untouched(alice, tmp_path):
    """Before: every ``.meta.json`` was imported as a transcript and failed, so the command
    failed ("2 session(s) or file(s) failed")."""
    tree = _tree(tmp_path)
    before = _snapshot(tree)
    out, err = _import_dir(tree)  # raises CommandError on any failed file
    assert "error:" not in err
    main, explore, fixer = _sessions(alice)
    assert main.title == "Why does the nightly build fail?"
    assert _snapshot(tree) == before  # byte-identical, no new files


def test_sub_agents_are_children_with_their_meta_not_rotations(alice, tmp_path):
    _import_dir(_tree(tmp_path))
    main, explore, fixer = _sessions(alice)
    for agent in (explore, fixer):
        assert agent.parent_id == main.pk
        assert agent.root_id == agent.pk
        assert agent.compression_count == 0
        assert agent.extra["import_report"]["kind"] == "sub-agent"
    assert explore.extra["sub_agent"] == {
        "agentType": "Explore",
        "description": "Find the failing test",
        "toolUseId": "toolu_01TASK",
        "spawnDepth": 1,
    }
    assert fixer.extra["sub_agent"] == {
        "agentType": "general-purpose",
        "description": "Draft the fix",
    }
    assert explore.extra["spawned_by_call"] == "toolu_01TASK"
    assert fixer.extra["spawned_by_call"] == "toolu_01FIX"
    assert [s.pk for s in session_tree(main)] == [main.pk]  # no rotation chain
    assert [s.pk for s in session_tree(explore)] == [explore.pk]


def test_pages_show_sub_agents_as_children_never_as_a_chain(alice, alice_client, tmp_path):
    _import_dir(_tree(tmp_path))
    main, explore, fixer = _sessions(alice)
    listing = alice_client.get("/conversations/").content.decode()
    assert "chain of" not in listing
    assert "first session" not in listing
    assert "sub-agent: Explore" in listing
    detail = alice_client.get(f"/conversations/{main.public_id}/").content.decode()
    assert "<strong>Sub-agents</strong>" in detail
    assert f'href="/conversations/{fixer.public_id}/"' in detail
    assert f'href="/conversations/{explore.public_id}/"' in detail
    assert "Find the failing test" in detail
    child = alice_client.get(f"/conversations/{explore.public_id}/").content.decode()
    assert "A sub-agent (<strong>Explore</strong>) of" in child
    assert f'href="/conversations/{main.public_id}/"' in child
    assert "toolu_01TASK" in child
    tree = alice_client.get(f"/conversations/{main.public_id}/tree/").content.decode()
    assert "1 session." in tree


def test_tool_results_files_are_joined_to_the_stub_that_names_them(alice, tmp_path):
    out, err = _import_dir(_tree(tmp_path))
    main, explore, _ = _sessions(alice)
    log = Message.objects.get(session=main, tool_call_id="toolu_01LOG")
    assert log.content == (FOLDER / "tool-results" / "toolu_01LOG.txt").read_text()
    assert "got 100.0" in log.content  # past the 2 KB preview the stub held
    assert log.extra["tool_result_file"] == "toolu_01LOG.txt"
    gone = Message.objects.get(session=main, tool_call_id="toolu_01GONE")
    assert gone.content.startswith("<persisted-output>")  # the stub, kept as it was
    assert gone.extra["tool_result_file_missing"] == "toolu_01GONE.txt"
    report = main.extra["import_report"]
    assert report["tool_result_files_joined"] == 1
    assert report["tool_result_files_missing"] == 1
    # a sub-agent's stub names a file of the same folder
    grep = Message.objects.get(session=explore, tool_call_id="toolu_01SUBGREP")
    assert grep.content == (FOLDER / "tool-results" / "toolu_01SUBGREP.txt").read_text()
    assert explore.extra["import_report"]["tool_result_files_joined"] == 1
    # the stored result is what the engine and exports see, with its token count
    sent = next(m for m in openai_messages(explore) if m.get("tool_call_id") == "toolu_01SUBGREP")
    assert sent["content"] == grep.content
    assert log.token_count > 1000
    assert "1 tool-results files joined; 1 tool-results files missing" in out
    assert "1 file(s) in tool-results/ named by no stub: b7q2xk1.txt" in err


def test_only_files_of_the_folder_are_joined_never_the_path_in_the_stub(alice, tmp_path):
    """The stub's path is the transcript's word: a file at that path outside the folder is
    never opened, only the folder's own tool-results file of that base name."""
    tree = _tree(tmp_path)
    outside = tmp_path / "secret.txt"
    outside.write_text("not for import")
    main_path = tree / "-home-dev-shop" / f"{SID}.jsonl"
    text = main_path.read_text().replace(
        f"/home/dev/.claude/projects/-home-dev-shop/{SID}/tool-results/toolu_01GONE.txt",
        str(outside),
    )
    main_path.write_text(text)
    _import_dir(tree)
    main, _, _ = _sessions(alice)
    gone = Message.objects.get(session=main, tool_call_id="toolu_01GONE")
    assert "not for import" not in str(gone.content)
    assert gone.extra["tool_result_file_missing"] == "secret.txt"


def test_the_compaction_agent_is_attached_to_the_compaction_it_wrote(tmp_path):
    """``agent-acompact-*.jsonl`` holds the summarizer's own transcript: it becomes the
    compaction's summarizer input and output, matched by the summary text it wrote."""
    with open(MAIN, "rb") as stream:
        main = next(iter(claude_code.parse(stream, MAIN.name)))
    main.stream.close()
    summary = "Summary:\n1. Primary Request: find why the nightly build fails.\n2. Findings: " + (
        "tests/test_cart.py::test_total expects 90.0 and gets 100.0; checkout.py never applies "
        "the discount.\n3. Pending: fix checkout.py and rerun the build."
    )
    main.native_compactions = [
        NativeCompaction(source="claude-code", created_at=epoch("2026-03-01T08:00:00Z")),
        NativeCompaction(
            source="claude-code",
            trigger="auto",
            created_at=epoch("2026-03-02T10:09:59Z"),
            tokens_before=161234,
            summary=summary,
        ),
    ]
    agent = _summarizer(COMPACTION_AGENT, COMPACTION_AGENT.name)
    attached = attach_compaction_agents(main, [(COMPACTION_AGENT, agent)])
    assert attached == [COMPACTION_AGENT]
    first, second = main.native_compactions
    assert first.summarizer_input is None  # a day earlier, another summary: not this one
    assert second.summarizer_output.startswith("<analysis>")
    assert "<summary>\n1. Primary Request" in second.summarizer_output
    assert [m["role"] for m in second.summarizer_input] == ["user", "assistant", "user"]
    assert second.summarizer_input[-1]["content"].startswith("Your task is to create a detailed")
    assert second.extra["summarizer_file"] == COMPACTION_AGENT.name
    assert main.counts["compaction_agents_attached"] == 1


def test_the_compaction_agent_matches_by_time_when_the_text_differs(tmp_path):
    with open(MAIN, "rb") as stream:
        main = next(iter(claude_code.parse(stream, MAIN.name)))
    main.stream.close()
    main.native_compactions = [
        NativeCompaction(source="claude-code", created_at=epoch("2026-03-02T10:09:59Z"))
    ]
    agent = _summarizer(COMPACTION_AGENT, COMPACTION_AGENT.name)
    assert attach_compaction_agents(main, [(COMPACTION_AGENT, agent)]) == [COMPACTION_AGENT]
    far = NativeCompaction(source="claude-code", created_at=epoch("2026-03-02T12:00:00Z"))
    main.native_compactions = [far]
    assert attach_compaction_agents(main, [(COMPACTION_AGENT, agent)]) == []
    assert far.summarizer_input is None


def test_the_compaction_agent_is_attached_to_the_stored_compaction_not_a_child(alice, tmp_path):
    """The transcript's ``compact_boundary`` is stored as Claude Code's own compaction; the
    compaction agent that wrote its summary is that compaction's summarizer transcript, and
    no session of its own."""
    _import_dir(_tree(tmp_path))
    main, _, _ = _sessions(alice)
    assert main.extra["import_report"]["compaction_agents_attached"] == 1
    assert not Session.objects.filter(public_id__contains="acompact").exists()
    (native,) = Compaction.objects.filter(session=main, source=Compaction.Source.CLAUDE_CODE)
    assert native.tokens_before == 161234  # the file's compactMetadata.preTokens
    assert native.native_record["summarizer_file"] == COMPACTION_AGENT.name
    transcript = native.summarizer_transcript
    assert transcript["output"].startswith("<analysis>")
    assert transcript["input"][-1]["content"].startswith("Your task is to create a detailed")


def test_a_second_import_of_the_folder_is_all_duplicates_or_all_skipped(alice, tmp_path):
    tree = _tree(tmp_path)
    _import_dir(tree)
    count = Session.objects.count()
    err = StringIO()
    with pytest.raises(Exception, match="already imported"):
        call_command("import_sessions", str(tree), user="alice", stdout=StringIO(), stderr=err)
    assert err.getvalue().count("duplicate:") == count
    call_command("import_sessions", str(tree), user="alice", skip_existing=True, stdout=StringIO())
    assert Session.objects.count() == count


def test_a_sub_agent_folder_without_its_main_transcript_waits_for_its_parent(alice, tmp_path):
    """The folder alone (``<id>/``): the sub-agents are stored; the main transcript imported
    later becomes their parent, and they stay out of its rotation tree."""
    tree = _tree(tmp_path)
    main_path = tree / "-home-dev-shop" / f"{SID}.jsonl"
    held = tmp_path / f"{SID}.jsonl"
    main_path.rename(held)
    _import_dir(tree)
    assert Session.objects.filter(parent__isnull=True).count() == Session.objects.count()
    call_command("import_sessions", str(held), user="alice", stdout=StringIO())
    main, explore, fixer = _sessions(alice)
    assert explore.parent_id == fixer.parent_id == main.pk
    assert explore.root_id == explore.pk
    assert fixer.root_id == fixer.pk
    assert explore.extra["spawned_by_call"] == "toolu_01TASK"
    assert [s.pk for s in session_tree(main)] == [main.pk]


# --- uploads: a .zip or .tar.gz of the folder ----------------------------------------------


def _zip(root: Path, extra: dict | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(root).as_posix())
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _tar(root: Path, members=()) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(root, arcname=".")
        for member, data in members:
            archive.addfile(member, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_a_folder_uploaded_as_an_archive_imports_like_the_directory(alice, alice_client, kind):
    data = _zip(PROJECT) if kind == "zip" else _tar(PROJECT)
    upload = SimpleUploadedFile(f"session.{kind}", data)
    response = alice_client.post("/api/import", {"file": upload})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["format"] == f"{kind} archive"
    assert body["errors"] == []
    main, explore, fixer = _sessions(alice)
    assert explore.parent_id == main.pk
    assert explore.root_id == explore.pk
    assert explore.extra["sub_agent"]["agentType"] == "Explore"
    log = Message.objects.get(session=main, tool_call_id="toolu_01LOG")
    assert "got 100.0" in log.content
    imported = {s["source_id"]: s for s in body["imported"]}
    assert imported[SID]["fidelity"]["tool_result_files_joined"] == 1
    assert any("named by no stub: b7q2xk1.txt" in w for w in body["warnings"])


def test_the_import_page_takes_a_folder_archive(alice, alice_client):
    upload = SimpleUploadedFile("session.zip", _zip(PROJECT))
    response = alice_client.post("/import/", {"file": upload})
    assert response.status_code == 200
    html = response.content.decode()
    assert "zip archive" in html
    assert html.count('<span class="badge">sub-agent</span>') >= 2
    assert "1 tool-results files joined · 1 tool-results files missing" in html
    assert "sub-agent type Explore" in html
    assert Session.objects.filter(owner=alice).count() >= 3


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../evil.jsonl", "'..' in a member name: refused"),
        ("/tmp/evil.jsonl", "an absolute path in the archive: refused"),
        ("C:/evil.jsonl", "an absolute path in the archive: refused"),
    ],
)
def test_a_zip_with_a_path_out_of_its_folder_is_refused_whole(alice, alice_client, name, why):
    data = _zip(PROJECT, {name: '{"type": "user"}\n'})
    response = alice_client.post("/api/import", {"file": SimpleUploadedFile("s.zip", data)})
    assert response.status_code == 400
    assert why in response.json()["detail"]
    assert not Session.objects.exists()  # nothing half-stored
    assert not Path("/tmp/evil.jsonl").exists()


@pytest.mark.parametrize("link", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_a_tar_with_a_link_is_refused_whole(alice, alice_client, link):
    member = tarfile.TarInfo("db.sqlite3")
    member.type = link
    member.linkname = "/work/main/db.sqlite3"
    data = _tar(PROJECT, [(member, None)])
    response = alice_client.post("/api/import", {"file": SimpleUploadedFile("s.tar.gz", data)})
    assert response.status_code == 400
    assert "'db.sqlite3': a link: refused" in response.json()["detail"]
    assert not Session.objects.exists()


def test_a_zip_with_a_symlink_member_is_refused(alice, alice_client):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("state.db")
        info.external_attr = 0o120777 << 16  # a symbolic link, as Info-ZIP stores one
        archive.writestr(info, "/home/dev/.hermes/state.db")
    upload = SimpleUploadedFile("s.zip", buffer.getvalue())
    response = alice_client.post("/api/import", {"file": upload})
    assert response.status_code == 400
    assert "'state.db': a symbolic link: refused" in response.json()["detail"]


def test_an_archive_unpacking_past_the_limit_is_refused(alice, alice_client, settings):
    """A bomb: 2 KB compressed, far more unpacked; counted as written, whatever it claims."""
    settings.HERMES_MAX_UPLOAD_BYTES = 64 * 1024
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("big.jsonl", b" " * (1024 * 1024))
    data = buffer.getvalue()
    assert len(data) < 4096
    response = alice_client.post("/api/import", {"file": SimpleUploadedFile("s.zip", data)})
    assert response.status_code == 400
    assert "unpacks to more than 0 MB: refused" in response.json()["detail"]


def test_a_broken_archive_is_a_clear_error(alice, alice_client):
    data = _zip(PROJECT)[:300]
    response = alice_client.post("/api/import", {"file": SimpleUploadedFile("s.zip", data)})
    assert response.status_code == 400
    assert "s.zip: a broken zip archive" in response.json()["detail"]


def test_a_windows_path_in_a_stub_of_text_blocks_is_joined_by_its_base_name(alice, tmp_path):
    """Claude Code on Windows writes ``C:\\Users\\…\\tool-results\\<name>``; a result may hold
    the stub as a text block among others."""
    tree = _tree(tmp_path)
    main_path = tree / "-home-dev-shop" / f"{SID}.jsonl"
    records = [json.loads(line) for line in main_path.read_text().splitlines()]
    for record in records:
        content = (record.get("message") or {}).get("content")
        if isinstance(content, list) and content[0].get("tool_use_id") == "toolu_01LOG":
            stub = content[0]["content"].replace(
                f"/home/dev/.claude/projects/-home-dev-shop/{SID}/tool-results/",
                f"C:\\Users\\dev\\.claude\\projects\\C--shop\\{SID}\\tool-results\\",
            )
            content[0]["content"] = [{"type": "text", "text": stub}]
    main_path.write_text("".join(json.dumps(r) + "\n" for r in records))
    _import_dir(tree)
    main, _, _ = _sessions(alice)
    log = Message.objects.get(session=main, tool_call_id="toolu_01LOG")
    assert log.content == (FOLDER / "tool-results" / "toolu_01LOG.txt").read_text()
    assert log.extra["tool_result_file"] == "toolu_01LOG.txt"


def test_workflow_agents_and_other_files_of_the_folder(alice, tmp_path):
    """A workflow's agents live in ``subagents/workflows/<run>/`` (meta beside them); the
    run's own ``<session>/workflows/<run>.json`` is not a transcript: skipped and named, it
    fails nothing."""
    tree = _tree(tmp_path)
    folder = tree / "-home-dev-shop" / SID
    run = folder / "subagents" / "workflows" / "wf_1a2b"
    run.mkdir(parents=True)
    agent = (folder / "subagents" / "agent-a9f8e7d.jsonl").read_text()
    (run / "agent-a7c7c7c.jsonl").write_text(agent.replace("a9f8e7d", "a7c7c7c"))
    (run / "agent-a7c7c7c.meta.json").write_text(
        json.dumps({"agentType": "workflow-subagent", "workflowPhase": "implement"})
    )
    (folder / "workflows").mkdir()
    (folder / "workflows" / "wf_1a2b.json").write_text('{"name": "build", "phases": []}')
    out, err = _import_dir(tree)
    assert "error:" not in err
    assert f"skipped {folder / 'workflows' / 'wf_1a2b.json'}: not a transcript" in err
    main, _, _ = _sessions(alice)
    flow = Session.objects.get(public_id=f"{SID}.agent-a7c7c7c.{alice.pk}")
    assert flow.parent_id == main.pk
    assert flow.root_id == flow.pk
    assert flow.extra["sub_agent"] == {
        "agentType": "workflow-subagent",
        "workflowPhase": "implement",
    }
