"""Without cached counts the hermes profile estimates the middle and counts exactly only the
head and the rows its cut, passes and make-room step decide on; the report says which
figures are estimates."""

from datetime import date

from compaction import CompactionConfig, compact, count_messages_tokens, generate_conversation
from compaction.tokens import estimate_message_tokens


def test_uncached_long_conversations_estimate_the_middle_and_say_so():
    messages = generate_conversation(600, seed=5)
    config = CompactionConfig()
    out = compact(messages, config=config, now=date(2026, 1, 1), force=True)
    report = out.report.to_dict()
    assert set(report["tokens_estimated"]) >= {"before", "middle", "saved", "ratio"}
    exact = count_messages_tokens(messages, config)
    head, tail = report["boundaries"]["head"], report["boundaries"]["tail"]
    got = report["message_tokens"]
    # Head and tail rows kept verbatim are exact; a row a pass rewrote there (a fold line)
    # keeps its estimate as input count, and the report says the spans hold estimates. The
    # after figure is counted, not estimated.
    rewritten = {a["index"] for a in report["slimming"] if a["region"] in ("head", "tail")}
    assert rewritten  # this conversation has folded tail rows
    for i in [*range(*head), *range(*tail)]:
        want = estimate_message_tokens(messages[i], config) if i in rewritten else exact[i]
        assert got[i] == want or got[i] == exact[i], i
    assert any(got[i] != exact[i] for i in rewritten)
    assert "tail" in report["tokens_estimated"]
    assert "after" not in report["tokens_estimated"]
    assert report["tokens"]["after"] == sum(report["output_message_tokens"])
    # Some middle row is an estimate (4 chars a token), not its exact count.
    middle = range(*report["boundaries"]["middle"])
    assert any(got[i] != exact[i] for i in middle)
    assert all(
        got[i] == estimate_message_tokens(messages[i], config) or got[i] == exact[i] for i in middle
    )


def test_cached_counts_classic_and_short_conversations_are_exact():
    messages = generate_conversation(600, seed=5)
    exact = count_messages_tokens(messages, CompactionConfig())
    cached = compact(messages, token_counts=exact, now=date(2026, 1, 1), force=True)
    assert cached.report.tokens_estimated == ()
    classic = compact(messages, config=CompactionConfig(profile="classic"), force=True)
    assert classic.report.tokens_estimated == ()
    assert list(classic.report.message_tokens) == exact
    short = compact(generate_conversation(100, seed=5), force=True)
    assert short.report.tokens_estimated == ()
