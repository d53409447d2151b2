"""Routes of the OpenAI-compatible endpoint, included under ``/v1/``."""

from django.urls import path

from hermes_web.openai_compat import views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="openai_chat_completions"),
    path("models", views.models, name="openai_models"),
]
