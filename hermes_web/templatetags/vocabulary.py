"""``{{ value|term:"trigger" }}``: the one word every page uses for a stored value."""

from django import template

from hermes_web.presenters.vocabulary import number as _number
from hermes_web.presenters.vocabulary import term as _term

register = template.Library()


@register.filter
def term(value: object, kind: str) -> str:
    """The label of ``value`` in the vocabulary ``kind`` (trigger, status, mode, summarizer, …)."""
    return _term(kind, value)


@register.filter
def count(value: object, missing: str = "not reported") -> str:
    """``{{ n|count }}``: ``125,824``; "not reported" (or ``missing``) when there is none."""
    return _number(value, missing=missing)
