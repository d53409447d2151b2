from django.http import HttpRequest

from hermes_web.llm_models import chat_model, model_label, summary_model_label


def hermes(request: HttpRequest) -> dict:
    """What every page shows about the running configuration (nav, model labels)."""
    return {
        "chat_model_label": model_label(chat_model()),
        "summary_model_label": summary_model_label(),
    }
