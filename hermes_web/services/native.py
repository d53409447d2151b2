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


def replay_native(
    native: Compaction, *, requested_by, summarizer: str = "deterministic"
) -> list[Compaction]:
    """Our engine on the rows ``native`` replaced: one dry run per profile (one without
    profiles), forced (the agent had already decided to compact), in-place mode so nothing
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
    runs = []
    for profile in engine_profiles() or ("",):
        runs.append(
            request_compaction(
                session=native.session,
                requested_by=requested_by,
                trigger=Compaction.Trigger.WHAT_IF,
                mode=Compaction.Mode.IN_PLACE,
                config_overrides={**overrides, **({"profile": profile} if profile else {})},
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
