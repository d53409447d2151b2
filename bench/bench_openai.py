"""What the OpenAI-compatible endpoint adds to each request on top of the model.

A real gunicorn (one worker, one thread) serves hermes-web on 127.0.0.1 from a temporary SQLite
database; the official ``openai`` SDK plays an agent for 200 turns (a tool call and its result
per turn, the client sending its whole history each time), against the local fake upstream.
When the prompt crosses the threshold the endpoint queues a compaction; this script runs it
(untimed, as the worker would), so the later turns go upstream compacted.

Per turn: the request's wall time through the endpoint, minus one identical call made by the
same client straight to the fake upstream with exactly the messages the endpoint sent it (the
model's share). Twice per protocol: plain JSON replies, then SSE streaming with usage. The
protocols are chat completions, Anthropic Messages (``/v1/messages``, Claude Code's shape) and
Responses (``/v1/responses``, Codex's ``store: false`` shape); the client keeps its history in
the protocol's own format. Target: median overhead ≤ 30 ms.

    python bench/bench_openai.py [chat] [messages] [responses] [--turns N]
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes_server import p95, prepare_hermes, tool_output  # noqa: E402  (bench/, beside this script)

from tools.localservices import free_port  # noqa: E402

TURNS = 200
PROTOCOLS = ("chat", "messages", "responses")
PATHS = {"chat": "/chat/completions", "messages": "/messages", "responses": "/responses"}
TARGET_MEDIAN_MS = 30.0


def main() -> int:
    global TURNS
    args = sys.argv[1:]
    if "--turns" in args:
        at = args.index("--turns")
        TURNS = int(args[at + 1])
        del args[at : at + 2]
    protocols = [name for name in args if name in PROTOCOLS] or list(PROTOCOLS)
    tmp = Path(tempfile.mkdtemp(prefix="bench_openai_"))
    from tests.fake_openai import FakeOpenAIServer

    upstream = FakeOpenAIServer().start()
    port = free_port()
    env, raw_key = prepare_hermes(tmp, upstream.base_url)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "hermes_web.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "1",
            "--threads",
            "1",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    import httpx

    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.2)
        direct = f"{upstream.base_url}/chat/completions"
        results = {}
        with httpx.Client(timeout=60) as client:
            for protocol in protocols:
                endpoint = base + PATHS[protocol]
                for streamed in (False, True):
                    results[protocol, streamed] = run_conversation(
                        client, endpoint, direct, raw_key, upstream, streamed, protocol
                    )
    finally:
        server.terminate()
        server.wait(timeout=15)
        upstream.stop()

    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    verdict = True
    for (protocol, streamed), (
        overheads,
        totals,
        models,
        compacted,
        compactions,
        size,
        phases,
    ) in results.items():
        label = f"{protocol}: " + ("SSE + usage" if streamed else "JSON")
        median = statistics.median(overheads)
        print(
            f"{label}: {TURNS} turns, client history grew to {size} messages; "
            f"{compactions} compaction(s) committed; {compacted} requests sent compacted"
        )
        print(
            f"  request via endpoint  median {statistics.median(totals):7.1f} ms   p95 {p95(totals):7.1f} ms"
        )
        print(
            f"  same call direct      median {statistics.median(models):7.1f} ms   p95 {p95(models):7.1f} ms"
        )
        print(
            f"  endpoint overhead     median {median:7.1f} ms   p95 {p95(overheads):7.1f} ms   "
            f"(target median <= {TARGET_MEDIAN_MS:.0f} ms)"
        )
        upstream_phase = phases.get("upstream") or phases.get("upstream-first-chunk") or [0]
        print(
            f"  of which litellm (server upstream phase - direct call), median "
            f"{statistics.median(upstream_phase) - statistics.median(models):.1f} ms"
        )
        cpu = phases.pop("cpu", [0.0])
        print(
            f"  server CPU per request (thread time, load-independent)  median "
            f"{statistics.median(cpu):.1f} ms   p95 {p95(cpu):.1f} ms"
        )
        print(
            "  server phases (median ms): "
            + ", ".join(f"{name} {statistics.median(v):.1f}" for name, v in phases.items())
        )
        verdict = verdict and median <= TARGET_MEDIAN_MS
    print("PASS" if verdict else "MISS")
    return 0


def run_conversation(client, endpoint, direct, raw_key, upstream, streamed, protocol="chat"):
    from hermes_web.models import Compaction
    from hermes_web.services.compactions import run_compaction

    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {
            "role": "user",
            "content": f"Trace how events are routed ({'sse' if streamed else 'json'}).",
        },
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]

    history = list(messages)  # in the protocol's own format
    if protocol == "messages":
        history = messages[1:]
    elif protocol == "responses":
        history = [{"type": "message", "role": "user", "content": messages[1]["content"]}]

    def call(client, url, key, body_messages):
        """One request, its body serialized before the clock starts (the client's own work)."""
        if url == direct or protocol == "chat":
            return call_chat(client, url, key, body_messages)
        return call_other(client, url, key, body_messages)

    def call_other(client, url, key, history):
        if protocol == "messages":
            body = {
                "model": "claude-sonnet-4-5",
                "max_tokens": 1024,
                "system": [{"type": "text", "text": "You are a coding agent."}],
                "messages": history,
                "tools": [
                    {"name": "read_file", "input_schema": tools[0]["function"]["parameters"]}
                ],
                "stream": streamed,
            }
        else:
            body = {
                "model": "openai/fake-chat",
                "instructions": "You are a coding agent.",
                "input": history,
                "tools": [{"type": "function", **tools[0]["function"]}],
                "store": False,
                "stream": streamed,
            }
        data = json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        started = time.perf_counter()
        call_id, arguments = "", ""
        if streamed:
            with client.stream("POST", url, content=data, headers=headers) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    kind = event.get("type")
                    if (
                        kind == "content_block_start"
                        and event["content_block"]["type"] == "tool_use"
                    ):
                        call_id = event["content_block"]["id"]
                    elif kind == "content_block_delta" and "partial_json" in event["delta"]:
                        arguments += event["delta"]["partial_json"]
                    elif (
                        kind == "response.output_item.added"
                        and event["item"]["type"] == "function_call"
                    ):
                        call_id = event["item"]["call_id"]
                    elif kind == "response.function_call_arguments.delta":
                        arguments += event["delta"]
                headers_seen = response.headers
        else:
            response = client.post(url, content=data, headers=headers)
            response.raise_for_status()
            headers_seen = response.headers
            payload = response.json()
            if protocol == "messages":
                block = [b for b in payload["content"] if b["type"] == "tool_use"][0]
                call_id, arguments = block["id"], json.dumps(block["input"])
            else:
                item = [i for i in payload["output"] if i["type"] == "function_call"][0]
                call_id, arguments = item["call_id"], item["arguments"]
        return time.perf_counter() - started, headers_seen, call_id, arguments

    def call_chat(client, url, key, body_messages):
        body = {"model": "openai/fake-chat", "messages": body_messages, "tools": tools}
        if streamed:
            body.update(stream=True, stream_options={"include_usage": True})
        data = json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        started = time.perf_counter()
        if streamed:
            call_id, arguments = "", ""
            with client.stream("POST", url, content=data, headers=headers) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    for choice in json.loads(line[6:]).get("choices", ()):
                        for piece in choice["delta"].get("tool_calls") or ():
                            call_id = piece.get("id") or call_id
                            arguments += (piece.get("function") or {}).get("arguments") or ""
                headers_seen = response.headers
        else:
            response = client.post(url, content=data, headers=headers)
            response.raise_for_status()
            headers_seen = response.headers
            tool_call = response.json()["choices"][0]["message"]["tool_calls"][0]
            call_id, arguments = tool_call["id"], tool_call["function"]["arguments"]
        return time.perf_counter() - started, headers_seen, call_id, arguments

    def reply(turn):
        call_id = f"call_{'s' if streamed else 'j'}_{turn}"
        return {
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": json.dumps({"path": f"src/mod_{turn}.py"}),
                    },
                }
            ]
        }

    for turn in range(3):  # warm up: litellm import in the server, tokenizer, connections
        upstream.enqueue(reply(-turn - 1))
        warm = f"warm up {turn} {streamed}"
        if protocol == "responses":
            call(client, endpoint, raw_key, [{"type": "message", "role": "user", "content": warm}])
        else:
            call(client, endpoint, raw_key, [{"role": "user", "content": warm}])
        upstream.enqueue(reply(-turn - 1))
        call(client, direct, "x", [{"role": "user", "content": "warm up"}])

    overheads, totals, models = [], [], []
    phases: dict[str, list[float]] = {}
    compacted = 0
    for turn in range(TURNS):
        upstream.enqueue(reply(turn))
        total, headers, call_id, arguments = call(client, endpoint, raw_key, history)
        sent = upstream.requests[-1]["messages"]
        upstream.enqueue(reply(turn))
        model, _, _, _ = call(client, direct, "x", sent)
        totals.append(total * 1000)
        models.append(model * 1000)
        overheads.append(max(0.0, total - model) * 1000)
        compacted += "x-hermes-compaction" in headers
        for part in headers.get("server-timing", "").split(","):
            name, _, duration = part.strip().partition(";dur=")
            if duration:
                phases.setdefault(name, []).append(float(duration))
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": tool_output(turn)})
        if protocol == "chat":
            history = messages
        elif protocol == "messages":
            history.append(
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": call_id,
                            "name": "read_file",
                            "input": json.loads(arguments),
                        }
                    ],
                }
            )
            history.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": call_id,
                            "content": tool_output(turn),
                        }
                    ],
                }
            )
        else:
            history.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "read_file",
                    "arguments": arguments,
                }
            )
            history.append(
                {"type": "function_call_output", "call_id": call_id, "output": tool_output(turn)}
            )
        # The worker's part, untimed.
        for run in Compaction.objects.filter(status=Compaction.Status.QUEUED):
            run_compaction(run.pk)
    compactions = Compaction.objects.filter(status=Compaction.Status.COMMITTED).count()
    Compaction.objects.all().delete()
    return overheads, totals, models, compacted, compactions, len(history), phases


if __name__ == "__main__":
    sys.exit(main())
