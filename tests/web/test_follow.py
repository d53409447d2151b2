"""Following agent files as they grow: appended rows, new versions, torn lines, and the
source folder left byte for byte as it was (importers/follow.py)."""

import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


# --- the real watcher -----------------------------------------------------------------


def settle(follower, condition, seconds: float = 30.0) -> None:
    """Run the follower's loop (as ``manage.py follow`` does) until ``condition`` holds."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        follower.wake.wait(0.05)
        follower.wake.clear()
        follower.step()
        if condition():
            return
    raise AssertionError("the follower did not import the change")


@pytest.mark.parametrize("poll", [False, True], ids=["file-events", "polling"])
def test_the_watcher_follows_a_file_written_in_bursts(tmp_path, alice, django_user_model, poll):
    import time

    from hermes_web.importers.follow_watch import Follower

    projects = tmp_path / "projects"
    (projects / "-home-dev-shop").mkdir(parents=True)
    live = projects / "-home-dev-shop" / CLAUDE.name
    lines = lines_of(CLAUDE)
    boundary = next(i for i, line in enumerate(lines) if b"compact_boundary" in line)
    seen = []
    follower = Follower(
        [projects], alice, poll=poll, poll_seconds=0.2, debounce=0.2, report=seen.append
    )
    follower.start()
    try:

        def burst(part: list[bytes]) -> None:
            with live.open("ab") as stream:
                for line in part:  # record by record, as the agent writes
                    stream.write(line)
                    stream.flush()
                    time.sleep(0.01)

        burst(lines[:6])
        settle(follower, lambda: Session.objects.filter(owner=alice).exists())
        session = Session.objects.get(owner=alice)
        burst(lines[6 : boundary + 3])
        settle(follower, lambda: Compaction.objects.filter(session=session).exists())
        burst(lines[boundary + 3 :])
        snapshot = folder_bytes(tmp_path)
        final = live.stat().st_size
        settle(follower, lambda: FollowedFile.objects.get(owner=alice).size == final)
    finally:
        follower.stop()
    assert folder_bytes(tmp_path) == snapshot  # the source folder is only read
    assert Session.objects.filter(owner=alice).count() == 1
    assert Session.objects.get(owner=alice).pk == session.pk
    reference = one_shot(live, django_user_model.objects.create_user("ref"))
    assert rows_of(session) == rows_of(reference)
    assert runs_of(session) == runs_of(reference)
    assert len(seen) < len(lines)  # bursts were imported together, not line by line


def test_follow_command_once_imports_the_folder(tmp_path, alice):
    from django.core.management import CommandError, call_command

    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "rollout.jsonl").write_bytes(CODEX.read_bytes())
    (tmp_path / "sessions" / "tool-results").mkdir()
    (tmp_path / "sessions" / "tool-results" / "x.json").write_text("{}")
    call_command("follow", str(tmp_path / "sessions"), user="alice", once=True)
    assert Session.objects.filter(owner=alice).count() == 1
    call_command("follow", str(tmp_path / "sessions"), user="alice", once=True)
    assert Session.objects.filter(owner=alice).count() == 1
    with pytest.raises(CommandError, match="no user named"):
        call_command("follow", str(tmp_path), user="nobody", once=True)
    with pytest.raises(CommandError, match="not a folder"):
        call_command("follow", str(tmp_path / "missing"), user="alice", once=True)


# --- property: followed in random chunks == one-shot import of the final file ---------


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    source=st.sampled_from([CLAUDE, CODEX]),
    cuts=st.lists(st.floats(min_value=0, max_value=1, exclude_max=True), max_size=6),
)
def test_a_session_followed_in_random_chunks_ends_as_a_one_shot_import(
    tmp_path_factory, django_user_model, source, cuts
):
    import uuid

    data = source.read_bytes()
    folder = tmp_path_factory.mktemp("live")
    live = folder / source.name
    follower = django_user_model.objects.create_user(f"f-{uuid.uuid4().hex[:8]}")
    for cut in sorted({int(c * len(data)) for c in cuts} | {len(data)}):
        live.write_bytes(data[:cut]) if not live.exists() else None
        with live.open("r+b") as stream:
            stream.seek(0, 2)
            stream.write(data[stream.tell() : cut])
        follow_file(live, owner=follower)
    reference = one_shot(live, django_user_model.objects.create_user(f"r-{uuid.uuid4().hex[:8]}"))
    (followed,) = Session.objects.filter(owner=follower)
    assert rows_of(followed) == rows_of(reference)
    assert runs_of(followed) == runs_of(reference)
    assert (followed.title, followed.model, followed.extra) == (
        reference.title,
        reference.model,
        reference.extra,
    )


# --- a SQLite agent: its writes land in the -wal --------------------------------------


def test_a_crush_database_written_through_its_wal_appends_to_its_sessions(tmp_path, alice):
    import json as jsonlib

    from hermes_web.importers.follow import followed_path
    from tests.web.test_import_crush import T0, build, text

    home = tmp_path / ".crush"
    home.mkdir()
    db = build(home / "crush.db", wal=True)  # left open, as Crush keeps it
    try:
        first = follow_file(home / "crush.db", owner=alice)
        assert len(first.created) == 2, first.line()  # the session and its sub-agent
        parent = Session.objects.get(public_id=f"s1.{alice.pk}")
        rows = Message.objects.filter(session=parent).count()
        assert followed_path(home / "crush.db-wal") == home / "crush.db"
        db.execute(
            "INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at) "
            "VALUES ('m99', 's1', 'user', ?, 'gpt-4.1', ?, ?)",
            (jsonlib.dumps([text("and the colours?")]), T0 + 99, T0 + 99),
        )
        db.commit()
        before = folder_bytes(home)
        grown = follow_file(home / "crush.db", owner=alice)
        assert folder_bytes(home) == before  # read from a private copy
    finally:
        db.close()
    assert grown.appended == {parent.public_id: 1}, grown.line()
    assert not grown.versions
    assert Session.objects.filter(owner=alice).count() == 2
    last = Message.objects.filter(session=parent).order_by("-position").first()
    assert Message.objects.filter(session=parent).count() == rows + 1
    assert last.content == "and the colours?"


def test_side_files_are_never_imported_alone(tmp_path):
    from hermes_web.importers.follow import followed_path

    kimi = tmp_path / "sessions" / "h" / "s"
    kimi.mkdir(parents=True)
    (kimi / "context.jsonl").write_text("")
    (kimi / "wire.jsonl").write_text("")
    assert followed_path(kimi / "wire.jsonl") is None
    assert followed_path(kimi / "context.jsonl") == kimi / "context.jsonl"
    assert followed_path(tmp_path / "x" / "tool-results" / "a.json") is None
    assert followed_path(tmp_path / "notes.md") is None


def test_a_new_version_goes_on_growing_and_the_first_stays_as_it_was(tmp_path, alice):
    live = tmp_path / "rollout.jsonl"
    lines = lines_of(CODEX)
    live.write_bytes(b"".join(lines))
    follow_file(live, owner=alice)
    original = Session.objects.get(owner=alice)
    rows = rows_of(original)
    live.write_bytes(b"".join(lines[:-6]))  # shrank: a new version
    assert follow_file(live, owner=alice).versions == [f"{original.public_id}-v2"]
    with live.open("ab") as stream:
        stream.write(b"".join(lines[-6:]))
    grown = follow_file(live, owner=alice)
    assert list(grown.appended) == [f"{original.public_id}-v2"], grown.line()
    assert not grown.versions
    assert rows_of(Session.objects.get(pk=original.pk)) == rows
    assert Session.objects.filter(owner=alice).count() == 2


def test_a_file_that_is_no_session_is_reported_once_and_nothing_is_stored(tmp_path, alice):
    junk = tmp_path / "settings.json"
    junk.write_text('{"theme": "dark"}')
    outcome = follow_file(junk, owner=alice)
    assert outcome.problems, outcome.line()
    assert "Traceback" not in outcome.line()
    assert not Session.objects.exists()
    assert follow_file(junk, owner=alice) is None  # not read again until it changes
    assert FollowedFile.objects.get(owner=alice).last_status.startswith("not imported")


def test_a_session_the_file_no_longer_holds_is_kept_and_said(tmp_path, alice):
    live = tmp_path / "rollout.jsonl"
    data = CODEX.read_bytes()
    live.write_bytes(data)
    follow_file(live, owner=alice)
    first = Session.objects.get(owner=alice)
    # The same file now holds another session (another id): the first is not deleted.
    live.write_bytes(
        data.replace(
            b"019c8a4c-ed82-79a1-aa28-7738fc5ab61a", b"019c8a4c-0000-0000-0000-000000000001"
        )
    )
    outcome = follow_file(live, owner=alice)
    assert outcome.created == [f"019c8a4c-0000-0000-0000-000000000001.{alice.pk}"]
    assert any(first.public_id in w and "no longer in the file" in w for w in outcome.warnings)
    assert Session.objects.filter(pk=first.pk, public_id=first.public_id).exists()


def test_a_burst_of_writes_is_imported_once_it_settles(tmp_path, alice):
    import time

    from hermes_web.importers.follow_watch import Follower

    live = tmp_path / "rollout.jsonl"
    live.write_bytes(CODEX.read_bytes())
    seen = []
    follower = Follower([tmp_path], alice, debounce=0.3, max_wait=2.0, report=seen.append)
    for _ in range(5):  # events of one burst (as the observer's thread notes them)
        follower.note(live)
    now = time.monotonic()
    assert follower.step(now=now) is not None  # still settling: nothing imported
    assert not Session.objects.exists()
    assert follower.step(now=now + 0.5) is None  # quiet for the debounce: one import
    assert len(seen) == 1
    assert Session.objects.filter(owner=alice).count() == 1
