"""A sub-agent exported as hermes-jsonl and imported again stays its parent's child, never a
rotation of it (issue #25: sub-agents showed as "chain of 2", the parent relabelled)."""

import json
import shutil
from pathlib import Path

import pytest

from hermes_web.exporters import hermes_session, iter_hermes_jsonl
from hermes_web.importers import import_directory, import_path
from hermes_web.models import Session

pytestmark = pytest.mark.django_db

PROJECT = Path(__file__).resolve().parent.parent / "fixtures" / "claude_code_folder"
SID = "3f2b8c1d-5e6a-4b7c-9d0e-1a2b3c4d5e6f"


def _exported(alice, tmp_path) -> Path:
    tree = tmp_path / "projects"
    shutil.copytree(PROJECT, tree)
    import_directory(tree, owner=alice)
    sessions = Session.objects.filter(owner=alice).order_by("pk")
    path = tmp_path / "export.jsonl"
    path.write_text("".join(iter_hermes_jsonl(sessions)), encoding="utf-8")
    return path


def test_the_export_marks_a_sub_agent_beside_its_parent(alice, tmp_path):
    path = _exported(alice, tmp_path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    agents = [line for line in lines if ".agent-" in line["id"]]
    assert agents
    for agent in agents:
        assert agent["parent_session_id"] == f"{SID}.{alice.pk}"
        assert isinstance(agent["sub_agent"], dict)
    (main,) = [line for line in lines if line["id"] == f"{SID}.{alice.pk}"]
    assert "sub_agent" not in main
    # the streamed export is byte for byte the object export
    one = Session.objects.get(public_id=agents[0]["id"])
    assert json.loads("".join(iter_hermes_jsonl([one]))) == hermes_session(one)


def test_a_sub_agent_imported_from_the_export_is_a_child_not_a_rotation(alice, bob, tmp_path):
    path = _exported(alice, tmp_path)
    report = import_path(path, owner=bob, fmt="auto")
    assert report.ok, report.refused
    main = Session.objects.get(owner=bob, public_id=f"{SID}.{alice.pk}.{bob.pk}")
    agents = Session.objects.filter(owner=bob, parent=main)
    assert agents.count() >= 2
    for agent in agents:
        assert "sub_agent" in agent.extra
        assert agent.root_id == agent.pk  # a tree of its own, not the parent's chain
        assert agent.compression_count == 0
    assert main.root_id == main.pk
    assert not Session.objects.filter(owner=bob, root=main).exclude(pk=main.pk).exists()
