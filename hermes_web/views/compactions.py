"""The compaction inspector page and its panels, exports, commit, and the home overview."""

from __future__ import annotations

import json

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db.models.fields.json import KT
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_POST

from hermes_web.caching import (
    AUDIT_SECONDS,
    UNDO_HISTORY_SECONDS,
    LazyPanels,
    audit_key,
    panel_seconds,
    undo_history_key,
)
from hermes_web.exporters import export_report_text
from hermes_web.http import HtmxHttpRequest
from hermes_web.llm_models import summarizes_with_llm
from hermes_web.models import Compaction, Message, Session
from hermes_web.presenters.chat import compaction_outcome
from hermes_web.presenters.facts import fact_survival_audit
from hermes_web.presenters.inspector import (
    inspector_context,
    output_token_rows,
    token_strip,
)
from hermes_web.presenters.lineage import saved_chart
from hermes_web.presenters.messages import message_view
from hermes_web.presenters.native import agent_summary_texts, native_context, row_text
from hermes_web.presenters.refs import RefResolver, chain_of
from hermes_web.services.compactions import (
    CompactionRefused,
    commit_what_if,
    run_compaction,
)
from hermes_web.services.native import latest_replays
from hermes_web.services.undo import UndoRefused, redo_compaction, undo_compaction, undo_state
from hermes_web.validation import scrub_surrogates

# Dry runs on conversations up to this size run inside the request (deterministic summarizer
# takes well under a second); bigger ones, or ones that may call an LLM, go to the worker.
INLINE_MAX_MESSAGES = 3_000
FINAL_LIST_LIMIT = 500
# The inspector lists a final list this long inline (its box open); a longer one, like the
# summarizer's input and prompt, loads when its box is opened (or on its own page without
# JavaScript): on a run of a 1,000-message conversation they were 290 KB of a 450 KB page.
FINAL_INLINE_MAX = 60
SUMMARIZER_TEXTS = {
    "input": ("summarizer_input", "Summarizer input exactly as sent"),
    "prompt": ("summarizer_prompt", "Full prompt sent to the model"),
}


def _compaction_for(
    request: HtmxHttpRequest, public_id: str, *, defer_report: bool = False
) -> Compaction:
    runs = Compaction.objects.for_user(request.user).select_related("session", "result_session")
    if defer_report:
        # The report can be megabytes of JSON; pages that cache their panels skip loading it.
        runs = runs.defer("report")
    return get_object_or_404(runs, public_id=public_id)


def _session_for(request: HttpRequest, public_id: str) -> Session:
    return get_object_or_404(Session.objects.for_user(request.user), public_id=public_id)


def _int(value, default: int) -> int:
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return default


# ---------------------------------------------------------------- inspector


def final_rows(compaction: Compaction) -> list[Message]:
    """The committed, assembled list (at most FINAL_LIST_LIMIT rows), with a text excerpt each."""
    final = list(compaction.final_rows(FINAL_LIST_LIMIT))
    agents = agent_summary_texts(final)
    for row in final:
        content = agents.get(row.position, row.content)
        row.excerpt = message_view({"content": content}, preview_chars=200)["text"]
    return final


@require_GET
@login_required
def compaction_detail(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    compaction = _compaction_for(request, public_id, defer_report=True)
    slim_kind, slim_page = request.GET.get("kind", ""), _int(request.GET.get("page"), 1)
    slim_region = request.GET.get("region", "")

    def panels() -> dict:
        # Where each input message is stored: the strip and the slimming rows link to them.
        positions = list(compaction.input_rows().values_list("position", flat=True))
        return {
            **inspector_context(
                compaction,
                slim_kind=slim_kind,
                slim_region=slim_region,
                slim_page=slim_page,
                positions=positions,
                refs=RefResolver(chain_of(compaction)),
            ),
            "final": final_rows(compaction),
            "strip": token_strip(compaction.report or {}, positions),
        }

    # The panels of a finished run never change, so the template caches their HTML and reads
    # ``panels`` (built on first read) only when it renders them anew (a cache miss).
    context: dict = dict(
        panels=LazyPanels(panels),
        c=compaction,
        nav="conversations",
        slim_kind=slim_kind,
        slim_region=slim_region,
        slim_page=slim_page,
        # Only a dry run's page shows the engine's verdict; reading one key of the report
        # still makes PostgreSQL decompress all of it, so other runs skip the query.
        report_status=(
            Compaction.objects.filter(pk=compaction.pk)
            .values_list(KT("report__status"), flat=True)
            .first()
            if compaction.status == Compaction.Status.DRY_RUN
            else None
        ),
        panel_seconds=panel_seconds(compaction),
        final_inline_max=FINAL_INLINE_MAX,
        **undo_panel(compaction),
        # An agent's own compaction: what its transcript recorded, and our replays of it.
        native=native_context(compaction) if compaction.is_native else None,
        replays=latest_replays(compaction) if compaction.is_native else [],
        replay_of=compaction.replay_of if compaction.replay_of_id else None,
    )
    template = "hermes_web/compaction_detail.html"
    panel = request.GET.get("panel", "")
    if request.htmx and panel == "compaction-status" and compaction.is_finished:
        # The run finished while the page polled: reload it so every panel shows the report.
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
        return response
    if request.htmx and panel in ("slimming", "compaction-status"):
        template += f"#{panel}"
    return render(request, template, context)


@require_GET
@login_required
def compaction_summarizer_text(request: HtmxHttpRequest, public_id: str, part: str) -> HttpResponse:
    """The summarizer's input (or the prompt sent to the model) as stored: the inspector's
    collapsed box loads it when opened (htmx), or the box's link shows it as a page."""
    if part not in SUMMARIZER_TEXTS:
        raise Http404("no such summarizer text")
    compaction = _compaction_for(request, public_id)
    key, title = SUMMARIZER_TEXTS[part]
    text = (compaction.report or {}).get(key) or ""
    if request.htmx:
        return render(request, "hermes_web/_pre.html", {"text": text})
    context = {"c": compaction, "title": title, "text": text, "nav": "conversations"}
    return render(request, "hermes_web/compaction_text.html", context)


@require_GET
@login_required
def compaction_final_list(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """The final assembled list of a run (the committed rows, or a dry run's per-message
    tokens): loaded into the inspector's box when opened, or as a page without JavaScript."""
    compaction = _compaction_for(request, public_id)
    context = {
        "c": compaction,
        "final": final_rows(compaction),
        "output_tokens": output_token_rows(compaction.report or {}),
    }
    if request.htmx:
        return render(request, "hermes_web/_final_list.html", context)
    context.update(final_list=True, title="Final assembled list", nav="conversations")
    return render(request, "hermes_web/compaction_text.html", context)


UNDOABLE = (Compaction.Status.COMMITTED, Compaction.Status.UNDONE)


def undo_panel(compaction: Compaction) -> dict:
    """The inspector's undo box: what can be done now (or why not) and the undo history.

    Only committed or undone runs have one; the history is read as one key of the report so
    the (possibly megabytes of) report is not loaded for it.
    """
    if (
        compaction.status not in UNDOABLE
        or compaction.trigger == Compaction.Trigger.WHAT_IF
        or compaction.is_native  # the agent's own: there is no "before" of ours to go back to
    ):
        return {"undo": None, "undo_history": []}
    # Reading one key of the report makes PostgreSQL decompress all of it: kept in the cache
    # until an undo or redo, which write it and touch the run's sessions (the key's stamps).
    key = undo_history_key(compaction)
    history = cache.get(key)
    if history is None:
        undo = (
            Compaction.objects.filter(pk=compaction.pk)
            .values_list("report__undo", flat=True)
            .first()
        )
        history = list((undo or {}).get("history") or []) if isinstance(undo, dict) else []
        cache.set(key, history, UNDO_HISTORY_SECONDS)
    # undo_state reads the history from the report: hand it the part we already have.
    probe = Compaction(
        **{
            f.attname: getattr(compaction, f.attname)
            for f in Compaction._meta.concrete_fields  # type: ignore[attr-defined]  # not in the stubs
            if f.attname != "report"
        },
        report={"undo": {"history": history}},
    )
    for entry in history:
        entry["when"] = parse_datetime(entry.get("at") or "")
    return {"undo": undo_state(probe), "undo_history": history[::-1]}


@require_POST
@login_required
def compaction_undo(request: HtmxHttpRequest, public_id: str, action: str) -> HttpResponse:
    """Undo (or redo) a committed compaction from the inspector, then show the inspector again.

    ``carry_over=1`` keeps the messages added since; without it a refusal says why.
    """
    run = _compaction_for(request, public_id, defer_report=True)
    apply = undo_compaction if action == "undo" else redo_compaction
    try:
        run = apply(run, user=request.user, carry_over=request.POST.get("carry_over") == "1")
    except UndoRefused as refused:
        flash.error(request, str(refused))
    else:
        flash.success(request, compaction_outcome(run))
    return redirect("compaction_detail", public_id=run.public_id)


def _context_after(compaction: Compaction, report: dict) -> str:
    """The text the next turn sees of the compacted rows: the summary and the head and tail
    kept (as the report's boundaries say). A fact is "lost" only when absent from all of it:
    the tail kept verbatim still carries what its rows say."""
    parts = [str(report.get("summary") or "")]
    rows = compaction.input_rows().only("content", "tool_calls")
    for part in ("head", "tail"):
        start, end = (list(report["boundaries"].get(part) or [0, 0]) + [0, 0])[:2]
        if end > start:
            for row in rows[start:end].iterator(chunk_size=2000):
                parts.append(row_text({"content": row.content, "tool_calls": row.tool_calls}))
    return "\n".join(parts)


def audit_for(compaction: Compaction) -> dict | None:
    """The fact-survival audit of one finished run (cached: a finished report never changes)."""
    report = compaction.report or {}
    if not report.get("summary") or not report.get("boundaries"):
        return None
    key = audit_key(compaction)
    audit = cache.get(key)
    if audit is None:
        start, end = (report["boundaries"].get("middle") or [0, 0])[:2]
        rows = compaction.input_rows().only("role", "content", "tool_calls")[start:end]
        # Streamed in chunks: the audit keeps only its capped facts, so a middle of a million
        # rows costs one chunk of memory, not the whole middle.
        middle = (
            {"role": r.role, "content": r.content, "tool_calls": r.tool_calls}
            for r in rows.iterator(chunk_size=2000)
        )
        try:
            audit = fact_survival_audit(middle, _context_after(compaction, report))
        finally:
            # Closes the database cursor at once, even if the audit failed half-way (on
            # PostgreSQL a server-side cursor closed later would abort another transaction).
            middle.close()
        cache.set(key, audit, AUDIT_SECONDS)
    return audit


@require_GET
@login_required
def compaction_audit(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    compaction = _compaction_for(request, public_id)
    context = {"c": compaction, "audit": audit_for(compaction), "nav": "conversations"}
    template = "hermes_web/compaction_audit.html"
    if request.htmx:
        template = "hermes_web/_audit.html"
    return render(request, template, context)


@require_GET
@login_required
def compaction_report_json(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    compaction = _compaction_for(request, public_id)
    # As stored; a lone surrogate quoted from a row (SQLite keeps them) becomes U+FFFD.
    document = dict(compaction.report or {})
    tests = list(
        compaction.recall_tests.order_by("created_at").values(
            "public_id", "status", "questions", "bank", "results", "error", "created_at"
        )
    )
    if tests:  # the recall tests run on it (bank and results), so two runs compare
        document["recall_tests"] = [{**t, "created_at": t["created_at"].isoformat()} for t in tests]
    text = json.dumps(document, ensure_ascii=False, indent=2)
    response = HttpResponse(scrub_surrogates(text), content_type="application/json")
    response["Content-Disposition"] = (
        f'attachment; filename="compaction-{compaction.public_id}.json"'
    )
    return response


@require_GET
@login_required
def compaction_report_md(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    compaction = _compaction_for(request, public_id)
    body = export_report_text(compaction, "report-md")
    response = HttpResponse(body, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="compaction-{compaction.public_id}.md"'
    return response


@require_POST
@login_required
def commit_compaction(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """'Commit this': queue a real run with a dry run's parameters."""
    what_if = _compaction_for(request, public_id)
    if what_if.status != Compaction.Status.DRY_RUN:
        return HttpResponse("Only a finished dry run can be committed.", status=409)
    if what_if.replay_of_id is not None:
        return HttpResponse(
            "This dry run replays an agent's own compaction on rows already archived; "
            "it is there to compare, not to commit. Run a what-if on the conversation instead.",
            status=409,
        )
    if (what_if.report or {}).get("status") != "compacted":
        return HttpResponse(
            "This dry run compacted nothing, so there is nothing to commit.", status=409
        )
    session = what_if.session
    if session.is_rotated:
        return HttpResponse(
            "This session was already compacted by rotation; run a what-if on its continuation.",
            status=409,
        )
    try:
        run = commit_what_if(what_if, requested_by=request.user)
    except CompactionRefused as refused:  # e.g. another run of this session is in progress
        return HttpResponse(f"{str(refused).capitalize()}.", status=409)
    if _runs_inline(session, run.summarizer):
        run = run_compaction(run.pk)  # the queued task finds it finished and does nothing
    flash.success(
        request, "Committed." if run.status == Compaction.Status.COMMITTED else "Compaction queued."
    )
    return redirect("compaction_detail", public_id=run.public_id)


def _runs_inline(session: Session, summarizer: str) -> bool:
    if summarizes_with_llm(summarizer):
        return False
    return Message.objects.filter(session=session, active=True).count() <= INLINE_MAX_MESSAGES


def _latest_committed(session: Session) -> Compaction | None:
    return (
        Compaction.objects.committed()
        .filter(session=session)
        .defer("report")
        .order_by("-finished_at", "-pk")
        .first()
    )


# ---------------------------------------------------------------- home


def home_context(user) -> dict:
    """The signed-in overview: recent conversations and compactions, tokens saved over time."""
    sessions = list(
        Session.objects.for_user(user)
        .only("public_id", "title", "source", "updated_at")
        .order_by("-updated_at")[:6]
    )
    runs = Compaction.objects.for_user(user).defer("report").select_related("session")
    recent = list(runs.order_by("-queued_at")[:6])
    committed = list(
        runs.ours()
        .filter(status=Compaction.Status.COMMITTED, tokens_before__isnull=False)
        .exclude(tokens_after__isnull=True)
        .order_by("-finished_at")[:30]
    )[::-1]
    example = committed[-1] if committed else next((r for r in recent if r.is_finished), None)
    return {
        "recent_sessions": sessions,
        "recent_runs": recent,
        "saved_chart": saved_chart(
            [(c.finished_at, c.tokens_before - c.tokens_after) for c in committed]
        ),
        "example": example,
    }
