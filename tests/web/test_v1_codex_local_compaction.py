"""The real Codex CLI's *local* compaction through hermes-web: with a provider Codex does not
compact remotely (any not named OpenAI or Azure), Codex summarises by itself, sending its
summarization prompt as an ordinary ``/v1/responses`` request, then starts the next turn
with the summary as a user message. The gateway stores that exchange as a compaction of the
conversation (Codex's, asked by its local compaction, its model's summary), and the
conversation goes on in the rotation's child session."""

import json

import pytest

from hermes_web.models import Compaction, Session
from hermes_web.openai_compat.codex_local import ASKED_WITH, PROMPT_OPENING, SUMMARY_PREFIX
from tests.web.test_v1_codex_compaction import codex_home
from tests.web.test_v1_real_clients import (
    LAST,
    LONG_REPLY,
    MARKER,
    PROMPTS,
    installed,
    main_requests,
    run,
    sessions_holding,
    turns_saying,
)
from tests.web.v1_helpers import issue_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.agent_clients]

SUMMARY = "HANDOFF-SUMMARY-4417: a log of entries; the code word was given in turn three."
AFTER = "Another question."


def test_codex_local_compaction_is_stored_and_the_model_reads_its_summary(
    live_server, upstream, alice, tmp_path, settings
):
    codex = installed("codex")
    settings.HERMES_CHAT_MODEL = "openai/gpt-4.1-mini"
    env = codex_home(
        tmp_path,
        'model = "gpt-4.1-mini"\n'
        'model_provider = "hermes"\n'
        "model_context_window = 85000\n"
        "model_auto_compact_token_limit = 60000\n"
        "[model_providers.hermes]\n"
        'name = "hermes-web"\n'
        f'base_url = "{live_server.url}/v1"\n'
        'env_key = "HERMES_API_KEY"\n'
        'wire_api = "responses"\n',
    )
    env.update(HERMES_API_KEY=issue_key(alice))
    work = tmp_path / "project"
    work.mkdir()
    for number, prompt in enumerate([*PROMPTS, LAST, AFTER]):
        # Past Codex's 60,000-token limit after the fifth reply: it summarises (with the
        # first queued reply) before sending the sixth prompt.
        if number < len(PROMPTS):
            upstream.default_reply = {**LONG_REPLY, "prompt_tokens": 12_000 * (number + 1)}
        elif number == len(PROMPTS):
            upstream.clear()
            upstream.enqueue({"content": SUMMARY, "prompt_tokens": 61_000})
            upstream.default_reply = {"content": "After the summary.", "prompt_tokens": 9_000}
        command = [str(codex), "exec", "--skip-git-repo-check"]
        command += ["resume", "--last", prompt] if number else [prompt]
        done = run(command, env, work)
        if number == len(PROMPTS):
            assert "After the summary." in done.stdout + done.stderr  # the agent answered

    # Codex's summarization request reached the model as it sent it…
    summarizing = [r for r in upstream.requests if PROMPT_OPENING in json.dumps(r["messages"])]
    assert len(summarizing) == 1
    # …and was stored as a compaction of the conversation, with the summary Codex's model wrote.
    run_ = Compaction.objects.get()
    assert run_.status == Compaction.Status.COMMITTED
    assert run_.source == Compaction.Source.CODEX
    assert run_.native_summary == SUMMARY
    assert run_.report["summary"] == SUMMARY
    assert run_.asked_by["asked_with"] == ASKED_WITH
    assert run_.asked_by["endpoint"] == "/v1/responses"
    assert run_.tokens_before == 61_000
    [compacted] = [s for s in sessions_holding(alice, MARKER) if s.pk == run_.session_id]
    # The prompt and the summary are no turns of the conversation it compacted.
    texts = json.dumps(list(compacted.messages.values_list("content", flat=True)))
    assert PROMPT_OPENING not in texts
    assert SUMMARY not in texts

    # The next request carried the summary: the model read it, after the user turns Codex kept.
    sent = main_requests(upstream, LAST)[0]
    assert SUMMARY in json.dumps(sent["messages"], ensure_ascii=False)
    assert turns_saying(sent["messages"], LAST)
    assert "batched its readings" not in json.dumps(sent["messages"])  # the replies are gone

    # That request continued the conversation in the rotation's child, one tree, and the turn
    # after it continued the child.
    child = run_.result_session
    assert child is not None
    assert child.parent_id == run_.session_id
    assert child.root_id == compacted.root_id
    compacted.refresh_from_db()
    assert compacted.end_reason == Session.EndReason.COMPRESSION
    summary_row = child.messages.get(is_summary=True)
    assert SUMMARY_PREFIX in json.dumps(summary_row.content)
    assert summary_row.extra["native_compaction"] == run_.public_id
    assert AFTER in json.dumps(list(child.messages.values_list("content", flat=True)))
    assert Session.objects.filter(owner=alice, parent__isnull=True).count() == 1
    assert run_.final_rows(100).count() == summary_row.position + 1
