"""API routes for following a fact over a chain and for recall tests of a compaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Router, Schema, Status

from hermes_web.api.common import ERRORS, get_compaction, get_session
from hermes_web.api.errors import Unprocessable
from hermes_web.models import RecallTest
from hermes_web.schemas import ErrorOut
from hermes_web.services.fate import follow
from hermes_web.services.recall_test import start_recall_test

router = Router(tags=["fate and recall"])


class FateOut(Schema):
    kind: str
    label: str
    in_input: bool
    in_final: bool
    index: int | None
    detail: str
    anchor: str


class FateEntryOut(Schema):
    compaction: str
    kind: str = Field(description="ours | native | replay | what-if")
    label: str
    profile: str
    status: str
    session: str
    tokens_after: int | None
    fate: FateOut
    replays: list[FateEntryOut] = []


class FirstOut(Schema):
    session: str
    position: int
    role: str


class FollowOut(Schema):
    query: str
    first: FirstOut | None
    compactions: list[FateEntryOut]


class RecallTestIn(Schema):
    questions: int = Field(15, ge=1, le=100)


class RecallTestOut(Schema):
    id: str
    compaction: str
    status: str
    progress: int
    questions: int
    bank: list[dict[str, Any]]
    results: dict[str, Any]
    error: str
    created_at: datetime
    finished_at: datetime | None

    @staticmethod
    def of(test: RecallTest) -> RecallTestOut:
        return RecallTestOut(
            id=test.public_id,
            compaction=test.compaction.public_id,
            status=test.status,
            progress=test.progress,
            questions=test.questions,
            bank=test.bank or [],
            results=test.results or {},
            error=test.error,
            created_at=test.created_at,
            finished_at=test.finished_at,
        )


@router.get(
    "/conversations/{session_id}/follow", response={200: FollowOut, 422: ErrorOut, **ERRORS}
)
def follow_fact(request: HttpRequest, session_id: str, q: str = "") -> dict:
    """The fate of ``q`` in every compaction of the conversation's chain."""
    session = get_session(request, session_id)
    try:
        return follow(session, q)
    except ValueError as error:
        raise Unprocessable(str(error)) from error


@router.post(
    "/compactions/{compaction_id}/recall-test",
    response={202: RecallTestOut, 422: ErrorOut, **ERRORS},
)
def recall_test(request: HttpRequest, compaction_id: str, data: RecallTestIn) -> Status:
    """Queue a recall test of the compaction; poll GET for its progress and results."""
    compaction = get_compaction(request, compaction_id)
    try:
        test = start_recall_test(compaction, requested_by=request.user, questions=data.questions)
    except ValueError as error:
        raise Unprocessable(str(error)) from error
    test.compaction = compaction
    return Status(202, RecallTestOut.of(test))


@router.get(
    "/compactions/{compaction_id}/recall-test", response={200: list[RecallTestOut], **ERRORS}
)
def recall_tests(request: HttpRequest, compaction_id: str) -> list[RecallTestOut]:
    """The compaction's recall tests, newest first (at most 20)."""
    compaction = get_compaction(request, compaction_id)
    tests = RecallTest.objects.filter(compaction=compaction).select_related("compaction")[:20]
    return [RecallTestOut.of(t) for t in tests]


@router.get("/recall-tests/{test_id}", response={200: RecallTestOut, **ERRORS})
def recall_test_detail(request: HttpRequest, test_id: str) -> RecallTestOut:
    """One recall test."""
    test = get_object_or_404(
        RecallTest.objects.for_user(request.user).select_related("compaction"), public_id=test_id
    )
    return RecallTestOut.of(test)
