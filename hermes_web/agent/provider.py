"""How a chat call reaches its provider: our base URL and key, or the offline demo provider.

Used by the agent's turn loop and by the OpenAI-compatible endpoint, so both route a model
the same way. (Which model, and its window, is ``hermes_web.llm_models``.)
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from hermes_web.agent.demo_model import register
from hermes_web.llm_models import is_demo_model


def chat_provider_kwargs(model: str) -> dict[str, Any]:
    """litellm arguments that route a chat call for ``model``: our base URL and key, or none.

    For the demo model this registers its litellm custom provider (on first use) instead.
    """
    if is_demo_model(model):
        register()
        return {}
    kwargs: dict[str, Any] = {}
    if settings.HERMES_CHAT_API_BASE:
        kwargs["api_base"] = settings.HERMES_CHAT_API_BASE
    if settings.HERMES_CHAT_API_KEY:
        kwargs["api_key"] = settings.HERMES_CHAT_API_KEY
    elif settings.HERMES_CHAT_API_BASE:
        # Local OpenAI-compatible servers rarely want a key, but the OpenAI client refuses to
        # send a request without one.
        kwargs["api_key"] = "no-key-needed"
    return kwargs
