"""Demo data: realistic shapes for every panel, loaded once, without a worker or a model."""

import pytest
from django.core.management import call_command

from hermes_web.demo import load_demo_conversations
from hermes_web.models import Compaction, Message, Session
from hermes_web.services.sessions import session_tree

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    """Load once for the module (it takes seconds); the rows are removed afterwards."""
    from django.contrib.auth import get_user_model

    with django_db_blocker.unblock():
        user = get_user_model().objects.create_user("demo-test")
        loaded = load_demo_conversations(user)
        yield user, loaded
        Session.objects.filter(owner=user).delete()
        user.delete()


def test_loads_the_promised_conversations(demo):
    user, loaded = demo
    roots = Session.objects.filter(owner=user, parent__isnull=True)
    assert loaded == roots.count() >= 3
    assert all(s.source == "demo" for s in Session.objects.filter(owner=user))


def test_one_conversation_is_rotated_twice_into_a_three_node_tree(demo):
    user, _ = demo
    rotated = [
        s
        for s in Session.objects.filter(owner=user, parent__isnull=True)
        if len(session_tree(s)) == 3
    ]
    assert len(rotated) == 1
    tree = session_tree(rotated[0])
    assert [s.end_reason for s in tree] == ["compression", "compression", ""]
    runs = Compaction.objects.filter(session__in=tree, mode="rotation", status="committed")
    assert runs.count() == 2
    assert all(r.summarizer == "deterministic" for r in runs)


def test_one_conversation_is_compacted_in_place(demo):
    user, _ = demo
    run = Compaction.objects.get(session__owner=user, mode="in_place", status="committed")
    assert Message.objects.filter(archived_by=run).count() > 100
    # Turns were added after the compaction, so the session is live and longer than the compacted list.
    assert (
        Message.objects.filter(session=run.session, active=True).count()
        > run.report["counts"]["messages_after"]
    )


def test_there_is_a_what_if_with_folds_truncations_and_images(demo):
    user, _ = demo
    what_if = Compaction.objects.get(session__owner=user, trigger="what_if")
    assert what_if.status == "dry_run"
    totals = what_if.report["slimming_totals"]
    assert totals["truncate"]["count"] > 0
    assert totals["image"]["count"] > 0


def test_conversations_are_long_agent_sessions(demo):
    user, _ = demo
    rows = Message.objects.filter(session__owner=user)
    assert rows.filter(role="tool", tool_name="terminal").exists()
    assert rows.filter(role="tool", tool_name="read_file").exists()
    assert rows.exclude(reasoning=None).exists()
    assert rows.filter(content__icontains="data:image/png;base64").exists()
    sizes = [
        Message.objects.filter(session=s).count()
        for s in Session.objects.filter(owner=user, parent__isnull=True)
    ]
    # Long, yet within the demo model's 64,000-token window (issue #37): a few hundred rows.
    assert max(sizes) >= 200


def test_the_demo_could_have_happened_within_its_window(demo):
    """Issue #37: no context over the window and every compaction started by the context
    reaching the threshold, as a chat with the demo model would."""
    from django.db.models import Sum

    from hermes_web.llm_models import DEMO_CONTEXT_LENGTH
    from hermes_web.services.sessions import compaction_config_for

    user, _ = demo
    for session in Session.objects.filter(owner=user):
        active = session.messages.filter(active=True).aggregate(t=Sum("token_count"))["t"]
        assert active <= DEMO_CONTEXT_LENGTH, session.title
    runs = Compaction.objects.filter(session__owner=user).select_related("session")
    assert runs.count() == 4
    for run in runs:
        threshold = compaction_config_for(run.session).threshold_tokens
        assert run.tokens_before <= DEMO_CONTEXT_LENGTH, run.session.title
        assert 0.9 * threshold <= run.tokens_before <= threshold, run.session.title
    assert {r.trigger for r in runs if r.status == "committed"} == {"auto"}


def test_loading_again_adds_nothing(demo):
    user, _ = demo
    before = (Session.objects.count(), Message.objects.count(), Compaction.objects.count())
    assert load_demo_conversations(user) == 0
    assert (Session.objects.count(), Message.objects.count(), Compaction.objects.count()) == before


def test_load_demo_command_is_a_no_op_when_demo_data_exists(demo, settings, capsys):
    from django.contrib.auth import get_user_model

    settings.HERMES_DEMO_DATA = True
    demo_user = get_user_model().objects.create_user("demo")
    Session.objects.create(owner=demo_user, source="demo", title="already here")
    call_command("load_demo")
    assert Session.objects.filter(owner=demo_user).count() == 1
    assert "demo account" in capsys.readouterr().out
