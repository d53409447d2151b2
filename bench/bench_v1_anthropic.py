"""``/v1/messages`` to an Anthropic upstream: hermes-web's native path against LiteLLM's proxy.

The sibling of ``bench_v1_protocols.py`` (same agent, turns, clients, gateways and output) with
an Anthropic-shaped fake upstream (``tests/web/anthropic_fake.py``, keep-alive, SSE when asked)
in place of the OpenAI-shaped one, and both gateways serving an ``anthropic/`` model at it:
hermes-web with ``HERMES_CHAT_MODEL=anthropic/claude-sonnet-4-5`` (a JSON request it sends as
written goes through litellm's native Messages call, ``openai_compat/anthropic_native.py``;
a streamed one is translated to chat completions and back), LiteLLM's proxy with a
``model_list`` entry ``anthropic/claude-sonnet-4-5`` and its ``api_base`` (it passes
``/v1/messages`` through in Anthropic's protocol, JSON and SSE).

hermes-web's context length is set to 1,000,000 tokens here so that no request of the 200-turn
history is compacted (a compacted context is ours, in chat messages, and is translated): every
JSON request of ours is a native one, which the run shows (0 requests sent compacted).

First, one request per gateway and mode whose reply carries blocks only Anthropic's own shape
carries (``server_tool_use``, ``web_search_tool_result``): a JSON answer without them means
the gateway translated it, and the bench stops. Then, as ``bench_v1_protocols.py``: TURNS
sequential turns per mode (each asks both gateways, alternating order, with the same bytes; the
overhead is the wall time minus the same body posted straight to the fake), median, p95 and
per band of 50 turns, with hermes-web's Server-Timing phases; and CLIENTS concurrent agents ×
CONCURRENT_TURNS turns per mode and gateway: p50/p95/p99, req/s, errors. PASS/MISS against
LiteLLM's figures.

    python bench/bench_v1_anthropic.py [--concurrent-only]
    HERMES_BENCH_V1_TURNS=50 HERMES_BENCH_V1_CLIENTS=0 python bench/bench_v1_anthropic.py
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_v1_protocols import (  # noqa: E402  (bench/, beside this script; sets sys.path)
    CLIENTS,
    LITELLM_VERSION,
    PATHS,
    TURNS,
    WORKER,
    Agent,
    gateway_urls,
    print_concurrent,
    print_sequential,
    run_concurrent,
    run_protocol,
    start_hermes,
    start_litellm,
)

from tests.web.anthropic_fake import FakeAnthropic  # noqa: E402

MODEL = "anthropic/claude-sonnet-4-5"
LABEL = "msgs→anthropic"  # the rows' label (22 columns with " JSON")
# Blocks of a reply that only Anthropic's own protocol carries: the chat-completions
# translation has no place for a server tool's call or result.
NATIVE_ONLY = {"server_tool_use", "web_search_tool_result"}
SEARCHED = [
    {
        "type": "server_tool_use",
        "id": "srvtoolu_bench",
        "name": "web_search",
        "input": {"query": "event routing"},
    },
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_bench",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.org/routing",
                "title": "Routing",
                "encrypted_content": "EoBench",
                "page_age": None,
            }
        ],
    },
    {"type": "text", "text": "Events are routed by shard."},
]


class AnthropicUpstream(FakeAnthropic):
    """The Anthropic-shaped fake with ``bench_v1_protocols.Upstream``'s interface: queued
    replies in the OpenAI shape its ``reply()`` makes become ``tool_use`` blocks; with nothing
    queued (the concurrent clients) every reply is a tool call with an id of its own, and the
    request is not kept."""

    DIRECT = "/v1/messages"  # where the bench posts a gateway's upstream body itself

    def __init__(self) -> None:
        super().__init__(keep_alive=True)
        self._lock = threading.Lock()
        self._count = 0

    def start(self) -> AnthropicUpstream:
        return self  # serving since it was made

    def enqueue(self, reply: dict) -> None:
        """Queue a reply: a fake's own (``content`` blocks) or an OpenAI-shaped tool call."""
        with self._lock:
            self.replies.append(_as_anthropic(reply))

    def next_reply(self, body: dict, headers: dict[str, str]) -> dict:
        with self._lock:
            if self.replies:
                self.requests.append(body)
                return self.replies.pop(0)
            self._count += 1
            count = self._count
        return _as_anthropic(
            {
                "tool_calls": [
                    {
                        "id": f"toolu_c{count}",
                        "function": {"name": "read_file", "arguments": '{"path": "src/a.py"}'},
                    }
                ]
            }
        )


def _as_anthropic(reply: dict) -> dict:
    if "tool_calls" not in reply:
        return reply
    blocks = [
        {
            "type": "tool_use",
            "id": call["id"],
            "name": call["function"]["name"],
            "input": json.loads(call["function"]["arguments"]),
        }
        for call in reply["tool_calls"]
    ]
    return {"id": f"msg_{blocks[0]['id']}", "content": blocks}


def native_check(gateways, upstream: AnthropicUpstream) -> dict[tuple[str, bool], str]:
    """One request per gateway and mode whose reply carries NATIVE_ONLY blocks: "native"
    when the client got them, else "translated" (or the error)."""
    import httpx

    found = {}
    with httpx.Client(timeout=120) as client:
        for streamed in (False, True):
            for name, (url, headers) in gateways.items():
                upstream.enqueue({"id": "msg_native_check", "content": SEARCHED})
                body = Agent("messages", streamed, f"(native check, {name})").body()
                try:
                    with client.stream(
                        "POST", url + PATHS["messages"], content=body, headers=headers
                    ) as response:
                        response.read()
                        if response.status_code != 200:
                            found[name, streamed] = f"error {response.status_code}"
                            continue
                        kinds = block_types(response.text, streamed)
                except httpx.HTTPError as error:
                    found[name, streamed] = f"error {error}"
                    continue
                finally:
                    upstream.requests.clear()
                found[name, streamed] = "native" if kinds >= NATIVE_ONLY else "translated"
    return found


def block_types(text: str, streamed: bool) -> set[str]:
    """The content block types of a Messages answer, JSON or SSE."""
    if not streamed:
        return {block["type"] for block in json.loads(text)["content"]}
    kinds = set()
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            event = json.loads(line[6:])
            if event.get("type") == "content_block_start":
                kinds.add(event["content_block"]["type"])
    return kinds


def print_phases(results: dict) -> None:
    """hermes-web's Server-Timing phases, median ms per row (where its time goes)."""
    print(
        "hermes-web Server-Timing, median ms (parse, prepare, upstream call, store, request "
        "thread's CPU), and the fake upstream's own answer to the same body"
    )
    for (label, streamed), result in results.items():
        phases = result["phases"]
        print(
            f"{label + (' SSE' if streamed else ' JSON'):<22}"
            + "  ".join(
                f"{name} {statistics.median(values):.1f}" for name, values in phases.items()
            )
            + f"  (upstream alone {statistics.median(result['models']):.1f})"
        )


def main() -> int:
    sequential = "--concurrent-only" not in sys.argv
    tmp = Path(tempfile.mkdtemp(prefix="bench_v1_anthropic_"))
    upstream = AnthropicUpstream().start()
    processes: list[subprocess.Popen] = []
    try:
        master_key = "sk-bench-" + secrets.token_hex(16)
        litellm, litellm_port = start_litellm(tmp, upstream.base_url, master_key, model=MODEL)
        processes.append(litellm)
        hermes, hermes_port, raw_key = start_hermes(
            tmp,
            upstream.base_url,
            {"HERMES_CHAT_MODEL": MODEL, "HERMES_CONTEXT_LENGTH": "1000000"},
        )
        processes.append(hermes)
        import httpx

        gateways = gateway_urls(hermes_port, raw_key, litellm_port, master_key)
        started = time.monotonic()
        found = native_check(gateways, upstream)
        print(
            "native check (a reply with server_tool_use + web_search_tool_result blocks): "
            + ", ".join(
                f"{name} {'SSE' if streamed else 'JSON'} {how}"
                for (name, streamed), how in found.items()
            ),
            flush=True,
        )
        if any(found[name, False] != "native" for name in gateways):
            print("MISS: a JSON answer was not the upstream's own message; nothing measured")
            return 1
        results = {}
        with httpx.Client(timeout=120) as client:
            for streamed in (False, True) if sequential else ():
                results[LABEL, streamed] = run_protocol(
                    client, gateways, upstream, "messages", streamed
                )
        elapsed = time.monotonic() - started
        concurrent = {}
        names = list(gateways)
        for streamed in (False, True) if CLIENTS else ():
            first = names[len(concurrent) % 2]  # alternating which gateway goes first
            concurrent[LABEL, streamed] = run_concurrent(gateways, "messages", streamed, first)
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=20)
        upstream.stop()

    print(
        f"{TURNS if results else 0} turns per mode in {elapsed:.0f} s; load average at the end "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; litellm[proxy]=={LITELLM_VERSION}; "
        f"gunicorn {WORKER} worker; {MODEL} at an Anthropic-shaped fake"
    )
    if results:
        print_sequential(results)
        print_phases(results)
    if concurrent:
        print_concurrent(concurrent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
