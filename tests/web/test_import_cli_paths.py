"""Paths given to ``import_sessions`` that are not plain files (issue #28, item 10): a FIFO,
socket or device is refused at once, never opened (opening a FIFO blocks until a writer
comes); directory mode never follows a symbolic link (one pointing at the app's own
database was opened): it is skipped and named."""

import os
import socket
import threading
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from hermes_web.importers import import_path
from hermes_web.models import Session
from tests.web.hermes_state_db import add_session, empty_state_db

# The command runs in a thread (a hang must fail the test, not stall it): it needs
# committed rows, so these tests do not run inside a rolled-back transaction.
pytestmark = pytest.mark.django_db(transaction=True)

HANG_SECONDS = 10


def _run(*args, **kwargs):
    """call_command in a thread: (finished in time, the error raised, stdout, stderr)."""
    out, err = StringIO(), StringIO()
    outcome: dict = {}

    def run():
        try:
            call_command(*args, stdout=out, stderr=err, **kwargs)
        except BaseException as error:  # handed back to the test
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(HANG_SECONDS)
    return not worker.is_alive(), outcome.get("error"), out.getvalue(), err.getvalue()


def _unblock(fifo):
    """Open the FIFO for writing without blocking, so a reader stuck in open() returns."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # no reader: nothing is stuck
        return
    os.close(fd)


def test_a_fifo_as_the_path_is_refused_at_once(alice, tmp_path):
    fifo = tmp_path / "state.db"
    os.mkfifo(fifo)
    try:
        finished, error, _, _ = _run("import_sessions", str(fifo), user="alice")
    finally:
        _unblock(fifo)
    assert finished, "import_sessions blocked on a FIFO"
    assert isinstance(error, CommandError)
    assert "FIFO" in str(error)
    assert "refused" in str(error)


def test_import_path_refuses_a_fifo_without_opening_it(alice, tmp_path):
    fifo = tmp_path / "chat.jsonl"
    os.mkfifo(fifo)
    result: dict = {}
    worker = threading.Thread(
        target=lambda: result.update(report=import_path(fifo, owner=alice)), daemon=True
    )
    worker.start()
    worker.join(HANG_SECONDS)
    _unblock(fifo)
    assert not worker.is_alive(), "import_path blocked on a FIFO"
    (problem,) = result["report"].errors
    assert "a FIFO (named pipe), not a regular file: refused" in problem.problem


def test_a_socket_as_the_path_is_refused(alice, tmp_path):
    path = tmp_path / "s.jsonl"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    try:
        with pytest.raises(CommandError, match="a socket, not a file or directory"):
            call_command("import_sessions", str(path), user="alice", stdout=StringIO())
    finally:
        server.close()


def test_a_device_as_the_path_is_refused(alice):
    with pytest.raises(CommandError, match="a character device"):
        call_command("import_sessions", "/dev/zero", user="alice", stdout=StringIO())


def test_directory_mode_skips_symlinks_and_special_files_and_names_them(alice, tmp_path):
    """A link to a live database (here a valid state.db outside the folder) is not opened:
    its session is not imported; the link, a linked folder and a FIFO are named as skipped."""
    live = tmp_path / "elsewhere" / "db.sqlite3"
    live.parent.mkdir()
    db = empty_state_db(live, fts=False)
    add_session(db, "live-one", None, 1.0, [("user", "from the live database")])
    db.commit()
    db.close()
    folder = tmp_path / "exports"
    folder.mkdir()
    ok = folder / "state.db"
    db = empty_state_db(ok, fts=False)
    add_session(db, "mine", None, 2.0, [("user", "mine"), ("assistant", "yes")])
    db.commit()
    db.close()
    (folder / "app.sqlite3").symlink_to(live)
    (folder / "linked").symlink_to(live.parent, target_is_directory=True)
    os.mkfifo(folder / "pipe.jsonl")
    try:
        finished, error, out, err = _run("import_sessions", str(folder), user="alice")
    finally:
        _unblock(folder / "pipe.jsonl")
    assert finished, "directory mode blocked"
    assert error is None, err
    assert list(Session.objects.values_list("extra__source_id", flat=True)) == ["mine"]
    assert f"skipped {folder / 'app.sqlite3'}: a symbolic link (not followed)" in err
    assert f"skipped {folder / 'linked'}: a symbolic link (not followed)" in err
    assert f"skipped {folder / 'pipe.jsonl'}: a FIFO (named pipe), not a regular file" in err
