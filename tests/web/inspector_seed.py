"""Seeded conversations and compactions for the inspector tests, built through the services."""

import json

from django.db import transaction

from compaction import generate_conversation
from hermes_web.services.compactions import request_compaction
from hermes_web.services.sessions import append_message, create_session

# Every way a tool output could try to become markup or template code.
PAYLOAD = (
    '<script>alert("pwn")</script><img src=x onerror=alert(1)>'
    '<a href="javascript:alert(2)">click</a><!-- hidden comment -->{{ secret_var }}{% now "Y" %}'
)
# Fragments that must never appear unescaped in any HTML page.
RAW_FRAGMENTS = ("<script>alert", "<img src=x", '<a href="javascript:', "<!-- hidden comment -->")
SMALL_TAIL = {"tail_token_budget": 2_000}


def _inject(messages: list[dict]) -> list[dict]:
    """Put the payload into a user ask, a command, a long tool output, an error line and an image URL."""
    out = [dict(m) for m in messages]
    # Past the head (system + 3 messages), so it lands in the middle that gets slimmed and summarized.
    first_user = next(i for i, m in enumerate(out) if m["role"] == "user" and i > 8)
    out[first_user]["content"] = [
        {
            "type": "text",
            "text": f"Never paste {PAYLOAD} into docs/{PAYLOAD}.md. Visit javascript:alert(3)",
        },
        {"type": "image_url", "image_url": {"url": "javascript:alert(4)"}},
    ]
    for m in out[first_user:]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            call = dict(m["tool_calls"][0])
            call["function"] = {
                "name": "terminal",
                "arguments": json.dumps({"command": f"echo '{PAYLOAD}'"}),
            }
            m["tool_calls"] = [call, *m["tool_calls"][1:]]
            break
    for m in out[first_user:]:
        if m["role"] == "tool":
            m["content"] = json.dumps(
                {"output": f"{PAYLOAD}\n" * 60 + f"ValueError: {PAYLOAD}\n", "exit_code": 1}
            )
            break
    return out


def seed_conversation(
    owner,
    *,
    n: int = 120,
    seed: int = 1,
    payload: bool = False,
    title: str = "Seeded",
    mode: str = "",
):
    session = create_session(
        owner=owner, title=title, source="chat", context_length=128_000, compaction_mode=mode
    )
    messages = generate_conversation(n, seed=seed)
    if payload:
        messages = _inject(messages)
    with transaction.atomic():
        for m in messages:
            append_message(
                session,
                role=m["role"],
                content=m.get("content"),
                tool_calls=m.get("tool_calls"),
                tool_call_id=m.get("tool_call_id") or "",
                tool_name=m.get("name") or "",
                reasoning=m.get("reasoning") or m.get("reasoning_content"),
            )
    return session


def compact_now(
    session, user, *, mode=None, trigger="manual", overrides=None, summarizer="deterministic"
):
    return request_compaction(
        session=session,
        requested_by=user,
        trigger=trigger,
        mode=mode,
        summarizer=summarizer,
        config_overrides=overrides if overrides is not None else SMALL_TAIL,
        run_now=True,
    )


def continue_with(session, n: int = 30, seed: int = 9):
    """Append more turns (no system prompt) to a live session."""
    for m in generate_conversation(n, seed=seed):
        if m["role"] == "system":
            continue
        append_message(
            session,
            role=m["role"],
            content=m.get("content"),
            tool_calls=m.get("tool_calls"),
            tool_call_id=m.get("tool_call_id") or "",
            tool_name=m.get("name") or "",
        )
    return session
