"""Demo conversations so every inspector panel has something to show on first start.

Long synthetic agent sessions (terminal logs, file reads, searches, screenshots, reasoning)
from ``compaction.generate_conversation``; one rotated twice (a three-node tree), one
compacted in place, one with a what-if dry run, one untouched. Everything runs inline with
the deterministic summarizer: no worker and no model are needed.
"""

from __future__ import annotations

from django.db import transaction

from compaction import generate_conversation
from hermes_web.llm_models import DEMO_CONTEXT_LENGTH
from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import request_compaction
from hermes_web.services.sessions import append_message, create_session


def _append_all(session: Session, messages: list[dict]) -> None:
    # One transaction for the whole batch: SQLite commits once instead of per message.
    names: dict[str, str] = {}
    with transaction.atomic():
        for m in messages:
            for call in m.get("tool_calls") or []:
                names[call.get("id", "")] = (call.get("function") or {}).get("name", "")
            append_message(
                session,
                role=m["role"],
                content=m.get("content"),
                tool_calls=m.get("tool_calls"),
                tool_call_id=m.get("tool_call_id") or "",
                # Name each result after its call, as a real agent transcript does.
                tool_name=m.get("name") or names.get(m.get("tool_call_id") or "", ""),
                reasoning=m.get("reasoning") or m.get("reasoning_content"),
            )


def _continuation(n: int, seed: int) -> list[dict]:
    """More turns for a live session: a generated conversation without its system prompt."""
    return [m for m in generate_conversation(n, seed=seed) if m["role"] != "system"]


def _compact(
    session: Session, user, *, mode: str, trigger: str = Compaction.Trigger.MANUAL, **kwargs
) -> Compaction:
    return request_compaction(
        session=session,
        requested_by=user,
        trigger=trigger,
        mode=mode,
        summarizer="deterministic",
        run_now=True,
        **kwargs,
    )


def load_demo_conversations(user) -> int:
    """Create the demo conversations for ``user`` once; returns how many were created (0 if any exist)."""
    if Session.objects.filter(owner=user, source=Session.Source.DEMO).exists():
        return 0
    created = 0

    # 1. Rotated twice: root → child → grandchild.
    rotated = create_session(
        owner=user,
        title="Parser crash on empty input (rotated twice)",
        source=Session.Source.DEMO,
        model="gpt-4o-mini",
        context_length=DEMO_CONTEXT_LENGTH,
        compaction_mode=Session.Mode.ROTATION,
    )
    _append_all(rotated, generate_conversation(600, seed=11))
    first = _compact(rotated, user, mode=Session.Mode.ROTATION, focus="the parser crash")
    child = first.result_session
    assert child is not None  # a rotation's result is its continuation
    _append_all(child, _continuation(260, seed=12))
    second = _compact(child, user, mode=Session.Mode.ROTATION)
    assert second.result_session is not None
    _append_all(second.result_session, _continuation(60, seed=13))
    created += 1

    # 2. Compacted in place: same session id, archived rows.
    in_place = create_session(
        owner=user,
        title="Add a --json flag to the CLI (in-place)",
        source=Session.Source.DEMO,
        model="gpt-4o-mini",
        context_length=DEMO_CONTEXT_LENGTH,
        compaction_mode=Session.Mode.IN_PLACE,
    )
    _append_all(in_place, generate_conversation(500, seed=21))
    _compact(in_place, user, mode=Session.Mode.IN_PLACE)
    _append_all(in_place, _continuation(40, seed=22))
    created += 1

    # 3. A long session with a what-if (smaller tail, more folding) but nothing committed.
    what_if = create_session(
        owner=user,
        title="Single sqlite connection refactor (what-if)",
        source=Session.Source.DEMO,
        model="gpt-4o-mini",
        context_length=DEMO_CONTEXT_LENGTH,
    )
    _append_all(what_if, generate_conversation(800, seed=31))
    _compact(
        what_if,
        user,
        mode=Session.Mode.ROTATION,
        trigger=Compaction.Trigger.WHAT_IF,
        # Folding only huge results leaves mid-size ones to the truncation step, so the
        # inspector has truncations (with their visible cut) to show as well as folds.
        config_overrides={"tail_token_budget": 8_000, "fold_min_chars": 20_000},
    )
    created += 1

    # 4. A short one nobody compacted yet.
    fresh = create_session(
        owner=user,
        title="Why do the view tests fail on CI?",
        source=Session.Source.DEMO,
        model="gpt-4o-mini",
        context_length=DEMO_CONTEXT_LENGTH,
    )
    _append_all(fresh, generate_conversation(200, seed=41))
    created += 1
    return created
