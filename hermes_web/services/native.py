"""Replaying an agent's own compaction with our engine: dry runs on exactly the rows it
replaced (``Compaction.replay_of``), one per engine profile, in the agent's window."""

from __future__ import annotations

import dataclasses

from compaction import CompactionConfig
from hermes_web.models import Compaction
from hermes_web.services.compactions import CompactionRefused, request_compaction

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
    summary bounded to the rest, so a fact comparison weighs contexts of one size."""
    tail = max(1, int(budget * BUDGET_TAIL_SHARE))
    return {
        "protect_first_n": 0,
        "tail_token_budget": tail,
        "resume_summary_max_chars": max(1_000, int((budget - tail) * BUDGET_CHARS_PER_TOKEN)),
    }


def replay_native(
    native: Compaction, *, requested_by, summarizer: str = "deterministic"
) -> list[Compaction]:
    """Our engine on the rows ``native`` replaced: one dry run per profile (one without
    profiles; the hermes one aimed at the agent's retained budget, ``agent_budget``), forced (the agent had already decided to compact), in-place mode so nothing
    of the session is touched. Returns the runs, finished when they ran inline.

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
        aimed = budget_overrides(budget) if budget and profile == "hermes" else {}
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
