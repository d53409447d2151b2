"""The bounded-middle path: a session over HERMES_BOUNDED_COMPACTION_ABOVE is compacted from
its head, the middle's two ends and the rows its tail can reach, never loaded whole.

Real SQLite, the worker's own ``run_compaction``; each bounded run is compared with the normal
path on the same (or an identical) session.
"""

from __future__ import annotations

import functools
import tracemalloc

import pytest
from django.urls import reverse

from compaction import CompactionConfig, count_messages_tokens, generate_conversation
from compaction.messages import content_text
from compaction.sanitize import validate_tool_pairs
from hermes_web.models import Message
from hermes_web.services.bounded_compaction import active_span, load_bounded
from hermes_web.services.compaction_run import run_compaction
from hermes_web.services.compactions import request_compaction
from hermes_web.services.recall import recall_ref
from hermes_web.services.sessions import create_session

pytestmark = pytest.mark.django_db

N = 3_000
# Small summarizer input and tail, so 3,000 messages are "long": the loaded part is a fraction.
OVERRIDES = {"summary_input_max_chars": 20_000, "tail_token_budget": 2_000}


@functools.cache
def _conversation(n: int, seed: int) -> tuple[list[dict], list[int]]:
    messages = generate_conversation(n, seed=seed)
    return messages, count_messages_tokens(messages, CompactionConfig())


def _session(owner, n: int = N, seed: int = 3, *, exact: bool = True):
    """A session of ``n`` generated messages written in bulk (token counts as stored)."""
    session = create_session(owner=owner, title="long", context_length=32_000)
    if exact:
        messages, counts = _conversation(n, seed)
    else:  # big sessions: counts estimated, only the shape matters
        messages = generate_conversation(n, seed=seed)
        counts = [4 + len(content_text(m.get("content"))) // 4 for m in messages]
    Message.objects.bulk_create(
        [
            Message(
                session=session,
                position=i,
                role=m["role"],
                content=m.get("content"),
                tool_calls=m.get("tool_calls"),
                tool_call_id=m.get("tool_call_id", ""),
                tool_name=m.get("name", ""),
                token_count=count,
            )
            for i, (m, count) in enumerate(zip(messages, counts, strict=True))
        ],
        batch_size=1_000,
    )
    return session


def _run(session, *, bounded: bool, settings, mode: str = "rotation", trigger: str = "manual"):
    settings.HERMES_BOUNDED_COMPACTION_ABOVE = 500 if bounded else 10**9
    run = request_compaction(
        session=session,
        trigger=trigger,
        mode=mode,
        summarizer="deterministic",
        config_overrides=OVERRIDES,
    )
    run = run_compaction(run.pk)
    assert run.status in ("committed", "dry_run"), (run.status, run.error)
    return run


def _rows(session_id: int, **filters) -> list[tuple]:
    return list(
        Message.objects.filter(session_id=session_id, **filters)
        .order_by("position")
        .values_list("role", "content", "tool_calls", "tool_call_id", "is_summary")
    )


def test_a_bounded_dry_run_cuts_where_the_whole_session_cuts(alice, settings):
    session = _session(alice)
    whole = _run(session, bounded=False, settings=settings, trigger="what_if").report
    bounded = _run(session, bounded=True, settings=settings, trigger="what_if").report

    assert bounded["boundaries"] == whole["boundaries"]
    assert bounded["counts"]["messages_before"] == whole["counts"]["messages_before"] == N
    for figure in ("before", "head", "tail", "threshold"):
        assert bounded["tokens"][figure] == whole["tokens"][figure], figure
    assert bounded["tokens"]["middle"] == whole["tokens"]["middle"]
    after = bounded["tokens"]["after"]
    assert bounded["tokens"]["saved"] == bounded["tokens"]["before"] - after
    # The loaded part is a fraction of the session, and the report says what was not read.
    assert bounded["counts"]["messages_loaded"] < N // 2
    assert bounded["bounded"]["omitted_messages"] == N - bounded["counts"]["messages_loaded"]
    warning = next(w for w in bounded["warnings"] if w["code"] == "bounded_middle")
    assert f"{bounded['bounded']['omitted_messages']:,} middle messages" in warning["message"]
    assert "recall" in warning["message"]
    assert bounded["message_tokens"] == []
    # The summarizer read what it reads of the whole session: the middle's two ends (the
    # edge of the back differs by the digits of the [ref:N] the engine numbered on the
    # reduced list, renumbered after).
    front, back = int(0.45 * OVERRIDES["summary_input_max_chars"]), 10_000
    assert bounded["summarizer_input"][:front] == whole["summarizer_input"][:front]
    assert bounded["summarizer_input"][-back:] == whole["summarizer_input"][-back:]
    # What the passes did to the tail, at the same (real) indices as the whole run.
    tail_start = whole["boundaries"]["tail"][0]

    def tail_actions(report):
        return sorted(
            (a["index"], a["kind"], a.get("line"))
            for a in report["slimming"]
            if a["index"] >= tail_start
        )

    assert tail_actions(bounded) == tail_actions(whole)
    assert tail_actions(bounded)  # the shape folds and stubs tail tool rows


def test_a_bounded_rotation_commits_the_same_head_and_tail(alice, settings):
    normal = _run(_session(alice), bounded=False, settings=settings)
    session = _session(alice)
    run = _run(session, bounded=True, settings=settings)
    child = run.result_session
    assert child.parent_id == session.pk
    got, want = _rows(child.pk), _rows(normal.result_session_id)
    assert len(got) == len(want)
    summary = [i for i, row in enumerate(got) if row[4]]
    assert summary == [i for i, row in enumerate(want) if row[4]]
    assert len(summary) == 1
    assert [r for i, r in enumerate(got) if i != summary[0]] == [
        r for i, r in enumerate(want) if i != summary[0]
    ]
    engine_rows = [
        Message(role=r[0], content=r[1], tool_calls=r[2], tool_call_id=r[3]) for r in got
    ]
    assert validate_tool_pairs([m.to_engine() for m in engine_rows]) == []
    # The parent is untouched: every row still active.
    assert Message.objects.filter(session=session, active=True).count() == N
    assert run.report["boundaries"] == normal.report["boundaries"]
    assert run.tokens_before == normal.tokens_before


def test_a_bounded_in_place_commit_archives_the_whole_input_by_range(alice, settings):
    normal_session = _session(alice)
    normal = _run(normal_session, bounded=False, settings=settings, mode="in_place")
    session = _session(alice)
    run = _run(session, bounded=True, settings=settings, mode="in_place")

    archived = Message.objects.filter(session=session, archived_by=run)
    assert archived.count() == N
    assert sorted(archived.values_list("position", flat=True)) == list(range(N))
    assert not Message.objects.filter(session=session, position__lt=N, active=True).exists()
    got = _rows(session.pk, active=True)
    want = _rows(normal_session.pk, active=True)
    assert len(got) == run.report["counts"]["messages_after"] == len(want)
    keep = [i for i, row in enumerate(got) if not row[4]]
    assert [got[i] for i in keep] == [want[i] for i in keep]
    assert run.report["boundaries"] == normal.report["boundaries"]
    session.refresh_from_db()
    assert session.compression_count == 1
    assert session.previous_summary


def test_a_bounded_refs_recall_the_real_rows(alice, settings):
    session = _session(alice)
    run = _run(session, bounded=True, settings=settings)
    tail_start = run.report["boundaries"]["tail"][0]
    refs = [
        a["index"]
        for a in run.report["slimming"]
        if a["index"] >= tail_start and f"[ref:{a['index']}]" in (a.get("line") or "")
    ]
    assert refs
    messages, _ = _conversation(N, 3)
    for ref in refs[:5]:
        recalled = recall_ref(run.result_session, ref)
        assert recalled["content"] == content_text(messages[ref]["content"])[:100_000]


def test_bounded_results_answer_their_pages(alice, alice_client, settings):
    session = _session(alice)
    run = _run(session, bounded=True, settings=settings)
    for url in (
        reverse("compaction_detail", args=[run.public_id]),
        reverse("conversation_detail", args=[run.result_session.public_id]),
        reverse("conversation_detail", args=[session.public_id]),
    ):
        response = alice_client.get(url)
        assert response.status_code == 200, url
    page = alice_client.get(reverse("compaction_detail", args=[run.public_id])).content.decode()
    assert "were not read by the summarizer in bounded mode" in page


def test_a_session_under_the_threshold_takes_the_normal_path(alice, settings):
    session = _session(alice)
    run = _run(session, bounded=False, settings=settings, trigger="what_if")
    assert "bounded" not in run.report
    assert len(run.report["message_tokens"]) == N


def _load_peak(session) -> int:
    total, top = active_span(session.pk)
    config = CompactionConfig(**OVERRIDES, context_length=32_000)
    tracemalloc.start()
    try:
        loaded = load_bounded(session.pk, config, top, total)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert loaded.omitted > total // 2
    return peak


def test_the_bounded_load_does_not_grow_with_the_middle(alice):
    small = _load_peak(_session(alice, 20_000, seed=5, exact=False))
    big = _load_peak(_session(alice, 80_000, seed=5, exact=False))
    assert big < 2 * small, (small, big)


def _long_tool_run(owner, rounds: int = 400):
    """A session whose last user ask is followed by ``rounds`` big tool rounds: the tail the
    classic profile keeps (from that ask) reaches far past what is loaded at first."""
    session = _session(owner, 1_000, seed=7)
    output = "line of build output that goes on and on\n" * 150
    rows = [{"role": "user", "content": "Run the whole migration and fix what breaks."}]
    for i in range(rounds):
        call = {"id": f"call_run_{i}", "type": "function"}
        call["function"] = {"name": "terminal", "arguments": f'{{"command": "step {i}"}}'}
        rows.append({"role": "assistant", "content": "", "tool_calls": [call]})
        rows.append({"role": "tool", "content": output, "tool_call_id": call["id"]})
    rows.append({"role": "assistant", "content": "The migration ran; every step passed."})
    Message.objects.bulk_create(
        [
            Message(
                session=session,
                position=1_000 + i,
                role=m["role"],
                content=m["content"],
                tool_calls=m.get("tool_calls"),
                tool_call_id=m.get("tool_call_id", ""),
                tool_name="terminal" if m["role"] == "tool" else "",
                token_count=4 + len(m["content"]) // 4 + 10 * bool(m.get("tool_calls")),
            )
            for i, m in enumerate(rows)
        ]
    )
    return session


@pytest.mark.parametrize("profile", ["classic", "hermes"])
def test_a_cut_past_the_loaded_end_loads_more_until_it_matches(alice, settings, profile):
    session = _long_tool_run(alice)
    overrides = {**OVERRIDES, "profile": profile}
    reports = []
    for threshold in (10**9, 500):
        settings.HERMES_BOUNDED_COMPACTION_ABOVE = threshold
        run = request_compaction(
            session=session,
            trigger="what_if",
            summarizer="deterministic",
            config_overrides=overrides,
        )
        reports.append(run_compaction(run.pk).report)
    whole, bounded = reports
    assert bounded["boundaries"] == whole["boundaries"]
    assert bounded["alignment"] == whole["alignment"]
    assert bounded["tokens"]["before"] == whole["tokens"]["before"]
    assert bounded["tokens"]["tail"] == whole["tokens"]["tail"]
    assert bounded["bounded"]["omitted_messages"] > 0
    if profile == "classic":  # the tail starts at the last ask, 800 rows back
        assert whole["boundaries"]["tail"][0] == 1_000


def test_a_model_summarizer_is_called_once_after_the_cut_is_found(alice, settings):
    from tests.fake_openai import FakeOpenAIServer
    from tests.web.compaction_helpers import use_summary_server

    session = _session(alice)
    settings.HERMES_BOUNDED_COMPACTION_ABOVE = 500
    with FakeOpenAIServer(default_reply={"content": "## Goal\nPort the parser."}) as server:
        use_summary_server(settings, server)
        run = request_compaction(session=session, config_overrides=OVERRIDES)
        run = run_compaction(run.pk)
        assert len(server.requests) == 1
        prompt = "\n".join(str(m.get("content")) for m in server.requests[0]["messages"])
    assert run.status == "committed", run.error
    assert run.summarizer == "aux"
    assert "Port the parser." in run.result_session.previous_summary
    assert "summary input truncated" in prompt
    assert any(w["code"] == "bounded_middle" for w in run.report["warnings"])
