"""The summary, by purpose: markers (``compaction.markers``), the summarizer prompt
(``compaction.prompt``) and the deterministic summary (``compaction.deterministic``).

This module re-exports their names, so ``from compaction.summary import …`` keeps working
for the web layer and tests. Nothing in ``compaction`` imports it: the dependency runs one way
(markers, prompt, facts ← resume ← deterministic ← summarizer ← engine; summary re-exports).
"""

from __future__ import annotations

from compaction.deterministic import _PATH_KEYS, _PATH_RE, deterministic_summary, gather_middle
from compaction.facts import MiddleGathered, SummaryFacts
from compaction.markers import (
    _OPENINGS,
    COMPACTION_NOTE,
    END_MARKER,
    LEGACY_PREFIXES,
    MERGED_CLOSE,
    MERGED_OPEN,
    PREFIX_OPENING,
    SUMMARY_PREFIX,
    is_summary_message,
    is_summary_text,
    split_summary,
    wrap_summary,
)
from compaction.prompt import SECTIONS, build_prompt, summary_budget_tokens, summary_template

__all__ = [
    "COMPACTION_NOTE",
    "END_MARKER",
    "LEGACY_PREFIXES",
    "MERGED_CLOSE",
    "MERGED_OPEN",
    "PREFIX_OPENING",
    "SECTIONS",
    "SUMMARY_PREFIX",
    "MiddleGathered",
    "SummaryFacts",
    "build_prompt",
    "deterministic_summary",
    "gather_middle",
    "is_summary_message",
    "is_summary_text",
    "split_summary",
    "summary_budget_tokens",
    "summary_template",
    "wrap_summary",
]
_PRIVATE_REEXPORTS = (_OPENINGS, _PATH_KEYS, _PATH_RE)  # used by tests and older imports
