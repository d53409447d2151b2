"""A recall test of one compaction, the method of Hermes Agent's ``evals/compaction``.

A bank of questions (``compaction.probes.draw_probes``, 15 by default) is drawn from the
region the compaction removed (its input rows outside head and tail: for an agent's own
compaction, every row it replaced), then asked of contexts, each in arms:

- ``needle`` (offline, always): is the gold answer in the context;
- ``model``: the configured chat model answers from that context only, graded by normalized
  match (``compaction.probes.normalize``: the gold answer in the reply's line);
- ``control`` (once per test): the model answers from the uncompacted input rows;
- ``recovery``: the model may make one ``recall`` search per question (the chain's
  history, ``services.recall.search_history``), then answers with the context and the hits.

Contexts: the compaction's own post-compaction context; for an agent's compaction also our
replay of the same rows at the agent's retained token budget (``budget_replay``) and our
latest replay per profile. A model failure is a failed arm with its message; the test goes on.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compaction.probes import DEFAULT_QUESTIONS, Probe, answers_in, draw_probes, normalize
from hermes_web.jobs import enqueue_on_commit
from hermes_web.llm_models import chat_model, is_llm_model, litellm_module
from hermes_web.models import Compaction, RecallTest
from hermes_web.services.fate import context_after, input_messages
from hermes_web.services.recall import search_history

log = logging.getLogger(__name__)

__all__ = [
    "RUN_RECALL_TEST",
    "budget_replay",
    "draw_bank",
    "region_of",
    "run_recall_test",
    "start_recall_test",
]

RUN_RECALL_TEST = "hermes_web.tasks.run_recall_test"
MAX_QUESTIONS = 100
# A replay at the agent's budget is close enough within this share of its retained tokens.
BUDGET_TOLERANCE = 0.15
_BUDGET_ATTEMPTS = 4
_ANSWER_LINE = re.compile(r"^\s*(\d+)[.):]\s*(.*)$")
SYSTEM = (
    "You answer questions about a coding agent's conversation using ONLY the context given. "
    "Answer every numbered question on its own line as '<number>. <exact answer>'; copy "
    "paths, commands, errors and ids exactly. Write 'unknown' when the context does not say."
)
QUERY_SYSTEM = (
    "You may search the full conversation history once per question. For every numbered "
    "question write one line '<number>. <search words>' (a few exact words to search for)."
)


def region_of(report: Mapping[str, Any], count: int) -> range:
    """The input indices the compaction removed: its middle (every replaced row of an
    agent's compaction, whose report has no head or tail)."""
    bounds = (report.get("boundaries") or {}).get("middle") or [0, count]
    try:
        return range(max(0, int(bounds[0])), min(count, int(bounds[1])))
    except (TypeError, ValueError, IndexError):
        return range(0)


def draw_bank(compaction: Compaction, inputs: Sequence[Mapping[str, Any]], questions: int):
    """The bank of ``compaction``: the same rows always give the same questions."""
    return draw_probes(inputs, region_of(compaction.report or {}, len(inputs)), questions)


def start_recall_test(
    compaction: Compaction,
    *,
    requested_by=None,
    questions: int = DEFAULT_QUESTIONS,
    enqueue: bool = True,
) -> RecallTest:
    """Store a queued test of ``compaction`` and send it to a worker after commit (unless
    ``enqueue`` is False: the caller runs it, e.g. the ``recall_test`` command).

    Raises:
        ValueError: a compaction with no result to test, or a bad question count.
    """
    if not 1 <= questions <= MAX_QUESTIONS:
        raise ValueError(f"questions: between 1 and {MAX_QUESTIONS}")
    if compaction.status not in (Compaction.Status.COMMITTED, Compaction.Status.DRY_RUN):
        raise ValueError("only a committed compaction or a dry run has a context to test")
    with transaction.atomic():
        test = RecallTest.objects.create(
            compaction=compaction, requested_by=requested_by, questions=questions
        )
        if enqueue:
            enqueue_on_commit(RUN_RECALL_TEST, test.pk)
    return test


# ------------------------------------------------------------------------------ the model


class ModelError(Exception):
    """A model call failed (its message is shown on the arm)."""


def _call(messages: list[dict[str, Any]], spent: dict[str, float], model: str = "") -> str:
    """One chat call to ``model`` (the configured chat model by default); tokens and cost
    added to ``spent``."""
    from hermes_web.agent.provider import chat_provider_kwargs

    model = model or chat_model()
    litellm = litellm_module()
    try:
        response = litellm.completion(
            model=model,
            messages=messages,
            temperature=0,
            timeout=settings.HERMES_LLM_TIMEOUT,
            num_retries=0,
            **chat_provider_kwargs(model),
        )
    except Exception as error:  # every provider raises its own kinds
        message = str(getattr(error, "message", "") or error).splitlines()[0][:300]
        raise ModelError(f"{type(error).__name__}: {message}") from error
    usage = getattr(response, "usage", None)
    spent["prompt_tokens"] += getattr(usage, "prompt_tokens", 0) or 0
    spent["completion_tokens"] += getattr(usage, "completion_tokens", 0) or 0
    # An unknown model has no price: its cost is not counted.
    with contextlib.suppress(Exception):
        spent["cost"] += float(litellm.completion_cost(completion_response=response) or 0)
    return str(response.choices[0].message.content or "")


def _numbered(bank: Sequence[Probe]) -> str:
    return "\n".join(f"{n}. {p.question}" for n, p in enumerate(bank, 1))


def _lines(reply: str, count: int) -> list[str]:
    answers = [""] * count
    for line in reply.splitlines():
        match = _ANSWER_LINE.match(line)
        if match and 1 <= int(match.group(1)) <= count:
            answers[int(match.group(1)) - 1] = match.group(2).strip()
    return answers


JUDGE_SYSTEM = (
    "You grade answers. For every numbered item you get a gold answer and a given answer; "
    "write one line '<number>. yes' when the given answer states the gold answer exactly "
    "(same path, command, error, id or rule), else '<number>. no'."
)


def _graded(
    bank: Sequence[Probe], answers: Sequence[str], spent: dict[str, float] | None = None
) -> list[bool]:
    """Normalized match (the gold answer inside the reply's line); with a judge model
    configured (``HERMES_RECALL_JUDGE_MODEL``) the answers it did not accept go to the judge
    in one call. A judge failure leaves the normalized grades."""
    hits = [
        bool(a) and normalize(p.answer) in normalize(a) for p, a in zip(bank, answers, strict=True)
    ]
    judge = settings.HERMES_RECALL_JUDGE_MODEL
    doubtful = [i for i, hit in enumerate(hits) if not hit and answers[i].strip()]
    if not judge or spent is None or not doubtful:
        return hits
    items = "\n".join(
        f"{n}. gold: {bank[i].answer}\n   given: {answers[i]}" for n, i in enumerate(doubtful, 1)
    )
    try:
        reply = _call(
            [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": items}],
            spent,
            judge,
        )
    except ModelError as error:
        log.warning("recall judge failed: %s", error)
        return hits
    for n, verdict in enumerate(_lines(reply, len(doubtful))):
        if verdict.strip().lower().startswith("yes"):
            hits[doubtful[n]] = True
    return hits


def _ask(bank: Sequence[Probe], context: str, spent: dict[str, float]) -> list[str]:
    reply = _call(
        [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": f"CONTEXT:\n{context}\n\nQUESTIONS:\n{_numbered(bank)}",
            },
        ],
        spent,
    )
    return _lines(reply, len(bank))


def _recover(bank: Sequence[Probe], context: str, session, spent: dict[str, float]) -> list[str]:
    """One recall search per question (the model picks the words), then the answers."""
    queries = _lines(
        _call(
            [
                {"role": "system", "content": QUERY_SYSTEM},
                {"role": "user", "content": f"CONTEXT:\n{context}\n\n{_numbered(bank)}"},
            ],
            spent,
        ),
        len(bank),
    )
    found = []
    for n, query in enumerate(queries, 1):
        hits = []
        if query.strip():
            try:
                hits = search_history(session, query, limit=2)["matches"]
            except LookupError:
                hits = []
        found.append(f"[{n}] " + " … ".join(h["snippet"] for h in hits) if hits else f"[{n}] —")
    recalled = "\n".join(found)
    return _ask(bank, f"{context}\n\nRECALLED (one search per question):\n{recalled}", spent)


def _arm(
    name: str,
    bank: Sequence[Probe],
    run: Callable[[], list[str]],
    tokens: int | None,
    spent: dict[str, float] | None = None,
) -> dict[str, Any]:
    try:
        answers = run()
    except ModelError as error:
        return {"arm": name, "status": "failed", "error": str(error), "tokens": tokens}
    hits = _graded(bank, answers, spent)
    return {
        "arm": name,
        "status": "done",
        "answers": answers,
        "hits": hits,
        "recall": round(100 * sum(hits) / len(bank), 1) if bank else None,
        "tokens": tokens,
    }


def _needle(bank: Sequence[Probe], context: str, tokens: int | None) -> dict[str, Any]:
    hits = list(answers_in(bank, context))
    return {
        "arm": "needle",
        "status": "done",
        "hits": hits,
        "recall": round(100 * sum(hits) / len(bank), 1) if bank else None,
        "tokens": tokens,
    }


# --------------------------------------------------------------------- the native's budget


def _counted_after(run: Compaction) -> int | None:
    report = run.report or {}
    native = report.get("native") or {}
    value = native.get("tokens_after_counted") if run.is_native else None
    value = value or (report.get("tokens") or {}).get("after") or run.tokens_after
    return int(value) if isinstance(value, int | float) and value > 0 else None


def budget_replay(native: Compaction, *, requested_by=None) -> Compaction | None:
    """Our engine (hermes profile, deterministic) on the rows ``native`` replaced, at the
    agent's retained tokens (our count of them): the threshold at that budget and the tail
    tuned until the tokens after come within ``BUDGET_TOLERANCE`` of it. The closest attempt is kept, the others deleted. None when
    the native kept no count or replaced no row."""
    from hermes_web.services.compactions import request_compaction

    target = _counted_after(native)
    if target is None or not native.input_rows().exists():
        return None
    # The engine's own threshold is put at the agent's retained tokens (hermes: 75 % of a
    # window under 512K, no floor), so its make-room passes (tail folds, head down to the
    # system prompt, the cut moved forward) work to end under it; half of it goes to the
    # summary (4 chars a token; the engine's floor is 1,000 chars) and half to the verbatim
    # tail, which the attempts then adjust.
    window = int(target / 0.75) + 1
    summary_chars = max(1_000, target * 2)
    tail = max(50, target // 2)
    best: Compaction | None = None
    for _ in range(_BUDGET_ATTEMPTS):
        overrides = {
            "profile": "hermes",
            "context_length": window,
            "min_threshold_tokens": 0,
            "summary_max_chars": summary_chars,
            "resume_summary_max_chars": summary_chars,
            "summary_window_fraction": min(1.0, max(0.001, summary_chars / 4 / window)),
            "tail_token_budget": tail,
            "tail_max_fraction": min(1.0, max(0.01, tail / window)),
        }
        run = request_compaction(
            session=native.session,
            requested_by=requested_by,
            trigger=Compaction.Trigger.WHAT_IF,
            mode=Compaction.Mode.IN_PLACE,
            config_overrides=overrides,
            summarizer="deterministic",
            run_now=True,
            replay_of=native,
        )
        run.refresh_from_db()
        after = _counted_after(run)
        if after is None:
            run.delete()
            break
        if best is None or abs(after - target) < abs((_counted_after(best) or 0) - target):
            if best is not None:
                best.delete()
            best = run
        else:
            run.delete()
        if abs(after - target) <= BUDGET_TOLERANCE * target:
            break
        # Both parts move by half the miss: a tail of big tool rows is folded whatever its
        # budget, and then only the summary's room changes the result.
        miss = target - after
        tail = max(50, tail + miss // 2)
        summary_chars = max(1_000, summary_chars + 2 * miss)
    return best


# ------------------------------------------------------------------------------- the run


def _contexts(compaction: Compaction, requested_by) -> list[tuple[str, Compaction]]:
    contexts = [("this compaction", compaction)]
    if compaction.is_native:
        replay = budget_replay(compaction, requested_by=requested_by)
        if replay is not None:
            contexts.append(("our replay at its retained budget", replay))
        newest: dict[str, Compaction] = {}
        others = compaction.replays.exclude(pk=replay.pk if replay else None)
        for run in others.filter(status=Compaction.Status.DRY_RUN).order_by("-queued_at", "-pk"):
            newest.setdefault(str((run.config or {}).get("profile") or "engine"), run)
        for profile in sorted(newest, key=lambda p: (p != "hermes", p)):
            contexts.append((f"our replay, {profile} profile", newest[profile]))
    return contexts


def run_recall_test(test_id: int) -> RecallTest:
    """Run one queued test (idempotent: a finished or running test is returned untouched)."""
    claimed = RecallTest.objects.filter(pk=test_id, status=RecallTest.Status.QUEUED).update(
        status=RecallTest.Status.RUNNING, started_at=timezone.now(), progress=1
    )
    test = RecallTest.objects.select_related("compaction", "compaction__session").get(pk=test_id)
    if not claimed:
        return test
    try:
        _run(test)
    except Exception as error:  # one bad compaction never kills the worker
        log.exception("recall test %s failed", test.public_id)
        RecallTest.objects.filter(pk=test.pk).update(
            status=RecallTest.Status.FAILED,
            error=f"{type(error).__name__}: {error}"[:2000],
            finished_at=timezone.now(),
        )
    test.refresh_from_db()
    return test


def _run(test: RecallTest) -> None:
    compaction = test.compaction
    inputs = input_messages(compaction)
    bank = draw_bank(compaction, inputs, test.questions)
    RecallTest.objects.filter(pk=test.pk).update(bank=[p.to_dict() for p in bank], progress=5)
    with_model = is_llm_model(chat_model())
    spent = {"prompt_tokens": 0.0, "completion_tokens": 0.0, "cost": 0.0}
    contexts = _contexts(compaction, test.requested_by)
    steps = len(contexts) + (1 if with_model else 0)
    done = 0
    results: list[dict[str, Any]] = []

    def advance() -> None:
        nonlocal done
        done += 1
        RecallTest.objects.filter(pk=test.pk).update(progress=5 + int(90 * done / steps))

    session = compaction.session
    for label, run in contexts:
        run_inputs = (
            inputs
            if run.replay_of_id == compaction.pk or run.pk == compaction.pk
            else (input_messages(run))
        )
        text = "\n\n".join(context_after(run, run_inputs))
        tokens = _counted_after(run)
        arms = [_needle(bank, text, tokens)]
        if with_model and bank:
            ask = functools.partial(_ask, bank, text, spent)
            arms.append(_arm("model", bank, ask, tokens, spent))
            recover = functools.partial(_recover, bank, text, session, spent)
            arms.append(_arm("recovery", bank, recover, tokens, spent))
        else:
            reason = "no chat model configured" if not with_model else "no questions"
            arms += [
                {"arm": a, "status": "skipped", "error": reason, "tokens": tokens}
                for a in ("model", "recovery")
            ]
        results.append(
            {
                "label": label,
                "compaction": run.public_id,
                "profile": (run.config or {}).get("profile")
                or (run.report or {}).get("profile")
                or "",
                "tokens_after": tokens,
                "arms": arms,
            }
        )
        advance()
    control_text = "\n\n".join(context_after_uncompacted(inputs))
    before = (compaction.report or {}).get("tokens", {}).get("before") or compaction.tokens_before
    if with_model and bank:
        ask = functools.partial(_ask, bank, control_text, spent)
        control = _arm("control", bank, ask, before, spent)
        advance()
    else:
        control = {
            "arm": "control",
            "status": "skipped",
            "error": "no chat model configured" if not with_model else "no questions",
            "tokens": before,
        }
    RecallTest.objects.filter(pk=test.pk).update(
        status=RecallTest.Status.DONE,
        progress=100,
        finished_at=timezone.now(),
        results={
            "model": chat_model() if with_model else "",
            "judge": settings.HERMES_RECALL_JUDGE_MODEL if with_model else "",
            "questions": len(bank),
            "contexts": results,
            "control": control,
            "control_needle": _needle(bank, control_text, before),
            "spent": {k: round(v, 6) for k, v in spent.items()},
        },
    )


def context_after_uncompacted(inputs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The control arm's context: every input row as the model would read it."""
    from compaction.probes import message_text

    return [message_text(m) for m in inputs]
