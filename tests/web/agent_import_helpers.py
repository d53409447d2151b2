"""Shared checks of the other agents' importer tests (Gemini CLI, Aider, OpenHands, Cline,
Continue): parse a fixture as the import does, import it for real, and check what every
real file must satisfy (tool calls paired, the source file unchanged, nothing stored on a
refusal)."""

import hashlib
from pathlib import Path

from hermes_web.importers import detect_format, import_path
from hermes_web.importers.base import ImportProblem, ParsedSession, pair_tool_results
from hermes_web.importers.checks import check_session
from hermes_web.models import Message, Session

AGENTS = Path(__file__).resolve().parent.parent / "fixtures" / "agents"


def parsed(parse, path: Path) -> list[ParsedSession]:
    """The sessions ``parse`` reads from ``path``, paired and checked as the import does."""
    with open(path, "rb") as stream:
        sessions = list(parse(stream, path.name))
    for session in sessions:
        assert isinstance(session, ParsedSession), session
        if session.stream is not None:  # a streamed (spooled) session: its messages in order
            session.messages, session.stream = list(session.stream), None
        pair_tool_results(session)
        check_session(session, path.name)
    return sessions


def pairs_ok(messages) -> None:
    """Every active assistant call is followed directly by its results, in call order."""
    rows = [m for m in messages if m.active and not _meta(m)]
    for i, message in enumerate(rows):
        calls = [c["id"] for c in message.tool_calls or ()]
        following = []
        for later in rows[i + 1 :]:
            if later.role != "tool":
                break
            following.append(later.tool_call_id)
        if message.role == "assistant":
            assert following == calls, (i, calls, following)


def _meta(message) -> str:
    return getattr(message, "meta", "") or (message.extra or {}).get("meta", "")


def wrapper_free(sessions, openings: tuple[str, ...]) -> None:
    """No stored active user turn starts with one of the agent's wrapper openings."""
    for session in sessions:
        for row in Message.objects.filter(session=session, role="user", active=True):
            text = row.content if isinstance(row.content, str) else str(row.content)
            if not _meta(row):
                assert not text.lstrip().startswith(openings), text[:80]


def imported(path: Path, owner, fmt: str) -> list[Session]:
    """Import ``path`` with ``--format auto`` (checking it is detected as ``fmt``) and
    return its sessions; the file is byte-identical afterwards."""
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert detect_format(path, path.name) == fmt
    report = import_path(path, owner=owner)
    assert report.refused == [], [str(e) for e in report.refused]
    assert report.format == fmt
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    for session in report.sessions:
        pairs_ok(Message.objects.filter(session=session).order_by("position"))
    return report.sessions


def refused(path: Path, owner, fmt: str = "auto") -> ImportProblem:
    """The one problem importing ``path`` gives; nothing of it is stored."""
    sessions, messages = Session.objects.count(), Message.objects.count()
    report = import_path(path, owner=owner, fmt=fmt)
    assert report.sessions == []
    assert len(report.errors) == 1, [str(e) for e in report.errors]
    assert (Session.objects.count(), Message.objects.count()) == (sessions, messages)
    return report.errors[0]
