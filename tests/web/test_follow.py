"""Following agent files as they grow: appended rows, new versions, torn lines, and the
source folder left byte for byte as it was (importers/follow.py)."""

import hashlib
from pathlib import Path

import pytest

from hermes_web.importers import import_path
from hermes_web.importers.follow import follow_file
from hermes_web.models import Compaction, FollowedFile, Message, Session

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CLAUDE = FIXTURES / "claude_code" / "7c1e9a52-3b0d-4f8e-a6c4-91d2e5f0b7a3.jsonl"
CODEX = FIXTURES / "codex_rollout_current.jsonl"


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def folder_bytes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


ROW = (
    "position",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "reasoning",
    "token_count",
    "active",
    "archived",
    "is_summary",
)


def rows_of(session: Session) -> list[tuple]:
    """Every stored row with the index of the compaction that archived it (ids differ)."""
    runs = {
        pk: i
        for i, pk in enumerate(
            Compaction.objects.filter(session=session).order_by("pk").values_list("pk", flat=True)
        )
    }
    out = []
    for row in Message.objects.filter(session=session).order_by("position"):
        extra = dict(row.extra or {})
        extra.pop("native_compaction", None)
        out.append((*(getattr(row, n) for n in ROW), runs.get(row.archived_by_id), extra))
    return out


def runs_of(session: Session) -> list[tuple]:
    return [
        (
            c.source,
            c.trigger,
            c.tokens_before,
            c.tokens_after,
            c.native_summary,
            c.report,
            c.snapshot_position,
        )
        for c in Compaction.objects.filter(session=session).order_by("pk")
    ]


def one_shot(path: Path, owner) -> Session:
    report = import_path(path, owner=owner, name=str(path))
    assert report.ok, report.refused
    (session,) = report.sessions
    return session


def test_a_growing_claude_code_file_appends_rows_and_gains_its_compaction(
    tmp_path, alice, django_user_model
):
    home = tmp_path / "projects" / "-home-dev-shop"
    home.mkdir(parents=True)
    live = home / CLAUDE.name
    lines = lines_of(CLAUDE)
    boundary = next(i for i, line in enumerate(lines) if b"compact_boundary" in line)
    live.write_bytes(b"".join(lines[:6]))
    first = follow_file(live, owner=alice)
    assert first.created, first.line()
    session = Session.objects.get(owner=alice)
    pk, public_id = session.pk, session.public_id
    before = Message.objects.filter(session=session).count()
    assert not Compaction.objects.filter(session=session).exists()

    with live.open("ab") as stream:
        stream.write(b"".join(lines[6 : boundary + 3]))
    grown = follow_file(live, owner=alice)
    assert public_id in grown.appended, grown.line()
    session = Session.objects.get(owner=alice)
    assert (session.pk, session.public_id) == (pk, public_id)  # the same session, appended
    assert Message.objects.filter(session=session).count() > before
    assert Compaction.objects.filter(session=session, source="claude-code").count() == 1

    with live.open("ab") as stream:
        stream.write(b"".join(lines[boundary + 3 :]))
    source_before = folder_bytes(tmp_path)
    follow_file(live, owner=alice)
    assert folder_bytes(tmp_path) == source_before  # only ever read

    bob = django_user_model.objects.create_user("bob2")
    reference = one_shot(live, bob)
    assert Session.objects.filter(owner=alice).count() == 1
    assert rows_of(Session.objects.get(owner=alice)) == rows_of(reference)
    assert runs_of(Session.objects.get(owner=alice)) == runs_of(reference)


def test_an_unchanged_file_is_not_read_again(tmp_path, alice):
    live = tmp_path / "rollout.jsonl"
    live.write_bytes(CODEX.read_bytes())
    assert follow_file(live, owner=alice).created
    assert follow_file(live, owner=alice) is None
    assert FollowedFile.objects.get(owner=alice).size == live.stat().st_size


def test_a_rewritten_file_becomes_a_new_version_never_merged(tmp_path, alice):
    live = tmp_path / "rollout.jsonl"
    data = CODEX.read_bytes()
    live.write_bytes(data)
    follow_file(live, owner=alice)
    original = Session.objects.get(owner=alice)
    rows = rows_of(original)
    # The same session id, an earlier user turn said otherwise: not a continuation.
    lines = lines_of(CODEX)
    index = next(
        i
        for i, line in enumerate(lines)
        if b'"user_message"' in line or b'"role":"user"' in line or b'"role": "user"' in line
    )
    target = lines[index]
    changed = (
        target.replace(b'"text":"', b'"text":"EDITED ', 1)
        .replace(b'"message":"', b'"message":"EDITED ', 1)
        .replace(b'"text": "', b'"text": "EDITED ', 1)
    )
    assert changed != target
    lines[index] = changed
    live.write_bytes(b"".join(lines))
    outcome = follow_file(live, owner=alice)
    assert outcome.versions == [f"{original.public_id}-v2"], outcome.line()
    assert rows_of(Session.objects.get(pk=original.pk)) == rows  # untouched
    assert Session.objects.get(public_id=f"{original.public_id}-v2").extra["follow"] == {
        "version_of": original.public_id
    }


def test_a_truncated_file_becomes_a_new_version(tmp_path, alice):
    live = tmp_path / "rollout.jsonl"
    lines = lines_of(CODEX)
    live.write_bytes(b"".join(lines))
    follow_file(live, owner=alice)
    original = Session.objects.get(owner=alice)
    live.write_bytes(b"".join(lines[: len(lines) - 4]))
    outcome = follow_file(live, owner=alice)
    assert outcome.versions == [f"{original.public_id}-v2"], outcome.line()
    assert Session.objects.filter(owner=alice).count() == 2


def test_a_torn_last_line_waits_for_the_rest(tmp_path, alice, django_user_model):
    live = tmp_path / "rollout.jsonl"
    lines = lines_of(CODEX)
    whole = b"".join(lines)
    cut = len(b"".join(lines[:-3])) + len(lines[-3]) // 2  # in the middle of a record
    live.write_bytes(whole[:cut])
    outcome = follow_file(live, owner=alice)
    assert any("still being written" in w for w in outcome.warnings), outcome.line()
    session = Session.objects.get(owner=alice)
    with live.open("ab") as stream:
        stream.write(whole[cut:])
    follow_file(live, owner=alice)
    bob = django_user_model.objects.create_user("bob3")
    assert rows_of(Session.objects.get(pk=session.pk)) == rows_of(one_shot(live, bob))


def test_a_session_imported_by_hand_is_adopted_and_appended_to(tmp_path, alice):
    live = tmp_path / "rollout.jsonl"
    lines = lines_of(CODEX)
    live.write_bytes(b"".join(lines[:-4]))
    imported = one_shot(live, alice)
    live.write_bytes(b"".join(lines))
    outcome = follow_file(live, owner=alice)
    assert imported.public_id in outcome.appended, outcome.line()
    assert Session.objects.filter(owner=alice).count() == 1
