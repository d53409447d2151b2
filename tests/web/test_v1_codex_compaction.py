"""The real Codex CLI's remote compaction through hermes-web: a provider Codex compacts remotely
(named Azure: Codex calls ``/v1/responses/compact`` only for OpenAI's and Azure's) reaches our
engine when its auto-compact limit is passed; the compaction item it keeps goes back with the
next prompt, and the model reads our summary."""

import json

import pytest

from compaction import PREFIX_OPENING
from hermes_web.models import Compaction
from tests.web.test_v1_real_clients import (
    LAST,
    LONG_REPLY,
    MARKER,
    PROMPTS,
    base_env,
    installed,
    main_requests,
    run,
    sessions_holding,
    turns_saying,
)
from tests.web.v1_helpers import issue_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.agent_clients]


def codex_home(tmp_path, provider: str) -> dict:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(provider)
    return {**base_env(tmp_path), "CODEX_HOME": str(home)}


def test_codex_remote_compaction_is_served_by_our_engine_and_the_model_reads_its_summary(
    live_server, upstream, alice, tmp_path, settings
):
    codex = installed("codex")
    settings.HERMES_CHAT_MODEL = "openai/gpt-4.1-mini"
    key = issue_key(alice)
    env = codex_home(
        tmp_path,
        'model = "gpt-4.1-mini"\n'
        'model_provider = "azure"\n'
        "model_context_window = 85000\n"
        "model_auto_compact_token_limit = 60000\n"
        "[model_providers.azure]\n"
        'name = "Azure"\n'
        f'base_url = "{live_server.url}/v1"\n'
        'env_key = "HERMES_API_KEY"\n'
        'wire_api = "responses"\n',
    )
    env.update(HERMES_API_KEY=key)
    work = tmp_path / "project"
    work.mkdir()
    prompts = [*PROMPTS, LAST]
    for number, prompt in enumerate(prompts):
        # The usage each reply reports grows by 12,000 tokens a turn: past the 60,000 limit
        # after the fifth, so Codex compacts before sending the sixth prompt.
        upstream.default_reply = {**LONG_REPLY, "prompt_tokens": 12_000 * (number + 1)}
        if number == len(PROMPTS):
            upstream.clear()
            upstream.default_reply = {"content": "After the summary.", "prompt_tokens": 9_000}
        command = [str(codex), "exec", "--skip-git-repo-check"]
        command += ["resume", "--last", prompt] if number else [prompt]
        done = run(command, env, work)
    assert "After the summary." in done.stdout + done.stderr

    # Codex called /v1/responses/compact: our engine compacted the conversation it holds.
    run_ = Compaction.objects.get()
    assert run_.status == Compaction.Status.COMMITTED, run_.error
    holding = sessions_holding(alice, MARKER)
    assert run_.session_id in {session.pk for session in holding}
    # The next request carried the compaction item back: the model read our summary, and
    # the long replies of the middle are gone from what it read.
    [sent] = main_requests(upstream, LAST)
    text = json.dumps(sent["messages"], ensure_ascii=False)
    assert PREFIX_OPENING in text
    per_reply = LONG_REPLY["content"].count("batched its readings")
    assert text.count("batched its readings") < len(PROMPTS) * per_reply  # not all five replies
    assert turns_saying(sent["messages"], LAST)
