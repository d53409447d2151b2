"""Fact survival of the summary, measured with an extractor independent of the engine's code.

    .venv/bin/python bench/summary_facts.py [--generated] [--hermes-only] [transcript ...]

A transcript is a JSON list of OpenAI-format messages, a Claude Code ``.jsonl``, a Codex
rollout ``.jsonl`` or a Hermes session export ``.jsonl`` (read with the app's own importers,
which keep each row's time as ``timestamp``). The session is replayed as it was lived: the
rows the agent's own compactions archived are kept (its summary rows are left out). Fetch real ones outside the repo (``var/`` or ``/tmp``); never commit them.
``--generated`` adds generated sessions (the engine's synthetic conversations, and Claude
Code / Codex logs written by ``tests/agent_logs.py`` read through the importers).

Each session is replayed as an agent lives it, per profile (``hermes``, ``classic``),
summarizer kind (``deterministic``; ``llm``: an ``LLMSummarizer`` against a local fake OpenAI
server, a real HTTP round trip through litellm, answering a plausible but fact-poor summary)
and window (32K, 200K): messages are added one by one and, before every model call (after a
user message, or after the last tool result of a batch), the conversation is compacted when
``should_compact`` says so, up to five times. "×1" is the first compaction (facts of its
middle in its summary); "×5" the fifth (facts of all five rounds' middles in the fifth
summary), only for sessions that reached five compactions; "×2-4" the last compaction of
sessions that stopped before five. From the compacted middle of every round (the input rows the summary replaced;
earlier summaries left out) this script extracts:

- paths: path arguments of tool calls, patch headers (``*** Add/Update/Delete File: x``,
  ``+++ b/x``), and the file operands of reading shell commands (cat, sed, head, tail, nl,
  wc, rg, grep, ls, python, pytest …), Windows drive paths (``E:/x``, ``C:\\x``) among them;
- commands: the first line (≤ 200 chars) of every shell command;
- exceptions: ``FooError`` / ``FooException`` words in tool results;
- error lines: lines of failed shell results (a non-zero exit code) that start like an error
  report (``FooError:``, ``error:``, ``fatal:``, ``FAILED``, ``Traceback``, ``E   ``);
- constraints: sentences of real user messages containing must / never / always / do not /
  don't / make sure / avoid / only use;

and counts the share found verbatim in the summary body (and how many of them only the fact
ledger kept, not the narrative) (error lines by their first 120
chars). It prints per session, then per agent, profile, summarizer and window the kept
shares, the summary size in tokens, and PASS/MISS against the issue #26 targets: paths ≥ 90 %,
commands ≥ 80 %, exceptions ≥ 90 %, error lines ≥ 70 %, constraints ≥ 90 %, every kind
≥ 85 % over five compactions; the summary at most 8,000 tokens at 200K and 5 % of the window
at 32K. Exit status 1 when the hermes profile misses a target.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import sys
import tempfile
from collections import defaultdict
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compaction import CompactionConfig, LLMSummarizer, compact, should_compact  # noqa: E402
from compaction.markers import is_summary_message  # noqa: E402
from compaction.synthetic import generate_conversation  # noqa: E402
from compaction.tokens import count_message_tokens  # noqa: E402
from tests.fake_openai import FakeOpenAIServer  # noqa: E402

TARGETS = {"paths": 0.90, "commands": 0.80, "exceptions": 0.90, "errors": 0.70, "constraints": 0.90}
FIVE_TARGET = 0.85
WINDOWS = (32_000, 200_000)
SIZE_CAP = {32_000: 1_600, 200_000: 8_000}
DAY = date(2026, 12, 4)
SHELLS = {"terminal", "bash", "shell", "exec_command", "run_shell_command", "local_shell"}
DRIVE = re.compile(r"(?<![\w:/])[A-Za-z]:[\\/]")  # a Windows drive path: C:\\x, E:/y
PATH_KEY = re.compile(r"path$|^file$|^filename$", re.IGNORECASE)
PATCH_HEADER = re.compile(r"^\*\*\* ?(?:Add|Update|Delete) File: ?(\S+)|^\+\+\+ b/(\S+)", re.M)
EXCEPTION = re.compile(r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b")
ERROR_LINE = re.compile(
    r"^\s*(?:[A-Z]\w*(?:Error|Exception):|error(?:\[\w+\])?:|fatal:|FAILED |Traceback|E {3})"
)
EXIT = re.compile(r'"exit_code"\s*:\s*(-?\d+)|[Ee]xit code:?\s*(-?\d+)')
CONSTRAINT = re.compile(
    r"\b(must|never|always|do not|don't|make sure|avoid|only use)\b", re.IGNORECASE
)
READING = {"cat", "sed", "head", "tail", "nl", "wc", "rg", "grep", "ls", "python", "python3"}
READING |= {"pytest"}
WRAPPERS = (
    "<environment_context",
    "<user_instructions",
    "<command-",
    "<local-command",
    "<system-reminder",
    "Caveat:",
    "[Request interrupted",
    "This session is being continued from a previous conversation",
    "<task-notification",
)
# What a real LLM summary of such sessions tends to look like: the gist, few exact facts.
FACT_POOR = (
    "## Active Task\nContinue the current work.\n\n## Goal\nImprove the project as the user "
    "asked.\n\n## Completed Actions\n1. Read the relevant source files and made the requested "
    "changes.\n2. Ran the tests; some failures were fixed.\n\n## Active State\nWork is in "
    "progress; the test suite was run recently.\n\n## Remaining Work\n- Finish the remaining "
    "changes and re-run the tests."
)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content)


def _args(call: dict) -> dict:
    raw = (call.get("function") or {}).get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _shell_command(args: dict) -> str | None:
    command = args.get("command", args.get("cmd"))
    if isinstance(command, list):
        parts = [str(p) for p in command]
        command = parts[-1] if parts[:1] in (["bash"], ["sh"]) else " ".join(parts)
    return command if isinstance(command, str) and command.strip() else None


def _command_files(command: str) -> set[str]:
    found = {a or b for a, b in PATCH_HEADER.findall(command)}
    for segment in re.split(r"&&|\|\||[;|\n]", command.split("<<")[0]):
        windows = DRIVE.search(segment) is not None  # POSIX shlex would eat its backslashes
        try:
            words = shlex.split(segment, posix=not windows)
        except ValueError:
            words = segment.split()
        if windows:
            words = [
                w[1:-1] if len(w) > 1 and w[0] == w[-1] and w[0] in "\"'" else w for w in words
            ]
        if not words or words[0] not in READING:
            continue
        operands = [w for w in words[1:] if not w.startswith("-")]
        if words[0] in ("rg", "grep", "sed") and operands:
            operands = operands[1:]
        for word in operands:
            pathlike = "/" in word or re.search(r"\.\w{1,5}$", word)
            plain = re.fullmatch(r"(?:[A-Za-z]:[\\/])?[\w./@+~\\-]+", word)
            plain = plain and not word.replace(".", "").isdigit()
            if "://" not in word and pathlike and plain:
                found.add(word.split("::")[0])
    return found


def extract(middle: list[dict]) -> dict[str, set[str]]:
    facts: dict[str, set[str]] = {k: set() for k in TARGETS}
    commands: dict[str, str] = {}
    for m in middle:
        role = m.get("role")
        if is_summary_message(m):
            continue
        if role == "assistant":
            for call in m.get("tool_calls") or []:
                name = str((call.get("function") or {}).get("name") or "").lower()
                args = _args(call)
                for key, value in args.items():
                    named = isinstance(value, str) and PATH_KEY.search(key) and value.strip()
                    if named and "\n" not in value:
                        facts["paths"].add(value.strip())
                    if isinstance(value, str) and key not in ("command", "cmd"):
                        facts["paths"].update(a or b for a, b in PATCH_HEADER.findall(value))
                command = _shell_command(args) if name in SHELLS else None
                if command:
                    facts["commands"].add(command.strip().splitlines()[0][:200])
                    facts["paths"].update(_command_files(command))
                    commands[str(call.get("id") or "")] = command
        elif role == "tool":
            text = _text(m.get("content"))[:20_000]
            facts["exceptions"].update(EXCEPTION.findall(text))
            if str(m.get("tool_call_id") or "") in commands:
                code = EXIT.search(text[-400:]) or EXIT.search(text[:400])
                if code and (code.group(1) or code.group(2)) not in ("0", None):
                    body = text
                    if text.lstrip().startswith("{"):
                        try:
                            data = json.loads(text)
                            body = str(data.get("output") or data.get("stderr") or text)
                        except (ValueError, AttributeError):
                            body = text.replace("\\n", "\n")
                    for line in body.splitlines():
                        if ERROR_LINE.match(line) and len(line.strip()) >= 8:
                            facts["errors"].add(" ".join(line.split())[:120])
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


def _kept(facts: dict[str, set[str]], body: str) -> dict[str, tuple[int, int]]:
    body = _norm(body)
    return {k: (sum(_norm(f) in body for f in v), len(v)) for k, v in facts.items()}


def _only(facts: dict[str, set[str]], body: str, narrative: str) -> int:
    """How many facts the summary keeps only in its ledger (not in the narrative)."""
    body, narrative = _norm(body), _norm(narrative)
    return sum(_norm(f) in body and _norm(f) not in narrative for v in facts.values() for f in v)


def _config(profile: str, window: int) -> CompactionConfig:
    return CompactionConfig(profile=profile, context_length=window)


def _summary_tokens(body: str, config: CompactionConfig) -> int:
    return count_message_tokens({"role": "user", "content": body}, config)


def rounds(messages, profile, window, summarizer, most=5):
    """The session as an agent lives it: messages are added one by one and the conversation
    is compacted whenever ``should_compact`` says so (at most ``most`` times). Per round:
    the kept facts of that round's middle, the kept facts of every round so far (all in the
    newest summary), and the summary's tokens."""
    config = _config(profile, window)
    current: list[dict] = []
    sizes: list[int] = []
    wanted: dict[str, set[str]] = {k: set() for k in TARGETS}
    found = []
    for at, message in enumerate(messages):
        current.append(message)
        sizes.append(count_message_tokens(message, config))
        role = message.get("role")
        following = messages[at + 1].get("role") if at + 1 < len(messages) else None
        before_call = role == "user" or (role == "tool" and following != "tool")
        if not before_call or not should_compact(sum(sizes), config).should:
            continue
        out = compact(current, config=config, now=DAY, summarizer=summarizer)
        if out.report.status != "compacted":
            continue
        start, stop = out.report.boundaries["middle"]
        own = extract(current[start:stop])
        for kind, facts in own.items():
            wanted[kind] |= facts
        body = out.report.summary_body or ""
        narrative = body.split("\n## Fact Ledger\n")[0]
        found.append(
            (
                _kept(own, body),
                _kept(wanted, body),
                _summary_tokens(body, config),
                _only(own, body, narrative),
                _only(wanted, body, narrative),
            )
        )
        current = list(out.messages)
        sizes = list(out.report.output_message_tokens)
        if len(found) >= most:
            break
    return found


# ---------------------------------------------------------------------------------------
# Sessions


def _django() -> None:
    tmp = tempfile.mkdtemp(prefix="summary-facts-")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tmp}/db.sqlite3")
    os.environ.setdefault("HERMES_DATA_DIR", tmp)
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
    import django

    django.setup()


def _lived(parsed: Any) -> list[dict]:
    """A parsed session's rows as engine messages, as the agent lived them: the rows its own
    compactions archived are kept, its summary rows and meta rows left out; each keeps its
    own time as ``timestamp``."""
    rows = parsed.stream if parsed.stream is not None else iter(parsed.messages)
    messages = []
    for row in rows:
        if row.meta or row.is_summary or row.summary_of is not None:
            continue
        message = row.as_openai()
        if row.created_at is not None:
            message["timestamp"] = row.created_at.isoformat()
        messages.append(message)
    return messages


def _imported(data: bytes, name: str) -> tuple[str, list[dict]]:
    """The first session of a Claude Code, Codex, Hermes or Pi export file, as engine messages."""
    _django()
    from hermes_web.importers.base import ParsedSession
    from hermes_web.importers.formats import claude_code, codex, hermes, pi

    readers = (("codex", codex.parse), ("claude-code", claude_code.parse))
    readers += (("hermes", hermes.parse_jsonl), ("pi", pi.parse))
    for agent, parse in readers:
        try:
            for parsed in parse(io.BytesIO(data), name):
                if not isinstance(parsed, ParsedSession):
                    continue
                messages = _lived(parsed)
                if len(messages) >= 8:
                    return agent, messages
        except Exception:  # noqa: BLE001 - not this agent's format: try the next
            continue
    raise ValueError(f"{name}: neither a Claude Code, a Codex, a Hermes nor a Pi transcript")


def load(path: str) -> tuple[str, list[dict]]:
    data = Path(path).read_bytes()
    if path.endswith(".json"):
        return "openai", json.loads(data)
    return _imported(data, Path(path).name)


_DIRS = ("src/app", "src/lib/db", "web/src/components", "tests/unit", "scripts", "docs")
_NAMES = ("models", "views", "client", "cache", "parser", "router", "config", "utils")
_RULES = (
    "Do NOT run the migrations against production.",
    "Never commit directly to main.",
    "Always run the full test suite before you say it is done.",
    "Make sure the public API stays backwards compatible.",
    "Avoid adding new dependencies.",
    "Only use the standard library for the CLI.",
)


def shaped(agent: str, turns: int, seed: int) -> list[dict]:
    """A session shaped like the real ones the issue names: Codex reads with ``sed -n``/
    ``nl``/``rg`` and patches with ``apply_patch`` heredocs (exec_command, JSON envelopes with
    ``metadata.exit_code``); Claude Code uses Read/Edit/Bash (results without exit codes but
    "Exit code N" on failures); both list source files holding the word ``error`` and fail
    tests with tracebacks; the user repeats a constraint now and then."""
    import random

    rng = random.Random(seed)
    day = f"2026-0{1 + seed % 8}-1{seed % 9}T"
    messages: list[dict] = [{"role": "system", "content": "You are a coding agent."}]
    n = 0

    def stamp(message: dict) -> dict:
        message["timestamp"] = f"{day}{10 + n // 60 % 12:02d}:{n % 60:02d}:00Z"
        return message

    def tool(name: str, args: dict, output: str) -> None:
        nonlocal n
        n += 1
        cid = f"call_{seed}_{n}"
        fn = {"name": name, "arguments": json.dumps(args)}
        messages.append(
            stamp(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": cid, "type": "function", "function": fn}],
                }
            )
        )
        messages.append(stamp({"role": "tool", "tool_call_id": cid, "content": output}))

    def listing(path: str) -> str:
        lines = [f"import {{ query }} from './{rng.choice(_NAMES)}';"]
        lines += [f"const {{ data, error }} = await query('{w}');" for w in _NAMES[:3]]
        lines += ["if (error) throw new DatabaseError(error.message);", "x = 1\n" * 40]
        return "\n".join(lines)

    for turn in range(turns):
        ask = f"Turn {turn}: improve {rng.choice(_NAMES)} handling."
        if turn % 4 == 0:
            ask += " " + _RULES[(turn // 4) % len(_RULES)]
        messages.append(stamp({"role": "user", "content": ask}))
        for _ in range(rng.randint(3, 7)):
            path = f"{rng.choice(_DIRS)}/{rng.choice(_NAMES)}_{rng.randint(0, 30)}.ts"
            test = f"tests/unit/test_{rng.choice(_NAMES)}.py"
            pick = rng.random()
            if agent == "codex":
                run = lambda cmd, out, code: tool(  # noqa: E731
                    "exec_command",
                    {"cmd": ["bash", "-lc", cmd]},
                    json.dumps({"output": out, "metadata": {"exit_code": code}}),
                )
                if pick < 0.35:
                    run(f"sed -n '1,{rng.randint(80, 400)}p' {path}", listing(path), 0)
                elif pick < 0.5:
                    run(f"rg -n '{rng.choice(_NAMES)}' {path.rsplit('/', 1)[0]}", listing(path), 0)
                elif pick < 0.65:
                    patch = f"apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch\nEOF"
                    run(patch, "Success. Updated the following files:\nM " + path, 0)
                elif pick < 0.85:
                    err = rng.choice(["KeyError", "TypeError", "ValueError", "AssertionError"])
                    out = (
                        f'Traceback (most recent call last):\n  File "{test}", line 3\n'
                        f"{err}: bad {rng.choice(_NAMES)} {n}\nFAILED {test}::test_{n} - {err}\n"
                        "1 failed, 12 passed"
                    )
                    run(f"pytest -q {test}", out, 1)
                else:
                    run(f"nl -ba {path} | sed -n '1,60p'", listing(path), 0)
            else:
                if pick < 0.35:
                    tool("Read", {"file_path": "/repo/" + path}, listing(path))
                elif pick < 0.5:
                    tool("Grep", {"pattern": "error", "path": "/repo/" + path}, listing(path))
                elif pick < 0.65:
                    tool(
                        "Edit",
                        {"file_path": "/repo/" + path, "old_string": "a", "new_string": "b"},
                        f"The file /repo/{path} has been updated.",
                    )
                elif pick < 0.85:
                    err = rng.choice(["KeyError", "TypeError", "ValueError", "ImportError"])
                    out = (
                        f'Exit code 1\nTraceback (most recent call last):\n  File "{test}"\n'
                        f"{err}: bad {rng.choice(_NAMES)} {n}\nFAILED {test}::test_{n} - {err}"
                    )
                    tool("Bash", {"command": f"python -m pytest -q {test}"}, out)
                else:
                    tool("Bash", {"command": f"cat {path} | head -50"}, listing(path))
        messages.append(stamp({"role": "assistant", "content": f"Done with turn {turn}."}))
    return messages


def generated() -> list[tuple[str, str, list[dict]]]:
    from tests.agent_logs import claude_code_lines, codex_lines

    sessions = [
        (f"synthetic-{n}", "generated", generate_conversation(n, seed=n)) for n in (300, 1_200)
    ]
    for agent in ("codex", "claude-code"):
        for turns, seed in ((12, 1), (60, 2), (250, 3)):
            sessions.append(
                (f"{agent}-shaped-{turns}", f"shaped {agent}", shaped(agent, turns, seed))
            )
    for agent, lines in (
        ("claude-code", claude_code_lines(600, seed=7)),
        ("codex", codex_lines(600, seed=7)),
    ):
        data = "\n".join(lines).encode()
        sessions.append((f"{agent}-600", f"generated {agent}", _imported(data, agent)[1]))
    return sessions


def main(argv: list[str]) -> int:
    sessions = generated() if "--generated" in argv else []
    profiles = ("hermes",) if "--hermes-only" in argv else ("hermes", "classic")
    for path in (a for a in argv if not a.startswith("--")):
        try:
            agent, messages = load(path)
        except (ValueError, OSError) as error:
            print(f"skipped {path}: {error}")
            continue
        sessions.append((Path(path).name[:40], agent, messages))
    server = FakeOpenAIServer(default_reply={"content": FACT_POOR}).start()
    llm = LLMSummarizer("openai/fake", api_base=server.base_url, api_key="x", timeout=30)
    kinds = {"deterministic": None, "llm": llm}
    # (agent, profile, summarizer, window, rounds) -> kind -> [kept, total]; sizes
    totals: dict[tuple, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    sizes: dict[tuple, list[int]] = defaultdict(list)
    try:
        for name, agent, messages in sessions:
            for profile in profiles:
                for kind, summarizer in kinds.items():
                    for window in WINDOWS:
                        found = rounds(messages, profile, window, summarizer)
                        if not found:
                            continue
                        picks = [("1", found[0][0], found[0][2], found[0][3])]
                        if len(found) >= 2:
                            last = found[-1]
                            picks.append((str(len(found)), last[1], last[2], last[4]))
                        for count, kept, tokens, only in picks:
                            rounds_label = "1" if count == "1" else "5" if count == "5" else "2-4"
                            key = (agent, profile, kind, window, rounds_label)
                            sizes[key].append(tokens)
                            for fact, (a, b) in kept.items():
                                totals[key][fact][0] += a
                                totals[key][fact][1] += b
                            line = " ".join(f"{f} {a}/{b}" for f, (a, b) in kept.items())
                            print(
                                f"{name:28} {profile:7} {kind:13} {window // 1000:>3}K ×{count}"
                                f" {tokens:6,} tok  {line}  (ledger only: {only})"
                            )
    finally:
        server.stop()
    return _table(totals, sizes)


def _table(totals, sizes) -> int:
    missed = False
    print("\nagent / profile / summarizer / window / rounds: kept share per fact kind, size")
    for key in sorted(totals):
        agent, profile, kind, window, rounds = key
        cells = []
        for fact, target in TARGETS.items():
            a, b = totals[key][fact]
            goal = target if rounds == "1" else FIVE_TARGET
            if not b:  # no fact of this kind in these regions: nothing to keep
                cells.append(f"{fact}      – (0/0)")
                continue
            ok = a / b >= goal
            missed |= profile == "hermes" and not ok
            cells.append(f"{fact} {a / b:6.1%} ({a}/{b}){'' if ok else ' MISS'}")
        biggest = max(sizes[key])
        size_ok = biggest <= SIZE_CAP[window]
        missed |= profile == "hermes" and not size_ok
        print(
            f"{agent:22} {profile:7} {kind:13} {window // 1000:>3}K ×{rounds}  "
            + "  ".join(cells)
            + f"  max {biggest:,} tok{'' if size_ok else ' MISS'}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
