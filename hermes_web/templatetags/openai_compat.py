"""Template helpers for the API keys page's "use it from your own agent" snippets."""

from django import template

register = template.Library()


@register.simple_tag
def openai_default_model() -> str:
    """The model name a client sends when it wants the server's chat model."""
    from hermes_web.openai_compat.upstream import allowed_models

    return allowed_models()[0]
