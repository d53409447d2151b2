"""Routes of the model endpoints, included under ``/v1/``: OpenAI chat completions and
Responses, Anthropic Messages, and a JSON 404 for any other path."""

from django.urls import path, re_path

from hermes_web.openai_compat import anthropic, responses, views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="openai_chat_completions"),
    path("models", views.models, name="openai_models"),
    # Clients append or omit a trailing slash; both reach the endpoint.
    re_path(r"^messages/?$", anthropic.messages, name="anthropic_messages"),
    re_path(r"^messages/count_tokens/?$", anthropic.count_tokens, name="anthropic_count_tokens"),
    re_path(r"^responses/?$", responses.create, name="openai_responses"),
    re_path(r"^responses/compact/?$", responses.compact, name="openai_responses_compact"),
    re_path(r"^(?P<rest>.*)$", views.not_found, name="v1_not_found"),
]
