"""Compare: profile A vs profile B on one conversation, the per-message fate diff, labels."""

import dataclasses

import pytest
from django.urls import reverse

from compaction import CompactionConfig
from hermes_web.models import Compaction
from hermes_web.presenters.compare import fate_diff, message_fates
from tests.web.inspector_seed import compact_now, seed_conversation

pytestmark = pytest.mark.django_db

HAS_PROFILES = "profile" in {f.name for f in dataclasses.fields(CompactionConfig)}


def post_profiles(client, session, a="classic", b="hermes"):
    return client.post(
        reverse("compare"),
        {
            "session": session.public_id,
            "compare": "profiles",
            "profile_a": a,
            "profile_b": b,
            "mode": "in_place",
        },
    )


@pytest.mark.skipif(HAS_PROFILES, reason="the installed engine accepts profiles")
def test_profiles_without_engine_support_is_a_form_error(alice, alice_client):
    session = seed_conversation(alice, n=60, title="No profiles")
    response = post_profiles(alice_client, session)
    assert response.status_code == 400
    html = response.content.decode()
    assert "has no profiles yet" in html
    assert 'aria-invalid="true" aria-describedby="c-profile-a-error"' in html
    assert not Compaction.objects.filter(session=session).exists()


@pytest.mark.skipif(not HAS_PROFILES, reason="the installed engine has no profiles yet")
def test_profile_a_vs_profile_b_runs_both_and_labels_columns(alice, alice_client):
    session = seed_conversation(alice, n=120, title="Profiles")
    response = post_profiles(alice_client, session)
    assert response.status_code == 302
    runs = list(Compaction.objects.filter(session=session).order_by("pk"))
    assert [r.config.get("profile") for r in runs] == ["classic", "hermes"]
    page = alice_client.get(response["Location"]).content.decode()
    assert "Left: profile classic" in page
    assert "Right: profile hermes" in page


def test_unknown_profile_names_the_field(alice, alice_client):
    session = seed_conversation(alice, n=60, title="Bad profile")
    response = post_profiles(alice_client, session, b="turbo")
    assert response.status_code == 400
    assert 'id="c-profile-b-error"' in response.content.decode()


def test_fate_diff_lists_messages_that_end_differently(alice, alice_client):
    session = seed_conversation(alice, n=120, title="Fates")
    small = compact_now(session, alice, trigger="what_if", overrides={"tail_token_budget": 1_000})
    big = compact_now(session, alice, trigger="what_if", overrides={"tail_token_budget": 6_000})
    small.report = {**small.report, "profile": "classic"}  # the default engine wrote both
    small.save(update_fields=["report"])
    page = alice_client.get(
        reverse("compare"), {"session": session.public_id, "a": small.public_id, "b": big.public_id}
    ).content.decode()
    expected = fate_diff(small.report, big.report)
    assert expected["differ_count"] > 0
    assert f"{expected['differ_count']} of {expected['compared']} messages end differently" in page
    assert "Right: profile hermes" in page  # the profiles differ, so the columns say so
    # Labels carry the date and a short id, so same-titled runs can be told apart.
    assert small.public_id[:8] in page


def test_message_fates_from_a_report():
    report = {
        "status": "compacted",
        "message_tokens": [1] * 10,
        "boundaries": {"head": [0, 2], "middle": [2, 7], "tail": [7, 10]},
        "slimming": [
            {"index": 1, "kind": "fold", "region": "head"},
            {"index": 3, "kind": "fold"},
            {"index": 8, "kind": "lean_tail", "region": "tail"},
        ],
    }
    assert message_fates(report) == [
        "kept",
        "slimmed",
        "summarized",
        "summarized",
        "summarized",
        "summarized",
        "summarized",
        "kept",
        "slimmed",
        "kept",
    ]
    assert message_fates({"status": "skipped", "message_tokens": [1, 2]}) == ["kept", "kept"]


def test_a_repeated_compare_or_what_if_view_does_not_read_the_reports(alice, alice_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    session = seed_conversation(alice, n=120, title="Cached cards")
    a = compact_now(session, alice, trigger="what_if", overrides={"tail_token_budget": 1_000})
    b = compact_now(session, alice, trigger="what_if", overrides={"tail_token_budget": 4_000})
    urls = [
        reverse("compare") + f"?session={session.public_id}&a={a.public_id}&b={b.public_id}",
        reverse("what_if", args=[session.public_id]) + f"?run={a.public_id}",
    ]
    for page in urls:
        first = alice_client.get(page)
        with CaptureQueriesContext(connection) as queries:
            again = alice_client.get(page)
        assert first.status_code == again.status_code == 200
        # The selected columns (not the WHERE clause) must leave the report out.
        selected = [q["sql"].split(" FROM ", 1)[0] for q in queries]
        reads = [sql for sql in selected if '"hermes_web_compaction"."report"' in sql]
        assert not reads, reads
