"""When to compact: the threshold and the anti-thrash rule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compaction.config import CompactionConfig

__all__ = ["CompactionDecision", "CompactionOutcome", "compute_threshold", "should_compact"]


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """Token counts around one past compaction.

    Attributes:
        tokens_before: tokens of the conversation before the compaction.
        tokens_after: tokens after it.
    """

    tokens_before: int
    tokens_after: int

    @property
    def saving(self) -> float:
        """Fraction of tokens saved (0 when nothing was there)."""
        if self.tokens_before <= 0:
            return 0.0
        return (self.tokens_before - self.tokens_after) / self.tokens_before


@dataclass(frozen=True, slots=True)
class CompactionDecision:
    """The verdict of ``should_compact``.

    Attributes:
        should: compact now?
        reason: ``"forced"``, ``"threshold"``, ``"below_threshold"`` or ``"ineffective"``.
        threshold: the trigger in tokens.
    """

    should: bool
    reason: str
    threshold: int


def compute_threshold(config: CompactionConfig) -> int:
    """``max(int(threshold_percent × context_length), min_threshold_tokens)``.

    The seed says "never below 64,000", so with a window smaller than the floor the
    automatic trigger can never be reached; manual (forced) compaction still works.
    """
    return config.threshold_tokens


def _as_outcome(item: CompactionOutcome | Sequence[int]) -> CompactionOutcome:
    if isinstance(item, CompactionOutcome):
        return item
    before, after = item
    return CompactionOutcome(int(before), int(after))


def should_compact(
    prompt_tokens: int,
    config: CompactionConfig,
    history: Sequence[CompactionOutcome | Sequence[int]] = (),
    force: bool = False,
) -> CompactionDecision:
    """Decide whether to compact now.

    Args:
        prompt_tokens: the provider's ``usage.prompt_tokens`` of the latest request.
        config: the thresholds.
        history: past compactions of this conversation, newest last, as
            ``CompactionOutcome`` or ``(tokens_before, tokens_after)`` pairs.
        force: a manual request (``/compress``): always compact.

    Returns:
        ``should=True`` with reason ``"forced"`` or ``"threshold"``; otherwise ``should=False``
        with ``"below_threshold"``, or ``"ineffective"`` when each of the last
        ``anti_thrash_window`` compactions saved less than ``anti_thrash_min_saving``.
    """
    threshold = compute_threshold(config)
    if force:
        return CompactionDecision(True, "forced", threshold)
    if prompt_tokens < threshold:
        return CompactionDecision(False, "below_threshold", threshold)
    window = config.anti_thrash_window
    recent = [_as_outcome(item) for item in history][-window:]
    if len(recent) >= window and all(o.saving < config.anti_thrash_min_saving for o in recent):
        return CompactionDecision(False, "ineffective", threshold)
    return CompactionDecision(True, "threshold", threshold)
