import pytest

from compaction import CompactionConfig, CompactionOutcome, should_compact
from compaction.trigger import compute_threshold


@pytest.mark.parametrize(
    ("context_length", "threshold"),
    [(200_000, 100_000), (1_000_000, 500_000), (100_000, 64_000), (32_000, 64_000)],
)
def test_threshold_is_half_the_window_never_below_64k(context_length, threshold):
    assert compute_threshold(CompactionConfig(context_length=context_length)) == threshold


def test_below_and_at_threshold():
    config = CompactionConfig()
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
    config = CompactionConfig(context_length=32_000)
    assert not should_compact(32_000, config).should
