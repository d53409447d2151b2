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
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from hermes_web.http import HtmxHttpRequest
from hermes_web.importers import FORMATS, ImportProblem, ImportReport, import_upload
from hermes_web.importers.links import namespaced
from hermes_web.models import Session
from hermes_web.services.sessions import max_upload_bytes

# How a duplicate is skipped, said in the page's words (the form's checkbox).
DUPLICATE_HINT = "tick “Skip sessions imported before” to leave it out quietly"
# One entry per importer (``importers.FORMATS``): the dropdown's label, and for the help
# list the agent's name, where its files are and what becomes of them. A test checks that
# every format the registry knows is here, so the page cannot offer one it does not explain.
FORMAT_HELP: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "hermes-jsonl": (
        "Hermes JSONL / JSON export or sessions/<id>.jsonl",
        "Hermes",
        ("hermes sessions export out.jsonl", "~/.hermes/sessions/<id>.jsonl"),
        "or a session JSON export. Session ids, rotation chains, summaries and archived "
        "rows are kept.",
    ),
    "hermes-db": ("Hermes state.db", "Hermes state.db", ("~/.hermes/state.db",), "read-only."),
    "openai": (
        "OpenAI messages (JSON)",
        "OpenAI",
        (),
        "a JSON list of messages, or an object with messages.",
    ),
    "claude-code": (
        "Claude Code transcript (JSONL)",
        "Claude Code",
        ("~/.claude/projects/<project>/<session>.jsonl", "subagents/agent-*.jsonl"),
        "sub-agents are linked to the main session; a whole session folder (with its "
        "subagents/ and tool-results/) as a .zip or .tar.gz.",
    ),
    "codex": ("Codex rollout (JSONL)", "Codex", ("~/.codex/sessions/…/rollout-*.jsonl",), ""),
    "gemini-cli": (
        "Gemini CLI chat (session-*.json / .jsonl, logs.json, checkpoint)",
        "Gemini CLI",
        ("~/.gemini/tmp/<project>/chats/session-*.json", "logs.json", "checkpoint-*.json"),
        "its “Context compressed” notes become compactions.",
    ),
    "aider": (
        "Aider chat log (.aider.chat.history.md)",
        "Aider",
        (".aider.chat.history.md",),
        "each “aider chat started” block is a session.",
    ),
    "openhands": (
        "OpenHands trajectory or event (JSON)",
        "OpenHands",
        ("trajectory.json", "sessions/<id>/events/*.json"),
        "condensations become compactions.",
    ),
    "cline": (
        "Cline / Roo Code task (api_conversation_history.json, ui_messages.json)",
        "Cline / Roo Code",
        ("tasks/<id>/api_conversation_history.json", "ui_messages.json"),
        "context condensing becomes a compaction.",
    ),
    "continue": (
        "Continue session (JSON)",
        "Continue",
        ("~/.continue/sessions/<id>.json",),
        "",
    ),
    "pi": (
        "Pi session (JSONL)",
        "Pi",
        ("~/.pi/agent/sessions/…/*.jsonl",),
        "branches become linked sessions.",
    ),
    "copilot-cli": (
        "Copilot CLI events.jsonl",
        "Copilot CLI",
        ("~/.copilot/session-state/<id>/events.jsonl",),
        "",
    ),
    "swe-agent": ("SWE-agent trajectory (.traj)", "SWE-agent", ("*.traj",), ""),
    "cursor": (
        "Cursor chat exported by SpecStory (.md)",
        "Cursor",
        (".specstory/history/*.md",),
        "a chat saved by SpecStory.",
    ),
    "opencode": (
        "opencode database or storage folder (opencode.db, storage/)",
        "opencode",
        ("~/.local/share/opencode/opencode.db", "storage/session/<project>/<id>.json"),
        "compaction parts and summary messages become compactions.",
    ),
    "crush": (
        "Crush database (crush.db)",
        "Crush",
        (".crush/crush.db",),
        "summarize becomes a compaction; sub-agents become linked sessions.",
    ),
    "qwen-code": (
        "Qwen Code chat (JSONL)",
        "Qwen Code",
        ("~/.qwen/projects/<project>/chats/<id>.jsonl",),
        "its chat compression becomes a compaction.",
    ),
    "kimi-cli": (
        "Kimi CLI context.jsonl",
        "Kimi CLI",
        ("~/.kimi/sessions/<hash>/<id>/context.jsonl",),
        "its compaction becomes a compaction; checkpoints and token counts are kept.",
    ),
    "goose": (
        "Goose session (JSONL, before 1.10)",
        "Goose",
        ("~/.local/share/goose/sessions/<id>.jsonl",),
        "its compaction becomes a compaction; the working directory and token counts are kept.",
    ),
    "goose-db": (
        "Goose database (sessions.db)",
        "Goose",
        ("~/.local/share/goose/sessions/sessions.db",),
        "its compaction (the hidden summary message) becomes a compaction.",
    ),
}
FORMAT_CHOICES = [("auto", "Detect automatically")] + [
    (fmt, FORMAT_HELP[fmt][0]) for fmt in FORMATS if fmt in FORMAT_HELP
]
FORMAT_LIST = [
    {"name": name, "paths": paths, "note": note}
    for fmt, (_label, name, paths, note) in FORMAT_HELP.items()
    if fmt in FORMATS
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
        "format_list": FORMAT_LIST,
        "max_mb": max_upload_bytes() // 2**20,
        "recent": recent,
        "selected_format": "auto",
        **extra,
    }


def _link_duplicates(user, reports: list[ImportReport]) -> None:
    """Each report's duplicates as ``(problem, url)``: a duplicate is no failure, the
    session is already stored, so the page links it (url "" when the user cannot see it)."""
    ids = {p.session for r in reports for p in r.duplicates if p.session}
    wanted = {namespaced(i, user): i for i in ids} | {i: i for i in ids}
    stored = dict(
        Session.objects.for_user(user)
        .filter(public_id__in=wanted)
        .values_list("public_id", "public_id")
    )
    found = {wanted[pid]: pid for pid in stored}
    for report in reports:
        report.duplicate_links = [  # type: ignore[attr-defined]  # the page's view of it
            (
                problem,
                reverse("conversation_detail", args=[found[problem.session]])
                if problem.session in found
                else "",
            )
            for problem in report.duplicates
        ]


def _answer(request: HtmxHttpRequest, reports: list[ImportReport], status: int, fmt: str):
    if request.user.is_authenticated:
        _link_duplicates(request.user, reports)
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
