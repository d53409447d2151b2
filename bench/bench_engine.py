"""Benchmark of the compaction engine (no LLM): python bench/bench_engine.py

Generates conversations of 1k, 10k and 50k messages, counts tokens once, then times the whole
pipeline with the precomputed counts and the deterministic summarizer. Prints per-phase
times from the report, messages/s, peak memory (tracemalloc, separate run) and the ratio to
one plain tiktoken pass over the same text. Targets: 10k messages ≤ 150 ms; 50k ≤ 5.5× the
10k time. Asserts nothing.
"""

from __future__ import annotations

import gc
import os
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compaction import CompactionConfig, compact, count_messages_tokens, generate_conversation  # noqa: E402
from compaction.tokens import get_encoding, message_token_text  # noqa: E402

SIZES = (1_000, 10_000, 50_000)
PHASES = ("boundary", "slimming", "serialize", "summarize", "assemble", "sanitize")


def tiktoken_pass(messages: list[dict], config: CompactionConfig) -> float:
    encoding = get_encoding(config.model)
    texts = [message_token_text(m)[0] for m in messages]
    start = time.perf_counter()
    encoding.encode_ordinary_batch(texts, num_threads=min(2, os.cpu_count() or 1))
    return time.perf_counter() - start


def main() -> None:
    config = CompactionConfig()
    rows = []
    for size in SIZES:
        messages = generate_conversation(size, seed=42)
        chars = sum(len(message_token_text(m)[0]) for m in messages)
        counts = count_messages_tokens(messages, config)
        tik = tiktoken_pass(messages, config)
        runs = 7 if size <= 10_000 else 5
        best = None
        for _ in range(runs):
            gc.collect()
            start = time.perf_counter()
            result = compact(messages, config=config, token_counts=counts)
            elapsed = time.perf_counter() - start
            if best is None or elapsed < best[0]:
                best = (elapsed, result.report)
        assert best is not None
        elapsed, report = best
        gc.collect()
        tracemalloc.start()
        compact(messages, config=config, token_counts=counts)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows.append((size, chars, sum(counts), elapsed, tik, peak, report))
        del messages, counts

    print(
        f"{'messages':>9} {'MB text':>8} {'tokens':>11} {'total ms':>9} {'msg/s':>10} "
        f"{'peak MB':>8} {'tiktoken ms':>12} {'ratio':>6}  status"
    )
    for size, chars, tokens, elapsed, tik, peak, report in rows:
        print(
            f"{size:>9,} {chars / 1e6:>8.1f} {tokens:>11,} {elapsed * 1000:>9.1f} "
            f"{size / elapsed:>10,.0f} {peak / 1e6:>8.1f} {tik * 1000:>12.1f} "
            f"{elapsed / tik:>6.3f}  {report.status} ({report.tokens['before']:,} → "
            f"{report.tokens['after']:,} tokens)"
        )
    print()
    print(f"{'messages':>9} " + " ".join(f"{p:>10}" for p in PHASES))
    for size, *_, report in rows:
        print(f"{size:>9,} " + " ".join(f"{report.timings_ms[p]:>10.1f}" for p in PHASES))
    print()
    t10 = next(r[3] for r in rows if r[0] == 10_000)
    t50 = next(r[3] for r in rows if r[0] == 50_000)
    verdict = "PASS" if t10 <= 0.150 else "MISS"
    print(f"{verdict}: 10k messages in {t10 * 1000:.1f} ms (target ≤ 150 ms)")
    verdict = "PASS" if t50 <= 5.5 * t10 else "MISS"
    print(f"{verdict}: 50k messages in {t50 / t10:.2f}× the 10k time (target ≤ 5.5×)")


if __name__ == "__main__":
    main()
