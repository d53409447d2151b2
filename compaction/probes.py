"""Recall probes: a bank of questions drawn from the region a compaction removed.

The method of Hermes Agent's ``evals/compaction``: N questions (15 by default, ≈ ±3.3 points)
whose gold answers appear literally in the removed turns — a path read or written, a command
(with its exit code in the question), an exact error line, an identifier (SHA, URL, UUID, a
long number), a user constraint, a decision — answered from the post-compaction context
only. Recall at retained tokens is how many of them the compacted context still answers.

Nothing is drawn from the agent's own boilerplate: compaction prompts ("Do NOT call any
tools"), continuation notices, ``<system-reminder>`` blocks, command wrappers,
``<environment_context>``, earlier summaries. Facts come from the fact ledger's extractor
(``compaction.ledger.extract``, which already skips wrappers) plus identifiers and decisions
found in the remaining text.

``draw_probes`` is deterministic: the same rows always give the same bank (candidates are
ordered by a hash of their answer, taken round-robin over kinds), so two runs of a recall
test on one compaction ask the same questions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.ledger import extract
from compaction.markers import is_summary_message
from compaction.messages import Message, content_text
from compaction.resume import is_wrapper, without_ide_context

__all__ = [
    "DEFAULT_QUESTIONS",
    "KINDS",
    "Probe",
    "answers_in",
    "draw_probes",
    "is_boilerplate",
    "message_text",
    "normalize",
]

DEFAULT_QUESTIONS = 15
KINDS: tuple[str, ...] = ("path", "command", "error", "identifier", "constraint", "decision")
_MIN_ANSWER = 4
_MAX_ANSWER = 240

# Text an agent or harness writes into user/assistant turns on its own: never a fact of the
# work. Blocks are cut out of a message; a message that is one of these prompts is skipped.
_BLOCKS = re.compile(
    r"<(system-reminder|environment_context|command-name|command-message|command-args|"
    r"local-command-stdout|local-command-stderr|user_instructions|permissions instructions|"
    r"ide_[a-z_]+)>.*?</\1>",
    re.DOTALL | re.IGNORECASE,
)
_PROMPTS = (
    "do not call any tools",
    "your task is to create a detailed summary of the conversation",
    "this session is being continued from a previous conversation",
    "[context compaction",
    "context checkpoint compaction",
    "you are performing a context checkpoint",
    "respond with text only",
)
_SHA = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_URL = re.compile(r"\bhttps?://[^\s\"'<>)\]`]+")
_HEX = re.compile(r"\b0x[0-9a-fA-F]{3,}\b")
_NUMBER = re.compile(r"(?<![\w.])\d{4,}(?![\w.])")
_DECISION = re.compile(
    r"\b(I(?:'ll| will) use|we(?:'ll| will) use|decided to|let's go with|going with|"
    r"chose to|instead of)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_QUOTES = str.maketrans(dict.fromkeys("`'\"“”‘’", " "))


@dataclass(frozen=True, slots=True)
class Probe:
    """One recall question.

    Attributes:
        id: stable id (kind and a hash of the answer).
        kind: one of ``KINDS``.
        question: what is asked; it never contains the answer.
        answer: the gold answer, literal in the source row.
        index: index of the source row in the messages given to ``draw_probes``.
    """

    id: str
    kind: str
    question: str
    answer: str
    index: int

    def to_dict(self) -> dict[str, Any]:
        """The probe as JSON-ready data."""
        return {
            "id": self.id,
            "kind": self.kind,
            "question": self.question,
            "answer": self.answer,
            "index": self.index,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Probe:
        """The probe ``to_dict`` wrote."""
        return Probe(
            id=str(data["id"]),
            kind=str(data["kind"]),
            question=str(data["question"]),
            answer=str(data["answer"]),
            index=int(data["index"]),
        )


def normalize(text: str) -> str:
    """Text as answers are compared: case-folded, quotes and backticks dropped, whitespace
    collapsed (a model quoting a path in backticks still answers it)."""
    return " ".join(text.casefold().translate(_QUOTES).split())


def message_text(message: Message) -> str:
    """Everything a model reads of ``message``: its text and its tool calls' arguments."""
    text = content_text(message.get("content"))
    calls = message.get("tool_calls") or ()
    parts = [text]
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") or {}
        if isinstance(function, Mapping):
            parts.append(str(function.get("name") or ""))
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                parts.append(arguments)
                # The decoded values too: a path with an escaped slash is still a path.
                with contextlib.suppress(ValueError):
                    parts.extend(_strings(json.loads(arguments)))
            elif arguments is not None:
                parts.extend(_strings(arguments))
    return "\n".join(p for p in parts if p)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def answers_in(probes: Sequence[Probe], context: str) -> tuple[bool, ...]:
    """For each probe, whether its (normalized) answer is in ``context`` (the needle arm)."""
    haystack = normalize(context)
    return tuple(normalize(p.answer) in haystack for p in probes)


def is_boilerplate(message: Message) -> bool:
    """Whether ``message`` is the agent's or harness's own text, not the work: a summary, a
    compaction prompt, a continuation notice, a wrapper (command echo, reminder, context)."""
    if is_summary_message(message):
        return True
    role = message.get("role")
    raw = content_text(message.get("content"), images=False)
    text = _clean(raw)
    # A harness wrapper is one as written (a command echo with words after its tags too).
    if role == "user" and (is_wrapper(without_ide_context(raw.strip())) or is_wrapper(text)):
        return True
    head = text[:4000].casefold()
    return any(prompt in head for prompt in _PROMPTS)


def _clean(text: str) -> str:
    return without_ide_context(_BLOCKS.sub(" ", text)).strip()


def _hash(seed: str, kind: str, answer: str) -> str:
    return hashlib.sha256(f"{seed}\x00{kind}\x00{answer}".encode()).hexdigest()


def _hint(text: str, at: int) -> str:
    """A few words before position ``at`` of ``text`` (the question's context), one line."""
    line_start = text.rfind("\n", 0, at) + 1
    words = text[line_start:at].split()[-6:]
    return " ".join(words).strip(" :=,-")


def _shorten(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_VERBS = {"r": "read", "w": "wrote", "p": "patched", "s": "searched", "x": "ran"}


def _candidates(messages: Sequence[Message], region: Sequence[int]) -> list[Probe]:
    """Every question the region allows, before the draw (``id`` is the ordering hash)."""
    rows = [(i, messages[i]) for i in region if 0 <= i < len(messages)]
    work = [(i, m) for i, m in rows if not is_boilerplate(m)]
    texts = {i: _clean(message_text(m)) for i, m in work}
    found: list[Probe] = []

    def add(kind: str, answer: str, question: str, index: int) -> None:
        answer = answer.strip()
        if not _MIN_ANSWER <= len(answer) <= _MAX_ANSWER:
            return
        # The gold answer must be literal in the row it is drawn from, and not given away.
        if normalize(answer) not in normalize(texts.get(index, "")):
            return
        if normalize(answer) in normalize(question):
            return
        found.append(Probe(id="", kind=kind, question=question, answer=answer, index=index))

    ledger = extract([m for _, m in work])
    where = [i for i, _ in work]
    for fact in ledger.of("files"):
        index = where[min(fact.last, len(where) - 1)] if where else 0
        verbs = "/".join(_VERBS.get(letter, "used") for letter in fact.detail or "x")
        name = fact.text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        if name == fact.text:  # a bare name gives itself away: ask for it by its extension
            question = f"Which file did the agent {verbs} (give its exact name)?"
        else:
            question = f"What is the full path of the file named {name!r} the agent {verbs}?"
        add("path", fact.text, question, index)
    for fact in ledger.of("commands"):
        index = where[min(fact.last, len(where) - 1)] if where else 0
        code = fact.detail if fact.detail not in ("", "?") else "0"
        program = fact.text.split()[0] if fact.text.split() else "a"
        add(
            "command",
            fact.text,
            f"What exact {program!r} command did the agent run (it exited with code {code})?",
            index,
        )
    for fact in ledger.of("errors"):
        index = where[min(fact.last, len(where) - 1)] if where else 0
        source = fact.detail or "a tool"
        add("error", fact.text, f"What exact error line did {_shorten(source, 60)} print?", index)
    for fact in ledger.of("constraints"):
        index = where[min(fact.last, len(where) - 1)] if where else 0
        words = fact.text.split()
        add(
            "constraint",
            fact.text,
            f"What constraint did the user state, beginning {' '.join(words[:3])!r}…?",
            index,
        )
    for i, _ in work:
        text = texts[i]
        for pattern, what in (
            (_UUID, "id"),
            (_SHA, "commit SHA or hash"),
            (_URL, "URL"),
            (_HEX, "hex value"),
            (_NUMBER, "number"),
        ):
            for match in pattern.finditer(text[:20_000]):
                hint = _hint(text, match.start())
                if len(hint) < 3:
                    continue
                add("identifier", match.group(0), f"What {what} followed {hint!r}?", i)
        if messages[i].get("role") == "assistant":
            for sentence in _SENTENCE.split(text[:8000]):
                decided = _DECISION.search(sentence)
                if decided and 20 <= len(sentence) <= _MAX_ANSWER:
                    topic = _shorten(sentence[: decided.end()], 60)
                    add(
                        "decision",
                        sentence.strip(),
                        f"What did the agent decide, in the sentence beginning {topic!r}?",
                        i,
                    )
    return found


def draw_probes(
    messages: Sequence[Message],
    region: Sequence[int] | None = None,
    count: int = DEFAULT_QUESTIONS,
    seed: str = "",
) -> tuple[Probe, ...]:
    """The bank: at most ``count`` probes drawn from ``messages[i]`` for ``i`` in ``region``
    (every message when None), deterministic for the same rows and ``seed``.

    Candidates with one answer (normalized) are one; each kind is ordered by a hash of its
    answers, and the draw takes one of each kind in turn (``KINDS`` order) until ``count``.
    """
    indices = range(len(messages)) if region is None else region
    by_answer: dict[tuple[str, str], Probe] = {}
    for probe in _candidates(messages, list(indices)):
        by_answer.setdefault((probe.kind, normalize(probe.answer)), probe)
    # One answer asked once, whatever kinds found it (a SHA that is also a number).
    seen_answers: set[str] = set()
    pools: dict[str, list[tuple[str, Probe]]] = {kind: [] for kind in KINDS}
    for (kind, key), probe in by_answer.items():
        pools[kind].append((_hash(seed, kind, key), probe))
    for pool in pools.values():
        pool.sort(key=lambda item: item[0])
    bank: list[Probe] = []
    while len(bank) < count and any(pools.values()):
        for kind in KINDS:
            pool = pools[kind]
            while pool:
                digest, probe = pool.pop(0)
                key = normalize(probe.answer)
                if key in seen_answers:
                    continue
                seen_answers.add(key)
                bank.append(
                    Probe(
                        id=f"{kind}-{digest[:10]}",
                        kind=kind,
                        question=probe.question,
                        answer=probe.answer,
                        index=probe.index,
                    )
                )
                break
            if len(bank) >= count:
                break
    return tuple(bank)
