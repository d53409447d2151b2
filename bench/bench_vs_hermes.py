"""Our engine, uncached, vs Hermes's own context compressor: time and peak memory, same inputs.

    .venv/bin/python bench/bench_vs_hermes.py [--quick]

Hermes's compressor (``agent/context_compressor.py`` of NousResearch/hermes-agent, MIT) is
imported, never copied here. It comes from ``HERMES_AGENT_CHECKOUT`` (a checkout or an unpacked
wheel) when set, else from the pinned PyPI release ``hermes-agent==0.19.0`` (hash-checked),
installed once with ``pip --no-deps --target var/bench-hermes/0.19.0`` the way the real-client
tests install their clients; the few libraries it imports (openai, pydantic, yaml, httpx…)
are the project's own. Without either, the table shows our two profiles only and says how to
provide it. Its summary LLM call is stubbed to return at once, so both sides time only their
own work; nothing is cached between runs (no stored token counts, fresh dicts each run).

Inputs, "real-shaped": Claude Code sessions generated from the shapes of real ones (tool-heavy
Read/Bash/Edit runs with long outputs, ``bench/claude_code_shapes.py``) and converted by our
importer, 10 to 20,000 messages; and the engine's generated conversations at 1k–50k. Forced
compaction at a 200K window. Each side is timed best-of-N in this process, then its peak
Python memory is measured in one more run under tracemalloc.

Real inputs (issue 39): ``--real DIR`` (or ``HERMES_BENCH_REAL``) adds every Claude Code,
Codex, Hermes and Pi transcript found under DIR (``*.jsonl``, read by our importers as a user's
upload is, the agent's own compactions undone so the rows are those it lived), alone and
concatenated ×5 and ×20, each at a 64K and a 200K window. Real transcripts are public files
kept outside the repository (never committed); without them the table says so.

Targets per row (issue 26, item 4): ours (default ``hermes`` profile) at most Hermes's time
and at most its peak memory; ``classic`` at most 2× ours in time and in memory.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERMES_VERSION = "0.19.0"
HERMES_WHEEL_SHA256 = "bd0bac012aee38a60894781f4597dc29ee7bedb3448540249921f10d3bef327f"
HERMES_DIR = ROOT / "var" / "bench-hermes" / HERMES_VERSION
HOW_TO_PROVIDE = (
    "set HERMES_AGENT_CHECKOUT=/path/to/hermes-agent (a checkout of NousResearch/hermes-agent "
    f"or an unpacked hermes_agent wheel), or let pip reach PyPI once to install "
    f"hermes-agent=={HERMES_VERSION} into {HERMES_DIR.relative_to(ROOT)}"
)
CLAUDE_CODE_SIZES = (10, 20, 50, 100, 300, 1_000, 5_000, 20_000)
GENERATED_SIZES = (1_000, 10_000, 20_000, 50_000)  # issue 39 names 1k, 10k and 50k


def hermes_path() -> tuple[str | None, str]:
    """Where Hermes's ``agent`` package is importable from, and where it came from."""
    checkout = os.environ.get("HERMES_AGENT_CHECKOUT")
    if checkout:
        if not (Path(checkout) / "agent" / "context_compressor.py").is_file():
            return None, f"HERMES_AGENT_CHECKOUT={checkout} has no agent/context_compressor.py"
        return checkout, f"HERMES_AGENT_CHECKOUT={checkout}"
    if not (HERMES_DIR / "agent" / "context_compressor.py").is_file():
        HERMES_DIR.parent.mkdir(parents=True, exist_ok=True)
        pins = HERMES_DIR.parent / f"requirements-{HERMES_VERSION}.txt"
        pins.write_text(f"hermes-agent=={HERMES_VERSION} --hash=sha256:{HERMES_WHEEL_SHA256}\n")
        install = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--require-hashes",
                "--only-binary=:all:",
                "--target",
                str(HERMES_DIR),
                "-r",
                str(pins),
            ],
            capture_output=True,
            text=True,
        )
        if install.returncode != 0:
            reason = (install.stderr.strip().splitlines() or ["pip failed"])[-1]
            return None, f"pip install hermes-agent=={HERMES_VERSION} failed: {reason}"
    return str(HERMES_DIR), f"hermes-agent=={HERMES_VERSION} from PyPI ({HERMES_DIR})"


def load_hermes(path: str) -> Any:
    """Hermes's compressor module, its LLM call stubbed, its state kept under var/."""
    home = ROOT / "var" / "bench-hermes" / "home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["HERMES_HOME"] = str(home)
    # Its top-level ``tools``/``utils`` packages must win over ours while it is imported;
    # the engine (``compaction``) has no namesake there.
    sys.path.insert(0, path)
    import agent.context_compressor as hermes  # type: ignore[import-not-found]

    class _Message:
        content = "## Goal\nstub summary"
        reasoning_content = None
        refusal = None

    class _Choice:
        message = _Message()
        finish_reason = "stop"

    class _Response:
        choices = [_Choice()]
        usage = None

    hermes.call_llm = lambda *a, **k: _Response()
    return hermes


def measure(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Best wall time in ms over ``repeats`` runs, then the peak traced MB of one more run."""
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    gc.collect()
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return best * 1000, peak


def repeats_for(size: int) -> int:
    return 9 if size <= 100 else 5 if size <= 1_000 else 2 if size <= 5_000 else 1


def real_inputs(folder: str | None) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(label, messages)`` of each readable transcript under ``folder``, then ×5 and ×20
    concatenations of each (the sessions an agent that runs for hours would hold)."""
    if not folder:
        return []
    from summary_facts import load

    found = []
    for path in sorted(Path(folder).rglob("*.jsonl")):
        try:
            agent, messages = load(str(path))
        except ValueError:
            continue
        found.append((f"{agent}:{len(messages)}", messages))
    grown = []
    for label, messages in found:
        for times in (5, 20):
            grown.append((f"{label}×{times}", [dict(m) for _ in range(times) for m in messages]))
    return found + grown


def main(quick: bool, real: str | None) -> int:
    path, origin = hermes_path()
    hermes = load_hermes(path) if path else None
    sys.path.insert(1, str(ROOT))
    sys.path.insert(2, str(ROOT / "bench"))
    from claude_code_shapes import claude_code_session

    from compaction import CompactionConfig, compact, generate_conversation

    compact(generate_conversation(300, seed=1))  # tiktoken loaded, as in a running worker
    print(f"Hermes's compressor: {origin if hermes else 'NOT AVAILABLE — ' + origin}")
    if not hermes:
        print(f"  to compare with it, {HOW_TO_PROVIDE}")
    print("targets: ours ≤ Hermes in time and peak memory; classic ≤ 2× ours in both")
    header = (
        f"{'input':<20} {'window':>5} {'msgs':>6} | {'ours ms':>8} {'classic':>8} {'hermes':>8} | "
        f"{'ours MB':>8} {'classic':>8} {'hermes':>8} | verdict"
    )
    print(header)
    print("-" * len(header))
    sizes = [("claude-code", n) for n in CLAUDE_CODE_SIZES] + [
        ("generated", n) for n in GENERATED_SIZES
    ]
    if quick:
        sizes = [(kind, n) for kind, n in sizes if n <= 1_000]
    rows: list[tuple[str, int, Callable[[], list[dict[str, Any]]]]] = []
    for kind, size in sizes:
        if kind == "claude-code":
            rows.append((kind, 200_000, lambda size=size: claude_code_session(size, seed=size)))
        else:
            rows.append((kind, 200_000, lambda size=size: generate_conversation(size, seed=42)))
    real_rows = real_inputs(real)
    if real and not real_rows:
        print(f"no readable transcript under {real}")
    elif not real:
        print("real inputs: none (pass --real DIR or set HERMES_BENCH_REAL to add them)")
    for label, real_messages in real_rows:
        for window in (64_000, 200_000):
            rows.append((label, window, lambda m=real_messages: m))
    misses = time_misses = mem_misses = compared = 0
    for kind, window, build in rows:
        messages = build()
        size = len(messages)
        repeats = repeats_for(size)
        ours_config = CompactionConfig(context_length=window)
        classic_config = CompactionConfig(context_length=window, profile="classic")

        def ours(messages: list[dict[str, Any]] = messages, config: Any = ours_config) -> object:
            return compact([dict(m) for m in messages], config=config, force=True)

        def classic(
            messages: list[dict[str, Any]] = messages, config: Any = classic_config
        ) -> object:
            return compact([dict(m) for m in messages], config=config, force=True)

        o_ms, o_mb = measure(ours, repeats)
        c_ms, c_mb = measure(classic, repeats)
        misses_here = []
        if c_ms > 2 * o_ms:
            misses_here.append("classic time")
        if c_mb > 2 * o_mb:
            misses_here.append("classic mem")
        if hermes is not None:

            def theirs(messages: list[dict[str, Any]] = messages, window: int = window) -> object:
                compressor = hermes.ContextCompressor(
                    model="gpt-4o-mini", config_context_length=window, quiet_mode=True
                )
                return compressor.compress([dict(m) for m in messages], force=True)

            h_ms, h_mb = measure(theirs, repeats)
            compared += 1
            time_misses += o_ms > h_ms
            mem_misses += o_mb > h_mb
            if o_ms > h_ms:
                misses_here.append(f"time {h_ms / o_ms:.2f}×")
            if o_mb > h_mb:
                misses_here.append(f"mem {h_mb / o_mb:.2f}×")
            hermes_cols = (f"{h_ms:>8.1f}", f"{h_mb:>8.1f}")
        else:
            hermes_cols = (f"{'-':>8}", f"{'-':>8}")
        verdict = "PASS" if not misses_here else "MISS (" + ", ".join(misses_here) + ")"
        misses += bool(misses_here)
        print(
            f"{kind[:20]:<20} {window // 1000:>4}K {len(messages):>6,} | {o_ms:>8.1f} {c_ms:>8.1f} {hermes_cols[0]} | "
            f"{o_mb:>8.1f} {c_mb:>8.1f} {hermes_cols[1]} | {verdict}",
            flush=True,
        )
    print(f"{len(rows) - misses}/{len(rows)} rows PASS")
    if compared:
        print(
            f"vs Hermes: time PASS {compared - time_misses}/{compared}, "
            f"memory PASS {compared - mem_misses}/{compared}"
        )
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    folder = args[args.index("--real") + 1] if "--real" in args[:-1] else None
    sys.exit(main("--quick" in args, folder or os.environ.get("HERMES_BENCH_REAL")))
