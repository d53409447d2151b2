"""Run every benchmark script in bench/ (bench_*.py), one process each, and print their figures."""

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Builds a 1M-message session and takes about ten minutes: run it by hand, or set
# HERMES_BENCH_ALL=1 to include it here.
BY_HAND = {"bench_memory.py"}
# Search at 1M stored messages takes about ten minutes per database too: without
# HERMES_BENCH_ALL=1 it runs at 10k and 100k only.
SHORT_ARGS = {"bench_search.py": ["--sizes", "10000,100000"]}


def main() -> int:
    failures = 0
    for script in sorted(HERE.glob("bench_*.py")):
        if script.name in BY_HAND and not os.environ.get("HERMES_BENCH_ALL"):
            print(f"\n=== {script.name}: skipped (HERMES_BENCH_ALL=1 runs it) ===", flush=True)
            continue
        print(f"\n=== {script.name} ===", flush=True)
        args = [] if os.environ.get("HERMES_BENCH_ALL") else SHORT_ARGS.get(script.name, [])
        result = subprocess.run([sys.executable, str(script), *args], cwd=HERE.parent)
        failures += result.returncode != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
