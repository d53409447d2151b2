"""The one place for model rules: which model chats, which window a session gets, who summarizes.

Every part of the web layer that needs a model decision asks here: the chat (chat service and
turn loop), the sessions API, the OpenAI-compatible ``/v1`` endpoint, the importers, the what-if
and compaction views, and the demo data. Nothing here imports litellm at module level (it
takes seconds to import), any Django model or the agent, so any module may import this one.
How a chat call reaches its provider (base URL, key, the demo provider) is
``hermes_web.agent.provider``.

The context window of a session is fixed when the session is created, by
``context_length_for(model)``:

1. the offline demo model: ``DEMO_CONTEXT_LENGTH`` (64,000);
2. else ``HERMES_CONTEXT_LENGTH`` when set (an operator override for every model);
3. else litellm's bundled model map (``max_input_tokens``, then ``max_tokens``), tried with
   the full name and without its provider prefix;
4. else ``DEFAULT_CONTEXT_LENGTH`` (200,000), the same default as ``CompactionConfig`` and the
   ``Session.context_length`` column, so a session nobody resolved a window for and one
   resolved from an unknown model agree.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings

DEMO_MODEL = "hermes-demo/agent"
DEMO_MODEL_LABEL = "demo model (offline)"
# The demo's window, for the offline demo chat model and the seeded demo conversations alike:
# small enough that the 64,000-token trigger floor is the threshold, so a few large tool
# outputs cross it within a handful of messages.
DEMO_CONTEXT_LENGTH = 64_000
# An unknown model's window; equal to CompactionConfig.context_length and the model column's
# default (hermes_web.models imports it from here).
DEFAULT_CONTEXT_LENGTH = 200_000
DETERMINISTIC_LABEL = "deterministic summarizer"


def is_demo_model(model: str) -> bool:
    """Whether ``model`` is the built-in offline demo chat model."""
    return model == DEMO_MODEL


def is_llm_model(name: str) -> bool:
    """Whether ``name`` is a real litellm model (not empty, not the demo model, not ``demo…``)."""
    # The offline demo chat model is not something litellm can summarize with.
    return bool(name) and not is_demo_model(name) and not name.lower().startswith("demo")


def model_label(model: str) -> str:
    """How a model string is shown to people: the demo model always says what it is."""
    if not model or is_demo_model(model):
        return DEMO_MODEL_LABEL
    return model


def chat_model() -> str:
    """The configured litellm chat model, or the offline demo model when none is configured."""
    return settings.HERMES_CHAT_MODEL or DEMO_MODEL


def summary_model_label() -> str:
    """What summarizes compactions, as shown in the page header (configured names, as set)."""
    return settings.HERMES_SUMMARY_MODEL or settings.HERMES_CHAT_MODEL or DETERMINISTIC_LABEL


# --- the context window -----------------------------------------------------------------------


@functools.cache
def _model_map() -> dict[str, Any]:
    # Read litellm's bundled map directly: importing litellm costs seconds in a web process.
    spec = importlib.util.find_spec("litellm")
    if spec is None or spec.origin is None:
        return {}
    path = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def context_length_for(model: str) -> int:
    """The context window of a new session on ``model`` (see the module docstring for the order)."""
    if is_demo_model(model):
        return DEMO_CONTEXT_LENGTH
    if settings.HERMES_CONTEXT_LENGTH:
        return settings.HERMES_CONTEXT_LENGTH
    table = _model_map()
    for key in (model, model.split("/", 1)[-1]) if model else ():
        info = table.get(key) or {}
        window = info.get("max_input_tokens") or info.get("max_tokens")
        if isinstance(window, int) and window > 0:
            return window
    return DEFAULT_CONTEXT_LENGTH


# --- the summarizer ---------------------------------------------------------------------------


def summarizer_models() -> tuple[str, str]:
    """(aux, main): HERMES_SUMMARY_MODEL and HERMES_CHAT_MODEL, each "" unless a real LLM model."""
    aux, main = settings.HERMES_SUMMARY_MODEL, settings.HERMES_CHAT_MODEL
    return (aux if is_llm_model(aux) else "", main if is_llm_model(main) else "")


def summarizes_with_llm(choice: str = "auto") -> bool:
    """Whether ``build_summarizer(choice)`` calls a model (so a run cannot be done inline)."""
    return choice != "deterministic" and any(summarizer_models())


def build_summarizer(choice: str = "auto"):
    """aux (HERMES_SUMMARY_MODEL) → main (HERMES_CHAT_MODEL) → deterministic."""
    from compaction import DeterministicSummarizer, LLMSummarizer

    if not summarizes_with_llm(choice):
        return DeterministicSummarizer()
    aux, main = summarizer_models()
    if aux:
        return LLMSummarizer(
            aux,
            main or None,
            api_base=settings.HERMES_SUMMARY_API_BASE or None,
            api_key=settings.HERMES_SUMMARY_API_KEY or None,
            main_api_base=settings.HERMES_CHAT_API_BASE,
            main_api_key=settings.HERMES_CHAT_API_KEY,
            timeout=settings.HERMES_LLM_TIMEOUT,
        )
    return LLMSummarizer(
        main,
        api_base=settings.HERMES_CHAT_API_BASE or None,
        api_key=settings.HERMES_CHAT_API_KEY or None,
        timeout=settings.HERMES_LLM_TIMEOUT,
    )


@functools.cache
def litellm_module() -> Any:
    """litellm, imported once and set up the way every model call of the app wants it.

    No litellm callbacks or response cache are configured here, so its streaming success
    logging (a thread-pool task per streamed chunk, and more at the end of each stream) has
    nothing to feed and only competes for the GIL with the request that is streaming.
    """
    import litellm

    litellm.suppress_debug_info = True
    litellm.disable_streaming_logging = True
    return litellm


@contextlib.contextmanager
def unlogged_calls() -> Iterator[None]:
    """litellm calls made inside skip litellm's success and failure logging.

    With no callback configured that logging feeds nothing, yet after every call it builds
    a logging payload and works out the call's cost (2–4 ms of CPU a call, on the request's
    own thread for a native Messages call, on a thread competing for the GIL otherwise).
    litellm's switch for it is the context variable it sets for its own nested calls
    (``litellm._internal_context.is_internal_call``, litellm pinned); a test fails when
    litellm's logging runs for a gateway call again.
    """
    from litellm._internal_context import is_internal_call

    token = is_internal_call.set(True)
    try:
        yield
    finally:
        is_internal_call.reset(token)
