"""Hermes-style context compaction for OpenAI-format conversations, framework-free.

::

    from compaction import compact, CompactionConfig, should_compact

    decision = should_compact(prompt_tokens, CompactionConfig(context_length=200_000))
    if decision.should:
        result = compact(messages, config=CompactionConfig(context_length=200_000))
        result.messages          # head + summary + tail, provider-valid
        result.report.to_dict()  # everything the inspector shows

Nothing here imports Django or the web layer; litellm is imported lazily by
``LLMSummarizer`` only.
"""

from compaction.config import CompactionConfig
from compaction.engine import CompactionResult, compact
from compaction.errors import CompactionError, ConfigError, InputError, SummaryAborted, SummaryError
from compaction.markers import END_MARKER, PREFIX_OPENING, SUMMARY_PREFIX
from compaction.report import CompactionReport, report_to_markdown
from compaction.sanitize import validate_tool_pairs
from compaction.summarizer import (
    DeterministicSummarizer,
    FallbackError,
    LLMSummarizer,
    Summarizer,
    SummaryOutcome,
    SummaryRequest,
)
from compaction.synthetic import generate_conversation
from compaction.tokens import TokenCounter, count_message_tokens, count_messages_tokens
from compaction.trigger import CompactionDecision, CompactionOutcome, should_compact

__all__ = [
    "CompactionConfig",
    "CompactionDecision",
    "CompactionError",
    "CompactionOutcome",
    "CompactionReport",
    "CompactionResult",
    "ConfigError",
    "DeterministicSummarizer",
    "END_MARKER",
    "FallbackError",
    "InputError",
    "LLMSummarizer",
    "PREFIX_OPENING",
    "SUMMARY_PREFIX",
    "Summarizer",
    "SummaryAborted",
    "SummaryError",
    "SummaryOutcome",
    "SummaryRequest",
    "TokenCounter",
    "compact",
    "count_message_tokens",
    "count_messages_tokens",
    "generate_conversation",
    "report_to_markdown",
    "should_compact",
    "validate_tool_pairs",
]
