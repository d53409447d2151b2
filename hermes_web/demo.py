"""Demo conversations so every inspector panel has something to show on first start.

Long synthetic agent sessions (terminal logs, file reads, searches, screenshots, reasoning)
from ``compaction.generate_conversation``; one rotated twice (a three-node tree), one
compacted in place, one with a what-if dry run, one untouched. Everything runs inline with
the deterministic summarizer: no worker and no model are needed.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Sum

from compaction import count_messages_tokens, generate_conversation
from hermes_web.llm_models import DEMO_CONTEXT_LENGTH
from hermes_web.models import Compaction, Session
from hermes_web.services.compactions import request_compaction
from hermes_web.services.sessions import append_message, compaction_config_for, create_session


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


def _active_tokens(session: Session) -> int:
    return session.messages.filter(active=True).aggregate(t=Sum("token_count"))["t"] or 0


def _grow(
    session: Session,
    messages: list[dict],
    user,
    *,
    mode: str,
    compactions: int,
    **kwargs,
) -> tuple[Session, list[Compaction]]:
    """Append ``messages`` step by step as a chat would, within the demo model's window:
    when the next model call (with the tool results it asks for) or user turn would take the
    context past the threshold, compact (trigger ``auto``) and go on in the compacted
    context; after ``compactions`` of them, stop there. So no prompt exceeds the window and
    each compaction starts just under the threshold."""
    config = compaction_config_for(session)
    threshold = config.threshold_tokens
    tokens = count_messages_tokens(messages, config)
    # A model call and the tool results it asked for arrive together: what each step adds.
    step = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        follows = step[i + 1] if i + 1 < len(messages) and messages[i + 1]["role"] == "tool" else 0
        step[i] = tokens[i] + follows
    total = _active_tokens(session)
    runs: list[Compaction] = []
    pending: list[dict] = []
    for i, m in enumerate(messages):
        # Each assistant row is one model call, whose prompt is everything before it.
        if m["role"] in ("user", "assistant") and total + step[i] > threshold:
            _append_all(session, pending)
            pending = []
            if len(runs) == compactions:
                return session, runs
            runs.append(
                _compact(session, user, mode=mode, trigger=Compaction.Trigger.AUTO, **kwargs)
            )
            session = runs[-1].result_session or session
            total = _active_tokens(session)
        pending.append(m)
        total += tokens[i]
    _append_all(session, pending)
    return session, runs


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
    # Two rotations as the context fills up, then turns up to the threshold again.
    turns = generate_conversation(600, seed=11) + _continuation(400, seed=12)
    _grow(rotated, turns, user, mode=Session.Mode.ROTATION, compactions=2)
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
    _grow(
        in_place,
        generate_conversation(500, seed=21),
        user,
        mode=Session.Mode.IN_PLACE,
        compactions=1,
    )
    created += 1

    # 3. A long session with a what-if (smaller tail, more folding) but nothing committed.
    what_if = create_session(
        owner=user,
        title="Single sqlite connection refactor (what-if)",
        source=Session.Source.DEMO,
        model="gpt-4o-mini",
        context_length=DEMO_CONTEXT_LENGTH,
    )
    # Filled up to the threshold (the point where a chat would compact), not past the window.
    _grow(
        what_if,
        generate_conversation(800, seed=31),
        user,
        mode=Session.Mode.ROTATION,
        compactions=0,
    )
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
    _grow(
        fresh, generate_conversation(200, seed=41), user, mode=Session.Mode.ROTATION, compactions=0
    )
    created += 1
    return created
