"""Follow a fact: the fate shown for sampled strings equals a recomputation from the stored
contexts, over generated chains (rotation, in place, what-if) and imported native
compactions with our replays; a deliberately wrong fate fails the check."""

import dataclasses

import pytest
from django.urls import reverse
from django.utils import timezone

from compaction import CompactionConfig, DeterministicSummarizer, compact
from compaction.probes import draw_probes, message_text, normalize
from hermes_web.importers import import_path
from hermes_web.models import Compaction, Message
from hermes_web.services.compaction_run import _load_rows
from hermes_web.services.fate import follow
from hermes_web.services.native import replay_native
from tests.web.inspector_seed import compact_now, continue_with, seed_conversation
from tests.web.native_fixtures import claude_code_lines, write_lines

pytestmark = pytest.mark.django_db

MISSING = "zq-never-written-7731"


def _input_texts(run: Compaction) -> list[str]:
    """The run's input rows, read straight from the table (not through the service)."""
    source = run.replay_of if run.replay_of_id else run
    if source.status == "committed" and source.mode == "in_place":
        rows = Message.objects.filter(archived_by=source)
    else:
        rows = Message.objects.filter(session_id=source.session_id, active=True)
        if source.snapshot_position is not None:
            rows = rows.filter(position__lte=source.snapshot_position)
    return [message_text(m.to_engine()) for m in rows.order_by("position")]


def _final_texts(run: Compaction) -> list[str]:
    """The context after the run, recomputed: the stored result rows of a committed run;
    for a dry run, the engine run again on the same rows with the same settings."""
    if run.status == "committed":
        count = run.report["counts"]["messages_after"]
        rows = Message.objects.filter(session_id=run.result_session_id)
        if run.mode == "in_place":
            rows = rows.filter(position__gt=run.snapshot_position)
        return [message_text(m.to_engine()) for m in rows.order_by("position")[:count]]
    messages, counts, _, prompt = _load_rows(run.input_rows())
    result = compact(
        messages,
        config=CompactionConfig.from_dict(run.config),
        summarizer=DeterministicSummarizer(),
        now=timezone.now().date(),
        previous_summary=None if run.replay_of_id else run.session.previous_summary or None,
        force=True,
        token_counts=counts,
        provider_prompt_tokens=prompt,
    )
    return [message_text(m) for m in result.messages]


def problems(entry: dict, query: str) -> list[str]:
    """What is wrong with one shown fate, against the recomputed contexts (empty: right)."""
    run = Compaction.objects.get(public_id=entry["compaction"])
    needle = normalize(query)
    inputs = [normalize(t) for t in _input_texts(run)]
    final = [normalize(t) for t in _final_texts(run)]
    rows = [i for i, text in enumerate(inputs) if needle in text]
    in_final = any(needle in text for text in final)
    fate = entry["fate"]
    report = run.report or {}
    out = []
    if fate["in_final"] != in_final:
        out.append(f"in_final {fate['in_final']} but the context after says {in_final}")
    if fate["in_input"] != bool(rows):
        out.append(f"in_input {fate['in_input']} but the input rows say {bool(rows)}")
    kept = {"head", "tail", "summary", "ledger", "kept"}
    if fate["kind"] in kept and not in_final:
        out.append(f"{fate['kind']} but not in the context after")
    if fate["kind"] in {"recall", "truncated", "lost"} and in_final:
        out.append(f"{fate['kind']} but still in the context after")
    if fate["kind"] == "absent" and (rows or in_final):
        out.append("absent but present")
    if fate["kind"] in {"head", "tail"}:
        lo, hi = report["boundaries"][fate["kind"]]
        if not (lo <= fate["index"] < hi and fate["index"] in rows):
            out.append(f"{fate['kind']} but row {fate['index']} is not there or lacks it")
    if fate["kind"] in {"summary", "ledger"} and needle not in normalize(
        report.get("summary") or ""
    ):
        out.append("summary but the summary lacks it")
    if fate["kind"] == "recall" and not any(f"[ref:{fate['index']}]" in t for t in final):
        out.append("recall but no [ref:N] to its row is left")
    return out


def _samples(run: Compaction) -> list[str]:
    texts = _input_texts(run)
    messages = [{"role": "user", "content": t} for t in texts]
    picked = [p.answer for p in draw_probes(messages, count=8)]
    summary = (run.report or {}).get("summary") or ""
    lines = [line.strip() for line in summary.splitlines()[1:] if len(line.strip()) > 20]
    picked += [line[:120] for line in lines[:2]]
    return [p[:300] for p in picked] + [MISSING]


def _check_chain(session, client) -> int:
    runs = Compaction.objects.for_lineage(session).filter(status__in=["committed", "dry_run"])
    checked = 0
    for run in runs:
        for query in _samples(run):
            journey = follow(session, query)
            entries = [e for top in journey["compactions"] for e in (top, *top["replays"])]
            assert {e["compaction"] for e in entries} == {r.public_id for r in runs}
            for entry in entries:
                assert problems(entry, query) == [], (query, entry)
                checked += 1
    # The page shows the same fates, one labelled cell each.
    query = _samples(runs[0])[0]
    page = client.get(reverse("follow_fact", args=[session.public_id]), {"q": query})
    assert page.status_code == 200
    body = page.content.decode()
    for top in follow(session, query)["compactions"]:
        assert f'data-compaction="{top["compaction"]}" data-fate="{top["fate"]["kind"]}"' in body
        assert f'href="/compactions/{top["compaction"]}/' in body
    return checked


def test_fates_over_a_generated_rotation_chain_with_a_what_if(alice, alice_client):
    root = seed_conversation(alice, n=120, seed=4)
    first = compact_now(root, alice, mode="rotation")
    child = continue_with(first.result_session, n=40, seed=5)
    compact_now(child, alice, mode="rotation")
    tip = continue_with(Compaction.objects.get(session=child).result_session, n=30, seed=6)
    compact_now(
        tip, alice, trigger="what_if", overrides={"tail_token_budget": 1_500, "profile": "classic"}
    )
    assert Compaction.objects.for_lineage(root).count() == 3
    assert _check_chain(tip, alice_client) > 30


def test_fates_over_an_in_place_session(alice, alice_client):
    session = seed_conversation(alice, n=120, seed=7, mode="in_place")
    compact_now(session, alice, mode="in_place")
    continue_with(session, n=40, seed=8)
    compact_now(session, alice, mode="in_place")
    assert _check_chain(session, alice_client) > 10


def test_fates_over_imported_native_compactions_and_our_replays(alice, alice_client, tmp_path):
    path = write_lines(tmp_path / "cc-fate.jsonl", claude_code_lines(compacts=3, rounds=3))
    report = import_path(path, owner=alice)
    assert report.refused == []
    session = report.sessions[0]
    native = Compaction.objects.filter(session=session).order_by("queued_at").first()
    replays = replay_native(native, requested_by=alice)
    assert all(r.status == "dry_run" for r in replays)
    journey = follow(session, _samples(native)[0])
    top = next(e for e in journey["compactions"] if e["compaction"] == native.public_id)
    assert top["kind"] == "native"
    assert {r["compaction"] for r in top["replays"]} == {r.public_id for r in replays}
    api = alice_client.get(
        f"/api/conversations/{session.public_id}/follow", {"q": _samples(native)[0]}
    ).json()
    shown = next(e for e in api["compactions"] if e["compaction"] == native.public_id)
    assert shown["fate"] == {k: v for k, v in top["fate"].items() if k != "rows"}
    assert [r["fate"]["kind"] for r in shown["replays"]] == [
        r["fate"]["kind"] for r in top["replays"]
    ]
    assert _check_chain(session, alice_client) > 10


def test_a_wrong_fate_fails_the_check(alice):
    session = seed_conversation(alice, n=120, seed=4)
    run = compact_now(session, alice, mode="rotation")
    kinds_seen = set()
    for query in _samples(run):
        entry = follow(session, query)["compactions"][0]
        kinds_seen.add(entry["fate"]["kind"])
        assert problems(entry, query) == []
        flipped = {**entry, "fate": {**entry["fate"], "in_final": not entry["fate"]["in_final"]}}
        assert problems(flipped, query)
        wrong = "lost" if entry["fate"]["in_final"] else "summary"
        assert problems({**entry, "fate": {**entry["fate"], "kind": wrong}}, query)
    assert len(kinds_seen) >= 3, kinds_seen


def test_the_first_appearance_and_bad_queries(alice, alice_client, bob):
    session = seed_conversation(alice, n=60, seed=2)
    row = Message.objects.filter(session=session, role="user").order_by("position")[1]
    text = message_text(row.to_engine())[:30]
    journey = follow(session, text)
    assert journey["first"]["position"] <= row.position
    assert journey["compactions"] == []
    url = reverse("follow_fact", args=[session.public_id])
    assert alice_client.get(url, {"q": "x" * 501}).status_code == 400
    assert alice_client.get(url).status_code == 200  # the form alone
    api = alice_client.get(f"/api/conversations/{session.public_id}/follow", {"q": text})
    assert api.status_code == 200
    assert api.json()["first"]["role"] == "user"
    assert (
        alice_client.get(f"/api/conversations/{session.public_id}/follow", {"q": " "}).status_code
        == 422
    )
    alice_client.force_login(bob)
    assert alice_client.get(url, {"q": text}).status_code == 404


def test_fate_dataclass_is_frozen():
    from hermes_web.services.fate import Fate

    fate = Fate("lost", True, False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fate.kind = "head"  # type: ignore[misc]
