"""The recall test of a compaction: every arm through a real Celery worker with the local
fake model (through litellm), the same bank for the same compaction, the needle arm equal
to a recomputation, a model failure as a failed arm, and an agent's compaction beside our
replay of the same rows at its retained token budget."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from compaction.probes import answers_in, message_text
from hermes_web.importers import import_path
from hermes_web.models import Compaction, Message, RecallTest
from hermes_web.services.fate import input_messages
from hermes_web.services.recall_test import (
    BUDGET_TOLERANCE,
    draw_bank,
    run_recall_test,
    start_recall_test,
)
from tests.conftest import WorkerProcess, point_app_at_broker, wait_for
from tests.fake_openai import FakeOpenAIServer
from tests.web.inspector_seed import compact_now, seed_conversation
from tests.web.native_fixtures import claude_code_lines, write_lines


@pytest.fixture
def model_worker(tmp_path, settings, transactional_db):
    """A real worker on a fresh embedded broker whose chat model is the fake server."""
    from hermes_web.celery import app

    server = FakeOpenAIServer(default_reply={"content": "1. unknown"}).start()
    original = app.conf.broker_url
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    point_app_at_broker(url)
    env = {
        "HERMES_CHAT_MODEL": "openai/fake-chat",
        "HERMES_CHAT_API_BASE": server.base_url,
        "HERMES_CHAT_API_KEY": "x",
        "HERMES_LLM_TIMEOUT": "10",
        "HERMES_LLM_MAX_RETRIES": "0",
    }
    worker = WorkerProcess(url, tmp_path / "worker.log", extra_env=env)
    try:
        yield worker, server
    finally:
        worker.stop()
        server.stop()
        point_app_at_broker(original)


def _finished(test_id: str, worker) -> RecallTest:
    def done():
        test = RecallTest.objects.get(public_id=test_id)
        return test if test.is_finished else None

    return wait_for(done, timeout=90, worker=worker, message=lambda: worker.log()[-3000:])


def _final_text(run: Compaction) -> str:
    """The committed context after ``run``, read straight from its result session."""
    count = run.report["counts"]["messages_after"]
    rows = Message.objects.filter(session_id=run.result_session_id).order_by("position")[:count]
    return "\n\n".join(message_text(m.to_engine()) for m in rows)


def _answers(values) -> str:
    return "\n".join(f"{n}. {v}" for n, v in enumerate(values, 1))


@pytest.mark.slow
def test_every_arm_runs_through_the_worker_with_the_fake_model(model_worker, alice, client):
    worker, server = model_worker
    session = seed_conversation(alice, n=140, seed=11)
    run = compact_now(session, alice, mode="rotation")
    bank = draw_bank(run, input_messages(run), 15)
    assert len(bank) == 15
    gold = [p.answer for p in bank]
    server.enqueue({"content": _answers(["unknown"] * 15), "prompt_tokens": 900})  # model
    server.enqueue({"content": _answers(p.answer.split()[0] for p in bank)})  # recall queries
    server.enqueue({"content": _answers(gold)})  # recovery answers
    server.enqueue({"content": _answers(gold[:5] + ["unknown"] * 10)})  # control
    client.force_login(alice)
    started = client.post(
        f"/api/compactions/{run.public_id}/recall-test",
        data=json.dumps({"questions": 15}),
        content_type="application/json",
    )
    assert started.status_code == 202, started.content
    test = _finished(started.json()["id"], worker)
    assert test.status == "done", test.error
    assert test.progress == 100
    assert test.bank == [p.to_dict() for p in bank]
    context = test.results["contexts"][0]
    arms = {a["arm"]: a for a in context["arms"]}
    # The needle arm is the gold answers found in the stored context after the compaction.
    assert arms["needle"]["hits"] == list(answers_in(bank, _final_text(run)))
    assert arms["model"]["recall"] == 0.0
    assert arms["recovery"]["recall"] == 100.0
    assert test.results["control"]["recall"] == pytest.approx(100 * 5 / 15, abs=0.1)
    assert test.results["spent"]["prompt_tokens"] >= 900
    # The model saw only the context after the compaction; the recovery arm got the hits of
    # one search per question of the chain's history.
    assert len(server.requests) == 4
    model_prompt = server.requests[0]["messages"][1]["content"]
    missing = [p.answer for p, hit in zip(bank, arms["needle"]["hits"], strict=True) if not hit]
    assert missing
    assert all(answer not in model_prompt for answer in missing)
    assert "RECALLED (one search per question)" in server.requests[2]["messages"][1]["content"]
    # The inspector's panel, the API and the export show it.
    panel = client.get(reverse("recall_test_panel", args=[run.public_id]))
    assert panel.status_code == 200
    assert 'data-arm="recovery" data-status="done"' in panel.content.decode()
    listed = client.get(f"/api/compactions/{run.public_id}/recall-test").json()
    assert [t["id"] for t in listed] == [test.public_id]
    export = client.get(reverse("compaction_report_json", args=[run.public_id])).json()
    assert export["recall_tests"][0]["bank"] == test.bank
    # A second run (the inspector's button, a plain POST) asks the same questions.
    again = client.post(reverse("recall_test_start", args=[run.public_id]), {"questions": "15"})
    assert again.status_code == 302
    second = RecallTest.objects.filter(compaction=run).order_by("-created_at").first()
    second = _finished(second.public_id, worker)
    assert second.bank == test.bank


@pytest.mark.slow
def test_a_model_failure_is_a_failed_arm_not_a_500(model_worker, alice, client):
    worker, server = model_worker
    session = seed_conversation(alice, n=120, seed=12)
    run = compact_now(session, alice, mode="rotation")
    server.enqueue({"status": 500, "error": "upstream exploded"})
    client.force_login(alice)
    started = client.post(
        f"/api/compactions/{run.public_id}/recall-test", data="{}", content_type="application/json"
    )
    assert started.status_code == 202
    test = _finished(started.json()["id"], worker)
    assert test.status == "done"
    arms = {a["arm"]: a for a in test.results["contexts"][0]["arms"]}
    assert arms["model"]["status"] == "failed"
    assert "500" in arms["model"]["error"] or "exploded" in arms["model"]["error"]
    assert arms["needle"]["status"] == "done"
    page = client.get(reverse("recall_test_panel", args=[run.public_id]))
    assert page.status_code == 200
    assert "failed:" in page.content.decode()
    assert client.get(reverse("compaction_detail", args=[run.public_id])).status_code == 200


def _native_with_a_long_summary(tmp_path, owner) -> Compaction:
    """A Claude Code session whose one compaction kept a summary of about 2,500 tokens."""
    lines = [json.loads(line) for line in claude_code_lines(compacts=1, rounds=60)]
    for record in lines:
        if record.get("isCompactSummary"):
            record["message"]["content"] += "\n" + "\n".join(
                f"- note {i}: the parser handles case {i} of the input grammar" for i in range(150)
            )
    path = write_lines(tmp_path / "cc-budget.jsonl", [json.dumps(r) for r in lines])
    session = import_path(path, owner=owner).sessions[0]
    return Compaction.objects.get(session=session)


@pytest.mark.django_db
def test_an_agents_compaction_beside_our_replay_at_its_retained_budget(alice, tmp_path):
    native = _native_with_a_long_summary(tmp_path, alice)
    target = native.report["native"]["tokens_after_counted"]
    assert target > 2_000
    test = run_recall_test(start_recall_test(native, enqueue=False).pk)
    assert test.status == "done", test.error
    labels = [c["label"] for c in test.results["contexts"]]
    assert labels[:2] == ["this compaction", "our replay at its retained budget"]
    replay_entry = test.results["contexts"][1]
    replay = Compaction.objects.get(public_id=replay_entry["compaction"])
    assert replay.replay_of_id == native.pk
    assert replay.status == "dry_run"
    assert abs(replay_entry["tokens_after"] - target) <= BUDGET_TOLERANCE * target
    # Only the chosen attempt is kept.
    assert list(Compaction.objects.filter(replay_of=native)) == [replay]
    # The model arms say why they did not run (no chat model configured here).
    assert {a["status"] for a in replay_entry["arms"] if a["arm"] != "needle"} == {"skipped"}
    # Two runs: the same bank.
    again = run_recall_test(start_recall_test(native, enqueue=False).pk)
    assert again.bank == test.bank


@pytest.mark.django_db
def test_the_command_prints_recall_at_retained_tokens(alice):
    session = seed_conversation(alice, n=120, seed=13)
    run = compact_now(session, alice, mode="rotation")
    out = StringIO()
    call_command("recall_test", run.public_id, "--questions", "10", stdout=out)
    text = out.getvalue()
    assert "10 questions" in text
    assert "this compaction @" in text
    assert "needle" in text
    assert RecallTest.objects.get(compaction=run).status == "done"


@pytest.mark.django_db
def test_a_configured_judge_grades_what_a_normalized_match_did_not_accept(alice, llm, settings):
    settings.HERMES_RECALL_JUDGE_MODEL = "openai/fake-judge"
    session = seed_conversation(alice, n=120, seed=14)
    run = compact_now(session, alice, mode="rotation")
    llm.enqueue({"content": "1. the file it opened first"})  # model: a paraphrase
    llm.enqueue({"content": "1. yes"})  # the judge accepts it
    llm.enqueue({"content": ""})  # recovery: no searches
    llm.enqueue({"content": ""})  # recovery: no answers (nothing for the judge)
    llm.enqueue({"content": "1. not in the context"})  # control
    llm.enqueue({"content": "1. no"})  # the judge refuses it
    test = run_recall_test(start_recall_test(run, enqueue=False).pk)
    assert test.status == "done", test.error
    arms = {a["arm"]: a for a in test.results["contexts"][0]["arms"]}
    assert arms["model"]["hits"][0] is True
    assert sum(arms["model"]["hits"]) == 1
    assert arms["recovery"]["recall"] == 0.0
    assert test.results["control"]["recall"] == 0.0
    assert [r["model"] for r in llm.requests] == [
        "fake-chat",
        "fake-judge",
        "fake-chat",
        "fake-chat",
        "fake-chat",
        "fake-judge",
    ]
    assert test.results["judge"] == "openai/fake-judge"
