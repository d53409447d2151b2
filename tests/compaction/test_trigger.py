import pytest

from compaction import CompactionConfig, CompactionOutcome, should_compact
from compaction.trigger import compute_threshold


@pytest.mark.parametrize(
    ("context_length", "threshold"),
    [(200_000, 100_000), (1_000_000, 500_000), (100_000, 64_000), (32_000, 64_000)],
)
def test_threshold_is_half_the_window_never_below_64k(context_length, threshold):
    config = CompactionConfig(context_length=context_length, profile="classic")
    assert compute_threshold(config) == threshold


def test_below_and_at_threshold():
    config = CompactionConfig(profile="classic")
    assert should_compact(99_999, config).reason == "below_threshold"
    assert not should_compact(99_999, config).should
    decision = should_compact(100_000, config)
    assert decision.should
    assert decision.reason == "threshold"
    assert decision.threshold == 100_000


def test_force_always_goes():
    decision = should_compact(10, CompactionConfig(), history=[(100, 99), (100, 99)], force=True)
    assert decision.should
    assert decision.reason == "forced"


def test_two_ineffective_compactions_skip_auto():
    history = [CompactionOutcome(150_000, 140_000), CompactionOutcome(150_000, 139_000)]
    decision = should_compact(150_000, CompactionConfig(), history=history)
    assert not decision.should
    assert decision.reason == "ineffective"


@pytest.mark.parametrize(
    "history",
    [
        [(150_000, 140_000)],  # only one compaction so far
        [(150_000, 140_000), (150_000, 100_000)],  # the latest one saved 33 %
        [(150_000, 100_000), (150_000, 140_000)],  # the earlier one saved 33 %
        [(150_000, 140_000), (150_000, 135_000)],  # exactly 10 % is not ineffective
        [(0, 0), (150_000, 10_000)],
    ],
)
def test_anti_thrash_needs_both_latest_to_be_ineffective(history):
    assert should_compact(150_000, CompactionConfig(), history=history).should


def test_only_the_latest_window_counts():
    history = [(150_000, 149_000), (150_000, 149_000), (150_000, 10_000)]
    assert should_compact(150_000, CompactionConfig(), history=history).should


def test_small_window_never_reaches_the_floor():
    config = CompactionConfig(context_length=32_000, profile="classic")
    assert not should_compact(32_000, config).should


@pytest.mark.parametrize(
    ("context_length", "threshold"),
    [
        (200_000, 150_000),
        (1_000_000, 500_000),
        (128_000, 96_000),
        (100_000, 75_000),
        (64_000, 54_400),
        (32_000, 27_200),
        (8_000, 6_800),
    ],
)
def test_hermes_threshold_is_always_below_the_window(context_length, threshold):
    # Reference §10.1 (its examples: 128K -> 96K, 200K -> 150K, 64K -> 54.4K): the percent
    # is raised to 75 % under a 512K window, and the 64K floor is capped at 85 % of it.
    config = CompactionConfig(context_length=context_length)
    assert compute_threshold(config) == threshold < context_length
    assert config.threshold_lowered == (context_length <= 64_000)


@pytest.mark.parametrize("percent", [0.5, 0.9, 1.0])
def test_hermes_threshold_never_reaches_the_window_whatever_the_percent(percent):
    config = CompactionConfig(
        context_length=50_000, threshold_percent=percent, min_threshold_tokens=0
    )
    assert 0 < config.threshold_tokens < 50_000


@pytest.mark.parametrize(
    ("context_length", "tail"), [(8_000, 1_600), (64_000, 12_800), (200_000, 20_000)]
)
def test_hermes_tail_is_at_most_a_fifth_of_the_window(context_length, tail):
    assert CompactionConfig(context_length=context_length).tail_budget_tokens == tail
    assert (
        CompactionConfig(context_length=context_length, profile="classic").tail_budget_tokens
        == 20_000
    )


def test_small_window_compacts_before_it_overflows():
    config = CompactionConfig(context_length=8_000)
    assert should_compact(6_800, config).should
    assert not should_compact(6_799, config).should


@pytest.mark.parametrize(
    ("percent", "context_length", "threshold"),
    [
        (0.5, 511_999, 383_999),  # under 512K: raised to 75 %
        (0.5, 512_000, 256_000),  # 512K and over: the configured percent
        (0.9, 200_000, 180_000),  # raised to at least 75 %, never lowered
        (0.6, 400_000, 300_000),
    ],
)
def test_hermes_percent_is_at_least_75_under_a_512k_window(percent, context_length, threshold):
    config = CompactionConfig(context_length=context_length, threshold_percent=percent)
    assert config.effective_threshold_percent == max(
        percent, 0.75 if context_length < 512_000 else 0.0
    )
    assert config.threshold_tokens == threshold


def test_the_75_percent_rule_is_hermes_only_and_configurable():
    classic = CompactionConfig(context_length=200_000, profile="classic")
    assert (classic.effective_threshold_percent, classic.threshold_tokens) == (0.5, 100_000)
    lowered = CompactionConfig(context_length=200_000, threshold_min_percent=0.6)
    assert lowered.threshold_tokens == 120_000
    off = CompactionConfig(context_length=200_000, threshold_raise_below=0)
    assert off.threshold_tokens == 100_000


def test_should_compact_uses_the_raised_threshold():
    config = CompactionConfig(context_length=200_000)
    assert should_compact(149_999, config).reason == "below_threshold"
    assert should_compact(150_000, config).should
