"""``CompactionConfig``: every number the engine uses, with the seed's defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compaction.errors import ConfigError

__all__ = ["PROFILES", "SANITIZE_MODES", "CompactionConfig"]

SANITIZE_MODES = ("stub", "strip")
PROFILES = ("hermes", "classic")
# The hermes summary body is never bounded below this unless resume_summary_max_chars asks
# for less (``CompactionConfig.summary_chars``).
SUMMARY_FLOOR_CHARS = 1_000


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """Settings for one compaction. Defaults are the seed's numbers.

    Attributes:
        context_length: the model's context window in tokens.
        threshold_percent: trigger at this fraction of ``context_length``.
        min_threshold_tokens: the trigger is never below this many tokens. When
            ``context_length`` is smaller than this floor the automatic trigger can never fire
            (the seed says "never below 64,000"); manual compaction still works.
        protect_first_n: messages after the system prompt kept verbatim in the head.
        tail_token_budget: newest messages kept verbatim, up to this many tokens.
        fold_min_chars: tool results in the middle longer than this are folded to one line.
        content_max: summarizer input only: a message longer than this is truncated ...
        content_head: ... to its first ``content_head`` chars ...
        content_tail: ... plus its last ``content_tail`` chars.
        summary_input_max_chars: cap on the whole serialized summarizer input.
        anti_thrash_min_saving: a compaction that saved less than this fraction is ineffective.
        anti_thrash_window: automatic compaction is skipped when this many latest
            compactions were all ineffective.
        abort_on_summary_failure: abort instead of using the deterministic summary when the
            LLM summarizers fail.
        model: model name used to pick the tiktoken encoding (fallback ``o200k_base``).
        per_message_overhead: tokens added per message for role and framing.
        image_tokens: flat token cost of one image part (base64 is never tokenized).
        decay_head_after_first: Hermes's later behaviour: once a previous summary exists the
            head shrinks to the system prompt only.
        sanitize_mode: ``"stub"`` (seed) inserts a stub result for a call whose result is
            gone; ``"strip"`` (Hermes today) removes the call instead.
        summary_max_chars: size bound of the deterministic summary body.
        profile: ``"hermes"`` (default) runs the window-aware budgets and the slimming passes
            below; ``"classic"`` is the seed's engine exactly (the fields below are ignored).
        tail_max_fraction: hermes: the tail budget is capped at this fraction of the window.
        threshold_min_percent: hermes: for a window under ``threshold_raise_below`` tokens
            the trigger percent is raised to at least this (reference §10.1 step 2: 0.75) ...
        threshold_raise_below: ... windows of this many tokens or more keep
            ``threshold_percent`` as it is.
        threshold_window_fraction: hermes: when the ``min_threshold_tokens`` floor would put
            the trigger above this fraction of the window, the trigger is this fraction
            instead (reference §10.1: 85 %), so it is always below the window.
        prune_floor_messages: hermes: the newest messages never folded by the prune pass.
        dedup_min_chars: hermes: tool outputs at least this long are deduplicated (newest kept).
        args_shrink_min_chars: hermes: tool-call arguments longer than this are shrunk ...
        args_leaf_chars: ... each string leaf longer than this keeps this many chars.
        keep_tool_images: hermes: only the newest N image-bearing tool results keep images.
        pressure_keep_recent: hermes: pressure demotion never touches the newest N messages
            until the last stage.
        lean_tail_keep_rounds: hermes: the newest N tool rounds of the tail stay verbatim ...
        lean_tail_min_chars: ... older tail tool results at least this long become stubs.
        summary_window_fraction: hermes: the deterministic summary is bounded by this fraction
            of the window (as 4 chars per token) ...
        resume_summary_max_chars: ... and by this many chars (it keeps every path, command
            and error line it can, so it is allowed more room than the classic summary).
    """

    context_length: int = 200_000
    threshold_percent: float = 0.50
    min_threshold_tokens: int = 64_000
    protect_first_n: int = 3
    tail_token_budget: int = 20_000
    fold_min_chars: int = 200
    content_max: int = 6_000
    content_head: int = 4_000
    content_tail: int = 1_500
    summary_input_max_chars: int = 160_000
    anti_thrash_min_saving: float = 0.10
    anti_thrash_window: int = 2
    abort_on_summary_failure: bool = False
    model: str = "gpt-4o-mini"
    per_message_overhead: int = 4
    image_tokens: int = 1_600
    decay_head_after_first: bool = False
    sanitize_mode: str = "stub"
    summary_max_chars: int = 12_000
    profile: str = "hermes"
    tail_max_fraction: float = 0.20
    threshold_window_fraction: float = 0.85
    prune_floor_messages: int = 8
    dedup_min_chars: int = 200
    args_shrink_min_chars: int = 500
    args_leaf_chars: int = 200
    keep_tool_images: int = 3
    pressure_keep_recent: int = 3
    lean_tail_keep_rounds: int = 6
    lean_tail_min_chars: int = 1_500
    summary_window_fraction: float = 0.05
    resume_summary_max_chars: int = 40_000
    threshold_min_percent: float = 0.75
    threshold_raise_below: int = 512_000

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _check_field(f.name, getattr(self, f.name), f.type)
        if self.content_head + self.content_tail > self.content_max:
            raise ConfigError(
                "content_head", "content_head + content_tail must not exceed content_max"
            )

    @property
    def effective_threshold_percent(self) -> float:
        """The trigger percent used: classic ``threshold_percent``; hermes raises it to at
        least ``threshold_min_percent`` when the window is under ``threshold_raise_below``
        tokens (reference §10.1 step 2)."""
        if self.profile == "classic" or self.context_length >= self.threshold_raise_below:
            return self.threshold_percent
        return max(self.threshold_percent, self.threshold_min_percent)

    @property
    def threshold_tokens(self) -> int:
        """The automatic trigger in tokens.

        classic: ``max(int(percent × window), min_threshold_tokens)`` (may reach or pass the
        window). hermes (reference §10.1): the same with ``effective_threshold_percent``, but
        when the floor lifts it above ``threshold_window_fraction × window`` it is
        ``max(int(percent × window), int(fraction × window))``, and it is always at most
        ``window − 1``.
        """
        percent = self.effective_threshold_percent
        raw = max(int(percent * self.context_length), self.min_threshold_tokens)
        if self.profile == "classic":
            return raw
        window = self.context_length
        base = int(percent * window)
        capped = int(self.threshold_window_fraction * window)
        threshold = raw
        if raw > base and raw > capped:  # the floor binds above the cap
            threshold = max(base, capped)
        if threshold >= window:
            threshold = max(1, min(capped, window - 1))
        return threshold

    @property
    def threshold_lowered(self) -> bool:
        """hermes: True when the classic trigger would sit at or above the window."""
        percent = self.effective_threshold_percent
        raw = max(int(percent * self.context_length), self.min_threshold_tokens)
        return self.profile != "classic" and raw >= self.context_length

    @property
    def tail_budget_tokens(self) -> int:
        """The tail budget: classic ``tail_token_budget``; hermes
        ``max(1, min(tail_token_budget, int(tail_max_fraction × window)))``."""
        if self.profile == "classic":
            return self.tail_token_budget
        capped = int(self.tail_max_fraction * self.context_length)
        return max(1, min(self.tail_token_budget, capped))

    @property
    def summary_chars(self) -> int:
        """Bound of the deterministic summary body: classic ``summary_max_chars``; hermes
        ``max(floor, min(resume_summary_max_chars, int(summary_window_fraction × window × 4)))``
        where the floor is 1,000 unless ``resume_summary_max_chars`` asks for less (a replay
        aimed at an agent's small retained budget does; the defaults never reach it)."""
        if self.profile == "classic":
            return self.summary_max_chars
        scaled = int(self.summary_window_fraction * self.context_length * 4)
        floor = min(SUMMARY_FLOOR_CHARS, self.resume_summary_max_chars)
        return max(floor, min(self.resume_summary_max_chars, scaled))

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-serializable dict."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionConfig:
        """Build a config from user input (form, API, JSON), validating every field.

        Missing keys take their defaults. Integers are accepted for float fields.

        Raises:
            ConfigError: (a ``ValueError``) naming the first bad or unknown field.
        """
        if not isinstance(data, Mapping):
            raise ConfigError("config", "expected a mapping of field names to values")
        names = {f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in names:
                raise ConfigError(str(key), "unknown field")
        values = dict(data)
        for f in dataclasses.fields(cls):
            if f.name in values and f.type == "float" and _is_int(values[f.name]):
                values[f.name] = float(values[f.name])
        return cls(**values)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_RANGES: dict[str, tuple[float, float]] = {
    "context_length": (1, float("inf")),
    "threshold_percent": (0.0, 1.0),
    "min_threshold_tokens": (0, float("inf")),
    "protect_first_n": (0, 10_000),
    "tail_token_budget": (0, float("inf")),
    "fold_min_chars": (0, float("inf")),
    "content_max": (1, float("inf")),
    "content_head": (0, float("inf")),
    "content_tail": (0, float("inf")),
    "summary_input_max_chars": (1_000, float("inf")),
    "anti_thrash_min_saving": (0.0, 1.0),
    "anti_thrash_window": (1, 100),
    "per_message_overhead": (0, 1_000),
    "image_tokens": (0, 1_000_000),
    "summary_max_chars": (1_000, float("inf")),
    "tail_max_fraction": (0.01, 1.0),
    "threshold_window_fraction": (0.05, 0.99),
    "prune_floor_messages": (0, 10_000),
    "dedup_min_chars": (1, float("inf")),
    "args_shrink_min_chars": (1, float("inf")),
    "args_leaf_chars": (1, float("inf")),
    "keep_tool_images": (0, 10_000),
    "pressure_keep_recent": (0, 10_000),
    "lean_tail_keep_rounds": (0, 10_000),
    "lean_tail_min_chars": (1, float("inf")),
    "summary_window_fraction": (0.001, 1.0),
    # Below the 1,000-character floor only when asked for (``summary_chars``): a replay aimed
    # at an agent's retained budget of a few hundred tokens.
    "resume_summary_max_chars": (1, float("inf")),
    "threshold_min_percent": (0.0, 1.0),
    "threshold_raise_below": (0, float("inf")),
}


def _check_field(name: str, value: Any, type_name: Any) -> None:
    if type_name == "int":
        if not _is_int(value):
            raise ConfigError(name, f"expected an integer, got {type(value).__name__}")
    elif type_name == "float":
        if not isinstance(value, float):
            raise ConfigError(name, f"expected a number, got {type(value).__name__}")
        if value != value:  # NaN
            raise ConfigError(name, "must be a number, not NaN")
    elif type_name == "bool":
        if not isinstance(value, bool):
            raise ConfigError(name, f"expected true or false, got {type(value).__name__}")
    elif type_name == "str" and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(name, "expected a non-empty string")
    low, high = _RANGES.get(name, (float("-inf"), float("inf")))
    if isinstance(value, int | float) and not isinstance(value, bool) and not low <= value <= high:
        raise ConfigError(name, f"must be between {low:g} and {high:g}, got {value!r}")
    if name == "threshold_percent" and value <= 0:
        raise ConfigError(name, "must be greater than 0")
    if name == "profile" and value not in PROFILES:
        raise ConfigError(name, f"must be one of {', '.join(PROFILES)}, got {value!r}")
    if name == "sanitize_mode" and value not in SANITIZE_MODES:
        raise ConfigError(name, f"must be one of {', '.join(SANITIZE_MODES)}, got {value!r}")
