"""The Import page: upload a transcript file; per-file results and errors on the same page."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from hermes_web.importers import FORMATS, ImportProblem, ImportReport, import_upload
from hermes_web.models import Session
from hermes_web.services.sessions import max_upload_bytes

FORMAT_CHOICES = [
    ("auto", "Detect automatically"),
    ("hermes-jsonl", "Hermes JSONL export"),
    ("hermes-db", "Hermes state.db"),
    ("openai", "OpenAI messages (JSON)"),
    ("claude-code", "Claude Code transcript (JSONL)"),
    ("codex", "Codex rollout (JSONL)"),
]


def _context(request, **extra) -> dict:
    recent = (
        Session.objects.for_user(request.user)
        .filter(source__startswith="import:")
        .order_by("-created_at")[:10]
    )
    return {
        "nav": "import",
        "formats": FORMAT_CHOICES,
        "max_mb": max_upload_bytes() // 2**20,
        "recent": recent,
        "selected_format": "auto",
        **extra,
    }


@require_http_methods(["GET", "POST"])
@login_required
def import_page(request: HttpRequest) -> HttpResponse:
    template = "hermes_web/import.html#results" if request.htmx else "hermes_web/import.html"
    if request.method == "GET":
        return render(request, "hermes_web/import.html", _context(request))
    fmt = request.POST.get("format", "auto")
    files = request.FILES.getlist("file")
    reports: list[ImportReport] = []
    status = 200
    if fmt != "auto" and fmt not in FORMATS:
        reports.append(_failed("(form)", f"unknown format {fmt!r}"))
        status = 400
    elif not files:
        reports.append(_failed("(form)", "choose at least one file to import"))
        status = 400
    else:
        for upload in files:
            if upload.size > max_upload_bytes():
                reports.append(
                    _failed(upload.name, f"file is larger than {max_upload_bytes() // 2**20} MB")
                )
                status = 413
                continue
            reports.append(import_upload(upload, owner=request.user, fmt=fmt))
        if status == 200 and all(r.errors and not r.sessions and not r.skipped for r in reports):
            status = 400  # nothing at all could be imported
    context = _context(request, reports=reports, selected_format=fmt)
    return render(request, template, context, status=status)


def _failed(name: str, problem: str) -> ImportReport:
    report = ImportReport(file=name)
    report.errors.append(ImportProblem(name, 0, problem))
    return report
