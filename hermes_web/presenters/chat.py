"""The chat page's presenter: messages as chat items (Markdown made safe, tool calls paired
with their results), the sidebar's rotation chains, and a compaction's outcome in words.

Markdown from a model is rendered with python-markdown and then sanitized with nh3 (an
allow-list: no scripts, no event handlers, no ``javascript:`` links, no remote images), so a
reply can format text but never run anything. Tool output is never rendered as Markdown, only
escaped by the template. Images are shown only from ``data:image/...;base64`` parts of a
message, never from URLs a model wrote.
"""

from __future__ import annotations

import json
from typing import Any

import markdown as markdown_lib
import nh3
from django.urls import reverse
from django.utils import timezone

from compaction.messages import content_text
from compaction.slimming import fold_tool_result
from hermes_web.models import Compaction, Message, Session
from hermes_web.presenters.messages import image_views
from hermes_web.presenters.refs import FOLDED_MAX_CHARS, RefResolver, lineage_runs
from hermes_web.validation import scrub_surrogates

ALLOWED_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "details",
    "div",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "kbd",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "span",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "th": {"align"}, "td": {"align"}}
OUTPUT_PREVIEW_CHARS = 20_000


def render_markdown(text: str) -> str:
    """Safe HTML for a model's Markdown (the only string a template may mark safe)."""
    html = markdown_lib.markdown(
        # nh3 (Rust) takes only valid Unicode: a stored lone surrogate becomes U+FFFD.
        scrub_surrogates(text),
        extensions=["fenced_code", "tables", "sane_lists"],
        output_format="html",
    )
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


def _pretty_arguments(raw: Any) -> tuple[dict, str]:
    if isinstance(raw, dict):
        return raw, json.dumps(raw, indent=2, ensure_ascii=False)
    try:
        parsed = json.loads(raw or "{}")
    except ValueError:
        return {}, str(raw)
    if not isinstance(parsed, dict):
        return {}, str(raw)
    return parsed, json.dumps(parsed, indent=2, ensure_ascii=False)


def _pretty_output(text: str) -> str:
    # JSON tool outputs read better unwrapped: numbered file content, terminal output.
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict):
        for key in ("content", "output"):
            if isinstance(data.get(key), str) and len(data) <= 6:
                rest = {k: v for k, v in data.items() if k != key}
                return f"{json.dumps(rest, ensure_ascii=False)}\n\n{data[key]}"
        return json.dumps(data, indent=2, ensure_ascii=False)
    return text


def chat_items(rows: list[Message]) -> list[dict[str, Any]]:
    """Display items: each assistant message carries its calls with their results inlined."""
    results = {
        row.tool_call_id: row for row in rows if row.role == Message.Role.TOOL and row.tool_call_id
    }
    paired: set[int] = set()
    items = []
    for row in rows:
        if row.role == Message.Role.TOOL and row.pk in paired:
            continue
        text = content_text(row.content, images=False)
        item: dict[str, Any] = {
            "row": row,
            "role": row.role,
            "text": text,
            "images": image_views(row.content),
            "reasoning": content_text(row.reasoning, images=False) if row.reasoning else "",
            "html": render_markdown(text) if row.role == Message.Role.ASSISTANT and text else "",
            "calls": [],
        }
        # Stored rows may predate the entrance checks: a call that is not an object, or an
        # object without a function, still renders (as "?") instead of failing the page.
        calls = row.tool_calls if isinstance(row.tool_calls, list) else []
        for raw_call in calls:
            call = raw_call if isinstance(raw_call, dict) else {}
            raw_function = call.get("function")
            function = raw_function if isinstance(raw_function, dict) else {}
            name = str(function.get("name") or "?")
            args, pretty = _pretty_arguments(function.get("arguments"))
            raw_id = call.get("id")
            call_id = raw_id if isinstance(raw_id, str) else ""
            result = results.get(call_id)
            entry: dict[str, Any] = {
                "id": call_id,
                "name": name,
                "arguments": pretty,
                "one_line": "",
                "output": "",
                "output_chars": 0,
                "pending": result is None,
            }
            if result is not None:
                paired.add(result.pk)
                output = content_text(result.content, images=False)
                entry["raw_output"] = output
                entry["one_line"] = fold_tool_result(name, args, output)
                entry["output_chars"] = len(output)
                pretty_output = _pretty_output(output)
                entry["output"] = pretty_output[:OUTPUT_PREVIEW_CHARS]
                entry["output_cut"] = max(0, len(pretty_output) - OUTPUT_PREVIEW_CHARS)
                entry["error"] = output.startswith('{"error"')
            item["calls"].append(entry)
        if row.role == Message.Role.TOOL:
            item["raw_output"] = text
            item["one_line"] = fold_tool_result(row.tool_name or "tool", {}, text)
            item["output"] = _pretty_output(text)[:OUTPUT_PREVIEW_CHARS]
            item["output_chars"] = len(text)
        items.append(item)
    return items


def restore_folded(items: list[dict[str, Any]], session: Any) -> None:
    """Outputs that are a line an earlier compaction wrote in place of the original (a
    continuation session's copy of a fold or a stub) show the original output, its size
    and a link to its stored row (``original_href``), not the 72-character stub."""
    outputs = [
        entry
        for item in items
        for entry in [*item["calls"], item]
        if "[ref:" in str(entry.get("raw_output") or "")
        and len(str(entry["raw_output"])) <= FOLDED_MAX_CHARS
    ]
    if not outputs:
        return
    resolver = RefResolver(lineage_runs(session))
    for entry in outputs:
        found = resolver.folded_from(str(entry["raw_output"]))
        if found is None:
            continue
        original = Message.objects.filter(session__public_id=found[0], position=found[1]).first()
        if original is None:
            continue
        text = content_text(original.content, images=False)
        pretty = _pretty_output(text)
        entry["output"] = pretty[:OUTPUT_PREVIEW_CHARS]
        entry["output_cut"] = max(0, len(pretty) - OUTPUT_PREVIEW_CHARS)
        entry["output_chars"] = len(text)
        entry["original_href"] = reverse("message_detail", args=list(found))


# -- words for people ---------------------------------------------------------------------------


def compaction_outcome(run: Compaction) -> str:
    """What a compaction run did or why it did not, in a sentence (never a raw reason code)."""
    config = run.config or {}
    tail = config.get("tail_token_budget")
    head = config.get("protect_first_n")
    status = run.status
    if status == Compaction.Status.QUEUED:
        return "Queued: waiting for a worker to pick it up."
    if status == Compaction.Status.RUNNING:
        return "Running: summarizing the middle of the conversation."
    history = ((run.report or {}).get("undo") or {}).get("history") or []
    carried = history[-1].get("carried_messages") if history else 0
    carried_words = f"; {carried:,} later message(s) carried over" if carried else ""
    if status == Compaction.Status.UNDONE:
        return (
            "Undone: the context from before this compaction is restored"
            f"{carried_words}. Redo applies it again."
        )
    if status == Compaction.Status.COMMITTED:
        saved = ""
        if run.tokens_before and run.tokens_after is not None:
            saved = (
                f" {run.tokens_before:,} → {run.tokens_after:,} tokens"
                f" ({100 - round(100 * run.tokens_after / run.tokens_before)} % smaller)."
            )
        where = (
            "the conversation continues in a new session"
            if run.result_session_id and run.result_session_id != run.session_id
            else "older messages were archived in this session"
        )
        redone = " (redone after an undo)" if history else ""
        return f"Done{redone}: {where}{carried_words}.{saved}"
    reason = run.reason or ""
    words = {
        "nothing_to_compact": (
            "Nothing to compact: everything after the first "
            + (f"{head} messages" if head is not None else "messages")
            + " is within the protected tail"
            + (f" of {tail:,} tokens." if tail else ".")
        ),
        "summary_not_smaller": (
            "Not applied: the summary would not have been smaller than the messages it "
            "replaces, so the conversation was left as it was."
        ),
        "ineffective": (
            "Automatic compaction paused: the last compactions each saved too little "
            "(anti-thrash). It tries once more after a 5-minute cool-down; /compress forces "
            "one now."
        ),
        "locked": "Skipped: another compaction of this session was already running.",
        "superseded": "Skipped: this session had already continued in a new session.",
        "summary_auth_error": (
            "Stopped: the summary model refused the credentials; nothing was changed."
        ),
        "summary_failed": "Stopped: the summary could not be written; nothing was changed.",
    }
    if reason in words:
        return words[reason]
    if status == Compaction.Status.FAILED:
        return (
            "Failed: " + (run.error.splitlines()[0][:200] if run.error else "unknown error") + "."
        )
    if reason:
        return f"{run.get_status_display().capitalize()}: {reason.replace('_', ' ')}."
    return run.get_status_display().capitalize() + "."


# -- the sidebar --------------------------------------------------------------------------------


def chat_chains(user, *, limit: int = 50) -> list[dict[str, Any]]:
    """The sidebar: one entry per rotation chain (its live session first), newest first.

    Each entry: ``tip`` (the live session), ``sessions`` (the chain, latest first),
    ``compactions`` (the chain's compaction count) and ``label``: the title, with the date
    and a short id added when another chain has the same title.
    """
    rows = list(
        Session.objects.for_user(user)
        .filter(source=Session.Source.CHAT)
        .order_by("-updated_at")
        .only(
            "public_id",
            "title",
            "root_id",
            "parent_id",
            "end_reason",
            "compression_count",
            "created_at",
            "updated_at",
        )[: limit * 4]
    )
    return chains_of(rows, limit=limit)


def chains_of(rows, *, limit: int = 50, untitled: str = "Untitled chat") -> list[dict[str, Any]]:
    """Group sessions into rotation chains (the sidebar's and the conversation list's one
    presenter): see ``chat_chains`` for the entries' keys. ``rows`` may carry annotations."""
    chains: dict[int, dict[str, Any]] = {}
    for row in rows:
        key = row.root_id or row.pk
        chain = chains.setdefault(key, {"sessions": [], "tip": None, "compactions": 0})
        chain["sessions"].append(row)
        chain["compactions"] = max(chain["compactions"], row.compression_count)
    entries = []
    for chain in chains.values():
        chain["sessions"].sort(key=lambda s: (s.created_at, s.pk), reverse=True)
        live = [s for s in chain["sessions"] if not s.end_reason]
        chain["tip"] = live[0] if live else chain["sessions"][0]
        chain["updated_at"] = max(s.updated_at for s in chain["sessions"])
        entries.append(chain)
    entries.sort(key=lambda c: c["updated_at"], reverse=True)
    entries = entries[:limit]
    titles: dict[str, int] = {}
    for chain in entries:
        title = chain["tip"].title or untitled
        titles[title] = titles.get(title, 0) + 1
    for chain in entries:
        tip = chain["tip"]
        title = tip.title or untitled
        chain["title"] = title
        chain["disambiguation"] = (
            f"{timezone.localtime(chain['sessions'][-1].created_at):%b %-d, %H:%M} · "
            f"{tip.public_id[:6]}"
            if titles[title] > 1
            else ""
        )
    return entries
