"""An agent's own compaction: replayed with our engine, then compared side by side."""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from hermes_web.http import HtmxHttpRequest
from hermes_web.services.compactions import CompactionRefused
from hermes_web.services.native import replay_native
from hermes_web.views.compactions import _compaction_for


def compare_url(native, replay) -> str:
    """Compare: the agent's compaction on the left, our replay of it on the right."""
    return (
        f"{reverse('compare')}?session={native.session.public_id}"
        f"&a={native.public_id}&b={replay.public_id}"
    )


@require_POST
@login_required
def compaction_replay(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """'Replay with our engine': a dry run per profile on the rows the agent compacted,
    then Compare (the agent's summary against the first profile's; the page links the
    other). A plain form POST: works without JavaScript."""
    native = _compaction_for(request, public_id, defer_report=True)
    try:
        runs = replay_native(native, requested_by=request.user)
    except CompactionRefused as refused:
        flash.error(request, f"{str(refused).capitalize()}.")
        return redirect("compaction_detail", public_id=native.public_id)
    return redirect(compare_url(native, runs[0]))
