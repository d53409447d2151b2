"""The fact-survival audit: constraints, commands, paths, URLs, errors and numbers found in
the summarized middle, and whether each one made it into the summary."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from compaction.messages import content_text, parse_arguments

# ---------------------------------------------------------------- fact-survival audit

URL_RE = re.compile(r"https?://[^\s\"'<>`)\]}]+")
PATH_RE = re.compile(
    r"(?<![\w/.:-])(?:~?/)?(?:[\w.-]+/)+[\w.-]*\.[A-Za-z0-9]{1,8}\b|(?<![\w/.:-])/(?:[\w.-]+/)+[\w.-]+"
)
ERROR_RE = re.compile(
    r"^[ \t>E]*([A-Z]\w*(?:Error|Exception|Failure|Exit)|FAILED|fatal|error|ERROR)\b:?[ \t]*([^\n]{0,120})$",
    re.MULTILINE,
)
NUMBER_UNIT_RE = re.compile(
    r"\b\d+(?:[.,]\d+)?\s?(?:ms|s|sec|seconds?|minutes?|min|hours?|h|days?|KB|MB|GB|TB|KiB|MiB|GiB|kB|bytes?|"
    r"tokens?|px|%|chars?|characters|lines?|files?|tests?|rows?|requests?|connections?|workers?)(?![\w])"
)
CONSTRAINT_RE = re.compile(
    r"\b(never|always|don't|do not|must|mustn't|only|without asking|make sure|avoid|prefer|keep it|"
    r"should not|shouldn't|no more than|at most|at least)\b",
    re.IGNORECASE,
)
COMMAND_ARGS = ("command", "cmd", "script")
PER_KIND_LIMIT = 200
AUDIT_TOOL_CHARS = 8_000
FACT_KINDS = ("constraint", "command", "path", "url", "error", "number")
FACT_KIND_LABELS = {
    "constraint": "user constraints",
    "command": "commands",
    "path": "file paths",
    "url": "URLs",
    "error": "error strings",
    "number": "numbers with units",
}


def extract_facts(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Identifiers worth keeping, taken from messages (normally the compacted middle).

    - constraints: sentences of user messages with never/always/must/only/don't/…;
    - commands: the ``command`` argument of tool calls;
    - paths and URLs: from every message and tool-call argument;
    - errors: ``SomethingError: text`` lines from any message (mostly tool output);
    - numbers with units: from user and assistant text only (tool output is too noisy).

    Each fact is ``{"kind", "value", "index"}``; duplicates are dropped and each kind is
    capped at ``PER_KIND_LIMIT`` so a huge middle stays quick to audit.
    """
    facts: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in FACT_KINDS}

    def add(kind: str, value: str, index: int) -> None:
        value = value.strip().rstrip(".,;:")
        bucket = facts[kind]
        if len(value) < 3 or len(bucket) >= PER_KIND_LIMIT:
            return
        # "(turn 3) Never …" and "(turn 9) Never …" are the same constraint.
        key = (kind, _normalize(re.sub(r"^\(.{0,20}?\)\s*", "", value)))
        if key not in bucket:
            bucket[key] = {"kind": kind, "value": value, "index": index}

    for index, message in enumerate(messages):
        role = message.get("role")
        text = content_text(message.get("content"), images=False)
        if role == "tool":
            text = _unwrap_json(text)
            if len(text) > AUDIT_TOOL_CHARS:
                # A 50 KB file read is mostly code; its errors and paths sit at the ends.
                half = AUDIT_TOOL_CHARS // 2
                text = text[:half] + "\n" + text[-half:]
        if role == "user":
            for sentence in re.split(r"(?<=[.!?])\s+|\n+", text):
                if CONSTRAINT_RE.search(sentence) and len(sentence) <= 300:
                    add("constraint", sentence, index)
        calls = message.get("tool_calls")
        # Stored rows may predate the entrance checks: a call list that is not a list, or a
        # call that is not an object, has no arguments to audit.
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, Mapping):
                continue
            function = call.get("function") or {}
            arguments = function.get("arguments") if isinstance(function, Mapping) else None
            parsed = parse_arguments(call)
            for name in COMMAND_ARGS:
                if isinstance(parsed.get(name), str):
                    add("command", parsed[name], index)
            args_text = arguments if isinstance(arguments, str) else json.dumps(parsed)
            _paths_and_urls(args_text, index, add)
        _paths_and_urls(text, index, add)
        for match in ERROR_RE.finditer(text):
            name, rest = match.group(1), match.group(2).strip()
            if name[0].isupper() or rest:
                add("error", f"{name}: {rest}".strip(" :") if rest else name, index)
        if role in ("user", "assistant"):
            for match in NUMBER_UNIT_RE.finditer(text):
                add("number", match.group(0), index)
    return [fact for kind in FACT_KINDS for fact in facts[kind].values()]


def _unwrap_json(text: str) -> str:
    """Tool results are often JSON (``{"output": "...", "exit_code": 1}``): audit the strings."""
    if not text.startswith("{"):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict):
        return text
    return "\n".join(str(v) for v in value.values() if isinstance(v, str | int | float))


def _paths_and_urls(text: str, index: int, add) -> None:
    urls = URL_RE.findall(text)
    for url in urls:
        add("url", url, index)
    without_urls = URL_RE.sub(" ", text)
    for match in PATH_RE.finditer(without_urls):
        add("path", match.group(0), index)


def _normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9_./-]{3,}", text.lower()))


def _survives(
    fact: Mapping[str, Any], summary: str, summary_norm: str, summary_words: set[str]
) -> bool:
    value = fact["value"]
    if value in summary or _normalize(value) in summary_norm:
        return True
    if fact["kind"] == "number":
        return _normalize(value).replace(" ", "") in summary_norm.replace(" ", "")
    if fact["kind"] in ("constraint", "error"):
        # Summaries paraphrase: count it kept when most of its distinctive words are there.
        words = _words(value)
        return bool(words) and len(words & summary_words) / len(words) >= 0.8
    return False


def fact_survival_audit(middle: Iterable[Mapping[str, Any]], summary: str | None) -> dict[str, Any]:
    """Which identifiers from the compacted middle survive in the summary.

    Returns ``{"facts": [..., "survived"], "total", "kept", "score" (0–100 or None),
    "lost": [...], "by_kind": [{"kind", "label", "total", "kept"}]}``.
    """
    summary = summary or ""
    summary_norm = _normalize(summary)
    summary_words = _words(summary)
    facts = []
    for fact in extract_facts(middle):
        facts.append({**fact, "survived": _survives(fact, summary, summary_norm, summary_words)})
    kept = sum(1 for f in facts if f["survived"])
    by_kind = []
    for kind in FACT_KINDS:
        of_kind = [f for f in facts if f["kind"] == kind]
        if of_kind:
            by_kind.append(
                {
                    "kind": kind,
                    "label": FACT_KIND_LABELS[kind],
                    "total": len(of_kind),
                    "kept": sum(1 for f in of_kind if f["survived"]),
                }
            )
    return {
        "facts": facts,
        "total": len(facts),
        "kept": kept,
        "score": round(100.0 * kept / len(facts), 1) if facts else None,
        "lost": [f for f in facts if not f["survived"]],
        "by_kind": by_kind,
    }
