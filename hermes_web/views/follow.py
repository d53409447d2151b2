"""Follow folders (Settings): the folders whose agent files the worker imports as they are
written, the files followed and their last import; and the live rows of an open
conversation page (an htmx poll while its session is followed; a reload without JS)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from hermes_web.http import HtmxHttpRequest
from hermes_web.importers.follow import (
    FolderRefused,
    add_folder,
    follow_roots,
    followed_session_ids,
)
from hermes_web.models import Compaction, FollowedFile, FollowedFolder, Message, Session
from hermes_web.views.conversations import _message_rows

# Rows one poll adds at most: a burst past it shows the rest at the next poll.
LIVE_ROWS = 200


def _page(request, status: int = 200, **context) -> HttpResponse:
    files = list(FollowedFile.objects.filter(owner=request.user).order_by("-last_import")[:200])
    ids = {pk for f in files for pk in f.sessions or []}
    by_pk = {s.pk: s for s in Session.objects.filter(owner=request.user, pk__in=ids)}
    context.update(
        folders=FollowedFolder.objects.filter(owner=request.user),
        files=[
            {"file": f, "stored": [by_pk[pk] for pk in f.sessions or [] if pk in by_pk]}
            for f in files
        ],
        file_total=FollowedFile.objects.filter(owner=request.user).count(),
        roots=follow_roots(),
        nav="import",
    )
    return render(request, "hermes_web/follow_folders.html", context, status=status)


@require_GET
@login_required
def follow_folders(request: HttpRequest) -> HttpResponse:
    return _page(request)


@require_POST
@login_required
def follow_folder_add(request: HttpRequest) -> HttpResponse:
    raw = request.POST.get("path", "")
    try:
        folder = add_folder(request.user, raw)
    except FolderRefused as refused:
        return _page(request, status=400, path_error=str(refused), path=raw[:1000])
    messages.success(request, f"Following {folder.path}: its files are imported within seconds.")
    return redirect("follow_folders")


@require_POST
@login_required
def follow_folder_remove(request: HttpRequest, folder_id: int) -> HttpResponse:
    folder = get_object_or_404(FollowedFolder, pk=folder_id, owner=request.user)
    folder.delete()  # what it imported stays; only the following stops
    messages.success(request, f"No longer following {folder.path}; its sessions are kept.")
    return redirect("follow_folders")


@require_GET
@login_required
def conversation_live(request: HtmxHttpRequest, public_id: str) -> HttpResponse:
    """Rows stored past ``after`` and the poll that asks for the next ones; htmx is told to
    stop polling (286) once the session is no longer followed. Without JS: the page."""
    session = get_object_or_404(Session.objects.for_user(request.user), public_id=public_id)
    if not request.htmx:
        return redirect("conversation_detail", public_id=session.public_id)
    try:
        after = int(request.GET.get("after", "-1"))
    except ValueError:
        after = -1
    rows = list(
        Message.objects.filter(session=session, active=True, position__gt=after)
        .select_related("archived_by")
        .order_by("position")[:LIVE_ROWS]
    )
    try:  # the compactions the page knows of (the agent's own, as the import stored them)
        known = int(request.GET.get("compactions", "0"))
    except ValueError:
        known = 0
    following = session.pk in followed_session_ids(request.user)
    runs = Compaction.objects.filter(session=session).order_by("pk")
    new_runs = list(runs.defer("report")[max(known, 0) :]) if runs.count() > known else []
    if not rows and not new_runs and not following:
        return HttpResponse(status=HTMX_STOP_POLLING)
    biggest = max((r.token_count for r in rows), default=0)
    context = {
        "session": session,
        "new_rows": _message_rows(session, rows, biggest) if rows else [],
        "new_runs": new_runs,
        "after": rows[-1].position if rows else after,
        "compactions": max(known, 0) + len(new_runs),
        "following": following,
    }
    return render(request, "hermes_web/_live_rows.html", context)
