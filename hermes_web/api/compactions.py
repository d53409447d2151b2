"""API routes for compactions: queue one or a dry run, list, read, commit a dry run."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Status

from compaction import ConfigError
from hermes_web.api.common import ERRORS, get_compaction, get_session
from hermes_web.api.errors import Conflict, Unprocessable
from hermes_web.exporters import replay_comparison
from hermes_web.models import Compaction, Session
from hermes_web.schemas import CompactionDetailOut, CompactionIn, CompactionOut, ErrorOut
from hermes_web.services.compactions import (
    CompactionBusy,
    CompactionRefused,
    commit_what_if,
    in_progress,
    request_compaction,
)
from hermes_web.services.native import replay_native
from hermes_web.services.sessions import resolve_tip

router = Router(tags=["compactions"])

START = {202: CompactionOut, 409: ErrorOut, 422: ErrorOut, **ERRORS}


def _start(request: HttpRequest, session: Session, data: CompactionIn, trigger: str) -> Status:
    if trigger != Compaction.Trigger.WHAT_IF and (running := in_progress(session)) is not None:
        raise CompactionBusy(running)
    try:
        run = request_compaction(
            session=session,
            requested_by=request.user,
            trigger=trigger,
            mode=data.mode,
            focus=data.focus,
            config_overrides=data.config,
            summarizer=data.summarizer,
        )
    except ConfigError as error:
        raise Unprocessable(f"config: {error}") from error
    except CompactionRefused as error:
        raise Conflict(f"{error} ({resolve_tip(session).public_id})") from error
    except ValueError as error:
        raise Unprocessable(str(error)) from error
    return Status(202, CompactionOut.from_compaction(run))


@router.post("/sessions/{session_id}/compactions", response=START)
def compact(request: HttpRequest, session_id: str, data: CompactionIn) -> Status:
    """Queue a manual compaction; poll GET /compactions/{id} for its status and report."""
    return _start(request, get_session(request, session_id), data, Compaction.Trigger.MANUAL)


@router.post("/sessions/{session_id}/what-if", response=START)
def what_if(request: HttpRequest, session_id: str, data: CompactionIn) -> Status:
    """Queue a dry run: the report is stored, nothing is committed."""
    return _start(request, get_session(request, session_id), data, Compaction.Trigger.WHAT_IF)


@router.get("/sessions/{session_id}/compactions", response={200: list[CompactionOut], **ERRORS})
def session_compactions(request: HttpRequest, session_id: str) -> list[dict]:
    """This session's compaction runs, newest first."""
    session = get_session(request, session_id)
    rows = Compaction.objects.filter(session=session).select_related("session", "result_session")
    return [CompactionOut.from_compaction(c) for c in rows[:200]]


@router.get("/compactions/{compaction_id}", response={200: CompactionDetailOut, **ERRORS})
def compaction_detail(request: HttpRequest, compaction_id: str) -> dict:
    """Status, tokens, and the engine's full report once finished."""
    c = get_compaction(request, compaction_id)
    return {**CompactionOut.from_compaction(c), "config": c.config, "report": c.report}


@router.post("/compactions/{compaction_id}/commit", response=START)
def commit(request: HttpRequest, compaction_id: str) -> Status:
    """Run a finished dry run for real (same config, mode and focus)."""
    dry = get_compaction(request, compaction_id)
    if dry.status != Compaction.Status.DRY_RUN:
        raise Conflict(f"only a finished dry run can be committed; this one is {dry.status}")
    if dry.replay_of_id is not None:
        raise Conflict("a replay of an agent's own compaction is there to compare, not to commit")
    if (running := in_progress(dry.session)) is not None:
        raise CompactionBusy(running)
    try:
        run = commit_what_if(dry, requested_by=request.user)
    except CompactionRefused as error:
        raise Conflict(str(error)) from error
    return Status(202, CompactionOut.from_compaction(run))


@router.post(
    "/compactions/{compaction_id}/replay",
    response={202: list[CompactionOut], 409: ErrorOut, **ERRORS},
)
def replay(request: HttpRequest, compaction_id: str) -> Status:
    """Replay an agent's own compaction with our engine: a dry run per profile on exactly
    the rows it replaced (each run's ``replay_of`` names it). GET /compactions/{id}/compare
    gives the agent's summary against ours once they finished."""
    native = get_compaction(request, compaction_id)
    try:
        runs = replay_native(native, requested_by=request.user)
    except CompactionRefused as error:
        raise Conflict(str(error)) from error
    return Status(202, [CompactionOut.from_compaction(r) for r in runs])


@router.get("/compactions/{compaction_id}/compare", response={200: dict, **ERRORS})
def compare_replays(request: HttpRequest, compaction_id: str) -> dict:
    """An agent's own compaction against our replays of it: the same document as
    ``export_session <id> --format report-json`` gives under ``"replays"``."""
    native = get_compaction(request, compaction_id)
    return {"compaction": native.public_id, "replays": replay_comparison(native)}
