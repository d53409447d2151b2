"""Input and output schemas of the JSON API (explicit fields; public ids only, never pks)."""

from datetime import datetime
from typing import Any, ClassVar, Literal

from ninja import Field, Schema
from pydantic import BaseModel, field_validator

from hermes_web import validation

Role = Literal["system", "user", "assistant", "tool"]
Mode = Literal["rotation", "in_place", "in-place"]


class ErrorOut(Schema):
    detail: str


class SessionIn(Schema):
    title: str = Field("", max_length=200)
    model: str = Field("", max_length=200)
    context_length: int | None = Field(None, ge=1_000, le=10_000_000)
    compaction_mode: Literal["", "rotation", "in_place", "in-place"] = ""

    @field_validator("title", "model")
    @classmethod
    def _valid_text(cls, value: str, info) -> str:
        validation.check_text(value, info.field_name)
        return value


class SessionOut(Schema):
    id: str
    title: str
    source: str
    model: str
    context_length: int
    compaction_mode: str
    parent: str | None
    root: str | None
    ended_at: datetime | None
    end_reason: str
    compression_count: int
    message_count: int
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def from_session(session, message_count: int | None = None) -> dict:
        return {
            "id": session.public_id,
            "title": session.title,
            "source": session.source,
            "model": session.model,
            "context_length": session.context_length,
            "compaction_mode": session.effective_mode,
            "parent": session.parent.public_id if session.parent_id else None,
            "root": session.root.public_id if session.root_id else None,
            "ended_at": session.ended_at,
            "end_reason": session.end_reason,
            "compression_count": session.compression_count,
            "message_count": message_count
            if message_count is not None
            else session.messages.filter(active=True).count(),
            "created_at": session.created_at,
            "updated_at": session.updated_at,
        }


class SessionDetailOut(SessionOut):
    tip: str
    previous_summary: str
    # An imported session's fidelity report, as the import wrote it (None otherwise): what
    # was kept, and the lines of its file that could not be read (``unreadable_lines``,
    # ``last_line_incomplete``).
    import_report: dict[str, Any] | None = None


class SessionPage(Schema):
    count: int
    items: list[SessionOut]


class MessageIn(Schema):
    role: Role
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str = Field("", max_length=200)
    name: str = Field("", max_length=200)
    reasoning: str | None = None

    # Checked at the entrance, so a stored row can always be rendered and sent to a provider:
    # a 422 names the field and the place in it (e.g. tool_calls[0].function.name).
    @field_validator("content")
    @classmethod
    def _valid_content(cls, value):
        validation.check_content(value, "content")
        return value

    @field_validator("tool_calls")
    @classmethod
    def _valid_tool_calls(cls, value):
        validation.check_tool_calls(value, "tool_calls")
        return value

    @field_validator("tool_call_id", "name", "reasoning")
    @classmethod
    def _valid_text(cls, value, info):
        validation.check_text(value, info.field_name)
        return value


class MessageOut(BaseModel):
    """A message as the API returns it.

    A plain pydantic model rather than a ninja ``Schema``: it is only ever built from dicts,
    and ``Schema``'s validator wraps every input for attribute lookup on ORM objects, which
    made validating a page of 50 messages cost more than reading them from the database.
    """

    position: int
    role: str
    content: Any
    # Any, not list[dict]: rows stored before the entrance checks must still list (not 500).
    tool_calls: Any
    tool_call_id: str
    name: str
    reasoning: Any
    token_count: int
    provider_prompt_tokens: int | None
    active: bool
    archived: bool
    is_summary: bool
    created_at: datetime

    # Columns of Message behind these fields ("name" is tool_name), for .values() listings.
    COLUMNS: ClassVar[tuple[str, ...]] = (
        "position",
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "tool_name",
        "reasoning",
        "token_count",
        "provider_prompt_tokens",
        "active",
        "archived",
        "is_summary",
        "created_at",
    )

    @staticmethod
    def from_row(row: dict) -> dict:
        """A ``Message.objects.values(*COLUMNS)`` row as this schema's dict."""
        out = dict(row)
        out["name"] = out.pop("tool_name")
        return out

    @classmethod
    def from_message(cls, m) -> dict:
        """A ``Message`` instance as this schema's dict (the same fields as ``from_row``)."""
        return cls.from_row({column: getattr(m, column) for column in cls.COLUMNS})


class MessagePage(BaseModel):
    count: int
    items: list[MessageOut]


class CompactionIn(Schema):
    mode: Mode | None = None
    focus: str = Field("", max_length=2_000)
    config: dict[str, Any] = Field(default_factory=dict, description="CompactionConfig overrides")
    summarizer: Literal["auto", "deterministic"] = "auto"

    @field_validator("config")
    @classmethod
    def _sane_numbers(cls, value: dict[str, Any]) -> dict[str, Any]:
        validation.check_config_numbers(value, "config")
        return value

    @field_validator("focus")
    @classmethod
    def _valid_focus(cls, value: str) -> str:
        validation.check_text(value, "focus")
        return value


def _words(kind: str) -> str:
    """The stored codes of ``kind`` and the words the pages and exports show for them."""
    from hermes_web.presenters.vocabulary import VOCABULARY

    return "; ".join(f"`{code}`: {word}" for code, word in VOCABULARY[kind].items())


class CompactionOut(Schema):
    id: str
    session: str
    result_session: str | None
    status: str = Field(..., description=_words("status"))
    reason: str
    mode: str = Field(..., description=_words("mode"))
    trigger: str = Field(..., description=_words("trigger"))
    focus: str
    tokens_before: int | None
    tokens_after: int | None
    summarizer: str = Field(..., description=_words("summarizer"))
    summarizer_model: str
    error: str
    attempts: int
    queued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    source: str = Field(
        "", description="the agent whose own compaction this is (imported); empty for ours"
    )
    replay_of: str | None = Field(
        None, description="the agent's compaction this dry run replays with our engine"
    )
    asked_by: str = Field(
        "",
        description="the /v1 request that asked for it (protocol, endpoint and parameter, API "
        "key name, client); empty when none did",
    )

    @staticmethod
    def from_compaction(c) -> dict:
        return {
            "id": c.public_id,
            "session": c.session.public_id,
            "result_session": c.result_session.public_id if c.result_session_id else None,
            "status": c.status,
            "reason": c.reason,
            "mode": c.mode,
            "trigger": c.trigger,
            "focus": c.focus,
            "tokens_before": c.tokens_before,
            "tokens_after": c.tokens_after,
            "summarizer": c.summarizer,
            "summarizer_model": c.summarizer_model,
            "error": c.error,
            "attempts": c.attempts,
            "queued_at": c.queued_at,
            "started_at": c.started_at,
            "finished_at": c.finished_at,
            "source": c.source,
            "replay_of": c.replay_of.public_id if c.replay_of_id else None,
            "asked_by": c.who_asked,
        }


class CompactionDetailOut(CompactionOut):
    config: dict[str, Any]
    report: dict[str, Any] | None


class ImportProblemOut(Schema):
    file: str
    line: int
    problem: str
    session: str
    message: str


class ImportedSessionOut(Schema):
    id: str
    title: str
    messages: int | None
    source_id: str = ""  # the tool's own session id (``id`` is namespaced per user)
    parent: str | None = None
    fidelity: dict[str, Any] | None = None  # what the import kept, and what not and why


class ImportOut(Schema):
    file: str
    format: str
    imported: list[ImportedSessionOut]
    skipped: list[str]
    duplicates: list[ImportProblemOut] = []  # imported before (send skip_existing to skip)
    errors: list[ImportProblemOut]
    warnings: list[str] = []  # imported, but something was not read (e.g. a state.db -wal)
    # The lists above hold the first 100 of each kind; how many more there were.
    left_off: dict[str, int] = {}
    summary: str = ""  # "2 sessions, 57 messages; 1 empty session left out; 1 already there"
    empty_sessions: int = 0  # sessions with no messages: not stored


class ImportFailedOut(ImportOut):
    detail: str
