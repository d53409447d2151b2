"""Gemini CLI sessions of its A2A server (Cloud Shell's agent mode, 2026) as real
``~/.gemini/tmp/<project>/chats/session-<time>-a2a-serv.jsonl`` files hold them (issue #25,
two public home folders, 40-odd files): every file has the sessionId ``a2a-server``, the
history comes as a ``$set`` of ``messages`` whose first user message is the CLI's
``<session_context>`` (working directory, file tree, loaded GEMINI.md), and many files are
a metadata line alone. Each file is its own session (not a duplicate of the first), the
context is a meta row and never the title, and a file with nothing typed is an empty
session, left out, not a failure."""

import json

import pytest

from hermes_web.importers import import_directory
from hermes_web.models import Message
from tests.web.agent_import_helpers import wrapper_free

pytestmark = pytest.mark.django_db
CONTEXT = (
    "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
    "Today's date is Friday, June 26, 2026.\nMy operating system is: linux\n"
    "- **Workspace Directories:**\n  - /home/dev\n\n/home/dev/\n├───deploy.sh\n└───main.tf\n"
    "<loaded_context>\n--- Context from: /home/dev/GEMINI.md ---\nUse terraform.\n"
    "</loaded_context>\n</session_context>"
)


def _meta(start: str) -> dict:
    return {
        "sessionId": "a2a-server",
        "projectHash": "e34543de7c4f0e1a61236982efa9cd9fff239a78299e60831ba10c4023e3b922",
        "startTime": start,
        "lastUpdated": start,
        "kind": "main",
    }


def _message(n: int, kind: str, text: str, start: str) -> dict:
    return {"id": f"{n:032x}", "timestamp": start, "type": kind, "content": [{"text": text}]}


def _write(path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _chats(tmp_path):
    chats = tmp_path / ".gemini" / "tmp" / "dev" / "chats"
    chats.mkdir(parents=True)
    for minute, ask in (("04-18", "list the storage buckets"), ("05-02", "plan the terraform")):
        start = f"2026-06-26T{minute.replace('-', ':')}:22.502Z"
        history = [
            _message(1, "user", CONTEXT, start),
            _message(2, "user", ask, start),
            _message(3, "gemini", f"Here is how to {ask}.", start),
        ]
        _write(
            chats / f"session-2026-06-26T{minute}-a2a-serv.jsonl",
            [_meta(start), {"$set": {"messages": history, "lastUpdated": start}}],
        )
    start = "2026-06-26T04:40:01.000Z"  # opened and left: the metadata line alone
    _write(chats / "session-2026-06-26T04-40-a2a-serv.jsonl", [_meta(start)])
    start = "2026-06-26T05:30:09.000Z"  # the context and nothing typed after it
    _write(
        chats / "session-2026-06-26T05-30-a2a-serv.jsonl",
        [_meta(start), {"$set": {"messages": [_message(1, "user", CONTEXT, start)]}}],
    )
    return tmp_path / ".gemini" / "tmp"


def test_each_a2a_file_is_its_own_session_and_nothing_fails(alice, tmp_path):
    reports, _ = import_directory(_chats(tmp_path), owner=alice)
    assert [str(p) for r in reports for p in r.refused] == []
    sessions = [s for r in reports for s in r.sessions]
    assert sorted(s.title for s in sessions) == ["list the storage buckets", "plan the terraform"]
    assert len({s.extra["source_id"] for s in sessions}) == 2
    assert len([e for r in reports for e in r.empties]) == 2


def test_the_session_context_is_a_meta_row(alice, tmp_path):
    reports, _ = import_directory(_chats(tmp_path), owner=alice)
    sessions = [s for r in reports for s in r.sessions]
    wrapper_free(sessions, ("<session_context>",))
    for session in sessions:
        context = Message.objects.get(session=session, extra__meta="context")
        assert "/home/dev/GEMINI.md" in context.content
        assert not context.active
