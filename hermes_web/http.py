"""Request types for the type checker."""

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware, so it has ``request.htmx``
    (the pattern django-htmx documents for type checking; nothing is constructed from it)."""

    htmx: HtmxDetails
