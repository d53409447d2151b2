"""Our engine without cached token counts vs Hermes's own context compressor.

    .venv/bin/python bench/bench_vs_hermes.py /path/to/hermes-agent-checkout [--mem]

The checkout (e.g. NousResearch/hermes-agent, or a fork) is imported from its path; nothing
of it is copied here. Its summary LLM call is stubbed to return at once, so both sides time
only their own work. Same generated conversations (1k/10k/50k messages), forced compaction,
a 200K window. ``--mem`` also measures peak Python memory (tracemalloc; slower). Prints the
speed ratio per size and PASS/MISS against "at least as fast as Hermes".
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(checkout: str, mem: bool) -> None:
    sys.path.insert(0, checkout)
    sys.path.insert(1, str(ROOT))
    import agent.context_compressor as hermes  # type: ignore[import-not-found]

    from compaction import CompactionConfig, compact, generate_conversation

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
    compact(generate_conversation(300, seed=1))  # tiktoken loaded, as in a running worker
    print(
        f"{'messages':>9} {'hermes ms':>10} {'ours ms':>8} {'hermes MB':>10} {'ours MB':>8}  ratio"
    )
    for size in (1_000, 10_000, 50_000):
        messages = generate_conversation(size, seed=42)

        def theirs(messages=messages):
            compressor = hermes.ContextCompressor(
                model="gpt-4o-mini", config_context_length=200_000, quiet_mode=True
            )
            return compressor.compress([dict(m) for m in messages], force=True)

        def ours(messages=messages):
            return compact(messages, config=CompactionConfig(context_length=200_000), force=True)

        row = []
        for run in (theirs, ours):
            best, peak = None, None
            for _ in range(1 if size == 50_000 or mem else 2):
                gc.collect()
                if mem:
                    tracemalloc.start()
                start = time.perf_counter()
                run()
                elapsed = time.perf_counter() - start
                if mem:
                    peak = tracemalloc.get_traced_memory()[1] / 1e6
                    tracemalloc.stop()
                best = elapsed if best is None else min(best, elapsed)
            row.append((best * 1000, peak))
        (t_ms, t_mb), (o_ms, o_mb) = row
        ratio = t_ms / o_ms
        verdict = "PASS" if ratio >= 1 else "MISS"
        mb = f"{t_mb or 0:>10.1f} {o_mb or 0:>8.1f}" if mem else f"{'-':>10} {'-':>8}"
        print(f"{size:>9,} {t_ms:>10.0f} {o_ms:>8.0f} {mb}  {ratio:.2f}× {verdict}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], "--mem" in sys.argv[2:])
