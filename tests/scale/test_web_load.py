"""Proof 8: 50 concurrent clients against gunicorn on loopback (bounded in requests and time).

The clients (threads with http.client, one keep-alive connection each) hit the conversation
list, a 1k-message conversation page, the compaction inspector of a 1k-message run and the
JSON API's message list. Errors must be 0; latency percentiles (p50/p95/p99 per page, and
each client's first request on its own) and the resident memory of every gunicorn process
(idle before the load, after it) are printed, with the targets of issue #28 (p95 300 ms,
p99 1 s, 200 MB per idle process) marked PASS or MISS. Latency is not asserted: with clients
that wait for their answers it is clients ÷ throughput, and the throughput of a shared 2-core
machine is a measurement, not a property of the code. What the code decides is asserted: an
idle web process's RSS and the gunicorn CPU time a request costs.
"""

import http.client
import json
import os
import threading
import time
from pathlib import Path

import pytest
from django.test import Client

from hermes_web.llm_models import DEMO_MODEL
from hermes_web.models import ApiKey
from hermes_web.services.compactions import request_compaction
from tests.scale.harness import build_session, percentile
from tools.localservices import free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CLIENTS = int(os.environ.get("HERMES_LOAD_CLIENTS", "50"))
REQUESTS_PER_CLIENT = int(os.environ.get("HERMES_LOAD_REQUESTS", "16"))
TIME_LIMIT = 120.0
P95_TARGET_MS = 300
P99_TARGET_MS = 1000
IDLE_RSS_TARGET_MB = 200
# Gunicorn CPU per request, averaged over the four pages (11 ms measured with the machine at a
# load average of 10); 2 cores serving 50 waiting clients at p95 300 ms need ~170 req/s, so
# about 12 ms a request all told. The bound catches a page that starts rendering every row.
CPU_PER_REQUEST_BOUND_MS = 30
# As `make run-scaled` runs it by default: 4 single-threaded (sync) gunicorn processes.
WEB_PROCESSES = int(os.environ.get("HERMES_LOAD_WEB_PROCESSES", "4"))
WEB_THREADS = int(os.environ.get("HERMES_LOAD_WEB_THREADS", "1"))


def rss_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


def pss_mb(pid: int) -> int:
    """Proportional set size: shared pages (a --preload master's) split between sharers."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) // 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """``root`` and its live descendants (gunicorn's master and its workers)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def rss_line(label: str, pids: list[int]) -> str:
    figures = ", ".join(f"{rss_mb(pid)} ({pss_mb(pid)})" for pid in pids)
    return f"  RSS {label:<14} (MB, PSS in brackets; parent, then children): {figures}"


def test_fifty_clients_on_pages_of_1k_message_conversations(spawn, owner):
    sessions = [build_session(owner, 1000, seed=80 + i, title=f"load {i}") for i in range(8)]
    runs = [
        request_compaction(session=s, trigger="manual", summarizer="deterministic", run_now=True)
        for s in sessions[:2]
    ]
    assert all(r.status == "committed" for r in runs), [(r.status, r.error) for r in runs]
    _, key = ApiKey.issue(owner=owner, name="load")
    browser = Client()
    browser.force_login(owner)  # a database-backed session the gunicorn workers can read
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    later = sessions[2]

    targets = {
        "conversation list": ("/conversations/", {"Cookie": cookie}),
        "conversation 1k msgs": (f"/conversations/{later.public_id}/", {"Cookie": cookie}),
        "compaction inspector": (f"/compactions/{runs[0].public_id}/", {"Cookie": cookie}),
        "api messages": (
            f"/api/sessions/{later.public_id}/messages",
            {"Authorization": f"Bearer {key}"},
        ),
    }
    # Processes that serve pages only, as the 200 MB idle target is about: litellm (~150 MB of
    # RSS, shared from the --preload master by default) is left out and imported by the first
    # /v1 request below.
    server = spawn.web(
        free_port(),
        workers=WEB_PROCESSES,
        threads=WEB_THREADS,
        extra_env={"HERMES_WEB_PRELOAD_LITELLM": "0"},
    )
    baseline: dict[str, float] = {}
    for name, (path, headers) in targets.items():  # check the routes, then time them one at a time
        status, body = server.request("GET", path, headers=headers)
        assert status == 200, (name, status, body[:300])
        single = []
        for _ in range(5):
            started = time.perf_counter()
            server.request("GET", path, headers=headers)
            single.append(time.perf_counter() - started)
        baseline[name] = percentile(single, 50)
    time.sleep(2)
    processes = process_tree(server.pid)
    idle_rss = {pid: rss_mb(pid) for pid in processes}

    names = list(targets)
    samples: dict[str, list[float]] = {name: [] for name in names}
    first: dict[str, list[float]] = {name: [] for name in names}  # each client's first request
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + TIME_LIMIT
    barrier = threading.Barrier(CLIENTS)

    def client(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        barrier.wait(30)
        for i in range(REQUESTS_PER_CLIENT):
            if time.monotonic() > deadline:
                break
            name = names[(index + i) % len(names)]
            path, headers = targets[name]
            started = time.perf_counter()
            try:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                response.read()
                status = response.status
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
            except (OSError, http.client.HTTPException) as error:
                conn.close()
                status = f"{type(error).__name__}: {error}"
            elapsed = time.perf_counter() - started
            with lock:
                if status == 200:
                    samples[name].append(elapsed)
                    if i == 0:
                        first[name].append(elapsed)
                else:
                    errors.append(f"{name}: {status}")
        conn.close()

    server_cpu = {pid: cpu_seconds(pid) for pid in processes}
    client_cpu = time.process_time()
    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIME_LIMIT + 60)
    wall = time.monotonic() - started
    server_cpu_s = sum(cpu_seconds(pid) - before for pid, before in server_cpu.items())
    client_cpu_s = time.process_time() - client_cpu
    assert not any(t.is_alive() for t in threads)

    total = sum(len(v) for v in samples.values())
    every = [s for v in samples.values() for s in v]
    p95 = percentile(every, 95) * 1000
    print(
        f"\n[web load] {CLIENTS} clients x {REQUESTS_PER_CLIENT} requests against gunicorn ({WEB_PROCESSES} processes x {WEB_THREADS} threads) "
        f"in {wall:.1f}s: {total} ok, {len(errors)} errors, {total / wall:.1f} req/s"
    )
    # With clients that each wait for their answer, latency ≈ clients ÷ throughput, and the
    # throughput is the cores' time ÷ what a request costs: gunicorn's CPU per request (the
    # code's cost), this process's (the 50 clients), and what was left of the machine.
    print(
        f"  CPU per request: gunicorn {1000 * server_cpu_s / max(total, 1):.1f} ms, "
        f"clients {1000 * client_cpu_s / max(total, 1):.1f} ms; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    for name in names:
        values = samples[name]
        if values:
            print(
                f"  {name:<22} n={len(values):4d}  p50 {percentile(values, 50) * 1000:6.0f} ms  "
                f"p95 {percentile(values, 95) * 1000:6.0f} ms  p99 {percentile(values, 99) * 1000:6.0f} ms  "
                f"(alone: {baseline[name] * 1000:.0f} ms)"
            )
    p99 = percentile(every, 99) * 1000
    print(
        f"  {'all':<22} n={total:4d}  p50 {percentile(every, 50) * 1000:6.0f} ms  p95 {p95:6.0f} ms  "
        f"p99 {p99:6.0f} ms  -> p95 target {P95_TARGET_MS} ms: "
        f"{'PASS' if p95 <= P95_TARGET_MS else 'MISS'}, p99 target {P99_TARGET_MS} ms: "
        f"{'PASS' if p99 <= P99_TARGET_MS else 'MISS'}"
    )
    for name in names:
        if first[name]:
            print(
                f"  first request/client {name:<22} n={len(first[name]):3d}  "
                f"p50 {percentile(first[name], 50) * 1000:6.0f} ms  "
                f"max {max(first[name]) * 1000:6.0f} ms"
            )
    busiest_idle = max(idle_rss.values())
    print(
        rss_line("idle", list(idle_rss))
        + f"  -> target {IDLE_RSS_TARGET_MB} MB: "
        + ("PASS" if busiest_idle <= IDLE_RSS_TARGET_MB else "MISS")
    )
    print(rss_line("after load", [pid for pid in idle_rss if Path(f"/proc/{pid}").exists()]))
    # /v1 is left out of the mix above: litellm, which only /v1 needs, is imported by the first
    # /v1 request of each process (HERMES_WEB_PRELOAD_LITELLM=1 does it in the master). Its
    # cost, and what it adds to a process, printed for the record.
    body = json.dumps(
        {"model": DEMO_MODEL, "messages": [{"role": "user", "content": "hello"}]}
    ).encode()
    v1_headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    v1_times = []
    for _ in range(WEB_PROCESSES + 1):
        v1_started = time.perf_counter()
        status, reply = server.request(
            "POST", "/v1/chat/completions", body=body, headers=v1_headers, timeout=120
        )
        v1_times.append(time.perf_counter() - v1_started)
        assert status == 200, reply[:300]
    print(
        "  /v1 chat completions (demo model) one after another, litellm imported on first use: "
        + ", ".join(f"{t * 1000:.0f}" for t in v1_times)
        + " ms"
    )
    print(rss_line("after /v1", [pid for pid in idle_rss if Path(f"/proc/{pid}").exists()]))
    assert not errors, errors[:10]
    assert busiest_idle <= IDLE_RSS_TARGET_MB, idle_rss
    assert 1000 * server_cpu_s / total <= CPU_PER_REQUEST_BOUND_MS
    assert total == CLIENTS * REQUESTS_PER_CLIENT  # the run was not cut short by the time limit
    health = server.healthz()
    assert health is not None
    assert health["_status"] == 200


def test_idle_worker_processes_hold_litellm_only_where_a_model_is_called(spawn):
    """Idle RSS of a chat worker (calls models: litellm warmed at start) and of a compaction
    worker with the deterministic summarizer (never calls one: no litellm), as Procfile.scaled
    runs them (prefork parent and its child)."""
    chat = spawn.workers(1, queues="chat,default")[0]
    compaction = spawn.workers(1, queues="compaction")[0]
    time.sleep(2)
    figures = {}
    for label, worker in (("chat", chat), ("compaction", compaction)):
        pids = process_tree(worker.pid)
        figures[label] = max(rss_mb(pid) for pid in pids)
        print(
            rss_line(f"{label} wkr", pids)
            + f"  -> target {IDLE_RSS_TARGET_MB} MB: "
            + ("PASS" if figures[label] <= IDLE_RSS_TARGET_MB else "MISS (calls models)")
        )
    assert figures["compaction"] <= IDLE_RSS_TARGET_MB, figures
