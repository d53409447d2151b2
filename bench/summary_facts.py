"""Fact survival of the deterministic summary, measured with an extractor independent of the
engine's own summary code.

    .venv/bin/python bench/summary_facts.py conversation.json [...]

Each file is a JSON list of OpenAI-format messages (convert real Claude Code / Codex /
Hermes transcripts to that outside the repo; never commit them). Each conversation is
compacted (forced, deterministic summarizer) with both profiles; from the compacted middle
(the input messages the summary replaced) this script extracts:

- paths: every file path of a tool call's arguments (keys naming a path) and of patch
  headers (``*** Add/Update/Delete File: x``);
- commands: the first line (≤ 200 chars) of every shell command (tools terminal, bash,
  shell, exec_command, run_shell_command; ``command``/``cmd`` string or argv list);
- exception names: ``FooError`` / ``FooException`` words in tool results;
- constraints: sentences of real user messages (not tool echoes or wrappers) containing
  must / never / always / do not / don't / make sure / avoid / only use;

and counts the share that appears verbatim in the summary body. Targets (issue #13): paths
≥ 90 %, commands ≥ 80 %, exception names ≥ 80 %, constraints ≥ 95 %.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compaction import CompactionConfig, compact  # noqa: E402

TARGETS = {"paths": 0.90, "commands": 0.80, "exceptions": 0.80, "constraints": 0.95}
SHELLS = {"terminal", "bash", "shell", "exec_command", "run_shell_command", "local_shell"}
PATH_KEY = re.compile(r"path$|^file$|^filename$", re.IGNORECASE)
PATCH_HEADER = re.compile(r"\*\*\* ?(?:Add|Update|Delete) File: ?(\S+)")
EXCEPTION = re.compile(r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b")
CONSTRAINT = re.compile(
    r"\b(must|never|always|do not|don't|make sure|avoid|only use)\b", re.IGNORECASE
)
WRAPPERS = (
    "<environment_context",
    "<user_instructions",
    "<command-",
    "<local-command",
    "<system-reminder",
    "Caveat:",
    "[Request interrupted",
    "This session is being continued from a previous conversation",
)


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content)


def _args(call) -> dict:
    raw = (call.get("function") or {}).get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def extract(middle: list[dict]) -> dict[str, set[str]]:
    facts: dict[str, set[str]] = {k: set() for k in TARGETS}
    for m in middle:
        role = m.get("role")
        if role == "assistant":
            for call in m.get("tool_calls") or []:
                name = str((call.get("function") or {}).get("name") or "").lower()
                args = _args(call)
                for key, value in args.items():
                    if isinstance(value, str) and PATH_KEY.search(key) and value.strip():
                        facts["paths"].add(value.strip())
                    if isinstance(value, str):
                        facts["paths"].update(PATCH_HEADER.findall(value))
                if name in SHELLS:
                    command = args.get("command", args.get("cmd"))
                    if isinstance(command, list):
                        command = (
                            command[-1]
                            if command[:1] in (["bash"], ["sh"])
                            else " ".join(map(str, command))
                        )
                    if isinstance(command, str) and command.strip():
                        facts["commands"].add(command.strip().splitlines()[0][:200])
        elif role == "tool":
            facts["exceptions"].update(EXCEPTION.findall(_text(m.get("content"))[:20_000]))
        elif role == "user":
            text = _text(m.get("content")).strip()
            if not text or text.startswith(WRAPPERS):
                continue
            for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
                sentence = sentence.strip()
                if 8 <= len(sentence) <= 300 and CONSTRAINT.search(sentence):
                    facts["constraints"].add(sentence)
    return facts


def _norm(text: str) -> str:
    return " ".join(text.split())


def survival(messages: list[dict], profile: str) -> tuple[dict[str, tuple[int, int]], int]:
    config = CompactionConfig(profile=profile, context_length=200_000)
    out = compact(messages, config=config, force=True, now=date(2026, 12, 3))
    report = out.report
    start, stop = report.boundaries["middle"]
    facts = extract(messages[start:stop])
    body = _norm(report.summary_body or "")
    return {k: (sum(_norm(f) in body for f in v), len(v)) for k, v in facts.items()}, len(body)


def main(paths: list[str]) -> int:
    totals = {p: {k: [0, 0] for k in TARGETS} for p in ("classic", "hermes")}
    for path in paths:
        messages = json.loads(Path(path).read_text())
        for profile in totals:
            found, size = survival(messages, profile)
            line = ", ".join(f"{k} {a}/{b}" for k, (a, b) in found.items())
            print(f"{Path(path).name[:48]:48} {profile:8} summary {size:6,} chars: {line}")
            for k, (a, b) in found.items():
                totals[profile][k][0] += a
                totals[profile][k][1] += b
    missed = False
    for profile, figures in totals.items():
        print(f"\n{profile}:")
        for k, (a, b) in figures.items():
            share = a / b if b else 1.0
            verdict = "PASS" if share >= TARGETS[k] else "MISS"
            if profile == "hermes" and verdict == "MISS":
                missed = True
            print(f"  {k:12} {a:5}/{b:<5} {share:6.1%}  target {TARGETS[k]:.0%}  {verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
