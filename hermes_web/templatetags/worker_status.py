"""``{% worker_banner %}``: say "no worker is running" while jobs wait without one."""

from django import template

from hermes_web.health import no_worker_running

register = template.Library()


@register.inclusion_tag("hermes_web/_worker_banner.html")
def worker_banner() -> dict:
    """Checked at most every 5 s per cache (two small queries), shown on every page."""
    return {"no_worker": no_worker_running()}
