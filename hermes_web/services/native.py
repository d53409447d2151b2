"""Replaying an agent's own compaction with our engine: dry runs on exactly the rows it
replaced (``Compaction.replay_of``), one per engine profile, in the agent's window."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from django.utils import timezone

from compaction import CompactionConfig, DeterministicSummarizer, compact
from hermes_web.models import Compaction
from hermes_web.services.compaction_run import _load_rows
from hermes_web.services.compactions import CompactionRefused, request_compaction
from hermes_web.services.sessions import compaction_config_for

PROFILES = ("hermes", "classic")
# Replays up to this many rows run inside the request (the deterministic summarizer takes
# well under a second); bigger ones go to the worker and Compare follows them.
INLINE_MAX_ROWS = 3_000


def engine_profiles() -> tuple[str, ...]:
    """The profiles the installed engine knows (none before profiles existed)."""
    has = "profile" in {f.name for f in dataclasses.fields(CompactionConfig)}
    return PROFILES if has else ()


def agent_window(native: Compaction) -> int | None:
    """The context window the agent recorded for itself (Codex's ``model_context_window``);
    None when it recorded none (the session's model window applies)."""
    window = (native.native_record or {}).get("model_context_window")
    return window if isinstance(window, int) and not isinstance(window, bool) and window else None


# At the agent's budget: a tenth of it for the verbatim tail, the rest for the summary, at
# about 3.2 characters a token (what the deterministic summary's text measures in tiktoken).
BUDGET_TAIL_SHARE = 0.10
BUDGET_CHARS_PER_TOKEN = 3.2


def agent_budget(native: Compaction) -> int | None:
    """The tokens the agent's compaction left of the rows it replaced, on our scale (our
    tiktoken count of its summary row and the rows it kept); None when it left nothing we
    stored (a marker only)."""
    counted = ((native.report or {}).get("native") or {}).get("tokens_after_counted")
    return (
        counted if isinstance(counted, int) and not isinstance(counted, bool) and counted else None
    )


def budget_overrides(budget: int) -> dict:
    """Engine settings that aim a hermes replay at ``budget`` tokens after: no protected
    head (the agent kept none of the replaced rows), a tail of a tenth of the budget and a
    summary bounded to the rest, so a fact comparison weighs contexts of one size (below
    the defaults' 1,000-character floor when the budget is small: ``fitted_overrides``
    fits the bound to the budget by measuring)."""
    tail = max(1, int(budget * BUDGET_TAIL_SHARE))
    return {
        "protect_first_n": 0,
        "tail_token_budget": tail,
        "resume_summary_max_chars": max(1, int((budget - tail) * BUDGET_CHARS_PER_TOKEN)),
    }


# The hermes replay's size is fitted to the agent's budget by running the deterministic
# summary at a few bounds (each run well under a second on the rows replayed inline): it
# stops within this share of the budget, or after this many runs at the closest bound.
FIT_TOLERANCE = 0.02
FIT_RUNS = 8
# All runs of one fit: 3,000 rows (INLINE_MAX_ROWS) take about 0.7 s a run on the deterministic
# summary, so a replay request waits 8 s at most (most fits take 2 to 4 runs).
FIT_RUNS_TOTAL = 12


def fitted_overrides(native: Compaction, budget: int, overrides: dict) -> dict:
    """``budget_overrides`` with the summary bound fitted so the deterministic hermes replay
    of ``native`` keeps ``budget`` tokens (within ``FIT_TOLERANCE`` where the rows allow):
    the characters-per-token guess is replaced by runs of the engine on the same rows, with
    the same settings the replay gets, so the result the replay stores is the one measured.
    A budget below what the engine can keep (our prefix, the smallest summary and the last
    turn) gets the smallest bound."""
    aimed = budget_overrides(budget)
    config = compaction_config_for(native.session, {**overrides, **aimed, "profile": "hermes"})
    messages, counts, _, prompt = _load_rows(native.input_rows(), config)
    today = timezone.now().date()

    runs = 0

    def kept(chars: int, tail: int) -> int:
        nonlocal runs
        runs += 1
        fitted = dataclasses.replace(config, resume_summary_max_chars=chars, tail_token_budget=tail)
        result = compact(
            messages,
            config=fitted,
            summarizer=DeterministicSummarizer(),
            now=today,
            force=True,
            token_counts=counts,
            provider_prompt_tokens=prompt,
        )
        tokens = result.report.to_dict().get("tokens") or {}
        return int(tokens.get("after") or tokens.get("attempted_after") or 0)

    def fit(chars: int, tail: int) -> tuple[int, int]:
        """The bound (and what it keeps) closest to the budget with this tail budget."""
        low = high = best = None  # (chars, tokens): the closest under, over, and overall
        for _ in range(min(FIT_RUNS, FIT_RUNS_TOTAL - runs)):
            point = (chars, kept(chars, tail))
            if best is None or abs(point[1] - budget) < abs(best[1] - budget):
                best = point
            if abs(point[1] - budget) <= FIT_TOLERANCE * budget:
                break
            if point[1] > budget:
                high = point if high is None or point[0] < high[0] else high
            elif low is not None and point[1] == low[1] and high is None:
                break  # more room wrote nothing more: every fact of the rows is in it
            else:
                low = point if low is None or point[0] > low[0] else low
            if low is not None and high is not None:
                if high[0] - low[0] <= 1:
                    break
                share = (budget - low[1]) / max(high[1] - low[1], 1)
                chars = min(high[0] - 1, max(low[0] + 1, int(low[0] + share * (high[0] - low[0]))))
            else:  # one side known: move by the tokens missing, at the usual chars a token
                if high is not None and point[0] == 1:
                    break  # nothing smaller to try: the smallest summary is over the budget
                step = int((budget - point[1]) * BUDGET_CHARS_PER_TOKEN)
                chars = max(1, chars + step if step else chars + (1 if high is None else -1))
        return best if best is not None else (chars, kept(chars, tail))

    tail = aimed["tail_token_budget"]
    best = fit(aimed["resume_summary_max_chars"], tail)
    fitted = {**aimed, "resume_summary_max_chars": best[0]}
    if best[1] > budget:
        return fitted  # the smallest summary and tail are over it already
    # A summary at its longest (every fact of the rows written) still under the budget: the
    # rest is kept verbatim, as the agent's kept rows are (a longer tail, the summary bound
    # fitted again around it, since tail rows come whole).
    under, over, point = tail, None, best
    for _ in range(FIT_RUNS // 2):
        if abs(point[1] - budget) <= FIT_TOLERANCE * budget or runs >= FIT_RUNS_TOTAL:
            break
        if point[1] < budget:
            under = tail
            tail = tail + budget - point[1] if over is None else (tail + over) // 2
        else:
            over = tail
            tail = (under + tail) // 2
        point = fit(best[0], tail)
        if abs(point[1] - budget) < abs(best[1] - budget):
            best = point
            fitted.update(resume_summary_max_chars=best[0], tail_token_budget=tail)
    return fitted


def replay_native(
    native: Compaction, *, requested_by, summarizer: str = "deterministic"
) -> list[Compaction]:
    """Our engine on the rows ``native`` replaced: one dry run per profile (one without
    profiles; the hermes one aimed at the agent's retained budget, ``agent_budget``, and
    fitted to it by ``fitted_overrides`` when it runs inline), forced (the agent had already
    decided to compact), in-place mode so nothing of the session is touched. Returns the runs, finished when they ran inline.

    Raises:
        CompactionRefused: not an agent's compaction, or one that replaced no stored row.
    """
    if not native.is_native:
        raise CompactionRefused("only an agent's own compaction can be replayed")
    rows = native.input_rows().count()
    if not rows:
        raise CompactionRefused(
            "this compaction replaced no stored rows (the transcript kept only a marker), "
            "so there is nothing to replay"
        )
    window = agent_window(native)
    overrides: dict = {"context_length": window} if window else {}
    budget = agent_budget(native)
    runs = []
    for profile in engine_profiles() or ("",):
        # The hermes replay aims at the agent's retained budget (the fact comparison weighs
        # equal sizes); the classic one keeps our defaults beside it.
        aimed = {}
        if budget and profile == "hermes":
            fit = rows <= INLINE_MAX_ROWS and summarizer == "deterministic"
            aimed = fitted_overrides(native, budget, overrides) if fit else budget_overrides(budget)
        runs.append(
            request_compaction(
                session=native.session,
                requested_by=requested_by,
                trigger=Compaction.Trigger.WHAT_IF,
                mode=Compaction.Mode.IN_PLACE,
                config_overrides={
                    **overrides,
                    **aimed,
                    **({"profile": profile} if profile else {}),
                },
                summarizer=summarizer,
                run_now=rows <= INLINE_MAX_ROWS and summarizer == "deterministic",
                replay_of=native,
            )
        )
    return runs


def latest_replays(native: Compaction) -> list[Compaction]:
    """The newest replay of ``native`` per profile (report deferred), hermes first."""
    newest: dict[str, Compaction] = {}
    for run in native.replays.defer("report").order_by("-queued_at", "-pk"):
        newest.setdefault(str((run.config or {}).get("profile") or ""), run)
    order = {p: i for i, p in enumerate(PROFILES)}
    return sorted(newest.values(), key=lambda r: order.get(str((r.config or {}).get("profile")), 9))


def agent_thresholds(runs: Iterable[Compaction]) -> list[dict]:
    """Each agent's own compaction threshold as far as its transcripts tell it, one entry
    per agent of the native compactions in ``runs`` (by name):

    - ``how == "limit"``: the auto-compact limit it recorded (Codex's
      ``model_auto_compact_token_limit``);
    - ``how == "fired"``: the lowest count at which its automatic compaction fired, as it
      recorded it (Claude Code's ``preTokens`` of a compaction triggered "auto"): its
      threshold is at most this;
    - ``value`` None: nothing recorded says when it compacts.

    Values are the agent's own counts (its tokenizer, its whole prompt), not ours."""
    found: dict[str, dict] = {}
    for run in runs:
        if not run.is_native:
            continue
        agent = run.get_source_display()
        entry = found.setdefault(agent, {"agent": agent, "value": None, "how": ""})
        limit = (run.native_record or {}).get("model_auto_compact_token_limit")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            entry.update(value=limit, how="limit")
        elif (
            entry["how"] != "limit"
            and run.trigger == Compaction.Trigger.AUTO
            and run.tokens_before
            and (entry["value"] is None or run.tokens_before < entry["value"])
        ):
            entry.update(value=run.tokens_before, how="fired")
    return sorted(found.values(), key=lambda e: e["agent"])
