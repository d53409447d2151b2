"""The compaction inspector, its exports, what-if runs, the rotation tree, the timeline and compare."""

from __future__ import annotations

import functools

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db.models import Count, Q, Sum
from django.db.models.fields.json import KT
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from compaction import ConfigError, report_to_markdown
from hermes_web.inspection import (
    SANITIZATION_LABELS,
    fact_survival_audit,
    message_view,
    slimming_page,
    split_view,
    summary_diff,
    summary_sections,
    timeline_chart,
)
from hermes_web.models import Compaction, Message, Session
from hermes_web.services.compactions import (
    CompactionRefused,
    commit_what_if,
    request_compaction,
    run_compaction,
)
from hermes_web.services.sessions import lineage_root, session_tree

# Dry runs on conversations up to this size run inside the request (deterministic summarizer
# takes well under a second); bigger ones, or ones that may call an LLM, go to the worker.
INLINE_MAX_MESSAGES = 3_000
FINAL_LIST_LIMIT = 500
WHAT_IF_FIELDS = (
    # (form name, config key, label, kind, transform to config)
    ("threshold", "threshold_percent", "Threshold (% of the context window)", "percent"),
    ("head", "protect_first_n", "Head: messages kept after the system prompt", "int"),
    ("tail", "tail_token_budget", "Tail budget (tokens)", "int"),
    ("fold", "fold_min_chars", "Fold tool results longer than (chars)", "int"),
    ("content_max", "content_max", "Truncate summarizer input over (chars)", "int"),
    ("content_head", "content_head", "… keeping the first (chars)", "int"),
    ("content_tail", "content_tail", "… and the last (chars)", "int"),
)


def _compaction_for(
    request: HttpRequest, public_id: str, *, defer_report: bool = False
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


def input_rows(compaction: Compaction):
    """The rows the engine compacted, in order (a queryset; slice it before evaluating).

    In-place commits archive exactly the compacted rows; rotation parents and dry runs keep
    them active up to the snapshot position.
    """
    if (
        compaction.status == Compaction.Status.COMMITTED
        and compaction.mode == Compaction.Mode.IN_PLACE
    ):
        return Message.objects.filter(archived_by=compaction).order_by("position")
    rows = Message.objects.filter(session_id=compaction.session_id, active=True)
    if compaction.snapshot_position is not None:
        rows = rows.filter(position__lte=compaction.snapshot_position)
    return rows.order_by("position")


def final_rows(compaction: Compaction) -> list[Message]:
    """The committed, assembled list (child rows, or the new rows of an in-place commit)."""
    if compaction.status != Compaction.Status.COMMITTED or compaction.result_session_id is None:
        return []
    count = ((compaction.report or {}).get("counts") or {}).get(
        "messages_after"
    ) or FINAL_LIST_LIMIT
    rows = Message.objects.filter(session_id=compaction.result_session_id)
    if compaction.mode == Compaction.Mode.IN_PLACE and compaction.snapshot_position is not None:
        rows = rows.filter(position__gt=compaction.snapshot_position)
    final = list(rows.order_by("position")[: min(count, FINAL_LIST_LIMIT)])
    for row in final:
        row.excerpt = message_view({"content": row.content}, preview_chars=200)["text"]
    return final


def inspector_context(compaction: Compaction, *, slim_kind: str = "", slim_page: int = 1) -> dict:
    report = compaction.report or {}
    tokens = report.get("tokens") or {}
    summary = summary_sections(report.get("summary"))
    output_tokens = report.get("output_message_tokens") or []
    return {
        "c": compaction,
        "report": report,
        "tokens": tokens,
        "split": split_view(report) if report.get("boundaries") else None,
        "slim": slimming_page(report, kind=slim_kind, page=slim_page),
        "summary": summary,
        "sanitization": [
            {**s, "label": SANITIZATION_LABELS.get(s.get("kind"), s.get("kind"))}
            for s in report.get("sanitization") or []
        ],
        "output_tokens": [
            {"index": i, "tokens": t, "summary": i == report.get("summary_index")}
            for i, t in enumerate(output_tokens)
        ],
        "output_total": sum(output_tokens),
        "timings": list((report.get("timings_ms") or {}).items()),
        "saved_percent": round(100 * (1 - tokens["after"] / tokens["before"]), 1)
        if tokens.get("before") and tokens.get("after") is not None
        else None,
        "config_rows": sorted((report.get("config") or compaction.config or {}).items()),
    }


PANEL_VALUES = (
    "report",
    "tokens",
    "split",
    "slim",
    "summary",
    "sanitization",
    "output_tokens",
    "output_total",
    "timings",
    "saved_percent",
    "config_rows",
    "final",
)
PANEL_CACHE_SECONDS = 600


@require_GET
@login_required
def compaction_detail(request: HttpRequest, public_id: str) -> HttpResponse:
    compaction = _compaction_for(request, public_id, defer_report=True)
    slim_kind, slim_page = request.GET.get("kind", ""), _int(request.GET.get("page"), 1)

    @functools.cache
    def panels() -> dict:
        return {
            **inspector_context(compaction, slim_kind=slim_kind, slim_page=slim_page),
            "final": final_rows(compaction),
        }

    # The panels of a finished run never change, so the template caches their HTML; each
    # value is a callable the template calls only when it renders (a cache miss).
    context = {name: functools.partial(lambda n: panels()[n], name) for name in PANEL_VALUES}
    context.update(
        c=compaction,
        nav="conversations",
        slim_kind=slim_kind,
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
        panel_cache_seconds=PANEL_CACHE_SECONDS if compaction.is_finished else 0,
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


def audit_for(compaction: Compaction) -> dict | None:
    """The fact-survival audit of one finished run (cached: a finished report never changes)."""
    report = compaction.report or {}
    if not report.get("summary") or not report.get("boundaries"):
        return None
    key = f"hermes:audit:{compaction.public_id}:{compaction.finished_at and compaction.finished_at.timestamp()}"
    audit = cache.get(key)
    if audit is None:
        start, end = (report["boundaries"].get("middle") or [0, 0])[:2]
        middle = [
            {"role": r.role, "content": r.content, "tool_calls": r.tool_calls}
            for r in input_rows(compaction).only("role", "content", "tool_calls")[start:end]
        ]
        audit = fact_survival_audit(middle, report.get("summary"))
        cache.set(key, audit, 3600)
    return audit


@require_GET
@login_required
def compaction_audit(request: HttpRequest, public_id: str) -> HttpResponse:
    compaction = _compaction_for(request, public_id)
    context = {"c": compaction, "audit": audit_for(compaction), "nav": "conversations"}
    template = "hermes_web/compaction_audit.html"
    if request.htmx:
        template = "hermes_web/_audit.html"
    return render(request, template, context)


@require_GET
@login_required
def compaction_report_json(request: HttpRequest, public_id: str) -> HttpResponse:
    compaction = _compaction_for(request, public_id)
    response = JsonResponse(
        compaction.report or {}, json_dumps_params={"ensure_ascii": False, "indent": 2}
    )
    response["Content-Disposition"] = (
        f'attachment; filename="compaction-{compaction.public_id}.json"'
    )
    return response


@require_GET
@login_required
def compaction_report_md(request: HttpRequest, public_id: str) -> HttpResponse:
    compaction = _compaction_for(request, public_id)
    body = report_to_markdown(
        compaction.report or {"status": compaction.status, "reason": compaction.reason}
    )
    response = HttpResponse(body, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="compaction-{compaction.public_id}.md"'
    return response


@require_POST
@login_required
def commit_compaction(request: HttpRequest, public_id: str) -> HttpResponse:
    """'Commit this': queue a real run with a dry run's parameters."""
    what_if = _compaction_for(request, public_id)
    if what_if.status != Compaction.Status.DRY_RUN:
        return HttpResponse("Only a finished dry run can be committed.", status=409)
    if (what_if.report or {}).get("status") != "compacted":
        return HttpResponse(
            "This dry run compacted nothing, so there is nothing to commit.", status=409
        )
    session = what_if.session
    if session.end_reason == "compression":
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


# ---------------------------------------------------------------- what-if


def _runs_inline(session: Session, summarizer: str) -> bool:
    llm_configured = bool(settings.HERMES_SUMMARY_MODEL or settings.HERMES_CHAT_MODEL) and not (
        (settings.HERMES_SUMMARY_MODEL or settings.HERMES_CHAT_MODEL).lower().startswith("demo")
    )
    if summarizer != "deterministic" and llm_configured:
        return False
    return Message.objects.filter(session=session, active=True).count() <= INLINE_MAX_MESSAGES


def _what_if_form(session: Session, data=None) -> tuple[dict, dict, list[str]]:
    """Parse the what-if form into (values for redisplay, config overrides, errors)."""
    from hermes_web.services.compactions import compaction_config_for

    defaults = compaction_config_for(session).to_dict()
    values: dict = {}
    overrides: dict = {}
    errors: list[str] = []
    for name, key, label, kind in WHAT_IF_FIELDS:
        default = defaults[key] * 100 if kind == "percent" else defaults[key]
        raw = (data.get(name, "") if data is not None else "").strip()
        values[name] = (
            raw if data is not None else (round(default, 2) if kind == "percent" else default)
        )
        if data is None or raw == "":
            continue
        try:
            number = float(raw) if kind == "percent" else int(raw)
        except ValueError:
            errors.append(
                f"{label}: “{raw}” is not a {'number' if kind == 'percent' else 'whole number'}."
            )
            continue
        overrides[key] = number / 100 if kind == "percent" else number
    source = data if data is not None else {}
    values["summarizer"] = source.get("summarizer", "deterministic") or "deterministic"
    values["mode"] = source.get("mode", session.effective_mode) or session.effective_mode
    values["focus"] = source.get("focus", "")
    if values["summarizer"] not in ("auto", "deterministic"):
        errors.append("Summarizer: choose auto or deterministic.")
    if values["mode"] not in Compaction.Mode.values:
        errors.append("Mode: choose rotation or in_place.")
    return values, overrides, errors


def _latest_committed(session: Session) -> Compaction | None:
    return (
        Compaction.objects.filter(session=session, status=Compaction.Status.COMMITTED)
        .order_by("-finished_at", "-pk")
        .first()
    )


@require_http_methods(["GET", "POST"])
@login_required
def what_if(request: HttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    values, overrides, errors = _what_if_form(
        session, request.POST if request.method == "POST" else None
    )
    if request.method == "POST" and not errors:
        try:
            run = request_compaction(
                session=session,
                requested_by=request.user,
                trigger=Compaction.Trigger.WHAT_IF,
                mode=values["mode"],
                focus=values["focus"][:2000],
                config_overrides=overrides,
                summarizer=values["summarizer"],
                run_now=_runs_inline(session, values["summarizer"]),
            )
        except (ConfigError, ValueError) as error:
            errors.append(str(error))
        else:
            return redirect(f"{reverse('what_if', args=[session.public_id])}?run={run.public_id}")
    run = None
    if request.GET.get("run"):
        run = (
            Compaction.objects.for_user(request.user)
            .filter(public_id=request.GET["run"], session=session)
            .first()
        )
    context = {
        "session": session,
        "values": values,
        "fields": [(name, label, kind, values[name]) for name, _key, label, kind in WHAT_IF_FIELDS],
        "errors": errors,
        "run": run,
        "run_ctx": inspector_context(run) if run else None,
        "committed": _latest_committed(session),
        "previous": list(
            Compaction.objects.filter(session=session, trigger=Compaction.Trigger.WHAT_IF)
            .defer("report")
            .order_by("-queued_at")[:10]
        ),
        "nav": "conversations",
    }
    context["committed_ctx"] = (
        inspector_context(context["committed"]) if context["committed"] else None
    )
    if request.htmx and request.GET.get("panel") == "run-status":
        return render(request, "hermes_web/what_if.html#run-status", context)
    return render(request, "hermes_web/what_if.html", context, status=400 if errors else 200)


# ---------------------------------------------------------------- tree and timeline


def _lineage_compactions(session: Session):
    root = lineage_root(session)
    return Compaction.objects.filter(Q(session_id=root.pk) | Q(session__root_id=root.pk)).exclude(
        trigger=Compaction.Trigger.WHAT_IF
    )


@require_GET
@login_required
def conversation_tree(request: HttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    nodes = session_tree(session)
    ids = [n.pk for n in nodes]
    stats = {
        row["session"]: row
        for row in Message.objects.filter(session_id__in=ids, active=True)
        .values("session")
        .annotate(n=Count("pk"), tokens=Sum("token_count"))
    }
    compactions = list(
        Compaction.objects.filter(session_id__in=ids, status=Compaction.Status.COMMITTED)
        .defer("report")
        .order_by("finished_at")
    )
    edges = {c.result_session_id: c for c in compactions if c.mode == Compaction.Mode.ROTATION}
    events: dict[int, list[Compaction]] = {}
    for c in compactions:
        if c.mode == Compaction.Mode.IN_PLACE:
            events.setdefault(c.session_id, []).append(c)
    children: dict[int | None, list[Session]] = {}
    by_id = {n.pk: n for n in nodes}
    for n in nodes:
        parent = n.parent_id if n.parent_id in by_id else None
        children.setdefault(parent, []).append(n)
    # Depth-first order with a depth per node: a flat list renders any depth without recursion.
    ordered = []
    stack = [(n, 0) for n in reversed(children.get(None, []))]
    while stack:
        node, depth = stack.pop()
        s = stats.get(node.pk, {})
        ordered.append(
            {
                "s": node,
                "depth": min(depth, 12),
                "real_depth": depth,
                "n": s.get("n", 0),
                "tokens": s.get("tokens") or 0,
                "edge": edges.get(node.pk),
                "events": events.get(node.pk, []),
                "current": node.pk == session.pk,
            }
        )
        stack.extend((child, depth + 1) for child in reversed(children.get(node.pk, [])))
    return render(
        request,
        "hermes_web/tree.html",
        {"session": session, "nodes": ordered, "nav": "conversations"},
    )


@require_GET
@login_required
def conversation_timeline(request: HttpRequest, public_id: str) -> HttpResponse:
    session = _session_for(request, public_id)
    runs = list(
        _lineage_compactions(session)
        .select_related("session")
        .defer("report")
        .order_by("queued_at", "pk")
    )
    points = [
        {
            "label": f"#{i}",
            "title": f"{c.get_trigger_display()} {c.get_mode_display()} · {c.get_status_display()}",
            "before": c.tokens_before or 0,
            "after": c.tokens_after if c.tokens_after is not None else (c.tokens_before or 0),
            "status": c.status,
            "reason": c.reason,
            "url": reverse("compaction_detail", args=[c.public_id]),
            "c": c,
        }
        for i, c in enumerate(runs, start=1)
    ]
    chart = timeline_chart(points)
    return render(
        request,
        "hermes_web/timeline.html",
        {"session": session, "chart": chart, "nav": "conversations"},
    )


# ---------------------------------------------------------------- compare


def _structure(c: Compaction) -> dict:
    report = c.report or {}
    counts = report.get("counts") or {}
    bounds = report.get("boundaries") or {}
    head = bounds.get("head") or [0, 0]
    tail = bounds.get("tail") or [0, 0]
    return {
        "before": counts.get("messages_before"),
        "after": counts.get("messages_after"),
        "kept_verbatim": (head[1] - head[0]) + (tail[1] - tail[0]),
        "summarized": (bounds.get("middle") or [0, 0])[1] - (bounds.get("middle") or [0, 0])[0],
        "rotation": c.mode == Compaction.Mode.ROTATION,
    }


@require_http_methods(["GET", "POST"])
@login_required
def compare(request: HttpRequest) -> HttpResponse:
    sessions = Session.objects.for_user(request.user).order_by("-updated_at")
    chosen_id = request.POST.get("session") or request.GET.get("session") or ""
    session = get_object_or_404(sessions, public_id=chosen_id) if chosen_id else None
    if request.method == "POST":
        if session is None:
            return HttpResponse("Pick a conversation to compare.", status=400)
        summarizer = request.POST.get("summarizer", "deterministic")
        try:
            runs = [
                request_compaction(
                    session=session,
                    requested_by=request.user,
                    trigger=Compaction.Trigger.WHAT_IF,
                    mode=mode,
                    summarizer=summarizer,
                    run_now=_runs_inline(session, summarizer),
                )
                for mode in (Compaction.Mode.ROTATION, Compaction.Mode.IN_PLACE)
            ]
        except (ConfigError, ValueError, CompactionRefused) as error:
            return HttpResponse(f"Could not run the comparison: {error}", status=400)
        return redirect(
            f"{reverse('compare')}?session={session.public_id}&a={runs[0].public_id}&b={runs[1].public_id}"
        )
    context: dict = {"sessions": sessions[:200], "session": session, "nav": "compare"}
    if session is not None:
        runs = (
            Compaction.objects.filter(session=session)
            .exclude(report__isnull=True)
            .defer("report")
            .order_by("-queued_at")
        )
        context["runs"] = list(runs[:100])
        a_id, b_id = request.GET.get("a"), request.GET.get("b")
        if a_id and b_id:
            a = get_object_or_404(Compaction.objects.for_user(request.user), public_id=a_id)
            b = get_object_or_404(Compaction.objects.for_user(request.user), public_id=b_id)
            if a.session_id != b.session_id:
                return HttpResponse(
                    "Both compactions must belong to the same conversation.", status=400
                )
            context.update(
                a=inspector_context(a),
                b=inspector_context(b),
                a_structure=_structure(a),
                b_structure=_structure(b),
                diff=summary_diff((a.report or {}).get("summary"), (b.report or {}).get("summary")),
                same_summary=(a.report or {}).get("summary") == (b.report or {}).get("summary"),
                pending=not (a.is_finished and b.is_finished),
            )
    if request.htmx and request.GET.get("panel") == "compare-result":
        return render(request, "hermes_web/compare.html#compare-result", context)
    return render(request, "hermes_web/compare.html", context)
