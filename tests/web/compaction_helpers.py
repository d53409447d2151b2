"""Builders shared by the storage tests: a realistic session and a summarizer server."""

from compaction import generate_conversation
from hermes_web.services.sessions import append_message, create_session


def fill(session, n_messages: int = 80, seed: int = 1):
    for m in generate_conversation(n_messages, seed=seed):
        append_message(
            session,
            role=m["role"],
            content=m.get("content"),
            tool_calls=m.get("tool_calls"),
            tool_call_id=m.get("tool_call_id", ""),
            tool_name=m.get("name", ""),
        )
    return session


def conversation(owner, n_messages: int = 80, **kwargs):
    kwargs.setdefault("context_length", 32_000)
    return fill(create_session(owner=owner, title="work", **kwargs), n_messages)


# A small tail keeps the tests' conversations compactable without megabytes of text.
SMALL_TAIL = {"tail_token_budget": 2_000}


def use_summary_server(settings, server) -> None:
    settings.HERMES_SUMMARY_MODEL = "openai/fake-summary"
    settings.HERMES_SUMMARY_API_BASE = server.base_url
    settings.HERMES_SUMMARY_API_KEY = "x"
    settings.HERMES_CHAT_MODEL = ""
    settings.HERMES_LLM_TIMEOUT = 30
