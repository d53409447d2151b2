from django.conf import settings
from django.http import HttpRequest


def hermes(request: HttpRequest) -> dict:
    """What every page shows about the running configuration (nav, model labels)."""
    return {
        "chat_model_label": settings.HERMES_CHAT_MODEL or "demo model (offline)",
        "summary_model_label": settings.HERMES_SUMMARY_MODEL
        or settings.HERMES_CHAT_MODEL
        or "deterministic summarizer",
    }
