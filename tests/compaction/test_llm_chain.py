from datetime import date

import pytest

from compaction import CompactionConfig, LLMSummarizer, compact

from .builders import long_conversation

CONFIG = CompactionConfig(tail_token_budget=300)
DAY = date(2026, 1, 2)


def chain(server, **kw):
    options = {"api_base": server.base_url, "api_key": "x", "timeout": 5, "max_retries": 0}
    options.update(kw)
    return LLMSummarizer("openai/fake-aux", "openai/fake-main", **options)


def run(server, config=CONFIG, **kw):
    messages = long_conversation()
    result = compact(messages, config=config, summarizer=chain(server, **kw), now=DAY)
    return messages, result


def test_aux_model_writes_the_summary(fake_openai):
    fake_openai.enqueue({"content": "## Active Task\nAUX SUMMARY", "prompt_tokens": 900})
    _, result = run(fake_openai)
    report = result.report
    assert report.status == "compacted"
    assert (report.summarizer, report.summarizer_model) == ("aux", "openai/fake-aux")
    # The engine appends the fact ledger to the model's narrative.
    assert report.summary_body.startswith("## Active Task\nAUX SUMMARY\n\n## Fact Ledger\n")
    assert "AUX SUMMARY" in result.messages[result.summary_index]["content"]
    (request,) = fake_openai.requests
    assert request["model"] == "fake-aux"
    assert request["messages"] == [{"role": "user", "content": report.summarizer_prompt}]
    assert "TURNS TO SUMMARIZE:" in report.summarizer_prompt
    assert report.fallbacks == ()


@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        ({"status": 429}, "rate_limit", 429),
        ({"status": 500}, "server_error", 500),
        ({"status": 503}, "server_error", 503),
        ({"content": ""}, "empty_content", None),
        ({"content": "partial", "finish_reason": "length"}, "truncated", None),
    ],
)
def test_aux_failure_falls_through_to_main(fake_openai, reply, kind, status):
    fake_openai.enqueue(reply, {"content": "MAIN SUMMARY"})
    _, result = run(fake_openai)
    assert result.report.summarizer == "main"
    assert result.report.summarizer_model == "openai/fake-main"
    (fallback,) = result.report.fallbacks
    assert (fallback["stage"], fallback["model"], fallback["kind"]) == (
        "aux",
        "openai/fake-aux",
        kind,
    )
    assert fallback["status_code"] == status
    assert [r["model"] for r in fake_openai.requests] == ["fake-aux", "fake-main"]


def test_aux_timeout_falls_through_to_main(fake_openai):
    fake_openai.enqueue({"sleep": 2.5, "content": "too late"}, {"content": "MAIN SUMMARY"})
    _, result = run(fake_openai, timeout=1)
    assert result.report.summarizer == "main"
    assert result.report.fallbacks[0]["kind"] == "timeout"


def test_both_failing_falls_back_to_deterministic_with_errors(fake_openai):
    fake_openai.enqueue({"status": 500}, {"status": 429})
    messages, result = run(fake_openai)
    report = result.report
    assert report.status == "compacted"
    assert report.summarizer == "deterministic"
    assert report.summarizer_model is None
    assert [(f["stage"], f["kind"]) for f in report.fallbacks] == [
        ("aux", "server_error"),
        ("main", "rate_limit"),
    ]
    assert report.summarizer_prompt  # the LLM was tried
    assert "## Completed Actions" in report.summary_body


@pytest.mark.parametrize("status", [401, 403])
def test_auth_error_aborts_and_leaves_messages_unchanged(fake_openai, status):
    fake_openai.enqueue({"status": status})
    messages, result = run(fake_openai)
    assert result.report.status == "aborted"
    assert result.report.reason == "summary_auth_error"
    assert result.messages == messages
    assert result.summary_index is None
    assert len(fake_openai.requests) == 1  # main is not tried after an auth failure
    assert result.report.fallbacks[0]["kind"] == "auth"


def test_abort_on_summary_failure_aborts_instead_of_deterministic(fake_openai):
    fake_openai.enqueue({"status": 500}, {"status": 500})
    config = CompactionConfig(tail_token_budget=300, abort_on_summary_failure=True)
    messages, result = run(fake_openai, config=config)
    assert result.report.status == "aborted"
    assert result.report.reason == "summary_failed"
    assert result.messages == messages
    assert len(result.report.fallbacks) == 2


def test_connection_refused_falls_through():
    summarizer = LLMSummarizer(
        "openai/fake-aux", api_base="http://127.0.0.1:9/v1", api_key="x", timeout=2, max_retries=0
    )
    result = compact(long_conversation(), config=CONFIG, summarizer=summarizer, now=DAY)
    assert result.report.summarizer == "deterministic"
    assert result.report.fallbacks[0]["kind"] in {"connection", "server_error"}


def test_iterative_update_sends_the_previous_summary(fake_openai):
    fake_openai.enqueue({"content": "## Active Task\nFIRST"}, {"content": "## Active Task\nSECOND"})
    _, first = run(fake_openai)
    more = first.messages + long_conversation(6)[1:]
    second = compact(
        more, config=CONFIG, summarizer=chain(fake_openai), now=DAY, focus="exit codes"
    )
    prompt = fake_openai.requests[1]["messages"][0]["content"]
    assert "PREVIOUS SUMMARY:\n## Active Task\nFIRST" in prompt
    assert "NEW TURNS TO INCORPORATE:" in prompt
    assert 'FOCUS TOPIC: "exit codes"' in prompt
    assert second.report.previous_summary_used
    assert "[CONTEXT COMPACTION" not in prompt.split("NEW TURNS TO INCORPORATE:")[1]


def test_fake_server_streams_with_usage(fake_openai):
    import litellm

    fake_openai.enqueue(
        {"content": "hello streaming world", "prompt_tokens": 7, "completion_tokens": 3}
    )
    stream = litellm.completion(
        model="openai/fake",
        api_base=fake_openai.base_url,
        api_key="x",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
        max_retries=0,
    )
    pieces, usage = [], None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if getattr(chunk, "usage", None):
            usage = chunk.usage
    assert "".join(pieces) == "hello streaming world"
    assert usage.prompt_tokens == 7
    assert fake_openai.requests[0]["stream"] is True
