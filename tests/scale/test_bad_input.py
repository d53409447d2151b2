"""Proof 7: malformed and hostile import files, through the CLI and through HTTP uploads to gunicorn.

Every file is refused with a clear error (a 4xx whose detail names the file and the problem,
or a non-zero exit whose message does), nothing of it is stored, and the web server and the
Celery worker are still up afterwards.
"""

import json
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hermes_web.models import ApiKey, Message, Session, WorkerPing
from tests.scale.harness import PYTHON, ROOT, base_env, wait_until
from tests.scale.hostile_files import Case, cases, valid_case
from tools.localservices import free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PROBES = [
    Path("/tmp/hermes-traversal-probe.jsonl"),
    Path("/tmp/hermes-traversal-probe.json"),
    Path("/etc/hermes-traversal-probe.jsonl"),
    Path("/tmp/hermes-valid-control.json"),
    ROOT.parent / "hermes-traversal-probe.json",
]


# Run one per process as well (plus every case with a forced --format): one of each kind.
CLI_SAMPLE = {
    "empty-jsonl",
    "truncated-json-list",
    "unknown-role",
    "tool-result-without-call",
    "20mb-single-message",
    "deep-nesting-list",
    "invalid-utf8-jsonl",
    "escaped-nul-in-content",
    "lone-surrogate",
    "zip-bomb-renamed",
    "sqlite-other-schema",
    "binary-garbage",
    "dotfile-name",
}


def _counts() -> tuple[int, int]:
    return Session.objects.count(), Message.objects.count()


def _multipart(case: Case) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="format"\r\n\r\n{case.fmt}\r\n'.encode(),
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{case.filename}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n".encode(),
        case.data,
        f"\r\n--{boundary}--\r\n".encode(),
    ]
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _upload(server, key: str, case: Case) -> tuple[int, dict]:
    body, content_type = _multipart(case)
    status, raw = server.request(
        "POST",
        "/api/import",
        body=body,
        timeout=120,
        headers={"Authorization": f"Bearer {key}", "Content-Type": content_type},
    )
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, {"detail": f"<not JSON: {raw[:200]!r}>"}


def _cli(path: Path, username: str, fmt: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "manage.py", "import_sessions", str(path), "--user", username, "--format", fmt],
        cwd=ROOT,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )


# 80 files through both doors, a 70 MB one among them: past the default 300 s on a busy box.
@pytest.mark.timeout(900)
def test_hostile_import_files_are_refused_cleanly_by_api_and_cli(spawn, owner, tmp_path):
    for probe in PROBES:
        assert not probe.exists()
    all_cases = cases()
    assert len(all_cases) >= 50
    _, key = ApiKey.issue(owner=owner, name="sweep")
    server = spawn.web(free_port(), workers=2, threads=2)
    [worker] = spawn.workers(1, queues="default,chat,compaction")
    boots_before = server.log().count("Booting worker")

    # --- the upload API, one file at a time, counts checked around each ---------------
    results = []
    started = time.monotonic()
    for case in all_cases:
        before = _counts()
        one = time.monotonic()
        status, body = _upload(server, key, case)
        body["_seconds"] = time.monotonic() - one
        after = _counts()
        results.append((case, status, body, before == after))
    api_seconds = time.monotonic() - started

    print(f"\n[bad input] {len(all_cases)} hostile files, upload API ({api_seconds:.1f}s):")
    for case, status, body, _ in results:
        print(f"  {status} {body['_seconds']:5.1f}s {case.key:<30} {str(body.get('detail'))[:110]}")
    failures = []
    for case, status, body, unchanged in results:
        detail = str(body.get("detail") or "")
        if not 400 <= status < 500:
            failures.append(f"{case.key}: status {status} {detail[:200]}")
        elif not detail or detail.startswith("<not JSON"):
            failures.append(f"{case.key}: no error detail ({body})")
        elif status == 400 and case.disk_name not in detail:
            failures.append(
                f"{case.key}: detail does not name the file {case.disk_name!r}: {detail[:200]}"
            )
        if not unchanged:
            failures.append(f"{case.key}: something was stored")
        if status == 400 and (
            "/" in str(body.get("file", "")) or "\\" in str(body.get("file", ""))
        ):
            failures.append(
                f"{case.key}: the report kept a path in the file name: {body.get('file')}"
            )
    assert not failures, "\n".join(failures)

    # A good file under a traversal name still imports, under its plain name only.
    control = valid_case()
    before = _counts()
    status, body = _upload(server, key, control)
    assert status == 200, body
    assert body["file"] == "hermes-valid-control.json"
    assert len(body["imported"]) == 1
    assert _counts() == (before[0] + 1, before[1] + 3)

    # --- the CLI: the whole folder in one run, then a sample one file per process ------
    folder = tmp_path / "hostile"
    folder.mkdir()
    paths = []
    for case in all_cases:
        # Files that are bad only under a forced --format stay out of the (auto) folder run.
        path = (folder if case.fmt == "auto" else tmp_path / "forced") / case.key / case.disk_name
        path.parent.mkdir(parents=True)
        path.write_bytes(case.data)
        paths.append((case, path))
    before = _counts()
    started = time.monotonic()
    whole = _cli(folder, owner.username, "auto")
    sample = [item for item in paths if item[0].fmt != "auto" or item[0].key in CLI_SAMPLE]
    with ThreadPoolExecutor(3) as pool:
        runs = list(
            pool.map(lambda item: (item[0], _cli(item[1], owner.username, item[0].fmt)), sample)
        )
    cli_seconds = time.monotonic() - started
    stored = [
        line
        for run in [whole, *(r for _, r in runs)]
        for line in run.stdout.splitlines()
        if "imported" in line
    ]
    assert _counts() == before, stored  # nothing of any refused file was stored

    assert whole.returncode != 0
    assert "Traceback" not in whole.stderr, whole.stderr[-3000:]
    # The folder run reads the files the command picks up (.json, .jsonl, .db, .sqlite*).
    picked = [
        (case, path)
        for case, path in paths
        if case.fmt == "auto" and path.suffix in (".json", ".jsonl", ".db")
    ]
    unnamed = [case.key for case, path in picked if f"error: {path}" not in whole.stderr]
    assert not unnamed, f"no error line for {unnamed}:\n{whole.stderr[-3000:]}"
    print(
        f"[bad input] `manage.py import_sessions <folder>`: exit {whole.returncode}, one error line naming "
        f"each of the {len(picked)} files; then {len(sample)} files one per process ({cli_seconds:.1f}s in all):"
    )
    cli_failures = []
    for case, run in runs:
        message = (run.stderr.strip().splitlines() or ["<no message>"])[0].replace(
            f"{tmp_path}/", ""
        )
        print(f"  exit {run.returncode} {case.key:<30} {message[:110]}")
        if run.returncode == 0:
            cli_failures.append(f"{case.key}: exit 0\n{run.stdout[-500:]}")
        if "Traceback" in run.stderr:
            cli_failures.append(f"{case.key}: traceback\n{run.stderr[-1500:]}")
        elif case.disk_name not in run.stderr:
            cli_failures.append(f"{case.key}: message does not name the file: {run.stderr[-300:]}")
    assert not cli_failures, "\n".join(cli_failures)

    # An unknown --format is refused before anything is read.
    wrong = _cli(paths[0][1], owner.username, "pdf")
    assert wrong.returncode != 0
    assert "pdf" in wrong.stderr
    status, body = _upload(server, key, Case("bad-format", b"[]", "x.json", "pdf"))
    assert status == 422
    assert "format" in body["detail"]

    # --- everything still runs ----------------------------------------------------------
    for probe in PROBES:
        assert not probe.exists(), probe
    health = server.healthz()
    assert health is not None
    assert health["_status"] == 200, health
    assert server.log().count("Booting worker") == boots_before, server.log()[
        -3000:
    ]  # no web worker died
    assert "WORKER TIMEOUT" not in server.log()
    from hermes_web.tasks import ping_worker

    ping = WorkerPing.objects.create()
    ping_worker.delay(ping.pk)
    wait_until(
        lambda: WorkerPing.objects.get(pk=ping.pk).processed_at,
        30,
        "the worker to answer a ping",
        workers=[worker],
    )
    assert worker.alive()
    print(
        f"[bad input] all {len(all_cases)} refused by both (4xx with detail / non-zero exit naming the file); "
        f"nothing stored; healthz {health['_status']}, web workers never restarted, Celery worker answered"
    )
