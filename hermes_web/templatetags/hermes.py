from django import template

register = template.Library()


@register.filter
def clip(value: object, length: int) -> str:
    """Cut text to ``length`` characters with an ellipsis.

    A plain slice: Django's truncatechars normalises Unicode and walks the string, which
    costs more than the rest of a row when a page renders hundreds of them.
    """
    text = "" if value is None else str(value)
    length = int(length)
    return text if len(text) <= length else text[: max(0, length - 1)] + "…"


@register.filter
def num(value: object) -> object:
    """A number with thousands separators (``12,064``; ``0.42`` stays); anything else as is.

    For values that may or may not be numbers (configuration tables): humanize's intcomma
    would turn ``True`` into ``1`` and fail on text.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, float):
        return f"{value:,.{max(0, min(6, len(repr(value).partition('.')[2])))}f}"
    return f"{value:,}"
