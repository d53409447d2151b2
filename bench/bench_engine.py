"""Benchmark of the compaction engine (no LLM): python bench/bench_engine.py

Generates conversations of 1k, 10k and 50k messages, counts tokens once, then times the whole
pipeline with the precomputed counts and the deterministic summarizer. Prints per-phase
times from the report, messages/s, peak memory (tracemalloc, separate run) and the ratio to
one plain tiktoken pass over the same text. Targets: 10k messages ≤ 150 ms; 50k ≤ 5.5× the
10k time. Asserts nothing.

The multi-process timing below is of the ``classic`` profile (the seed's engine, the figures
the README has tracked); a second table times both profiles in this process, with cached
counts (best of a few runs, the profiles alternating) and without (one run: the engine counts
tokens itself). The default (hermes) profile's 10k cached time is checked against 1.3× the
classic one in each of the fresh processes (alternating runs), and the verdict is the median
process's ratio, for the same reason as below; every process's pair is printed.

On this kind of shared VM the same code runs up to 1.6× slower in one process than in the
next (how the host backs the process's memory), while the runs inside one process agree.
So the timings are taken in several fresh processes, each timing every size (the best of a
few runs per size), and the verdicts use the median process: the median 10k time, and the
median of each process's own 50k/10k ratio. Every process's figures are printed. Token
counts are computed once here and handed to the processes (the target is with cached
counts); each process generates its conversations itself.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compaction import CompactionConfig, compact, count_messages_tokens, generate_conversation  # noqa: E402
from compaction.tokens import get_encoding, message_token_text  # noqa: E402

SIZES = (1_000, 10_000, 50_000)
RUNS = {1_000: 7, 10_000: 7, 50_000: 7}  # timed runs per size in each process
PROCESSES = 5
PROFILE_RUNS = {1_000: 7, 10_000: 7, 50_000: 1}  # cached runs per profile (profile_bests)
PHASES = ("boundary", "slimming", "serialize", "summarize", "assemble", "sanitize")


def tiktoken_pass(messages: list[dict], config: CompactionConfig) -> float:
    encoding = get_encoding(config.model)
    texts = [message_token_text(m)[0] for m in messages]
    start = time.perf_counter()
    encoding.encode_ordinary_batch(texts, num_threads=min(2, os.cpu_count() or 1))
    return time.perf_counter() - start


def time_sizes(counts_file: str) -> dict[int, dict]:
    """One process's figures: for each size, the best of its runs."""
    counts_by_size = {int(k): v for k, v in json.loads(Path(counts_file).read_text()).items()}
    config = CompactionConfig(profile="classic")
    out = {}
    for size in SIZES:
        messages = generate_conversation(size, seed=42)
        counts = counts_by_size[size]
        best = None
        result = None
        for _ in range(RUNS[size]):
            # The previous run's result is freed here: rebinding ``result`` below would free
            # it inside the timed region and charge one run with the last one's teardown.
            result = None
            gc.collect()
            start = time.perf_counter()
            result = compact(messages, config=config, token_counts=counts)
            elapsed = time.perf_counter() - start
            if best is None or elapsed < best[0]:
                best = (elapsed, result.report)
        assert best is not None
        elapsed, report = best
        out[size] = {"elapsed": elapsed, "phases": {p: report.timings_ms[p] for p in PHASES}}
        if size == 10_000:
            bests = profile_bests(messages, counts, PROFILE_RUNS[size])
            out[size]["profiles"] = {profile: best[0] for profile, best in bests.items()}
        del messages, counts, result, best
    return out


def profile_bests(messages: list[dict], counts: list[int], runs: int) -> dict[str, tuple]:
    """``(best cached time, its report)`` of each profile over ``runs`` runs, their runs
    alternating (a slow spell of the machine falls on both). Both profiles count tokens
    alike, so one list of counts serves both."""
    configs = {profile: CompactionConfig(profile=profile) for profile in ("classic", "hermes")}
    bests: dict[str, tuple] = {}
    for _ in range(runs):
        for profile, config in configs.items():
            gc.collect()
            start = time.perf_counter()
            result = compact(messages, config=config, token_counts=counts)
            elapsed = time.perf_counter() - start
            if profile not in bests or elapsed < bests[profile][0]:
                bests[profile] = (elapsed, result.report)
            del result
    return bests


def describe(size: int, config: CompactionConfig) -> tuple[dict, list[int]]:
    """Text size, tokens, tiktoken time, peak memory and outcome of one size (this process)."""
    messages = generate_conversation(size, seed=42)
    counts = count_messages_tokens(messages, config)
    gc.collect()
    tracemalloc.start()
    result = compact(messages, config=config, token_counts=counts)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    report = result.report
    return {
        "chars": sum(len(message_token_text(m)[0]) for m in messages),
        "tiktoken": tiktoken_pass(messages, config),
        "peak": peak,
        "outcome": f"{report.status} ({report.tokens['before']:,} → {report.tokens['after']:,} tokens)",
        "tokens": report.tokens["before"],
    }, counts


def profiles_table() -> None:
    """Both profiles, cached and uncached, timed in this process."""
    print()
    print(
        f"{'messages':>9} {'profile':>8} {'cached ms':>10} {'uncached ms':>12} {'after tokens':>13}"
        "  warnings"
    )
    cached_10k = {}
    for size in SIZES:
        messages = generate_conversation(size, seed=42)
        counts = count_messages_tokens(messages, CompactionConfig())
        bests = profile_bests(messages, counts, PROFILE_RUNS[size])
        for profile, (best, report) in bests.items():
            config = CompactionConfig(profile=profile)
            gc.collect()
            start = time.perf_counter()
            compact(messages, config=config)
            uncached = time.perf_counter() - start
            if size == 10_000:
                cached_10k[profile] = best
            codes = ",".join(w["code"] for w in report.warnings) or "-"
            redact_ms = report.timings_ms.get("redact", 0.0)
            share = redact_ms / report.timings_ms["total"] if report.timings_ms["total"] else 0
            codes += f"  (redaction {redact_ms:.1f} ms, {share:.0%} of the run; target ≤ 10 %)"
            print(
                f"{size:>9,} {profile:>8} {best * 1000:>10.1f} {uncached * 1000:>12.1f} "
                f"{report.tokens['after']:>13,}  {codes}"
            )
    ratio = cached_10k["hermes"] / cached_10k["classic"]
    print(f"this process: hermes at 10k cached is {ratio:.2f}× classic (the verdict: below)")


def main() -> None:
    config = CompactionConfig(profile="classic")
    facts, counts = {}, {}
    for size in SIZES:
        facts[size], counts[size] = describe(size, config)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(counts, handle)
    try:
        processes = []
        for _ in range(PROCESSES):
            command = [sys.executable, __file__, "--time", handle.name]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            processes.append({int(k): v for k, v in json.loads(done.stdout).items()})
    finally:
        os.unlink(handle.name)

    def median_process(size: int) -> dict:
        return sorted(processes, key=lambda p: p[size]["elapsed"])[len(processes) // 2][size]

    print(
        f"{'messages':>9} {'MB text':>8} {'tokens':>11} {'median ms':>10} {'msg/s':>10} "
        f"{'peak MB':>8} {'tiktoken ms':>12} {'ratio':>6}  status"
    )
    for size in SIZES:
        f, elapsed = facts[size], median_process(size)["elapsed"]
        print(
            f"{size:>9,} {f['chars'] / 1e6:>8.1f} {f['tokens']:>11,} {elapsed * 1000:>10.1f} "
            f"{size / elapsed:>10,.0f} {f['peak'] / 1e6:>8.1f} {f['tiktoken'] * 1000:>12.1f} "
            f"{elapsed / f['tiktoken']:>6.3f}  {f['outcome']}"
        )
    print()
    print(
        f"{'process':>9} "
        + " ".join(f"{size:>10,}" for size in SIZES)
        + "  50k/10k   (ms, best of its runs)"
    )
    ratios = []
    for index, p in enumerate(processes, 1):
        ratios.append(p[50_000]["elapsed"] / p[10_000]["elapsed"])
        print(
            f"{index:>9} "
            + " ".join(f"{p[size]['elapsed'] * 1000:>10.1f}" for size in SIZES)
            + f"  {ratios[-1]:>6.2f}×"
        )
    print()
    print(f"{'messages':>9} " + " ".join(f"{p:>10}" for p in PHASES) + "   (median process)")
    for size in SIZES:
        phases = median_process(size)["phases"]
        print(f"{size:>9,} " + " ".join(f"{phases[p]:>10.1f}" for p in PHASES))
    print()
    t10, ratio = median_process(10_000)["elapsed"], statistics.median(ratios)
    verdict = "PASS" if t10 <= 0.150 else "MISS"
    print(f"{verdict}: 10k messages in {t10 * 1000:.1f} ms, median process (target ≤ 150 ms)")
    verdict = "PASS" if ratio <= 5.5 else "MISS"
    print(f"{verdict}: 50k messages in {ratio:.2f}× the 10k time, median process (target ≤ 5.5×)")
    profiles_table()
    print()
    print(
        f"{'process':>9} {'classic ms':>11} {'hermes ms':>10} {'ratio':>6}   (10k, cached, alternating)"
    )
    profile_ratios = []
    for index, p in enumerate(processes, 1):
        bests = p[10_000]["profiles"]
        profile_ratios.append(bests["hermes"] / bests["classic"])
        print(
            f"{index:>9} {bests['classic'] * 1000:>11.1f} {bests['hermes'] * 1000:>10.1f} "
            f"{profile_ratios[-1]:>5.2f}×"
        )
    median_ratio = statistics.median(profile_ratios)
    verdict = "PASS" if median_ratio <= 1.3 else "MISS"
    print(
        f"{verdict}: default (hermes) profile at 10k cached is {median_ratio:.2f}× classic, "
        "median process (target ≤ 1.3×)"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--time"]:
        print(json.dumps(time_sizes(sys.argv[2])))
    else:
        main()
