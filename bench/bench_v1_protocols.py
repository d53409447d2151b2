"""What each /v1 protocol adds on top of the model, against LiteLLM's proxy, in the same run.

Two gateways in front of one local fake upstream (tests/fake_openai.py): hermes-web (gunicorn,
one gthread worker with keep-alive, SQLite in a temporary directory, migrated first) and
LiteLLM's proxy (``litellm[proxy]``, pinned, installed on first use into its own virtualenv
under ``var/bench-litellm-proxy``, never into the project's; one uvicorn worker). A client plays
a coding agent for TURNS turns per protocol (chat completions, Anthropic ``/v1/messages``,
Responses ``/v1/responses``), JSON and streaming: every turn the model calls a tool and the
client appends the call and its ~2,000-character result to the history it sends in full.

Each turn asks both gateways, in alternating order, with the same bytes; each request's
overhead is its wall time minus the same client posting the body that gateway sent upstream
straight to the fake upstream (the model's share). hermes-web's queued compactions run
between turns, untimed, as its worker would.

Printed: median and p95 of the overhead per protocol, ours vs LiteLLM, and the median per
band of 50 turns. PASS when, for every protocol and mode, ours has a median and p95 at or
below LiteLLM's, and is flat: its last band's median at most ``FLAT_SLACK_MS`` above its
first band's, or no more above it than LiteLLM's own growth (both parse the growing body).

Then the providers' compaction requests (hermes-web alone, LiteLLM's proxy has none of them):
``POST /v1/responses/compact`` vs ``POST /v1/responses`` on a conversation of the same size
(each a fresh one, stored either way; the compact's summarizer call and the plain request's
model call both go to the fake upstream), and an Anthropic ``/v1/messages`` request with
``context_management`` edits (``clear_thinking`` + ``clear_tool_uses``, past its trigger, so
it clears) vs the same request without. Printed: the medians and the overhead in % (the
median of each round's ratio), target at most ``COMPACTION_TARGET``.

Then, concurrently (issue #39): CLIENTS agents at once (20), each CONCURRENT_TURNS turns (25),
per protocol, JSON and SSE, against one gateway at a time (alternating which goes first), in
the same run; each request's whole wall time (the fake upstream answers at once, the same for
both). Printed: p50/p95/p99, req/s and errors per gateway; PASS when ours has 0 errors and
p50, p95 and p99 at or below LiteLLM's. Also printed: each gateway's first request after it
started (what a worker warms before it takes traffic).

    python bench/bench_v1_protocols.py [chat] [messages] [responses] [compaction] [--concurrent-only]
    HERMES_BENCH_V1_TURNS=1000 python bench/bench_v1_protocols.py   # longer history
    HERMES_BENCH_V1_CLIENTS=0 python bench/bench_v1_protocols.py    # sequential only
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes_server import p95, prepare_hermes, tool_output  # noqa: E402  (bench/, beside this script)

from tests.fake_openai import FakeOpenAIServer  # noqa: E402
from tools.localservices import free_port  # noqa: E402

TURNS = int(os.environ.get("HERMES_BENCH_V1_TURNS", "200"))
CLIENTS = int(os.environ.get("HERMES_BENCH_V1_CLIENTS", "20"))
CONCURRENT_TURNS = int(os.environ.get("HERMES_BENCH_V1_CONCURRENT_TURNS", "25"))
BAND = 50
FLAT_SLACK_MS = 3.0
PROTOCOLS = ("chat", "messages", "responses")
COMPACTION_ROUNDS = int(os.environ.get("HERMES_BENCH_V1_COMPACTION_ROUNDS", "15"))
COMPACTION_TURNS = 60  # tool rounds of history: ~30,000 tokens, enough to summarize
COMPACTION_TARGET = 0.10  # at most 10 % over the same request without compaction
CLEARING_BETA = "context-management-2025-06-27"
CONTEXT_EDITS = {
    "edits": [
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 10_000},
            "keep": {"type": "tool_uses", "value": 3},
        },
    ]
}
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses"}
# 1.110's proxy extra needs a ``litellm-proxy`` package, 1.109's and 1.108.14's extras versions
# of ``litellm-proxy-extras`` the registry does not carry;
# 1.108.0 is a release whose ``litellm[proxy]`` installs from it.
LITELLM_VERSION = os.environ.get("HERMES_BENCH_LITELLM_VERSION", "1.108.0")
LITELLM_VENV = ROOT / "var" / "bench-litellm-proxy"
SYSTEM = "You are a coding agent."
PARAMETERS = {"type": "object", "properties": {"path": {"type": "string"}}}
# gunicorn as the Procfile starts it, but with threads: a gthread worker keeps the client's
# connection alive (a sync worker answers "Connection: close", a new TCP connection a request;
# HERMES_BENCH_V1_WORKER=sync measures that).
WORKER = os.environ.get("HERMES_BENCH_V1_WORKER", "gthread")
GUNICORN = ["--workers", "1", "--worker-class", WORKER, "--keep-alive", "30"] + (
    ["--threads", "2"] if WORKER == "gthread" else []
)


def wait_for_port(port: int, process: subprocess.Popen, name: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start") from None
            time.sleep(0.3)


def litellm_executable() -> Path:
    """The proxy's ``litellm`` command, installed at the pinned version on first use."""
    marker = LITELLM_VENV / f".litellm-proxy-{LITELLM_VERSION}"
    executable = LITELLM_VENV / "bin" / "litellm"
    if marker.exists() and executable.exists():
        return executable
    print(f"installing litellm[proxy]=={LITELLM_VERSION} into {LITELLM_VENV} …", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True)
    subprocess.run(
        [
            str(LITELLM_VENV / "bin" / "pip"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            f"litellm[proxy]=={LITELLM_VERSION}",
        ],
        check=True,
    )
    marker.touch()
    return executable


def start_litellm(
    tmp: Path, upstream_url: str, master_key: str, model: str = "custom_openai/fake-chat"
) -> tuple[subprocess.Popen, int]:
    """LiteLLM's proxy with the clients' model names routed to ``model`` at ``upstream_url``."""
    executable = litellm_executable()
    port = free_port()
    # ``custom_openai``: an OpenAI-compatible server that has chat completions only, so
    # /v1/responses goes through LiteLLM's bridge (an ``openai/`` model would be sent to the
    # upstream's /v1/responses, which the fake, like most self-hosted servers, lacks).
    params = {"model": model, "api_base": upstream_url, "api_key": "x"}
    # The names the clients send, both routed to ``model`` (the fake upstream's chat completions
    # unless a bench asks for another).
    names = ("openai/fake-chat", "claude-sonnet-4-5")
    config = {
        "model_list": [
            {
                "model_name": name,
                "litellm_params": params,
                "model_info": {"mode": "chat"},
            }
            for name in names
        ],
        "litellm_settings": {
            "drop_params": True,
            "set_verbose": False,
            # Its documented switch to send Anthropic Messages to an OpenAI-compatible upstream
            # as chat completions (by default it sends them to /v1/responses).
            "use_chat_completions_url_for_anthropic_messages": True,
        },
        # Authenticated like ours (it refuses to start without a key).
        "general_settings": {"master_key": master_key},
    }
    (tmp / "litellm.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "LITELLM_LOG": "ERROR",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no network fetch of the cost map
        "DATABASE_URL": "",
    }
    env.pop("DATABASE_URL")
    process = subprocess.Popen(
        [
            str(executable),
            "--config",
            str(tmp / "litellm.json"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--num_workers",
            "1",
        ],
        cwd=tmp,
        env=env,
        stdout=open(tmp / "litellm.log", "w"),  # noqa: SIM115 (the process outlives the block)
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_for_port(port, process, "litellm proxy (see its log: " + str(tmp / "litellm.log") + ")")
    return process, port


# As the Procfile starts it (each worker warms litellm's first call); not in a copy of the code
# from before the hooks existed (a before/after run).
HOOKS = int((ROOT / "hermes_web" / "gunicorn_hooks.py").exists())


def start_hermes(
    tmp: Path, upstream_url: str, overrides: dict[str, str] | None = None
) -> tuple[subprocess.Popen, int, str]:
    """hermes-web under gunicorn on its own SQLite database (``overrides``: its settings)."""
    port = free_port()
    env, raw_key = prepare_hermes(tmp, upstream_url, overrides)
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "hermes_web.wsgi:application"]
        + ["-c", "python:hermes_web.gunicorn_hooks"] * HOOKS
        + ["--bind", f"127.0.0.1:{port}", "--preload", "--timeout", "120"]
        + GUNICORN
        + ["--log-level", "warning"],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    wait_for_port(port, process, "gunicorn")
    return process, port, raw_key


class Upstream(FakeOpenAIServer):
    """The fake model; with nothing queued (the concurrent clients), every reply is a tool
    call with an id of its own, and the request is not kept (thousands of growing bodies)."""

    DIRECT = "/chat/completions"  # where the bench posts a gateway's upstream body itself

    def __init__(self) -> None:
        super().__init__()
        self._replies = 0

    def _next(self, body: dict) -> dict:
        with self._lock:
            if self._queue:
                self.requests.append(body)
                return self._queue.popleft()
            self._replies += 1
            return reply(self._replies, "c")


class Agent:
    """One conversation in one protocol's wire format, and the requests it sends."""

    def __init__(self, protocol: str, streamed: bool, who: str = "") -> None:
        self.protocol = protocol
        self.streamed = streamed
        opening = f"Trace how events are routed ({protocol}, {'sse' if streamed else 'json'})."
        opening += f" {who}" if who else ""
        if protocol == "chat":
            self.history: list[dict] = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": opening},
            ]
        elif protocol == "messages":
            self.history = [{"role": "user", "content": opening}]
        else:
            self.history = [{"type": "message", "role": "user", "content": opening}]

    def body(self) -> bytes:
        if self.protocol == "chat":
            body: dict = {
                "model": "openai/fake-chat",
                "messages": self.history,
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "read_file", "parameters": PARAMETERS},
                    }
                ],
            }
            if self.streamed:
                body["stream_options"] = {"include_usage": True}
        elif self.protocol == "messages":
            body = {
                "model": "claude-sonnet-4-5",
                "max_tokens": 1024,
                "system": [{"type": "text", "text": SYSTEM}],
                "messages": self.history,
                "tools": [{"name": "read_file", "input_schema": PARAMETERS}],
            }
        else:
            body = {
                "model": "openai/fake-chat",
                "instructions": SYSTEM,
                "input": self.history,
                "tools": [{"type": "function", "name": "read_file", "parameters": PARAMETERS}],
                "store": False,
            }
        body["stream"] = self.streamed
        return json.dumps(body).encode()

    def read_reply(self, response) -> tuple[str, str]:
        """(tool call id, arguments) of the reply, read as the protocol's client would."""
        call_id, arguments = "", ""
        if self.streamed:
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                kind = event.get("type")
                if self.protocol == "chat":
                    for choice in event.get("choices", ()):
                        for piece in choice["delta"].get("tool_calls") or ():
                            call_id = piece.get("id") or call_id
                            arguments += (piece.get("function") or {}).get("arguments") or ""
                elif kind == "content_block_start" and event["content_block"]["type"] == "tool_use":
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
            return call_id, arguments
        payload = json.loads(response.read())
        if self.protocol == "chat":
            call = payload["choices"][0]["message"]["tool_calls"][0]
            return call["id"], call["function"]["arguments"]
        if self.protocol == "messages":
            block = [b for b in payload["content"] if b["type"] == "tool_use"][0]
            return block["id"], json.dumps(block["input"])
        item = [i for i in payload["output"] if i["type"] == "function_call"][0]
        return item["call_id"], item["arguments"]

    def append_turn(self, call_id: str, arguments: str, output: str) -> None:
        if self.protocol == "chat":
            call = {"id": call_id, "type": "function"}
            call["function"] = {"name": "read_file", "arguments": arguments}
            self.history.append({"role": "assistant", "content": None, "tool_calls": [call]})
            self.history.append({"role": "tool", "tool_call_id": call_id, "content": output})
        elif self.protocol == "messages":
            use = {"type": "tool_use", "id": call_id, "name": "read_file"}
            use["input"] = json.loads(arguments)
            result = {"type": "tool_result", "tool_use_id": call_id, "content": output}
            self.history.append({"role": "assistant", "content": [use]})
            self.history.append({"role": "user", "content": [result]})
        else:
            self.history.append(
                {"type": "function_call", "call_id": call_id, "name": "read_file"}
                | {"arguments": arguments}
            )
            self.history.append(
                {"type": "function_call_output", "call_id": call_id, "output": output}
            )


def timed(client, url: str, data: bytes, headers: dict, read) -> tuple[float, object]:
    """Wall time of one request until its reply is read whole (the body serialized before)."""
    started = time.perf_counter()
    with client.stream("POST", url, content=data, headers=headers) as response:
        if response.status_code != 200:
            response.read()
            raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")
        result = read(response)
    return (time.perf_counter() - started) * 1000, result


def drain(response) -> None:
    for _ in response.iter_bytes():
        pass


def reply(turn: int, tag: str) -> dict:
    arguments = json.dumps({"path": f"src/mod_{turn}.py"})
    call = {"id": f"call_{tag}_{turn}", "type": "function"}
    call["function"] = {"name": "read_file", "arguments": arguments}
    return {"tool_calls": [call]}


def run_protocol(client, gateways, upstream, protocol: str, streamed: bool) -> dict:
    """TURNS turns of one agent through both gateways; overheads in ms per gateway."""
    from hermes_web.models import Compaction
    from hermes_web.services.compactions import run_compaction

    agent = Agent(protocol, streamed)
    direct = upstream.base_url + upstream.DIRECT
    tag = f"{protocol[0]}{'s' if streamed else 'j'}"
    overheads: dict[str, list[float]] = {name: [] for name in gateways}
    # hermes-web's Server-Timing phases per counted request (where its time goes).
    phases: dict[str, list[float]] = {}
    models: list[float] = []  # the model's share: the same bodies straight to the upstream
    compacted = 0
    warm_up = 3  # the first turns (imports, tokenizer, connections) are not counted
    for turn in range(-warm_up, TURNS):
        data = agent.body()
        order = list(gateways) if turn % 2 == 0 else list(reversed(gateways))
        answers = {}
        for name in order:
            url, headers = gateways[name]
            upstream.enqueue(reply(turn, tag))
            total, (answer, seen) = timed(
                client,
                url + PATHS[protocol],
                data,
                headers,
                lambda r: (agent.read_reply(r), r.headers),
            )
            answers[name] = answer
            compacted += name == "hermes-web" and "x-hermes-compaction" in seen
            if name == "hermes-web" and turn >= 0:
                for part in seen.get("server-timing", "").split(","):
                    phase, _, duration = part.strip().partition(";dur=")
                    if duration:
                        phases.setdefault(phase, []).append(float(duration))
            sent = json.dumps(upstream.requests[-1]).encode()
            upstream.requests.clear()  # 200 turns of growing bodies would hold gigabytes
            upstream.enqueue(reply(turn, tag))
            model, _ = timed(client, direct, sent, {"Content-Type": "application/json"}, drain)
            if turn >= 0:
                overheads[name].append(max(0.0, total - model))
                models.append(model)
        call_id, arguments = answers["hermes-web"]
        if answers["litellm"][0] != call_id:
            raise RuntimeError(f"litellm answered {answers['litellm']}, hermes-web {call_id}")
        agent.append_turn(call_id, arguments, tool_output(turn))
        for run in Compaction.objects.filter(status=Compaction.Status.QUEUED):
            run_compaction(run.pk)  # the worker's part, untimed
    return {
        "overheads": overheads,
        "compacted": compacted,
        "history": len(agent.history),
        "phases": phases,
        "models": models,
    }


def grown(protocol: str, label: str) -> Agent:
    """An agent of ``protocol`` with COMPACTION_TURNS tool rounds behind it, its opening
    line made unique by ``label`` (a fresh conversation for the store)."""
    agent = Agent(protocol, streamed=False)
    first = agent.history[0]
    first["content"] = f"{first['content']} [{label}]"
    for turn in range(COMPACTION_TURNS):
        call_id = f"call_{label}_{turn}"
        agent.append_turn(call_id, json.dumps({"path": f"src/mod_{turn}.py"}), tool_output(turn))
    return agent


def compaction_overheads(client, url: str, headers: dict, upstream) -> dict[str, tuple]:
    """Median ms of each compaction request and of the same request without, and how many
    edits or compactions the server reported (proof that it did the work)."""
    compact, plain, edited, unedited = [], [], [], []
    applied = compacted = 0
    warm_up = 2
    anthropic = grown("messages", "edits")
    without = json.loads(anthropic.body())
    with_edits = json.dumps({**without, "context_management": CONTEXT_EDITS}).encode()
    without_body = json.dumps(without).encode()
    beta = {**headers, "anthropic-beta": CLEARING_BETA}
    for round_ in range(-warm_up, COMPACTION_ROUNDS):
        # Responses: a plain turn and a compaction, each on a fresh conversation of one size.
        fresh = grown("responses", f"plain {round_}")
        upstream.enqueue(reply(round_, "rp"))
        elapsed, _ = timed(client, url + "/v1/responses", fresh.body(), headers, drain)
        if round_ >= 0:
            plain.append(elapsed)
        other = grown("responses", f"compact {round_}")
        body = json.dumps({"model": "openai/fake-chat", "input": other.history}).encode()
        elapsed, answer = timed(
            client, url + "/v1/responses/compact", body, headers, lambda r: json.loads(r.read())
        )
        compacted += answer["output"][-1]["type"] == "compaction"
        if round_ >= 0:
            compact.append(elapsed)
        # Anthropic: the same request with and without its context edits, in turn.
        order = [(True, with_edits), (False, without_body)]
        for edits, data in order if round_ % 2 == 0 else reversed(order):
            upstream.enqueue(reply(round_, "me"))
            elapsed, answer = timed(
                client, url + "/v1/messages", data, beta, lambda r: json.loads(r.read())
            )
            if edits:
                applied += len((answer.get("context_management") or {}).get("applied_edits", ()))
            if round_ >= 0:
                (edited if edits else unedited).append(elapsed)
        upstream.requests.clear()
    rounds = COMPACTION_ROUNDS + warm_up
    return {
        "responses.compact vs /v1/responses": (
            compact,
            plain,
            f"{compacted}/{rounds} compacted",
        ),
        "messages context_management vs none": (
            edited,
            unedited,
            f"{applied} edits applied in {rounds} requests",
        ),
    }


def print_compaction(figures: dict[str, tuple]) -> bool:
    """The medians, and the overhead as the median of each round's own ratio (the two
    requests of a round run back to back: a load that comes and goes on a shared machine
    moves both)."""
    print(
        f"\ncompaction requests, {COMPACTION_ROUNDS} rounds, {COMPACTION_TURNS} tool rounds of "
        f"history each (hermes-web only: LiteLLM's proxy serves none of them)"
    )
    print(f"{'request':<40}{'with ms':>9}{'without':>9}{'overhead':>10}")
    verdict = True
    for name, (with_times, without_times, proof) in figures.items():
        with_, without = statistics.median(with_times), statistics.median(without_times)
        overhead = statistics.median(
            [mine / theirs - 1 for mine, theirs in zip(with_times, without_times, strict=True)]
        )
        ok = overhead <= COMPACTION_TARGET
        verdict = verdict and ok
        print(
            f"{name:<40}{with_:9.1f}{without:9.1f}{overhead:+9.0%}  "
            f"{'PASS' if ok else 'MISS'} ({proof})"
        )
    print(
        "PASS" if verdict else "MISS",
        f"(target: each compaction request at most {COMPACTION_TARGET:.0%} over the same request "
        "without compaction)",
    )
    return verdict


def gateway_urls(
    hermes_port: int, raw_key: str, litellm_port: int, master_key: str
) -> dict[str, tuple[str, dict[str, str]]]:
    """Each gateway's base URL and the headers every protocol's request carries there."""
    headers = {"Content-Type": "application/json", "anthropic-version": "2023-06-01"}
    return {
        "hermes-web": (
            f"http://127.0.0.1:{hermes_port}",
            {**headers, "Authorization": f"Bearer {raw_key}"},
        ),
        "litellm": (
            f"http://127.0.0.1:{litellm_port}",
            {**headers, "Authorization": f"Bearer {master_key}"},
        ),
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(len(ordered) * share) - 1))]


def run_concurrent(gateways, protocol: str, streamed: bool, first: str) -> dict:
    """CLIENTS agents at once, CONCURRENT_TURNS turns each, on each gateway in turn."""
    import httpx

    results = {}
    order = [first] + [name for name in gateways if name != first]
    for name in order:
        url, headers = gateways[name]
        latencies: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()

        def agent_run(
            index: int, url=url, headers=headers, latencies=latencies, errors=errors, lock=lock
        ):
            agent = Agent(protocol, streamed, f"(agent {index}, {secrets.token_hex(4)})")
            with httpx.Client(timeout=120) as client:
                for turn in range(CONCURRENT_TURNS):
                    try:
                        ms, (call_id, arguments) = timed(
                            client, url + PATHS[protocol], agent.body(), headers, agent.read_reply
                        )
                    except Exception as error:  # counted, the agent stops
                        with lock:
                            errors.append(str(error)[:200])
                        return
                    with lock:
                        latencies.append(ms)
                    agent.append_turn(call_id, arguments, tool_output(turn))

        started = time.perf_counter()
        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(agent_run, range(CLIENTS)))
        elapsed = time.perf_counter() - started
        results[name] = {
            "p50": percentile(latencies, 0.50) if latencies else float("nan"),
            "p95": percentile(latencies, 0.95) if latencies else float("nan"),
            "p99": percentile(latencies, 0.99) if latencies else float("nan"),
            "rps": len(latencies) / elapsed,
            "requests": len(latencies),
            "errors": errors,
        }
    return results


def first_request(gateways) -> dict[str, float]:
    """Each gateway's first /v1 request after it started, in ms (nothing warmed by a client)."""
    import httpx

    body = Agent("chat", False, "(first request)").body()
    times = {}
    with httpx.Client(timeout=120) as client:
        for name, (url, headers) in gateways.items():
            times[name], _ = timed(client, url + PATHS["chat"], body, headers, drain)
    return times


def bands(values: list[float]) -> list[float]:
    return [statistics.median(values[i : i + BAND]) for i in range(0, len(values), BAND)]


def main() -> int:
    asked = [name for name in sys.argv[1:] if not name.startswith("--")]
    protocols = [name for name in asked if name in PROTOCOLS]
    if not asked:
        protocols = list(PROTOCOLS)
    sequential = "--concurrent-only" not in sys.argv
    with_compaction = sequential and ("compaction" in asked or not asked)
    tmp = Path(tempfile.mkdtemp(prefix="bench_v1_"))
    upstream = Upstream().start()
    processes: list[subprocess.Popen] = []
    try:
        master_key = "sk-bench-" + secrets.token_hex(16)
        litellm_port = 0
        if protocols:  # the compaction figure alone needs no LiteLLM
            litellm, litellm_port = start_litellm(tmp, upstream.base_url, master_key)
            processes.append(litellm)
        hermes, hermes_port, raw_key = start_hermes(tmp, upstream.base_url)
        processes.append(hermes)
        import httpx

        gateways = gateway_urls(hermes_port, raw_key, litellm_port, master_key)
        if not protocols:  # the compaction figure alone: hermes-web only
            del gateways["litellm"]
        firsts = first_request(gateways) if protocols else {}
        results = {}
        compaction_figures = {}
        started = time.monotonic()
        with httpx.Client(timeout=120) as client:
            for protocol in protocols if sequential else ():
                for streamed in (False, True):
                    results[protocol, streamed] = run_protocol(
                        client, gateways, upstream, protocol, streamed
                    )
            if with_compaction:
                compaction_figures = compaction_overheads(client, *gateways["hermes-web"], upstream)
        elapsed = time.monotonic() - started
        concurrent = {}
        names = list(gateways)
        for protocol in protocols if CLIENTS else ():
            for streamed in (False, True):
                first = names[len(concurrent) % 2]  # alternating which gateway goes first
                concurrent[protocol, streamed] = run_concurrent(gateways, protocol, streamed, first)
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=20)
        upstream.stop()

    print(
        f"{TURNS if results else 0} turns per protocol and mode"
        f"{' + the compaction figure' if compaction_figures else ''} in {elapsed:.0f} s; "
        f"load average at the end "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; litellm[proxy]=={LITELLM_VERSION}; "
        f"gunicorn {WORKER} worker"
    )
    print_sequential(results)
    if compaction_figures:
        print_compaction(compaction_figures)
    print(
        "first /v1 request after start: "
        + ", ".join(f"{name} {ms:.0f} ms" for name, ms in firsts.items())
    )
    if concurrent:
        print_concurrent(concurrent)
    return 0


def print_sequential(results: dict) -> bool:
    """The sequential figures per (protocol label, streamed): median, p95 and the median per
    band of turns of each gateway, and the verdict (printed, and returned)."""
    band_names = " ".join(
        f"{start}-{min(start + BAND, TURNS) - 1}".rjust(8) for start in range(0, TURNS, BAND)
    )
    if results:
        print(
            f"{'overhead ms':<22}{'gateway':<12}{'median':>7}{'p95':>7}   "
            + "median per band of turns:".ljust(27)
            + band_names
        )
    verdict = True
    for (protocol, streamed), result in results.items():
        label = f"{protocol} {'SSE' if streamed else 'JSON'}"
        figures = {}
        for name, values in result["overheads"].items():
            per_band = bands(values)
            figures[name] = (statistics.median(values), p95(values), per_band)
            print(
                f"{label:<22}{name:<12}{figures[name][0]:7.1f}{figures[name][1]:7.1f}   "
                + " " * 27
                + " ".join(f"{v:8.1f}" for v in per_band)
            )
        ours, theirs = figures["hermes-web"], figures["litellm"]
        growth = ours[2][-1] - ours[2][0]
        their_growth = theirs[2][-1] - theirs[2][0]
        flat = growth <= max(FLAT_SLACK_MS, their_growth)
        ok = ours[0] <= theirs[0] and ours[1] <= theirs[1] and flat
        verdict = verdict and ok
        print(
            f"{'':<22}{'PASS' if ok else 'MISS'}: median {'≤' if ours[0] <= theirs[0] else '>'} "
            f"LiteLLM, p95 {'≤' if ours[1] <= theirs[1] else '>'} LiteLLM, growth first→last "
            f"band {growth:+.1f} ms (LiteLLM {their_growth:+.1f}) {'flat' if flat else 'grows'}; "
            f"{result['compacted']} requests sent compacted, history {result['history']} items"
        )
    if results:
        print(
            "PASS" if verdict else "MISS",
            "(target: median and p95 at or below LiteLLM's, flat as the history grows)",
        )
    return verdict


def print_concurrent(concurrent: dict) -> None:
    print(
        f"{CLIENTS} concurrent clients × {CONCURRENT_TURNS} turns (request wall time, ms); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'':<22}{'gateway':<12}{'p50':>7}{'p95':>7}{'p99':>7}{'req/s':>7}{'errors':>7}")
    verdict = True
    for (protocol, streamed), by_gateway in concurrent.items():
        label = f"{protocol} {'SSE' if streamed else 'JSON'}"
        for name, row in by_gateway.items():
            print(
                f"{label:<22}{name:<12}{row['p50']:7.0f}{row['p95']:7.0f}{row['p99']:7.0f}"
                f"{row['rps']:7.1f}{len(row['errors']):7d}"
                + (f"  first error: {row['errors'][0]}" if row["errors"] else "")
            )
        ours, theirs = by_gateway["hermes-web"], by_gateway["litellm"]
        marks = [
            f"{q} {'≤' if ours[q] <= theirs[q] else '>'} LiteLLM ({ours[q] / theirs[q]:.2f}×)"
            for q in ("p50", "p95", "p99")
        ]
        ok = not ours["errors"] and all(ours[q] <= theirs[q] for q in ("p50", "p95", "p99"))
        verdict = verdict and ok
        print(f"{'':<22}{'PASS' if ok else 'MISS'}: " + ", ".join(marks))
    print(
        "PASS" if verdict else "MISS",
        f"(target at {CLIENTS} concurrent clients: 0 errors, p50, p95 and p99 at or below "
        "LiteLLM's)",
    )


if __name__ == "__main__":
    sys.exit(main())
