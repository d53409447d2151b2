"""Issue #27: the inspector's truth test, a property over generated chains.

For every compaction of a generated conversation (both profiles, both modes, chains of one
to three compactions, each an update of the summary before it), the inspector's figures and
warnings equal the stored report and the JSON export, Compare's structure counts equal its
fate table, and every ``[ref:N]`` link of the summary opens the row the summary line
describes (a tool result of the tool the line names).
"""

import html as html_lib
import json
import re

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction import CompactionConfig, generate_conversation
from compaction.markers import wrap_summary
from compaction.tokens import count_message_tokens
from hermes_web.models import Compaction, Message, Session
from hermes_web.presenters.compare import message_fates
from hermes_web.presenters.inspector import one_scale, structure_of
from hermes_web.presenters.vocabulary import report_warnings
from hermes_web.services.sessions import append_message
from tests.web.inspector_seed import compact_now, seed_conversation
from tests.web.native_sources import NATIVE_SOURCES, source_strings

pytestmark = pytest.mark.django_db

LINK_RE = re.compile(
    r'<a href="/conversations/(?P<sid>[^/]+)/messages/(?P<pos>\d+)/"[^>]*>\[ref:(?P<ref>\d+)\]</a>'
)
SUMMARY_RE = re.compile(r'<section class="summary-section">(.*?)</section>', re.S)
TOOL_RE = re.compile(r"\[tool: ([^\]]+)\]\s*$")
FOLD_RE = re.compile(r"^(?:\d+\. \S+.*? — )?\[([A-Za-z0-9_.:-]+)\] ")


def _figure(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _tool_of(row: Message) -> str:
    """The tool a result row belongs to: its own name, else its call's (the row before)."""
    if row.tool_name:
        return row.tool_name
    call = (
        Message.objects.filter(session=row.session, position__lt=row.position, role="assistant")
        .order_by("-position")
        .first()
    )
    for c in (call.tool_calls or []) if call else []:
        if c.get("id") == row.tool_call_id:
            return c["function"]["name"]
    return ""


def continue_with(session: Session, *, n: int, seed: int) -> Session:
    """More generated turns, their tool call ids made unique in the session (real agents
    never reuse one; the generator restarts its numbering)."""
    tag = f"r{seed}-"
    for m in generate_conversation(n, seed=seed):
        if m["role"] == "system":
            continue
        calls = [
            {**c, "id": tag + str(c.get("id") or "")} for c in m.get("tool_calls") or []
        ] or None
        append_message(
            session,
            role=m["role"],
            content=m.get("content"),
            tool_calls=calls,
            tool_call_id=tag + m["tool_call_id"] if m.get("tool_call_id") else "",
            tool_name=m.get("name") or "",
        )
    return session


def check_run(client, run: Compaction) -> int:
    """Asserts the truths of one run's pages; returns how many references it followed."""
    report = run.report
    page = client.get(reverse("compaction_detail", args=[run.public_id]))
    assert page.status_code == 200
    html = page.content.decode()
    exported = json.loads(
        client.get(reverse("compaction_report_json", args=[run.public_id])).content
    )
    assert exported == report

    # Figures: what the Numbers panel prints is the report's.
    tokens = report["tokens"]
    for label, key in (
        ("Tokens before", "before"),
        ("Tokens after", "after"),
        ("Threshold", "threshold"),
    ):
        assert f"<dt>{label}</dt><dd>{_figure(tokens[key])}</dd>" in html, label
    # The summary's row: its tokens, and when a kept message was merged into it, the
    # summary's own share and the message's, which add up to the row.
    summary_dd = re.search(r"<dt>Summary tokens</dt><dd>(.*?)</dd>", html, re.S)
    assert summary_dd, "Summary tokens"
    shown_summary = html_lib.unescape(re.sub(r"<[^>]+>", "", summary_dd[1]))
    assert shown_summary.startswith(_figure(tokens["summary"])), shown_summary
    if tokens.get("summary_merged"):
        alone, merged = tokens["summary"] - tokens["summary_merged"], tokens["summary_merged"]
        assert f"(the summary {_figure(alone)}, a kept message merged into its row" in (
            shown_summary
        ), shown_summary
        assert shown_summary.endswith(f"{_figure(merged)})"), shown_summary
        body_row = {"role": report["summary_role"], "content": wrap_summary(report["summary_body"])}
        config = CompactionConfig(**report["config"])
        assert alone == count_message_tokens(body_row, config), report["summary_body"][:200]
    else:
        assert shown_summary == _figure(tokens["summary"]), shown_summary

    # Warnings: the banners are the one list, and each is the engine's (as exported) or a
    # check the engine makes too; the tail one judges the tail as sent.
    shown = re.findall(r'data-code="([a-z_]+)"', html)
    assert shown == [w["code"] for w in report_warnings(report)]
    stored = {w["code"] for w in exported["warnings"]}
    assert set(shown) <= stored, (shown, stored)
    tail = tokens.get("tail_slimmed", tokens.get("tail"))
    assert ("tail_over_threshold" in shown) == (tail > tokens["threshold"])

    # Compare: the structure counts are the fate table's.
    fates = message_fates(report)
    structure = structure_of(report, run.mode)
    assert structure["kept_verbatim"] == fates.count("kept")
    assert structure["slimmed"] == fates.count("slimmed")
    assert structure["summarized"] == fates.count("summarized")

    # References: each link opens a tool result of the tool its line names.
    followed = 0
    for section in SUMMARY_RE.findall(html):
        text_lines = section.split("\n")
        for line in text_lines:
            for link in LINK_RE.finditer(line):
                plain = html_lib.unescape(re.sub(r"<[^>]+>", "", line))
                session = Session.objects.get(public_id=link["sid"])
                row = Message.objects.get(session=session, position=int(link["pos"]))
                assert row.role == "tool", (plain, row.role)
                named = TOOL_RE.search(plain) or FOLD_RE.search(plain)
                if named and named[1] != "tool":
                    assert _tool_of(row) == named[1], (plain, _tool_of(row))
                followed += 1
    return followed


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(min_value=1, max_value=50),
    profile=st.sampled_from(["hermes", "classic"]),
    mode=st.sampled_from(["in_place", "rotation"]),
    rounds=st.integers(min_value=1, max_value=3),
)
def test_every_figure_warning_and_reference_is_true(
    alice, alice_client, seed, profile, mode, rounds
):
    session = seed_conversation(alice, n=140, seed=seed, mode=mode)
    followed = 0
    for round_ in range(rounds):
        run = compact_now(
            session, alice, mode=mode, overrides={"tail_token_budget": 2_000, "profile": profile}
        )
        assert run.status == "committed", (run.status, run.reason, run.error)
        followed += check_run(alice_client, run)
        live = Session.objects.get(pk=run.result_session_id) if mode == "rotation" else session
        session = continue_with(live, n=60, seed=seed * 10 + round_ + 1)
    if profile == "hermes":  # the classic summary writes no references
        assert followed > 0


# -- the rest of the corpus: the demo chats, real-transcript shapes, native compactions --------

COMPARE_ROW = r'<tr><th scope="row">{label}</th><td>([^<]*)</td><td>([^<]*)</td></tr>'


def check_compare(client, a: Compaction, b: Compaction) -> None:
    """Compare's counts and figures for two runs are each run's stored report's."""
    page = client.get(
        f"{reverse('compare')}?session={a.session.public_id}&a={a.public_id}&b={b.public_id}"
    )
    assert page.status_code == 200
    html = page.content.decode()
    sides = (a.report or {}, b.report or {})
    for label, fate in (
        ("Kept verbatim \\(head \\+ tail\\)", "kept"),
        ("Kept, slimmed \\(head \\+ tail\\)", "slimmed"),
        ("Summarized \\(middle\\)", "summarized"),
    ):
        found = re.search(COMPARE_ROW.format(label=label), html)
        assert found, label
        assert [found[1], found[2]] == [_figure(message_fates(r).count(fate)) for r in sides]
    found = re.search(COMPARE_ROW.format(label="Tokens"), html)
    assert found
    for shown, report in zip((found[1], found[2]), sides, strict=True):
        # One scale: an agent's compaction by our count of its rows (its figures apart).
        tokens = one_scale(report).get("tokens") or {}
        if report.get("native"):
            assert tokens["before"] == report["tokens"]["counted_before"]
        if isinstance(tokens.get("before"), int) and isinstance(tokens.get("after"), int):
            assert html_lib.unescape(shown) == f"{tokens['before']:,} → {tokens['after']:,}"


def ours(runs) -> list[Compaction]:
    """Runs of our engine with a report to check (what compacted, committed or as a dry run)."""
    return [
        r
        for r in runs
        if not r.is_native
        and (r.report or {}).get("tokens")
        and r.report.get("status") == "compacted"
    ]


def test_the_demo_chats_every_compaction_is_true(alice, alice_client):
    """``manage.py load_demo``'s conversations: rotations, in place, what-ifs, a chain."""
    from hermes_web.demo import load_demo_conversations

    load_demo_conversations(alice)
    runs = ours(Compaction.objects.filter(session__owner=alice).order_by("pk"))
    assert len(runs) >= 4
    assert {r.mode for r in runs} == {"in_place", "rotation"}
    followed = sum(check_run(alice_client, run) for run in runs)
    assert followed > 0
    for a, b in zip(runs, runs[1:], strict=False):
        if a.session_id == b.session_id:
            check_compare(alice_client, a, b)


@pytest.mark.parametrize("agent", ["claude_code", "codex", "hermes"])
def test_native_compactions_of_real_shapes_and_their_replays_are_true(
    alice, alice_client, tmp_path, agent
):
    """Imported transcripts in the shapes of real ones (tests/web/native_fixtures.py): the
    agent's own compaction shows what was recorded and our counts as stored and exported; its
    replays by our engine (both profiles) pass the same truths, and Compare says the same."""
    from hermes_web.importers import import_path
    from tests.web.native_fixtures import (
        claude_code_lines,
        codex_lines,
        hermes_rotation_lines,
        write_lines,
    )

    lines = {
        "claude_code": lambda: claude_code_lines(compacts=2, rounds=8),
        "codex": codex_lines,
        "hermes": hermes_rotation_lines,
    }[agent]()
    suffix = ".jsonl"
    report = import_path(write_lines(tmp_path / f"{agent}{suffix}", lines), owner=alice)
    assert report.refused == []
    natives = [r for r in Compaction.objects.filter(session__owner=alice) if r.is_native]
    assert natives, f"{agent}: the fixture holds the agent's own compaction"
    for native in natives:
        html = alice_client.get(reverse("compaction_detail", args=[native.public_id]))
        assert html.status_code == 200
        page = html.content.decode()
        exported = json.loads(
            alice_client.get(reverse("compaction_report_json", args=[native.public_id])).content
        )
        assert exported == native.report
        tokens = native.report.get("tokens") or {}
        for dom_id, value in (
            ("tokens-before-recorded", native.tokens_before),
            ("tokens-before-counted", tokens.get("counted_before")),
            ("tokens-after-counted", tokens.get("counted_after")),
        ):
            if isinstance(value, int):
                assert f'id="{dom_id}">{value:,}<' in page, dom_id
        replayed = alice_client.post(reverse("compaction_replay", args=[native.public_id]))
        assert replayed.status_code == 302
        replays = list(Compaction.objects.filter(replay_of=native).order_by("pk"))
        for run in ours(replays):
            check_run(alice_client, run)
        for run in replays:
            check_compare(alice_client, native, run)


# -- an agent's own summary, byte for byte from its transcript to every page (issue #37) --------


def _strings_of(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings_of(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings_of(v)]
    return []


def _streamed(response) -> str:
    assert response.status_code == 200
    body = getattr(response, "streaming_content", None)
    raw = b"".join(body) if body is not None else response.content
    return raw.decode("utf-8")


@pytest.mark.parametrize("agent", sorted(NATIVE_SOURCES))
def test_an_agents_summary_is_its_source_bytes_stored_and_shown(
    alice, alice_client, tmp_path, agent
):
    """For each agent with a native-compaction fixture: the summary row stored for the
    session, the compaction's verbatim summary, the message page, the conversation page,
    the inspector, the exports and the API all hold the string the agent wrote, and none of
    them our prefix or end marker (a prompt we build adds those: ``Message.prompt_content``)."""
    from compaction import END_MARKER, PREFIX_OPENING
    from hermes_web.importers import import_path

    path = NATIVE_SOURCES[agent](tmp_path)
    assert import_path(path, owner=alice).refused == []
    written = source_strings(path)
    natives = list(
        Compaction.objects.filter(session__owner=alice, source=agent).exclude(native_summary="")
    )
    assert natives, f"{agent}: the fixture holds a summary of the agent's own"
    for native in natives:
        summary = native.native_summary
        assert summary in written, (agent, summary[:80])  # a whole string of the source
        session = native.result_session
        row = Message.objects.get(
            session=session, position=native.report["native"]["summary_position"]
        )
        assert row.content == summary, (agent, str(row.content)[:80])

        message = html_lib.unescape(
            _streamed(
                alice_client.get(reverse("message_detail", args=[session.public_id, row.position]))
            )
        )
        body = message.split('<pre class="content" tabindex="0">', 1)[1].split("</pre>", 1)[0]
        assert body == summary
        inspector = html_lib.unescape(
            _streamed(alice_client.get(reverse("compaction_detail", args=[native.public_id])))
        )
        shown = inspector.split('id="native-summary-text">', 1)[1].split("</pre>", 1)[0]
        assert shown == summary
        conversation = html_lib.unescape(
            _streamed(alice_client.get(reverse("conversation_detail", args=[session.public_id])))
        )
        report = json.loads(
            _streamed(alice_client.get(reverse("compaction_report_json", args=[native.public_id])))
        )
        assert report["summary"] == summary
        api = json.loads(
            _streamed(
                alice_client.get(
                    f"/api/sessions/{session.public_id}/messages?include_archived=true&limit=500"
                )
            )
        )
        (item,) = [m for m in api["items"] if m["position"] == row.position]
        assert item["content"] == summary
        hermes = _streamed(
            alice_client.get(f"/api/sessions/{session.public_id}/export?format=hermes-jsonl")
        )
        assert summary in _strings_of([json.loads(line) for line in hermes.splitlines() if line])
        if row.active:
            assert summary in conversation
            exported = json.loads(
                _streamed(alice_client.get(f"/api/sessions/{session.public_id}/export"))
            )
            assert summary in [m.get("content") for m in exported]
        hermes_text = "\n".join(
            _strings_of([json.loads(line) for line in hermes.splitlines() if line])
        )
        for page in (
            message,
            inspector,
            conversation,
            json.dumps(api, ensure_ascii=False),
            hermes_text,
        ):
            assert PREFIX_OPENING not in page, agent
            assert END_MARKER not in page, agent
