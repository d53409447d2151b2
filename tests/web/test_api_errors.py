"""The API's refusals: raised by the routes, answered by one exception handler each."""

import pytest

from hermes_web.models import Compaction
from hermes_web.services.compactions import request_compaction
from tests.web.compaction_helpers import SMALL_TAIL, conversation

pytestmark = pytest.mark.django_db


def post(client, url, body=None):
    return client.post(url, body or {}, content_type="application/json")


def test_a_second_compaction_while_one_is_queued_is_a_409_naming_it(alice, alice_client):
    session = conversation(alice, 8)
    queued = Compaction.objects.create(session=session)
    response = post(alice_client, f"/api/sessions/{session.public_id}/compactions")
    assert response.status_code == 409
    assert response.json() == {
        "detail": f"compaction {queued.public_id} is already queued for this session"
    }
    dry = Compaction.objects.create(
        session=session, status=Compaction.Status.DRY_RUN, trigger=Compaction.Trigger.WHAT_IF
    )
    response = post(alice_client, f"/api/compactions/{dry.public_id}/commit")
    assert response.status_code == 409
    assert response.json()["detail"].startswith(f"compaction {queued.public_id} is already")


def test_refusals_answer_their_status_and_a_detail(alice, alice_client):
    session = conversation(alice)
    run = request_compaction(session=session, config_overrides=SMALL_TAIL, run_now=True)
    child = run.result_session.public_id
    cases = [
        (
            post(alice_client, f"/api/sessions/{session.public_id}/messages", {"role": "user"}),
            409,
            f"session {session.public_id} was compacted by rotation; append to {child}",
        ),
        (
            post(alice_client, f"/api/sessions/{child}/messages", {"role": "tool"}),
            422,
            "a tool message needs tool_call_id",
        ),
        (
            post(alice_client, f"/api/compactions/{run.public_id}/commit"),
            409,
            "only a finished dry run can be committed; this one is committed",
        ),
        (
            post(alice_client, f"/api/sessions/{child}/compactions", {"config": {"x": 1}}),
            422,
            "config: ",
        ),
        (
            alice_client.get(f"/api/sessions/{child}/export", {"format": "yaml"}),
            422,
            "format must be one of openai, hermes-jsonl",
        ),
    ]
    for response, status, detail in cases:
        assert response.status_code == status, response.content
        assert set(response.json()) == {"detail"}
        assert response.json()["detail"].startswith(detail), response.json()


def test_an_upload_over_the_limit_is_a_413(alice_client, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.HERMES_MAX_UPLOAD_BYTES = 10
    upload = SimpleUploadedFile("big.jsonl", b"x" * 100)
    response = alice_client.post("/api/import", {"file": upload})
    assert response.status_code == 413
    assert response.json() == {"detail": "file is larger than 0 MB"}
