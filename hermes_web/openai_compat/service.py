"""What one chat-completions request does, between the HTTP layer and the model.

``prepare`` (no writes): find the session the request continues, work out what the client
added since, and build what the model receives: the client's own messages, or, once the
session has a committed compaction, its stored compacted context (head + summary + tail)
plus the new messages. ``store`` (after a successful model call only, in one transaction):
append the new messages and the reply, remember the client's prefix, then let the chat's
``maybe_auto_compact`` queue a background compaction when the prompt crossed the threshold.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from compaction import CompactionConfig, count_message_tokens, validate_tool_pairs
from compaction.messages import content_text
from hermes_web.importers.base import clean_title
from hermes_web.importers.formats.codex import IDE_REQUEST, context_kind
from hermes_web.llm_models import context_length_for
from hermes_web.models import ApiKey, Compaction, Message, Session, new_public_id
from hermes_web.openai_compat import codex_local, replaced
from hermes_web.openai_compat.contexts import CONTEXTS, StoredContext
from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.matching import (
    RECENT,
    Match,
    bookkeeping,
    extend_hash,
    find_session,
)
from hermes_web.openai_compat.upstream import Reply, resolve_model
from hermes_web.openai_compat.validation import ChatRequest
from hermes_web.services.compactions import maybe_auto_compact
from hermes_web.services.sessions import (
    append_messages,
    count_items,
    create_session,
    normalize_mode,
    resolve_tip,
    token_model,
    token_model_for,
)

log = logging.getLogger(__name__)

CLIENT_NAME_LIMIT = 200


@dataclass
class Prepared:
    """Everything decided before the model call."""

    key: ApiKey
    request: ChatRequest
    upstream_model: str
    client_name: str
    hashes: list[str]
    match: Match | None
    upstream_messages: list[dict]
    compaction: Compaction | None = None  # the committed compaction the context comes from
    public_id: str = ""  # the session's id, known before the reply (set in prepare)
    mode: str = ""
    # Of a compacted session's stored context: the tool call ids it holds, and the ids that
    # already have a result there (a stub when the call was pending at the snapshot).
    stored_calls: frozenset[str] = frozenset()
    stored_results: frozenset[str] = frozenset()
    # The stored context read for it (when compacted): store() records its own rows there.
    context: StoredContext | None = None
    # Codex's local compaction (codex_local): this request is its summarization turn, or
    # the first request after one (that run, and where its summary is in the request).
    codex_summarizing: bool = False
    codex_run: tuple[Compaction, int] | None = None

    @property
    def new_messages(self) -> list[dict]:
        """What the client added since the stored session (everything for a new session)."""
        covered = self.match.covered if self.match else 0
        return self.request.messages[covered:]


def client_name_from(user_agent: str) -> str:
    """The client's name as people read it: the User-Agent's first product token.

    ``OpenAI/Python 2.3.0`` → ``OpenAI/Python 2.3.0``; ``my-agent/1.2 (linux) httpx`` →
    ``my-agent/1.2``. The openai SDK's own User-Agent is kept whole (it is short).
    """
    agent = " ".join((user_agent or "").split())
    if not agent:
        return ""
    if agent.startswith("OpenAI/"):
        return agent[:CLIENT_NAME_LIMIT]
    return agent.split(" (", 1)[0].split(" ", 1)[0][:CLIENT_NAME_LIMIT]


def prepare(
    key: ApiKey,
    request: ChatRequest,
    *,
    session_header: str = "",
    mode_header: str = "",
    user_agent: str = "",
) -> Prepared:
    """Decide the session and the model's messages; raises ApiError (nothing is written)."""
    upstream_model = resolve_model(request.model)
    mode = ""
    if mode_header:
        try:
            mode = normalize_mode(mode_header.strip().lower())
        except ValueError:
            raise ApiError(
                400,
                f"X-Hermes-Compaction-Mode must be rotation or in-place, got {mode_header!r}.",
                code="invalid_compaction_mode",
            ) from None
    hashes = RECENT.prefix_hashes(request.messages, request.known)
    match = _compacted_match(request)
    if match is None:
        match = find_session(key, hashes, named=session_header.strip())
    prepared = Prepared(
        key=key,
        request=request,
        upstream_model=upstream_model,
        client_name=client_name_from(user_agent),
        hashes=hashes,
        match=match,
        upstream_messages=request.messages,
        mode=mode,
        codex_summarizing=codex_local.is_summarization(request.messages),
    )
    if match is None:
        prepared.public_id = new_public_id()
        if not session_header.strip():
            _use_replaced_prefix(prepared)
            prepared.codex_run = codex_local.continued(key, request.messages)
    else:
        prepared.public_id = match.session.public_id
        if match.session.compression_count:
            _use_compacted_context(prepared, match.session)
    edit = request.extra.get("edit_upstream")
    if callable(edit):
        # A protocol's context edits (Anthropic's clear_tool_uses) change what the model
        # reads this time only: the client keeps its history, and so does the store.
        prepared.upstream_messages = edit(prepared.upstream_messages)
    return prepared


def _compacted_match(request: ChatRequest) -> Match | None:
    """The session a compaction item sent back continues (its first messages stand for what
    that compaction replaced: ``compacting.history_of``), when the session still holds
    exactly that; later requests match it by their hashes as any request does."""
    compaction = request.extra.get("compaction")
    if not isinstance(compaction, Compaction):
        return None
    tip = resolve_tip(compaction.result_session or compaction.session)
    covered, expected = bookkeeping(tip)
    if covered != request.extra.get("compaction_covers"):
        return None
    return Match(tip, covered, expected)


def _use_compacted_context(prepared: Prepared, session: Session) -> None:
    compaction = (
        Compaction.objects.committed()
        .filter(result_session=session)
        .order_by("-finished_at", "-pk")
        .first()
    )
    if compaction is None:
        return
    # The rows are read once per version of the session, not on every request (contexts).
    context = CONTEXTS.get(session, compaction)
    stored = with_tool_errors(context, prepared.request.messages)
    prepared.stored_calls = context.calls
    prepared.stored_results = context.results
    messages, problems = with_new_messages(
        context, stored, prepared.new_messages, prepared.request.messages
    )
    if problems:
        # Never break the client's agent over our stored context: send its own history.
        log.warning(
            "session %s: compacted context has broken tool pairs (%s); sending the client's",
            session.public_id,
            "; ".join(problems[:3]),
        )
        return
    prepared.upstream_messages = messages
    prepared.compaction = compaction
    prepared.context = context


def with_new_messages(
    context: StoredContext, stored: list[dict], new: list[dict], history: list[dict]
) -> tuple[list[dict], list[str]]:
    """``restore_dropped_calls(merge_repeated_results(stored + new), history)`` and its
    tool-pair problems. When the stored context is paired (each result right after its call,
    none twice) and no new message is a result it holds, that is ``stored`` followed by the
    new messages merged among themselves, and their pairing is checked alone: nothing is
    pending at the end of the stored part. Otherwise (a stub replaced, a stripped call),
    the whole list is worked out."""
    if context.paired and context.results.isdisjoint(
        m.get("tool_call_id") or "" for m in new if m.get("role") == "tool"
    ):
        added = merge_repeated_results(new)
        if not validate_tool_pairs(added):  # (then no result lacks its call either)
            return stored + added, []
    messages = restore_dropped_calls(merge_repeated_results(stored + new), history)
    return messages, validate_tool_pairs(messages)


def with_tool_errors(context: StoredContext, request: list[dict]) -> list[dict]:
    """The stored context with Anthropic's ``is_error`` back on the tool results that had it
    (kept in the rows' ``extra`` where the client's request stored them, an ancestor of a
    rotation's continuation included; the client's own copy of a result counts too)."""
    failed = {m.get("tool_call_id") for m in request if m.get("is_error") is True}
    failed = (failed | context.failed) & context.results
    if not failed:
        return list(context.messages)
    return [
        {**m, "is_error": True} if m["role"] == "tool" and m.get("tool_call_id") in failed else m
        for m in context.messages
    ]


def _use_replaced_prefix(prepared: Prepared) -> None:
    """For a client that rebuilds its history instead of appending to it (aider moves its
    "files added to the chat" turns behind the history it grew), so that no request is a
    prefix of the next: when the request starts with the messages a committed compaction
    replaced, the model receives that compaction's head + summary + the tail it kept, up to
    where the request stops agreeing with the compacted session, then the rest of the
    request as sent. The request still starts a session of its own (nothing it holds is
    dropped); only what the model reads is compacted. The run is found by its indexed
    replaced-prefix hash (``replaced``), not by reading stored rows."""
    found = replaced.find(prepared.key, prepared.hashes)
    if found is None:
        return
    messages = found.context + prepared.request.messages[found.common :]
    problems = validate_tool_pairs(messages)
    if problems:
        log.warning("compaction %s: substituted context has broken tool pairs", found.run.public_id)
        return
    prepared.upstream_messages = messages
    prepared.compaction = found.run


def call_ids(messages: list[dict]) -> set[str]:
    """The ids of every tool call made in ``messages``."""
    return {
        call.get("id") or ""
        for message in messages
        for call in message.get("tool_calls") or ()
        if isinstance(call, dict)
    }


def merge_repeated_results(messages: list[dict]) -> list[dict]:
    """A tool result that appears twice takes the place of the first copy.

    A compaction that snapshots a session right after a reply with tool calls (the client
    sends their results with its next request) gives those calls stub results; the real
    results arrive later and replace the stubs, so every call keeps exactly one result.
    """
    first: dict[str, int] = {}
    merged: list[dict] = []
    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id") or ""
            if call_id in first:
                at = first[call_id]
                merged[at] = {**merged[at], "content": message.get("content")}
                continue
            first[call_id] = len(merged)
        merged.append(message)
    return merged


def _call_owners(history: list[dict]) -> dict[str, dict]:
    """Each tool call id of ``history`` mapped to the assistant message that made it."""
    return {
        call_id: message
        for message in history
        if message.get("role") == "assistant"
        for call_id in call_ids([message])
    }


def restore_dropped_calls(messages: list[dict], history: list[dict]) -> list[dict]:
    """Put back, from the client's own history, the assistant message of a tool result whose
    call is missing: a compaction that strips calls still waiting for their results (the
    ``strip`` sanitize mode) removed it, and its results arrived after the snapshot."""
    present = call_ids(messages)
    if all(m.get("tool_call_id") in present for m in messages if m.get("role") == "tool"):
        return messages  # the usual case: nothing was stripped
    owners = _call_owners(history)
    restored: list[dict] = []
    for message in messages:
        call_id = message.get("tool_call_id") or ""
        if message.get("role") == "tool" and call_id not in present and call_id in owners:
            owner = owners[call_id]
            restored.append(owner)
            present |= call_ids([owner])
        restored.append(message)
    return restored


def _title(messages: list[dict]) -> str:
    """The first thing a user said, as the importers title a session (``clean_title``): the
    wrappers agents put before it (Codex's ``<environment_context>`` and AGENTS.md turns,
    Claude Code's ``<system-reminder>`` parts) are no title."""
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        for part in content if isinstance(content, list) else [content]:
            text = content_text(part if isinstance(part, str | None) else [part], images=False)
            if context_kind(text) == "ide_context" and IDE_REQUEST in text:
                text = text.partition(IDE_REQUEST)[2]  # the request the IDE context wraps
            elif context_kind(text):
                continue
            title = clean_title(text)
            if title:
                return title
    return "API conversation"


class _ToolNames:
    """Each tool call id's function name in ``messages`` (the last call with that id), found
    when asked: a request stores results whose calls are among its last messages, so a
    long history is not walked for them."""

    def __init__(self, messages: list[dict]) -> None:
        self.messages = messages
        self.found: dict[str, str] = {}
        self.read = len(messages)  # messages[read:] were looked through, newest first

    def get(self, call_id: str, default: str = "") -> str:
        while call_id not in self.found and self.read > 0:
            self.read -= 1
            for call in reversed(self.messages[self.read].get("tool_calls") or ()):
                name = (call.get("function") or {}).get("name") or ""
                self.found.setdefault(call.get("id"), name)
        return self.found.get(call_id, default)


def _item(message: dict, names: _ToolNames, extra: dict | None = None, **fields) -> dict:
    """``message`` as the fields ``append_messages`` stores."""
    role = message["role"]
    call_id = message.get("tool_call_id") or ""
    tool_name = (message.get("name") or names.get(call_id, "")) if role == "tool" else ""
    return {
        "role": "system" if role == "developer" else role,  # stored as the system prompt it is
        "content": message.get("content"),
        "tool_calls": message.get("tool_calls") or None,
        "tool_call_id": call_id,
        "tool_name": tool_name,
        "extra": {
            **(extra or {}),
            **({"role": role} if role == "developer" else {}),
            **({"is_error": True} if message.get("is_error") is True else {}),
            # A Responses client's reasoning items (Codex: encrypted_content), kept as sent.
            **(
                {"reasoning_items": message["reasoning_items"]}
                if message.get("reasoning_items")
                else {}
            ),
        },
        **fields,
    }


def store_streamed(prepared: Prepared, gatherer) -> Reply:
    """A streamed reply stored once the upstream finished it (every protocol's stream ends
    here); a stream cut off mid-reply (litellm usually raises first) stores nothing: 502."""
    if gatherer.reply.finish_reason is None:
        raise ApiError(
            502,
            "The model's stream ended before the reply was finished.",
            type="api_error",
            code="upstream_stream_incomplete",
        )
    reply: Reply = gatherer.finish()
    store(prepared, reply)
    return reply


def store(prepared: Prepared, reply: Reply | None) -> tuple[Session, Compaction | None]:
    """Store the new messages and the reply in one transaction; then queue a compaction if
    the provider's prompt count crossed the threshold. Returns the session the messages
    landed on and the compaction queued (or None). Without a reply (a compaction request:
    the conversation is stored to be compacted) only the messages are stored."""
    request = prepared.request
    answer = reply.message() if reply is not None else None
    prompt_tokens = reply.usage.get("prompt_tokens") if reply is not None else None
    names = _ToolNames([*request.messages, *([answer] if answer else [])])
    new_hash = extend_hash(prepared.hashes[-1], answer) if answer else prepared.hashes[-1]
    # Codex's summarization turn is no turn of the conversation: its prompt and the summary
    # are not stored (the summary goes into the compaction recorded below).
    summarizing = prepared.codex_summarizing
    held = len(request.messages) - 1 if summarizing else len(request.messages) + bool(answer)
    if summarizing:
        answer = None
        new_hash = prepared.hashes[-2] if len(prepared.hashes) > 1 else ""
    codex_after: tuple[Compaction, int] | None = None
    # The rows this request stores, built and counted before the transaction (the write
    # lock is held from its first statement to the commit, see ``count_items``): the new
    # messages of a matched conversation, or a new one's whole history. Rows of a
    # conversation that moved on meanwhile (a fork) or mended rows are counted inside.
    expected = prepared.new_messages if prepared.match is not None else request.messages
    built = {id(m): _item(m, names) for m in (expected[:-1] if summarizing else expected)}
    reply_item = None
    if answer is not None and reply is not None:
        reply_item = _item(
            answer,
            names,
            extra={
                "model": prepared.upstream_model,
                "client": prepared.client_name,
                **_reply_ids(request),
            },
            provider_prompt_tokens=prompt_tokens,
            reasoning=reply.reasoning or None,
        )
    stored_model = prepared.match.session.model if prepared.match else prepared.upstream_model
    count_items(
        [*built.values(), *([reply_item] if reply_item else [])], token_model_for(stored_model)
    )
    with transaction.atomic():
        session = _continue(prepared)
        # Stubs and stripped calls are mended only against the stored context prepare saw.
        mend = session is not None and prepared.compaction is not None
        # Whether only this request's rows will have changed the session since prepare read
        # its stored context (checked under the lock _continue holds): then they extend it.
        context = prepared.context
        extends = (
            context is not None
            and session is not None
            and session.pk == context.session_pk
            and session.updated_at == context.version
        )
        to_store = prepared.new_messages
        if session is None:  # a new conversation, or one that moved on meanwhile (a fork)
            session = _create(prepared)
            to_store = request.messages
            if prepared.codex_run is not None:
                # A new session, whose first rows are the ones linked below.
                codex_after = prepared.codex_run
        if summarizing:
            to_store = to_store[:-1]
        items = []
        owners: dict[str, dict] | None = None
        for message in to_store:
            call_id = message.get("tool_call_id") or ""
            if mend and message["role"] == "tool":
                if call_id in prepared.stored_results and _replaced_stub(session, message, names):
                    extends = False  # a stored row changed: the next request reads anew
                    continue
                if call_id not in prepared.stored_calls:
                    owners = owners if owners is not None else _call_owners(request.messages)
                    if call_id in owners:
                        # The compaction stripped this pending call: store it again first.
                        items.append(_item(owners[call_id], names))
                        prepared.stored_calls = prepared.stored_calls | call_ids([owners[call_id]])
            items.append(built.get(id(message)) or _item(message, names))
        if reply_item is not None:
            items.append(reply_item)
        # One INSERT for the request's messages and the reply (a per-message append took a
        # lock, a position lookup and a touch each: a third of the endpoint's own time).
        rows = append_messages(session, items) if items else []
        if codex_after is not None:
            codex_local.link(*codex_after, session)
        landed = _landing(session, rows[-1]) if rows else resolve_tip(session)
        remembered = {
            "api_key": prepared.key,
            "client_name": prepared.client_name or landed.client_name,
            "prefix_hash": new_hash,
            "client_messages": held,
        }
        if prepared.mode:
            remembered["compaction_mode"] = prepared.mode
        now = timezone.now()
        Session.objects.filter(pk=landed.pk).touch(now, **remembered)  # chain bookkeeping
    if extends and context is not None and landed.pk == context.session_pk:
        CONTEXTS.appended(context, now)
    for name, value in remembered.items():
        setattr(landed, name, value)
    if summarizing and reply is not None and landed.client_messages:
        codex_local.record(landed, reply, _asked_by_codex(prepared))
        return landed, None
    if reply is None:
        return landed, None
    queued = maybe_auto_compact(landed, prompt_tokens=prompt_tokens)
    return landed, queued


def _asked_by_codex(prepared: Prepared) -> dict:
    endpoint = (
        "/v1/responses" if "response_id" in prepared.request.extra else "/v1/chat/completions"
    )
    return {
        "protocol": "openai",
        "endpoint": endpoint,
        "asked_with": codex_local.ASKED_WITH,
        "key": prepared.key.name,
        "client": prepared.client_name,
    }


def _reply_ids(request: ChatRequest) -> dict[str, str]:
    # A stored Responses reply keeps its response id: a later request names it in
    # previous_response_id (store: false asks us not to).
    if request.extra.get("store") and request.extra.get("response_id"):
        return {"response_id": request.extra["response_id"]}
    return {}


def _replaced_stub(session: Session, message: dict, names: _ToolNames) -> bool:
    """Write a tool result over the stub a compaction gave its call (see
    ``merge_repeated_results``); False when there is no such stub row."""
    stub = (
        Message.objects.filter(
            session_id=session.pk, active=True, role="tool", tool_call_id=message["tool_call_id"]
        )
        .order_by("-position")
        .first()
    )
    if stub is None:
        return False
    config = CompactionConfig(model=token_model(session))
    stub.content = message.get("content")
    stub.tool_name = stub.tool_name or names.get(stub.tool_call_id, "")
    stub.token_count = count_message_tokens(stub.to_openai(), config)
    stub.extra = {**stub.extra, "replaced_stub": True}
    stub.save(update_fields=["content", "tool_name", "token_count", "extra"])
    session.touch()
    return True


def _landing(session: Session, row: Message) -> Session:
    # A rotation that committed meanwhile sends appends to the continuation.
    return session if row.session_id == session.pk else Session.objects.get(pk=row.session_id)


def _continue(prepared: Prepared) -> Session | None:
    """The matched session, locked, if the chain still holds exactly what was matched."""
    match = prepared.match
    if match is None:
        return None
    locked = Session.objects.select_for_update().filter(pk=match.session.pk).first()
    if locked is None:
        return None
    tip = resolve_tip(locked)
    if bookkeeping(tip) != (match.covered, match.prefix_hash):
        log.info("session %s moved on during the request; storing a fork", tip.public_id)
        prepared.public_id = new_public_id()
        return None
    return tip


def _create(prepared: Prepared) -> Session:
    model = prepared.upstream_model
    session = create_session(
        owner=prepared.key.owner,
        title=_title(prepared.request.messages),
        source=Session.Source.API,
        model=model,  # the provider model the name resolved to (tokenizer, window)
        context_length=context_length_for(model),
        compaction_mode=prepared.mode,
    )
    session.public_id = prepared.public_id
    session.save(update_fields=["public_id"])
    return session
