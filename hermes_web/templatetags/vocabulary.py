"""``{{ value|term:"trigger" }}``: the one word every page uses for a stored value."""

from django import template

from hermes_web.presenters.vocabulary import term as _term

register = template.Library()


@register.filter
def term(value: object, kind: str) -> str:
    """The label of ``value`` in the vocabulary ``kind`` (trigger, status, mode, summarizer, …)."""
    return _term(kind, value)
