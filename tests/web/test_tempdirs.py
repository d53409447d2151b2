"""Temporary upload and import folders live in one folder per process under DATA_DIR/tmp, and
what a killed process left there is removed at start and by a beat task (issue #39: a killed
import left its 58 MB upload and 8 MB unpack folder in /tmp for good)."""

import io
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import TemporaryUploadedFile

from hermes_web import tempdirs
from hermes_web.importers.archive import unpacked
from hermes_web.tasks import sweep_temp_dirs

ROOT = Path(__file__).resolve().parents[2]

# A process that takes a folder as the web and the worker do, spools an upload and unpacks
# an archive there, then waits to be killed in the middle of its import.
KILLED_IMPORT = """
import django, sys, time
django.setup()
from django.core.files.uploadedfile import TemporaryUploadedFile
from hermes_web import tempdirs
from hermes_web.importers.archive import unpacked
tempdirs.start_process()
upload = TemporaryUploadedFile("big.zip", "application/zip", 0, None)
upload.write(b"x" * 100_000)
upload.flush()
with unpacked(sys.argv[1], "tar.gz", "a.tar.gz") as root:
    print(upload.temporary_file_path(), root, flush=True)
    time.sleep(600)
"""


@pytest.fixture
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "var"
    settings.HERMES_TEMP_MAX_AGE_SECONDS = 3600
    before = tempfile.tempdir
    yield settings.DATA_DIR
    tempfile.tempdir = before


def archive(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        data = b'{"role": "user", "content": "hi"}\n'
        info = tarfile.TarInfo("session/a.jsonl")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_a_killed_imports_upload_and_unpack_folder_are_removed_by_the_sweep(data_dir, tmp_path):
    env = {
        **os.environ,
        "HERMES_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_IMPORT, str(archive(tmp_path / "a.tar.gz"))],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        upload, unpack = (Path(part) for part in proc.stdout.readline().split())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
    (folder,) = tempdirs.temp_root().glob(f"p{proc.pid}-*")
    # Both were in the killed process's own folder, and are still there after the kill.
    assert upload.parent == folder
    assert unpack.parent == folder
    assert upload.exists()
    assert (unpack / "session" / "a.jsonl").exists()
    assert sweep_temp_dirs() >= 1  # what beat runs every HERMES_TEMP_SWEEP_SECONDS
    assert not folder.exists()


def test_a_live_processs_folder_keeps_its_fresh_files_and_loses_old_ones(data_dir):
    folder = tempdirs.use_process_dir()
    fresh = folder / "upload-in-progress"
    fresh.write_bytes(b"x")
    old = folder / "left-behind"
    old.mkdir()
    (old / "file").write_bytes(b"x")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    stray = tempdirs.temp_root() / "stray-old-file"
    stray.write_bytes(b"x")
    os.utime(stray, (hours_ago, hours_ago))
    assert tempdirs.sweep() == 2
    assert fresh.exists()
    assert not old.exists()
    assert not stray.exists()


def test_uploads_and_unpacked_archives_use_the_process_folder(data_dir, tmp_path):
    folder = tempdirs.use_process_dir()
    assert folder.parent == data_dir / "tmp"
    upload = TemporaryUploadedFile("big.jsonl", "application/json", 0, None)
    try:
        assert Path(upload.temporary_file_path()).parent == folder
    finally:
        upload.close()
    with unpacked(archive(tmp_path / "a.tar.gz"), "tar.gz", "a.tar.gz") as root:
        assert root.parent == folder
    assert list(folder.iterdir()) == []  # both removed when they ended normally


FORKING = """
import django, os, tempfile
django.setup()
from hermes_web import tempdirs
tempdirs.start_process()
print(os.getpid(), tempfile.gettempdir(), flush=True)
pid = os.fork()
if pid == 0:  # as a gunicorn worker forked from a preloaded master
    print(os.getpid(), tempfile.gettempdir(), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_a_forked_child_uses_a_folder_of_its_own(data_dir):
    env = {
        **os.environ,
        "HERMES_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", FORKING],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (parent_pid, parent), (child_pid, child) = (line.split() for line in done.stdout.splitlines())
    assert Path(parent).name.startswith(f"p{parent_pid}-")
    assert Path(child).name.startswith(f"p{child_pid}-")
    assert Path(child).parent == Path(parent).parent == data_dir / "tmp"


def test_beat_sweeps_periodically():
    entry = django_settings.CELERY_BEAT_SCHEDULE["sweep-temp-dirs"]
    assert entry["task"] == "hermes_web.tasks.sweep_temp_dirs"
    assert entry["schedule"] <= django_settings.HERMES_TEMP_MAX_AGE_SECONDS
