"""Agent tools under hostile sizes (issue #16): memory and time of one call, each case in a
fresh process so its peak RSS is its own. Prints PASS/MISS against the targets.

- read_file of 3 lines near the start of a 300 MB file: peak RSS grows < 50 MB
- search_files with (a+)+$ over 1,000 lines of 1,500 'a' then '!': < 5 s (Python's re: never ends)
- terminal printing 300 MB: peak RSS grows < 50 MB and the result is capped
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
import django
django.setup()
from pathlib import Path
from hermes_web.agent.tools import run_tool

def peak_kb():
    with open("/proc/self/status") as f:
        return int(next(l for l in f if l.startswith("VmHWM:")).split()[1])

before = peak_kb()
start = time.monotonic()
result = run_tool({name!r}, {args!r}, workspace=Path({ws!r}))
seconds = time.monotonic() - start
print(json.dumps({{"grew_mb": (peak_kb() - before) / 1024, "seconds": seconds,
                   "chars": len(result), "error": json.loads(result).get("error"),
                   "count": json.loads(result).get("total_count")}}))
"""


def run_case(ws: Path, name: str, args: dict, env: dict) -> dict:
    code = CASE.format(root=str(ROOT), name=name, args=json.dumps(args), ws=str(ws))
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    misses = 0
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        data_dir = ws / "var"
        env = {"HERMES_DATA_DIR": str(data_dir), "HERMES_ENABLE_TERMINAL": "1"}
        line = "2026-03-14T06:00:00Z station TW-017 level=3.21 ok " + "x" * 48 + "\n"
        start = time.monotonic()
        with open(ws / "huge.log", "w") as handle:
            block = line * 10_000
            for _ in range(300_000_000 // len(block)):
                handle.write(block)
        print(
            f"wrote a {os.path.getsize(ws / 'huge.log') / 1e6:,.0f} MB file in {time.monotonic() - start:.1f} s"
        )
        with open(ws / "evil.txt", "w") as handle:
            # 1.5 MB: under the 2 MiB per-file search limit, so every line is really searched
            handle.write(("a" * 1_500 + "!\n") * 1_000 + "aaaa\n")

        cases = [
            (
                "read_file 3 lines of a 300 MB file",
                "read_file",
                {"path": "huge.log", "offset": 10, "limit": 3},
                lambda r: r["grew_mb"] < 50,
                "peak RSS +{grew_mb:.1f} MB in {seconds:.2f} s (target < 50 MB)",
            ),
            (
                "search_files (a+)+$ on 1,000 lines of 1,500 chars",
                "search_files",
                {"pattern": "(a+)+$", "path": "evil.txt"},
                lambda r: r["seconds"] < 5 and r["count"] == 1,
                "{seconds:.2f} s, {count} match, peak RSS +{grew_mb:.1f} MB (target < 5 s)",
            ),
            (
                "terminal printing 300 MB",
                "terminal",
                {"command": "head -c 300000000 /dev/zero | tr '\\0' 'y'", "timeout": 120},
                lambda r: r["grew_mb"] < 50 and r["chars"] < 70_000,
                "peak RSS +{grew_mb:.1f} MB, result {chars:,} chars in {seconds:.1f} s (target < 50 MB)",
            ),
        ]
        for label, name, args, ok, fmt in cases:
            result = run_case(ws, name, args, env)
            verdict = "PASS" if ok(result) and not result["error"] else "MISS"
            misses += verdict == "MISS"
            print(f"{verdict}  {label}: {fmt.format(**result)}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
