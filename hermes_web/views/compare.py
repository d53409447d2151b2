"""Compare: two dry runs side by side (rotation vs in-place, profile A vs B, any two runs)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from compaction import ConfigError
from hermes_web.http import HtmxHttpRequest
from hermes_web.models import Compaction, Session
from hermes_web.presenters.compare import fates_diff
from hermes_web.presenters.inspector import card_context, summary_diff
from hermes_web.presenters.native import facts_kept
from hermes_web.services.compactions import (
    CompactionRefused,
    request_compaction,
)
from hermes_web.services.native import latest_replays
from hermes_web.views.compactions import _runs_inline
from hermes_web.views.what_if import PROFILES

PROFILE_ERROR = (
    "The installed compaction engine has no profiles yet, so a profile comparison cannot run. "
    "Compare rotation and in-place instead, or update the engine."
)


def _compare_specs(request: HtmxHttpRequest, session: Session) -> tuple[list[dict], dict[str, str]]:
    """The two dry runs a Compare form asks for, and errors by form field."""
    if request.POST.get("compare") != "profiles":
        return [{"mode": m} for m in (Compaction.Mode.ROTATION, Compaction.Mode.IN_PLACE)], {}
    errors = {}
    chosen = [request.POST.get("profile_a", ""), request.POST.get("profile_b", "")]
    for field, value in zip(("profile_a", "profile_b"), chosen, strict=True):
        if value not in PROFILES:
            errors[field] = f"Choose one of {', '.join(PROFILES)}."
    mode = request.POST.get("mode") or session.effective_mode
    if mode not in Compaction.Mode.values:
        errors["mode"] = "Choose rotation or in-place."
    return [{"mode": mode, "config_overrides": {"profile": p}} for p in chosen], errors


@require_http_methods(["GET", "POST"])
@login_required
def compare(request: HtmxHttpRequest) -> HttpResponse:
    sessions = Session.objects.for_user(request.user).order_by("-updated_at")
    chosen_id = request.POST.get("session") or request.GET.get("session") or ""
    session = get_object_or_404(sessions, public_id=chosen_id) if chosen_id else None
    errors: dict[str, str] = {}
    if request.method == "POST":
        if session is None:
            return HttpResponse("Pick a conversation to compare.", status=400)
        summarizer = request.POST.get("summarizer", "deterministic")
        specs, errors = _compare_specs(request, session)
        if not errors:
            try:
                runs = [
                    request_compaction(
                        session=session,
                        requested_by=request.user,
                        trigger=Compaction.Trigger.WHAT_IF,
                        summarizer=summarizer,
                        run_now=_runs_inline(session, summarizer),
                        **spec,
                    )
                    for spec in specs
                ]
            except ConfigError as error:
                field = "profile_a" if getattr(error, "field", "") == "profile" else "form"
                errors[field] = PROFILE_ERROR if field == "profile_a" else str(error)
            except (ValueError, CompactionRefused) as error:
                errors["form"] = f"Could not run the comparison: {error}"
            else:
                return redirect(
                    f"{reverse('compare')}?session={session.public_id}"
                    f"&a={runs[0].public_id}&b={runs[1].public_id}"
                )
    context: dict = {
        "sessions": sessions[:200],
        "session": session,
        "nav": "compare",
        "errors": errors,
        "profiles": PROFILES,
        "posted": request.POST,
    }
    if session is not None:
        context["runs"] = list(
            Compaction.objects.filter(session=session)
            .exclude(report__isnull=True)
            .defer("report")
            .order_by("-queued_at")[:100]
        )
        a_id, b_id = request.GET.get("a"), request.GET.get("b")
        if a_id and b_id:
            # Reports stay deferred: card_context reads them only when its cache is cold.
            runs_of_user = Compaction.objects.for_user(request.user).defer("report")
            a = get_object_or_404(runs_of_user, public_id=a_id)
            b = get_object_or_404(runs_of_user, public_id=b_id)
            if a.session_id != b.session_id:
                return HttpResponse(
                    "Both compactions must belong to the same conversation.", status=400
                )
            a_ctx, b_ctx = card_context(a), card_context(b)
            a_summary, b_summary = a_ctx["report"]["summary"], b_ctx["report"]["summary"]
            context.update(
                a=a_ctx,
                b=b_ctx,
                a_structure=a_ctx["structure"],
                b_structure=b_ctx["structure"],
                by_profile=a_ctx["profile"] != b_ctx["profile"],
                fates=fates_diff(a_ctx["fates"], b_ctx["fates"]),
                diff=summary_diff(a_summary, b_summary),
                same_summary=a_summary == b_summary,
                pending=not (a.is_finished and b.is_finished),
                # An agent's compaction against our replay of it: the facts each kept.
                facts=facts_kept(a, b) if a.is_finished and b.is_finished else None,
                replays=latest_replays(a) if a.is_native else [],
            )
    if request.htmx and request.GET.get("panel") == "compare-result":
        return render(request, "hermes_web/compare.html#compare-result", context)
    return render(request, "hermes_web/compare.html", context, status=400 if errors else 200)
