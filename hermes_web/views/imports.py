"""The Import page: upload a transcript file; per-file results, refusals and the fidelity
report on the same page.

Refusals reach the page in both modes: a plain form POST that imports nothing answers 4xx
with the full page; an htmx POST answers 200 with the results partial (htmx does not swap
4xx responses, so a 400 would leave the page blank), and says the real status in the
``X-Import-Status`` header.
"""

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from hermes_web.http import HtmxHttpRequest
from hermes_web.importers import FORMATS, ImportProblem, ImportReport, import_upload
from hermes_web.models import Session
from hermes_web.services.sessions import max_upload_bytes

# How a duplicate is skipped, said in the page's words (the form's checkbox).
DUPLICATE_HINT = "tick “Skip sessions imported before” to leave it out quietly"
FORMAT_CHOICES = [
    ("auto", "Detect automatically"),
    ("hermes-jsonl", "Hermes JSONL / JSON export or sessions/<id>.jsonl"),
    ("hermes-db", "Hermes state.db"),
    ("openai", "OpenAI messages (JSON)"),
    ("claude-code", "Claude Code transcript (JSONL)"),
    ("codex", "Codex rollout (JSONL)"),
    ("gemini-cli", "Gemini CLI chat (session-*.json / .jsonl, logs.json, checkpoint)"),
    ("aider", "Aider chat log (.aider.chat.history.md)"),
    ("openhands", "OpenHands trajectory or event (JSON)"),
    ("cline", "Cline / Roo Code task (api_conversation_history.json, ui_messages.json)"),
    ("continue", "Continue session (JSON)"),
    ("pi", "Pi session (JSONL)"),
    ("copilot-cli", "Copilot CLI events.jsonl"),
    ("swe-agent", "SWE-agent trajectory (.traj)"),
    ("cursor", "Cursor chat exported by SpecStory (.md)"),
]


def _context(request, **extra) -> dict:
    recent = (
        Session.objects.for_user(request.user)
        .filter(source__startswith="import:")
        .order_by("-created_at")[:10]
        if request.user.is_authenticated
        else []
    )
    return {
        "nav": "import",
        "formats": FORMAT_CHOICES,
        "max_mb": max_upload_bytes() // 2**20,
        "recent": recent,
        "selected_format": "auto",
        **extra,
    }


def _answer(request: HtmxHttpRequest, reports: list[ImportReport], status: int, fmt: str):
    context = _context(request, reports=reports, selected_format=fmt)
    if request.htmx:
        response = render(request, "hermes_web/import.html#results", context, status=200)
        response["X-Import-Status"] = str(status)
        return response
    return render(request, "hermes_web/import.html", context, status=status)


@require_http_methods(["GET", "POST"])
@login_required
def import_page(request: HtmxHttpRequest) -> HttpResponse:
    if request.method == "GET":
        return render(request, "hermes_web/import.html", _context(request))
    fmt = request.POST.get("format", "auto")
    if getattr(request, "import_too_large", False):  # the upload was stopped while read
        return too_large(request, f"file is larger than {max_upload_bytes() // 2**20} MB")
    files = request.FILES.getlist("file")
    skip_existing = request.POST.get("skip_existing") == "on"
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
            if (upload.size or 0) > max_upload_bytes():
                reports.append(
                    _failed(
                        upload.name or "(file)",
                        f"file is larger than {max_upload_bytes() // 2**20} MB",
                    )
                )
                status = 413
                continue
            reports.append(
                import_upload(
                    upload,
                    owner=request.user,
                    fmt=fmt,
                    skip_existing=skip_existing,
                    duplicate_hint=DUPLICATE_HINT,
                )
            )
        if status == 200 and all(r.refused and not r.sessions and not r.skipped for r in reports):
            status = 400  # nothing at all could be imported
    return _answer(request, reports, status, fmt)


def too_large(request: HtmxHttpRequest, problem: str, status: int = 413) -> HttpResponse:
    """413 (200 + error markup for htmx) before the body was stored, or another refusal of
    an upload that could not be read (400); see importers.limits."""
    fmt = request.GET.get("format", "auto")
    return _answer(request, [_failed("(upload)", problem)], status, fmt)


def _failed(name: str, problem: str) -> ImportReport:
    report = ImportReport(file=name)
    report.errors.append(ImportProblem(name, 0, problem))
    return report
