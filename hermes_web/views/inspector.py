"""The compaction inspector, its exports, what-if runs, the rotation tree, the timeline and compare."""

from __future__ import annotations

import functools
from urllib.parse import urlencode

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

from compaction import ConfigError
from hermes_web.exporters import export_report_text
from hermes_web.inspection import (
    SANITIZATION_LABELS,
    fact_survival_audit,
    fate_diff,
    message_view,
    ref_segments,
    report_profile,
    report_warnings,
    saved_chart,
    slimming_page,
    split_view,
    summary_diff,
    summary_sections,
    tally_compactions,
    term,
    timeline_chart,
    token_strip,
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
    # (form name, config key, label, kind, help under the field)
    (
        "threshold",
        "threshold_percent",
        "Threshold (% of the context window)",
        "percent",
        "Automatic compaction starts at this share of the window.",
    ),
    (
        "head",
        "protect_first_n",
        "Head: messages kept after the system prompt",
        "int",
        "Kept verbatim at the start; the cut moves past tool results so none is orphaned.",
    ),
    (
        "tail",
        "tail_token_budget",
        "Tail budget (tokens)",
        "int",
        "The newest messages kept verbatim, up to about this many tokens; the latest user "
        "message and reply always stay, even when they alone are bigger.",
    ),
    (
        "fold",
        "fold_min_chars",
        "Fold tool results longer than (chars)",
        "int",
        "Longer tool results in the middle become one line.",
    ),
    (
        "content_max",
        "content_max",
        "Truncate summarizer input over (chars)",
        "int",
        "Only what the summarizer reads is cut; the stored messages stay whole.",
    ),
    (
        "content_head",
        "content_head",
        "… keeping the first (chars)",
        "int",
        "Start kept of a cut message. Start + end must not exceed the limit above.",
    ),
    (
        "content_tail",
        "content_tail",
        "… and the last (chars)",
        "int",
        "End kept of a cut message.",
    ),
)
FIELD_FOR_KEY = {key: name for name, key, *_ in WHAT_IF_FIELDS}


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


def inspector_context(
    compaction: Compaction,
    *,
    slim_kind: str = "",
    slim_region: str = "",
    slim_page: int = 1,
    positions: list[int] | None = None,
) -> dict:
    """Everything the inspector panels print for one run (pure reads of its report)."""
    report = compaction.report or {}
    tokens = report.get("tokens") or {}
    summary = summary_sections(report.get("summary"))
    for section in summary["sections"]:
        section["segments"] = ref_segments(section["body"], positions)
    output_tokens = report.get("output_message_tokens") or []
    return {
        "c": compaction,
        "report": report,
        "tokens": tokens,
        "split": split_view(report) if report.get("boundaries") else None,
        "slim": slimming_page(
            report, kind=slim_kind, region=slim_region, page=slim_page, positions=positions
        ),
        "profile": report_profile(report),
        "warnings": report_warnings(report),
        "redactions": report.get("redactions"),
        "estimated": set(report.get("tokens_estimated") or ()),
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
    "profile",
    "warnings",
    "redactions",
    "estimated",
    "strip",
)
PANEL_CACHE_SECONDS = 600


@require_GET
@login_required
def compaction_detail(request: HttpRequest, public_id: str) -> HttpResponse:
    compaction = _compaction_for(request, public_id, defer_report=True)
    slim_kind, slim_page = request.GET.get("kind", ""), _int(request.GET.get("page"), 1)
    slim_region = request.GET.get("region", "")

    @functools.cache
    def panels() -> dict:
        # Where each input message is stored: the strip and the slimming rows link to them.
        positions = list(input_rows(compaction).values_list("position", flat=True))
        return {
            **inspector_context(
                compaction,
                slim_kind=slim_kind,
                slim_region=slim_region,
                slim_page=slim_page,
                positions=positions,
            ),
            "final": final_rows(compaction),
            "strip": token_strip(compaction.report or {}, positions),
        }

    # The panels of a finished run never change, so the template caches their HTML; each
    # value is a callable the template calls only when it renders (a cache miss).
    context = {name: functools.partial(lambda n: panels()[n], name) for name in PANEL_VALUES}
    context.update(
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
    body = export_report_text(compaction, "report-md")
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
    run = commit_what_if(what_if, requested_by=request.user)
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


def _friendly_config_error(error: ConfigError, overrides: dict, defaults: dict) -> tuple:
    """(form field, message in the form's words) for an engine config error."""
    key = getattr(error, "field", "")
    labels = {name: label for name, _key, label, *_ in WHAT_IF_FIELDS}
    if key in ("content_head", "content_tail", "content_max"):
        used = {
            k: overrides.get(k, defaults[k])
            for k in ("content_head", "content_tail", "content_max")
        }
        return (
            "content_head",
            f"The start kept ({used['content_head']:,}) plus the end kept "
            f"({used['content_tail']:,}) is {used['content_head'] + used['content_tail']:,} "
            f"characters, longer than the truncation limit ({used['content_max']:,}). "
            "Lower one of them or raise the limit.",
        )
    if key == "threshold_percent":
        return "threshold", "Give a percentage above 0 and at most 100."
    name = FIELD_FOR_KEY.get(key)
    if name:
        reason = str(error).split(": ", 1)[-1]
        return name, f"{labels[name]}: {reason}."
    return "form", str(error)


def _what_if_form(session: Session, data=None) -> tuple[dict, dict, dict[str, str]]:
    """Parse the what-if form into (values for redisplay, config overrides, errors by field).

    ``data`` is the POST, or the GET query of a URL that reproduces an earlier run, or the
    stored parameters of the run being shown; None shows the session's defaults.
    """
    from hermes_web.services.compactions import compaction_config_for

    defaults = compaction_config_for(session).to_dict()
    values: dict = {}
    overrides: dict = {}
    errors: dict[str, str] = {}
    for name, key, label, kind, _help in WHAT_IF_FIELDS:
        default = defaults[key] * 100 if kind == "percent" else defaults[key]
        raw = str(data.get(name, "") if data is not None else "").strip()
        values[name] = raw or (round(default, 2) if kind == "percent" else default)
        if data is None or raw == "":
            continue
        try:
            number = float(raw) if kind == "percent" else int(raw)
        except ValueError:
            errors[name] = (
                f"{label}: “{raw}” is not a {'number' if kind == 'percent' else 'whole number'}."
            )
            continue
        if kind == "percent" and not 0 < number <= 100:
            errors[name] = "Give a percentage above 0 and at most 100."
            continue
        if number != default:
            overrides[key] = number / 100 if kind == "percent" else number
    source = data if data is not None else {}
    values["summarizer"] = source.get("summarizer", "deterministic") or "deterministic"
    values["mode"] = source.get("mode", session.effective_mode) or session.effective_mode
    values["focus"] = source.get("focus", "")
    if engine_has_profiles():
        default_profile = defaults.get("profile", "hermes")
        values["profile"] = source.get("profile", "") or default_profile
        if values["profile"] not in PROFILES:
            errors["profile"] = f"Profile: choose {' or '.join(PROFILES)}."
        elif values["profile"] != default_profile:
            overrides["profile"] = values["profile"]
    if values["summarizer"] not in ("auto", "deterministic"):
        errors["summarizer"] = "Summarizer: choose auto or deterministic."
    if values["mode"] not in Compaction.Mode.values:
        errors["mode"] = "Mode: choose rotation or in-place."
    if not errors:
        try:
            compaction_config_for(session, overrides)
        except ConfigError as error:
            field, message = _friendly_config_error(error, overrides, defaults)
            errors[field] = message
    return values, overrides, errors


def _values_of_run(run: Compaction) -> dict:
    """The form values that reproduce a stored run."""
    values = {"summarizer": run.summarizer or "deterministic", "mode": run.mode, "focus": run.focus}
    if (run.config or {}).get("profile"):
        values["profile"] = run.config["profile"]
    if values["summarizer"] not in ("auto", "deterministic"):
        values["summarizer"] = "auto"  # the run recorded which model wrote it, not the choice
    for name, key, _label, kind, _help in WHAT_IF_FIELDS:
        if key in (run.config or {}):
            value = run.config[key]
            values[name] = round(value * 100, 2) if kind == "percent" else value
    return values


def _query_of(values: dict) -> str:
    return urlencode({k: v for k, v in values.items() if v not in ("", None)})


def threshold_note(session: Session, overrides: dict) -> str:
    """How the threshold in tokens follows from the percentage, the window and the floor."""
    from hermes_web.services.compactions import compaction_config_for

    try:
        config = compaction_config_for(session, overrides)
    except ConfigError:
        return ""
    raw = int(config.threshold_percent * config.context_length)
    note = (
        f"{config.threshold_percent * 100:g} % of this conversation's "
        f"{config.context_length:,}-token window is {raw:,} tokens"
    )
    if config.threshold_tokens != raw:
        return (
            f"{note}, below the {config.min_threshold_tokens:,}-token floor, so the threshold "
            f"is {config.threshold_tokens:,} tokens."
        )
    return f"{note}: the threshold."


def parameters_used(session: Session, run: Compaction) -> list[dict]:
    """Every parameter a run used, its session default, and whether it differed."""
    from hermes_web.services.compactions import compaction_config_for

    defaults = compaction_config_for(session).to_dict()
    rows = []
    for _name, key, label, kind, _help in WHAT_IF_FIELDS:
        used = (run.config or {}).get(key, defaults[key])
        shown = (lambda v: f"{v * 100:g} %") if kind == "percent" else (lambda v: f"{v:,}")
        rows.append(
            {
                "label": label,
                "used": shown(used),
                "default": shown(defaults[key]),
                "differs": used != defaults[key],
            }
        )
    # Runs store their whole config; of the fields the form does not show, list the changed.
    for key in sorted(set(run.config or {}) - set(FIELD_FOR_KEY)):
        if run.config[key] != defaults.get(key):
            rows.append(
                {
                    "label": key,
                    "used": run.config[key],
                    "default": defaults.get(key, "—"),
                    "differs": True,
                }
            )
    rows += [
        {
            "label": "Mode",
            "used": term("mode", run.mode),
            "default": term("mode", session.effective_mode),
            "differs": run.mode != session.effective_mode,
        },
        {
            "label": "Summarizer",
            "used": term("summarizer", run.summarizer),
            "default": term("summarizer", "auto"),
            "differs": False,  # a run records who wrote the summary, not the choice made
        },
        {
            "label": "Focus topic",
            "used": run.focus or "—",
            "default": "—",
            "differs": bool(run.focus),
        },
    ]
    return rows


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
    run = None
    if request.GET.get("run"):
        run = (
            Compaction.objects.for_user(request.user)
            .filter(public_id=request.GET["run"], session=session)
            .first()
        )
    reproduce = any(name in request.GET for name, *_ in WHAT_IF_FIELDS) or any(
        name in request.GET for name in ("mode", "profile", "focus")
    )
    if request.method == "POST":
        data = request.POST
    elif reproduce:
        data = request.GET  # a URL that reproduces a run fills the form in
    elif run is not None:
        data = _values_of_run(run)
    else:
        data = None
    values, overrides, errors = _what_if_form(session, data)
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
            errors["form"] = str(error)
        else:
            return redirect(
                f"{reverse('what_if', args=[session.public_id])}?run={run.public_id}"
                f"&{_query_of(values)}"
            )
    if request.method == "POST":
        run = None
    context = {
        "session": session,
        "values": values,
        "fields": [
            {
                "name": name,
                "label": label,
                "kind": kind,
                "value": values[name],
                "help": help_text,
                "error": errors.get(name, ""),
            }
            for name, _key, label, kind, help_text in WHAT_IF_FIELDS
        ],
        "errors": errors,
        "field_errors": [(name, message) for name, message in errors.items() if name != "form"],
        "threshold_note": threshold_note(session, overrides),
        "profiles": PROFILES if engine_has_profiles() else (),
        "run": run,
        "run_ctx": inspector_context(run) if run else None,
        "run_params": parameters_used(session, run) if run else None,
        "reproduce_url": f"?{_query_of(values)}",
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


def compaction_tally(runs, *, fetched: list[Compaction] | None = None, limit: int = 0) -> dict:
    """Count a queryset of compactions the way every page does (``tally_compactions``).

    A page that already fetched the newest ``limit`` rows passes them as ``fetched``: when
    fewer came back, they are all of them and no count query is needed.
    """
    if fetched is not None and len(fetched) < limit:
        return tally_compactions((c.status, c.trigger, 1) for c in fetched)
    rows = runs.order_by().values_list("status", "trigger").annotate(n=Count("pk"))
    return tally_compactions(rows)


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
    root = lineage_root(session)
    lineage = Compaction.objects.filter(Q(session_id=root.pk) | Q(session__root_id=root.pk))
    tally = compaction_tally(lineage)
    runs = list(
        _lineage_compactions(session)
        .select_related("session")
        .defer("report")
        .order_by("queued_at", "pk")
    )
    points = [
        {
            "label": f"#{i}",
            "title": f"{term('trigger', c.trigger)} {term('mode', c.mode)} · {term('status', c.status)}",
            "before": c.tokens_before or 0,
            "after": c.tokens_after if c.tokens_after is not None else (c.tokens_before or 0),
            "status": c.status,
            "reason": c.reason,
            "url": reverse("compaction_detail", args=[c.public_id]),
            "when": c.queued_at,
            "c": c,
        }
        for i, c in enumerate(runs, start=1)
    ]
    from hermes_web.services.compactions import compaction_config_for

    config = compaction_config_for(session)
    chart = timeline_chart(points, threshold=config.threshold_tokens, window=config.context_length)
    return render(
        request,
        "hermes_web/timeline.html",
        {"session": session, "chart": chart, "tally": tally, "nav": "conversations"},
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


PROFILES = ("classic", "hermes")


def engine_has_profiles() -> bool:
    """Whether the installed engine's CompactionConfig has a ``profile`` field (issue #13)."""
    import dataclasses

    from compaction import CompactionConfig

    return "profile" in {f.name for f in dataclasses.fields(CompactionConfig)}


PROFILE_ERROR = (
    "The installed compaction engine has no profiles yet, so a profile comparison cannot run. "
    "Compare rotation and in-place instead, or update the engine."
)


def _compare_specs(request: HttpRequest, session: Session) -> tuple[list[dict], dict[str, str]]:
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
def compare(request: HttpRequest) -> HttpResponse:
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
            a_ctx, b_ctx = inspector_context(a), inspector_context(b)
            context.update(
                a=a_ctx,
                b=b_ctx,
                a_structure=_structure(a),
                b_structure=_structure(b),
                by_profile=a_ctx["profile"] != b_ctx["profile"],
                fates=fate_diff(a.report or {}, b.report or {}),
                diff=summary_diff((a.report or {}).get("summary"), (b.report or {}).get("summary")),
                same_summary=(a.report or {}).get("summary") == (b.report or {}).get("summary"),
                pending=not (a.is_finished and b.is_finished),
            )
    if request.htmx and request.GET.get("panel") == "compare-result":
        return render(request, "hermes_web/compare.html#compare-result", context)
    return render(request, "hermes_web/compare.html", context, status=400 if errors else 200)


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
        runs.filter(status=Compaction.Status.COMMITTED, tokens_before__isnull=False)
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
