"""CPU time hermes-web spends on each /v1 request as the history grows, in process.

bench_v1_protocols.py measures wall time through gunicorn against LiteLLM's proxy; on a
shared machine its bands move with the load. This drives the same agents (its ``Agent``:
a tool call and a ~2,000-character result per turn, queued compactions run between turns)
through Django's test client over the fake upstream, and reports the CPU time of the
thread that served each request (``time.thread_time``: the view, litellm's client side of
the upstream call, storage; not the fake upstream's thread), median per band of 50 turns.
With ``HERMES_BENCH_V1_PROFILE=N`` the last N turns of each protocol and mode are also
profiled (cProfile on CPU time); the profiles are written to a temporary directory.

    python bench/bench_v1_cpu.py [chat] [messages] [responses]
    HERMES_BENCH_V1_TURNS=400 HERMES_BENCH_V1_PROFILE=10 python bench/bench_v1_cpu.py chat
"""

from __future__ import annotations

import cProfile
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import bench_v1_protocols as protocols  # noqa: E402  (bench/, beside this script)
from hermes_server import prepare_hermes, tool_output  # noqa: E402

from tests.fake_openai import FakeOpenAIServer  # noqa: E402

TURNS = int(os.environ.get("HERMES_BENCH_V1_TURNS", "200"))
PROFILED = int(os.environ.get("HERMES_BENCH_V1_PROFILE", "0"))
BAND = 50


class Read:
    """A test client's response as ``Agent.read_reply`` reads an httpx one."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def read(self) -> bytes:
        return self.body

    def iter_lines(self) -> list[str]:
        return self.body.decode().splitlines()


def run(client, headers: dict, upstream, protocol: str, streamed: bool, out: Path) -> list[float]:
    from hermes_web.models import Compaction
    from hermes_web.services.compactions import run_compaction

    agent = protocols.Agent(protocol, streamed)
    tag = f"{protocol[0]}{'s' if streamed else 'j'}"
    profile = cProfile.Profile(time.thread_time)
    cpu = []
    for turn in range(-3, TURNS):  # the first turns (imports, tokenizer) are not counted
        data = agent.body()
        upstream.enqueue(protocols.reply(turn, tag))
        profiled = PROFILED and turn >= TURNS - PROFILED
        started = time.thread_time()
        if profiled:
            profile.enable()
        response = client.post(
            protocols.PATHS[protocol], data, content_type="application/json", **headers
        )
        body = b"".join(response.streaming_content) if streamed else response.content
        if profiled:
            profile.disable()
        spent = (time.thread_time() - started) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"{protocol}: {response.status_code} {body[:300]!r}")
        upstream.requests.clear()
        agent.append_turn(*agent.read_reply(Read(body)), tool_output(turn))
        if turn >= 0:
            cpu.append(spent)
        for queued in Compaction.objects.filter(status=Compaction.Status.QUEUED):
            run_compaction(queued.pk)
    if PROFILED:
        profile.dump_stats(str(out / f"{protocol}-{'sse' if streamed else 'json'}.prof"))
    return cpu


def main() -> int:
    chosen = [name for name in sys.argv[1:] if name in protocols.PROTOCOLS]
    tmp = Path(tempfile.mkdtemp(prefix="bench_v1_cpu_"))
    upstream = FakeOpenAIServer().start()
    try:
        _, raw_key = prepare_hermes(tmp, upstream.base_url)
        from django.test import Client

        headers = {"HTTP_AUTHORIZATION": f"Bearer {raw_key}", "HTTP_ANTHROPIC_VERSION": "1"}
        bands = " ".join(
            f"{start}-{min(start + BAND, TURNS) - 1}".rjust(8) for start in range(0, TURNS, BAND)
        )
        print(f"CPU ms per request, {TURNS} turns   median  by band: {bands}")
        for protocol in chosen or protocols.PROTOCOLS:
            for streamed in (False, True):
                cpu = run(Client(), headers, upstream, protocol, streamed, tmp)
                per_band = [statistics.median(cpu[i : i + BAND]) for i in range(0, TURNS, BAND)]
                label = f"{protocol} {'SSE' if streamed else 'JSON'}"
                print(
                    f"{label:<26}{statistics.median(cpu):7.1f}  {'':9}"
                    + " ".join(f"{value:8.1f}" for value in per_band)
                    + f"   growth {per_band[-1] - per_band[0]:+.1f}"
                )
    finally:
        upstream.stop()
    if PROFILED:
        print(f"profiles of the last {PROFILED} turns: {tmp}/*.prof")
    return 0


if __name__ == "__main__":
    sys.exit(main())
