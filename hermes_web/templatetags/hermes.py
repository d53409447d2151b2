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
