"""Where compaction hurt, across every session (issue #36 item 4): the page's and the API's
figures equal a recomputation from the stored rows, other users' sessions never count, the page
works without JavaScript, and a user with nothing compacted sees an empty state."""

import json
import re
from collections import defaultdict

import pytest
from django.urls import reverse

from hermes_web.importers import import_path
from hermes_web.models import Compaction, Message, Session
from tests.web.inspector_seed import compact_now, continue_with, seed_conversation
from tests.web.native_fixtures import claude_code_lines, write_lines

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_cache")]

RULE = "never touch config/prod.yaml"
READ_PATH = "/work/app/src/settings.py"
ABOVE_WINDOW = 250_000


def _hurting_lines(cwd: str) -> list[str]:
    """A Claude Code session that hurts every way: three compactions two replies apart (a
    loop), summaries that grow each time, a recorded tokens-before above the 200k window, a
    rule ("never touch …") said only before each compaction and kept by no summary, and the
    same file read before and right after each compaction."""
    lines = []
    for line in claude_code_lines(compacts=3, rounds=1):
        record = json.loads(line)
        record["cwd"] = cwd
        if record.get("isCompactSummary"):
            grown = len(lines)  # later summaries are longer
            record["message"]["content"] += "\n" + " ".join(["Pending item."] * (20 * grown))
        if (
            record.get("subtype") == "compact_boundary"
            and record["compactMetadata"]["preTokens"] == 97_777
        ):
            record["compactMetadata"]["preTokens"] = ABOVE_WINDOW
        content = record.get("message", {}).get("content")
        if isinstance(content, list) and content[0].get("type") == "tool_use":
            content[0]["name"] = "Read"
            content[0]["input"] = {"file_path": READ_PATH}
        lines.append(json.dumps(record))
    return lines


@pytest.fixture
def hurt_data(alice, bob, tmp_path):
    """Alice: the hurting Claude Code session and a chat compacted twice by our engine.
    Bob: the same hurting session of his own, which must never count for Alice."""
    for owner in (alice, bob):
        path = write_lines(tmp_path / f"{owner.username}.jsonl", _hurting_lines("/work/app"))
        assert import_path(path, owner=owner).refused == []
    chat = seed_conversation(alice, title="Chat work")
    first = compact_now(chat, alice)
    child = first.result_session or chat
    continue_with(child, 6)
    compact_now(child, alice)
    return alice


def _counted(user):
    return list(
        Compaction.objects.filter(session__owner=user, status="committed")
        .exclude(trigger="what_if")
        .select_related("session")
        .order_by("queued_at", "pk")
    )


def _chains(runs):
    chains = defaultdict(list)
    for run in runs:
        chains[run.session.root_id or run.session_id].append(run)
    return chains


def _texts(rows):
    return " ".join(json.dumps([row.content, row.tool_calls]) for row in rows)


def _recompute(user) -> dict:
    """The figures, recomputed plainly from the stored rows (the module docstring's rules)."""
    runs = _counted(user)
    agents = defaultdict(int)
    for run in runs:
        agents[run.session.get_source_display()] += 1
    quick_ids = []
    loops = 0
    ratios = []
    for chain in _chains(runs).values():
        quick = []
        for prev, cur in zip(chain, chain[1:], strict=False):
            replies = Message.objects.filter(
                session=cur.session,
                role="assistant",
                created_at__gt=prev.finished_at or prev.queued_at,
                created_at__lte=cur.queued_at,
            ).count()
            if replies <= 3:
                quick.append(cur.public_id)
        quick_ids += quick
        loops += len(quick) >= 2
        summaries = [r.report["tokens"]["summary"] for r in chain]
        ratios += [b / a for a, b in zip(summaries, summaries[1:], strict=False)]
    miscounts = []
    for run in runs:
        if run.source and run.tokens_before is not None:
            counted = run.report["tokens"]["counted_before"]
            if (
                run.tokens_before > run.session.context_length
                or run.tokens_before > 2 * counted + 20_000
                or run.tokens_before * 2 < counted
            ):
                miscounts.append(run.public_id)
    rules_lost, rereads, reread_tokens = [], [], 0
    for run in runs:
        replaced = Message.objects.filter(archived_by=run)
        if run.mode != "in_place":
            continue  # ours here: the fact ledger carries every rule into the summary
        after = list(
            Message.objects.filter(
                session=run.session, position__gt=run.snapshot_position
            ).order_by("position")
        )
        context = after[: run.report["counts"]["messages_after"]]
        if RULE in _texts(replaced.filter(role="user")) and RULE not in _texts(context):
            rules_lost.append(run.public_id)
        window = after[run.report["counts"]["messages_after"] :]
        replies, calls = 0, set()
        for row in window:
            if row.role == "assistant":
                if replies == 5:
                    break
                replies += 1
                for call in row.tool_calls or ():
                    if READ_PATH in call["function"]["arguments"]:
                        calls.add(call["id"])
            elif row.role == "tool" and row.tool_call_id in calls:
                reread_tokens += row.token_count
        if calls and READ_PATH in _texts(replaced):
            rereads.append(run.public_id)
    return {
        "compactions": len(runs),
        "agents": dict(agents),
        "quick": sorted(quick_ids),
        "loops": loops,
        "ratios": len(ratios),
        "grown": sum(1 for r in ratios if r > 1),
        "max_ratio": round(max(ratios), 2),
        "miscounts": sorted(miscounts),
        "rules_lost": sorted(rules_lost),
        "rereads": sorted(rereads),
        "reread_tokens": reread_tokens,
    }


def test_the_api_equals_a_recomputation_from_the_stored_rows(hurt_data, alice_client):
    truth = _recompute(hurt_data)
    # The fixture hurts every way, so every figure below is one that can be wrong.
    assert truth["loops"] == 1
    assert len(truth["quick"]) >= 2
    assert truth["grown"] >= 2
    assert truth["miscounts"]
    assert truth["rules_lost"]
    assert truth["rereads"]
    data = alice_client.get("/api/hurt").json()
    assert data["compactions"] == truth["compactions"] == 5
    assert {g["name"]: g["compactions"] for g in data["by_agent"]} == truth["agents"]
    assert data["quick"] == len(truth["quick"])
    assert data["loop_chains"] == len(data["loops"]) == truth["loops"]
    assert sorted(data["loops"][0]["compactions"]) == sorted(
        set(truth["quick"]) & set(data["loops"][0]["compactions"])
    )
    assert data["ratios"] == truth["ratios"]
    assert data["grown"] == truth["grown"]
    assert data["max_ratio"] == truth["max_ratio"]
    assert data["miscount_count"] == len(truth["miscounts"])
    assert sorted(i["compactions"][0] for i in data["miscounts"]) == truth["miscounts"]
    assert any("window 200,000" in i["detail"] for i in data["miscounts"])
    assert sorted(i["compactions"][0] for i in data["rules_lost"]) == truth["rules_lost"]
    assert all(RULE in i["detail"].lower() for i in data["rules_lost"])
    assert sorted(i["compactions"][0] for i in data["rereads"]) == truth["rereads"]
    assert data["reread_tokens"] == truth["reread_tokens"] > 0
    assert all(READ_PATH in i["detail"] for i in data["rereads"])
    hours = defaultdict(int)
    for run in _counted(hurt_data):
        hours[run.queued_at.strftime("%Y-%m-%d %H:00")] += 1
    assert {h["hour"]: h["compactions"] for h in data["hours"]} == dict(hours)
    sessions = defaultdict(int)
    for session in Session.objects.filter(owner=hurt_data):
        sessions[session.get_source_display()] += 1
    for group in data["by_agent"]:
        assert group["sessions"] == sessions[group["name"]]
        assert group["per_session"] == round(group["compactions"] / group["sessions"], 2)
    projects = {g["name"]: g for g in data["by_project"]}
    assert projects["/work/app"]["compactions"] == 3
    assert projects["/work/app"]["native"] == 3


def test_the_page_shows_the_same_figures_each_linked_to_its_compactions(hurt_data, alice_client):
    truth = _recompute(hurt_data)
    page = alice_client.get(reverse("hurt"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "<html" in html
    assert 'aria-current="page">Where it hurt<' in html

    def figure(name):
        return re.search(rf'id="fig-{name}">([^<]+)<', html).group(1)

    assert figure("compactions") == str(truth["compactions"])
    assert figure("quick") == str(len(truth["quick"]))
    assert figure("loops") == str(truth["loops"])
    assert figure("grown") == str(truth["grown"])
    assert figure("max-ratio") == str(truth["max_ratio"])
    assert figure("miscounts") == str(len(truth["miscounts"]))
    assert figure("rules-lost") == str(len(truth["rules_lost"]))
    assert figure("rereads") == str(len(truth["rereads"]))
    assert figure("reread-tokens") == f"{truth['reread_tokens']:,}"
    # Every finding links to the compactions behind it.
    for public_id in truth["quick"] + truth["miscounts"] + truth["rules_lost"] + truth["rereads"]:
        assert reverse("compaction_detail", args=[public_id]) in html
    # The per-hour chart is inline SVG; no script is needed to read any of it.
    assert '<svg class="hurt-hours"' in html
    assert "<rect" in html
    assert "hx-" not in html.split('id="hurt-figures"')[1]


def test_another_users_sessions_never_count(hurt_data, bob, bob_client, alice_client):
    alice_ids = {c.public_id for c in _counted(hurt_data)}
    bob_ids = {c.public_id for c in _counted(bob)}
    assert len(bob_ids) == 3
    page = alice_client.get(reverse("hurt")).content.decode()
    assert not any(public_id in page for public_id in bob_ids)
    api = json.dumps(alice_client.get("/api/hurt").json())
    assert not any(public_id in api for public_id in bob_ids)
    bob_data = bob_client.get("/api/hurt").json()
    assert bob_data["compactions"] == 3
    assert bob_data["sessions"] == Session.objects.filter(owner=bob).count()
    assert not any(public_id in json.dumps(bob_data) for public_id in alice_ids)


def test_a_new_session_row_refreshes_the_cached_figures(hurt_data, alice_client):
    before = alice_client.get("/api/hurt").json()["compactions"]
    chat = seed_conversation(hurt_data, title="Later", seed=4)
    compact_now(chat, hurt_data)
    assert alice_client.get("/api/hurt").json()["compactions"] == before + 1


def test_nothing_compacted_shows_an_empty_state(alice, alice_client):
    seed_conversation(alice, n=20)
    page = alice_client.get(reverse("hurt"))
    assert page.status_code == 200
    assert 'id="hurt-empty"' in page.content.decode()
    data = alice_client.get("/api/hurt").json()
    assert data["compactions"] == 0
    assert data["sessions"] == 1
    assert data["loops"] == data["rules_lost"] == data["by_agent"] == []


def test_the_page_and_the_api_need_a_signed_in_user(client):
    assert client.get(reverse("hurt")).status_code == 302
    assert client.get("/api/hurt").status_code == 401
    assert client.post(reverse("hurt")).status_code in (302, 405)


def test_a_compaction_that_freed_little_is_listed_and_linked(hurt_data, alice_client):
    ours = Compaction.objects.filter(session__owner=hurt_data, source="").order_by("pk").last()
    # A stored run that freed 5 %: what the rows say is what the page says.
    Compaction.objects.filter(pk=ours.pk).update(tokens_before=40_000, tokens_after=38_000)
    Session.objects.filter(pk=ours.session_id).touch()
    data = alice_client.get("/api/hurt").json()
    assert data["freed_little_count"] == 1
    assert data["freed_little"][0]["compactions"] == [ours.public_id]
    assert data["freed_little"][0]["value"] == 0.05
    html = alice_client.get(reverse("hurt")).content.decode()
    assert re.search(r'id="fig-freed-little">1<', html)
    assert reverse("compaction_detail", args=[ours.public_id]) in html
    assert "<td>5 %</td>" in html
