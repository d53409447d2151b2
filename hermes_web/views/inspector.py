"""The inspector's views, by purpose: ``compactions`` (the inspector page, exports, commit,
home), ``what_if``, ``lineage`` (rotation tree, timeline) and ``compare``.

Re-exported here so URLs and other modules keep one place to import them from.
"""

from hermes_web.presenters.inspector import inspector_context
from hermes_web.views.compactions import (
    INLINE_MAX_MESSAGES,
    audit_for,
    commit_compaction,
    compaction_audit,
    compaction_detail,
    compaction_final_list,
    compaction_report_json,
    compaction_report_md,
    compaction_summarizer_text,
    compaction_undo,
    final_rows,
    home_context,
)
from hermes_web.views.compare import compare
from hermes_web.views.lineage import compaction_tally, conversation_timeline, conversation_tree
from hermes_web.views.what_if import (
    PROFILES,
    WHAT_IF_FIELDS,
    engine_has_profiles,
    parameters_used,
    threshold_note,
    what_if,
)

__all__ = [
    "INLINE_MAX_MESSAGES",
    "PROFILES",
    "WHAT_IF_FIELDS",
    "audit_for",
    "commit_compaction",
    "compaction_audit",
    "compaction_detail",
    "compaction_final_list",
    "compaction_report_json",
    "compaction_report_md",
    "compaction_summarizer_text",
    "compaction_undo",
    "compaction_tally",
    "compare",
    "conversation_timeline",
    "conversation_tree",
    "engine_has_profiles",
    "final_rows",
    "home_context",
    "inspector_context",
    "parameters_used",
    "threshold_note",
    "what_if",
]
