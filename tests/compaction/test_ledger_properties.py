"""Properties of the fact ledger: every fact kind survives one and five successive compactions
of a session when the facts fit the summary budget."""

from __future__ import annotations

import json
from datetime import date

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, compact
from tests.compaction.builders import WORDS, assistant, call, result, system, user

DAY = date(2026, 12, 4)
CONFIG = CompactionConfig(context_length=200_000, tail_token_budget=60, protect_first_n=1)
# Words the secret redaction takes for a key name ("PasswdR1Error: x" reads as a password
# assignment) are left out: a redacted line is meant to leave the summary.
_SECRET_WORDS = ("passw", "pwd", "secret", "token", "bearer", "key", "auth")
_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8).filter(
    lambda word: not any(secret in word for secret in _SECRET_WORDS)
)


@st.composite
def _round(draw: st.DrawFn, tag: int) -> tuple[list[dict], dict[str, list[str]]]:
    """One round of work: tool calls reading/patching files, commands with exit codes, an
    error with its exception name, a user constraint; and the facts each must leave."""
    facts: dict[str, list[str]] = {k: [] for k in ("paths", "commands", "errors", "names")}
    facts["constraints"] = []
    rows: list[dict] = []
    for i in range(draw(st.integers(1, 4))):
        word = draw(_NAME)
        path = f"src/{word}/r{tag}_{i}.py"
        cid = f"r{tag}c{i}"
        how = draw(st.sampled_from(["sed", "read", "patch"]))
        if how == "sed":
            rows.append(assistant(None, call(cid, "terminal", command=f"sed -n '1,80p' {path}")))
            rows.append(result(cid, json.dumps({"output": f"def {word}(): ...", "exit_code": 0})))
            facts["commands"].append(f"sed -n '1,80p' {path}")
        elif how == "read":
            rows.append(assistant(None, call(cid, "read_file", path=path)))
            rows.append(result(cid, f"def {word}(): ..."))
        else:
            patch = f"*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch"
            rows.append(assistant(None, call(cid, "apply_patch", input=patch)))
            rows.append(result(cid, "Success."))
        facts["paths"].append(path)
    name = f"{draw(_NAME).capitalize()}R{tag}Error"
    command = f"pytest -q tests/test_r{tag}.py"
    line = f"{name}: {draw(_NAME)} failed in round {tag}"
    rows.append(assistant(None, call(f"r{tag}t", "terminal", command=command)))
    rows.append(result(f"r{tag}t", json.dumps({"output": f"{line}\n", "exit_code": 1})))
    facts["commands"].append(command)
    facts["errors"].append(line)
    facts["names"].append(name)
    constraint = f"Never edit the {draw(_NAME)} module of round {tag}."
    rows.insert(0, user(f"Round {tag}: go on. {constraint}"))
    # Bulk, so each round's compaction saves tokens whatever the summary holds.
    rows.insert(1, assistant(f"Reading round {tag}. " + "word " * 1_500))
    facts["constraints"].append(constraint)
    rows.append(assistant(f"round {tag} done."))
    return rows, facts


def _tail(tag: int) -> list[dict]:
    return [user(f"tail {tag} " + "word " * 40), assistant(f"tail {tag} " + "word " * 40)]


def _missing(body: str, facts: dict[str, list[str]]) -> list[str]:
    return [f for kind in facts.values() for f in kind if f not in body]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_round(1))
def test_every_fact_kind_survives_one_compaction(work):
    rows, facts = work
    messages = [system(), user("Fix the test suite."), *rows, *_tail(1)]
    out = compact(messages, config=CONFIG, now=DAY, force=True, tokenizer=WORDS)
    assert _missing(out.report.summary_body or "", facts) == []


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(*(_round(tag) for tag in range(1, 6))))
def test_every_fact_kind_survives_five_compactions(rounds):
    messages: list[dict] = [system(), user("Fix the test suite.")]
    wanted: dict[str, list[str]] = {}
    body = ""
    for tag, (rows, facts) in enumerate(rounds, start=1):
        messages = [*messages, *rows, *_tail(tag)]
        out = compact(messages, config=CONFIG, now=DAY, force=True, tokenizer=WORDS)
        assert out.report.status == "compacted"
        messages = list(out.messages)
        body = out.report.summary_body or ""
        for kind, found in facts.items():
            wanted.setdefault(kind, []).extend(found)
    assert _missing(body, wanted) == []
