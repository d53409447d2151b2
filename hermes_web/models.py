"""Conversations, their messages, compaction runs, agent turns, locks and API keys.

Public ids (``public_id``) appear in URLs and the API; integer primary keys never do.
Every lookup made for a request starts from ``<Model>.objects.for_user(user)``.
"""

# Over 450 lines: every table of the app with the rules that belong to its rows (querysets,
# touch, finish, the one message-dict builder), in the one module Django and its migrations read.

import hashlib
import secrets
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from compaction.markers import is_summary_text, wrap_summary
from hermes_web.llm_models import DEFAULT_CONTEXT_LENGTH


def new_public_id() -> str:
    return uuid.uuid4().hex


# ``Session.extra`` key of a session an import is still writing in batches (importers/store.py);
# removed by its last batch, or the session is deleted (also after a killed worker: tasks).
IMPORT_PENDING = "import_pending"


class SessionQuerySet(models.QuerySet):
    def for_user(self, user) -> "SessionQuerySet":
        """The user's sessions, without those an import is still writing: every page, API
        list and search starts here, so a half-written (or abandoned) import is never shown."""
        return self.filter(owner=user).exclude(extra__has_key=IMPORT_PENDING)

    def touch(self, now=None, **fields) -> int:
        """Bump ``updated_at`` (plus ``fields``) in one UPDATE; see ``Session.touch``."""
        return self.update(updated_at=now or timezone.now(), **fields)


class Session(models.Model):
    """One conversation. Rotation links a compacted child to the session it replaced."""

    # Not columns: an import sets these on the sessions it returns (its count and what it kept).
    message_total: int
    fidelity: dict[str, Any]

    class Source(models.TextChoices):
        CHAT = "chat", "chat"
        DEMO = "demo", "demo"
        IMPORT_HERMES = "import:hermes", "Hermes import"
        IMPORT_CLAUDE_CODE = "import:claude-code", "Claude Code import"
        IMPORT_CODEX = "import:codex", "Codex import"
        IMPORT_OPENAI = "import:openai", "OpenAI import"
        IMPORT_GEMINI_CLI = "import:gemini-cli", "Gemini CLI import"
        IMPORT_AIDER = "import:aider", "Aider import"
        IMPORT_OPENHANDS = "import:openhands", "OpenHands import"
        IMPORT_CLINE = "import:cline", "Cline / Roo Code import"
        IMPORT_CONTINUE = "import:continue", "Continue import"
        IMPORT_PI = "import:pi", "Pi import"
        IMPORT_SWE_AGENT = "import:swe-agent", "SWE-agent import"
        IMPORT_COPILOT_CLI = "import:copilot-cli", "Copilot CLI import"
        IMPORT_CURSOR = "import:cursor", "Cursor import"
        IMPORT_OPENCODE = "import:opencode", "opencode import"
        IMPORT_CRUSH = "import:crush", "Crush import"
        IMPORT_QWEN_CODE = "import:qwen-code", "Qwen Code import"
        IMPORT_KIMI_CLI = "import:kimi-cli", "Kimi CLI import"
        IMPORT_GOOSE = "import:goose", "Goose import"
        API = "api", "API client"

    class Mode(models.TextChoices):
        ROTATION = "rotation", "rotation"
        IN_PLACE = "in_place", "in-place"

    class EndReason(models.TextChoices):
        """Why a session stopped taking messages (``end_reason``; "" while it is live)."""

        LIVE = "", "live"
        COMPRESSION = "compression"  # rotated: a compaction continued it in a child session
        UNDONE = "undone"  # the child of a rotation that was undone (services.undo)

    public_id = models.CharField(max_length=128, unique=True, default=new_public_id, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="hermes_sessions"
    )
    title = models.CharField(max_length=200, blank=True)
    source = models.CharField(max_length=32, choices=Source.choices, default=Source.CHAT)
    model = models.CharField(max_length=200, blank=True)
    context_length = models.PositiveIntegerField(default=DEFAULT_CONTEXT_LENGTH)
    compaction_mode = models.CharField(max_length=16, choices=Mode.choices, blank=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    # The first session of a rotation chain (itself for a root), so a whole tree is one query.
    root = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="lineage"
    )
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=32, blank=True)
    compression_count = models.PositiveIntegerField(default=0)
    previous_summary = models.TextField(blank=True)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    # Sessions created through the OpenAI-compatible endpoint (/v1/chat/completions): the key
    # that created them, the client's name (its User-Agent), and how much of the client's own
    # history they hold: ``client_messages`` messages whose chained hash is ``prefix_hash``.
    api_key = models.ForeignKey(
        "ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions"
    )
    client_name = models.CharField(max_length=200, blank=True)
    prefix_hash = models.CharField(max_length=64, blank=True, db_index=True)
    client_messages = models.PositiveIntegerField(default=0)

    objects = SessionQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or self.public_id

    @property
    def is_rotated(self) -> bool:
        """Whether a rotation compaction ended this session (it continues in a child)."""
        return self.end_reason == self.EndReason.COMPRESSION

    def touch(self, now=None, **fields):
        """Record that this session changed: bump ``updated_at`` with ``fields`` in one UPDATE.

        The one way writers mark a session changed: ``updated_at`` is in the cache keys of
        the pages that show it (``.update()`` skips ``auto_now``, so a writer that forgets
        leaves those pages stale). Plain values in ``fields`` are set on this instance too.
        Returns the time written.
        """
        now = now or timezone.now()
        Session.objects.filter(pk=self.pk).touch(now, **fields)
        self.updated_at = now
        for name, value in fields.items():
            if not hasattr(value, "resolve_expression"):  # an F() stays a database expression
                setattr(self, name, value)
        return now

    @property
    def effective_mode(self) -> str:
        return self.compaction_mode or settings.HERMES_COMPACTION_MODE

    @property
    def is_ended(self) -> bool:
        return self.ended_at is not None


def _lineage_q(session: "Session") -> models.Q:
    """Rows (messages or compactions) of every session of ``session``'s rotation chain."""
    root_id = session.root_id or session.pk
    return models.Q(session_id=root_id) | models.Q(session__root_id=root_id)


class MessageQuerySet(models.QuerySet):
    def active(self) -> "MessageQuerySet":
        return self.filter(active=True).order_by("position")

    def for_lineage(self, session: "Session") -> "MessageQuerySet":
        """Messages of every session of ``session``'s rotation chain, archived ones included."""
        return self.filter(_lineage_q(session))


class Message(models.Model):
    """One OpenAI-format message. In-place compaction archives rows; it never deletes them."""

    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.JSONField(null=True, blank=True)  # str, list of parts, or None
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    tool_name = models.CharField(max_length=200, blank=True)
    reasoning = models.JSONField(null=True, blank=True)
    token_count = models.PositiveIntegerField(default=0)
    provider_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    active = models.BooleanField(default=True)
    archived = models.BooleanField(default=False)
    archived_by = models.ForeignKey(
        "Compaction",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="archived_messages",
    )
    is_summary = models.BooleanField(default=False)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="message_position_unique")
        ]
        indexes = [
            models.Index(fields=["session", "active", "position"]),
            # The model replies between two compactions (services.hurt counts them for every
            # compaction of a user): a range in this index, never a scan of the session's rows.
            models.Index(
                fields=["session", "role", "created_at"], name="message_session_role_time"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.position}"

    # The columns an engine message is built from, in ``engine_dict``'s argument order: read
    # them with ``values_list(*Message.ENGINE_COLUMNS)`` where model instances cost too much.
    ENGINE_COLUMNS = ("role", "content", "tool_calls", "tool_call_id", "tool_name", "reasoning")
    # ``ENGINE_COLUMNS`` and ``is_summary``: what a prompt is built from (``engine_dict`` wraps
    # an agent's own summary row in our prefix and end marker; a record shows it as stored).
    PROMPT_COLUMNS = (*ENGINE_COLUMNS, "is_summary")

    @staticmethod
    def engine_dict(
        role: str,
        content: Any,
        tool_calls: Any = None,
        tool_call_id: str = "",
        tool_name: str = "",
        reasoning: Any = None,
        is_summary: bool = False,
    ) -> dict[str, Any]:
        """The OpenAI-format dict the engine and providers take for these column values.

        Reasoning is kept and ``extra`` dropped; a tool result carries its call id and name.
        With ``is_summary``, a summary row is given as the engine reads one (``prompt_content``).
        """
        if is_summary:
            content = Message.prompt_content(content)
        message: dict[str, Any] = {"role": role, "content": content}
        if tool_calls:
            message["tool_calls"] = tool_calls
        if role == Message.Role.TOOL:
            message["tool_call_id"] = tool_call_id
            if tool_name:
                message["name"] = tool_name
        if reasoning:
            message["reasoning"] = reasoning
        return message

    @staticmethod
    def prompt_content(content: Any) -> Any:
        """A summary row's content as a prompt our engine builds carries it.

        An agent's own summary is stored as the agent wrote it (an import keeps its bytes);
        in a context we build it gets our prefix and end marker, so the engine recognizes it
        as an earlier summary and the model reads it as reference, as it does ours. Our own
        summaries and Hermes's carry them already and are left as they are.
        """
        if isinstance(content, str) and not is_summary_text(content):
            return wrap_summary(content)
        return content

    def to_engine(self) -> dict[str, Any]:
        """This message as the engine and providers see it (see ``engine_dict``)."""
        return Message.engine_dict(*(getattr(self, column) for column in self.PROMPT_COLUMNS))

    to_openai = to_engine


class CompactionQuerySet(models.QuerySet):
    def for_user(self, user) -> "CompactionQuerySet":
        return self.filter(session__owner=user)

    def in_progress(self) -> "CompactionQuerySet":
        """Real runs queued or running (what-if dry runs never block anything)."""
        return self.filter(status__in=Compaction.IN_PROGRESS).exclude(
            trigger=Compaction.Trigger.WHAT_IF
        )

    def committed(self) -> "CompactionQuerySet":
        """Runs whose result is the session's current history (not undone)."""
        return self.filter(status=Compaction.Status.COMMITTED)

    def real(self) -> "CompactionQuerySet":
        """Runs that were meant to change the conversation: every trigger but what-if."""
        return self.exclude(trigger=Compaction.Trigger.WHAT_IF)

    def ours(self) -> "CompactionQuerySet":
        """Runs of our engine, without the agents' own compactions found in imports."""
        return self.filter(source=Compaction.Source.OURS)

    def native(self) -> "CompactionQuerySet":
        """The agents' own compactions, as their imported transcripts recorded them."""
        return self.exclude(source=Compaction.Source.OURS)

    def for_lineage(self, session: "Session") -> "CompactionQuerySet":
        """Runs of every session of ``session``'s rotation chain (root and descendants)."""
        return self.filter(_lineage_q(session))


class Compaction(models.Model):
    """One compaction run of a session: queued, run by a worker, committed or not.

    Or an agent's own compaction found in an imported transcript (``source`` names the
    agent; "" is ours): stored committed, with the rows it replaced archived by it, the
    agent's summary verbatim and what the transcript recorded about it. A what-if run with
    ``replay_of`` set runs our engine on exactly the rows that compaction replaced.
    """

    class Source(models.TextChoices):
        OURS = "", "hermes-web"
        CLAUDE_CODE = "claude-code", "Claude Code"
        CODEX = "codex", "Codex"
        GEMINI_CLI = "gemini-cli", "Gemini CLI"
        OPENHANDS = "openhands", "OpenHands"
        PI = "pi", "Pi"
        COPILOT_CLI = "copilot-cli", "Copilot CLI"
        CLINE = "cline", "Cline"
        ROO_CODE = "roo-code", "Roo Code"
        CONTINUE = "continue", "Continue"
        HERMES = "hermes", "Hermes"
        OPENCODE = "opencode", "opencode"
        CRUSH = "crush", "Crush"
        QWEN_CODE = "qwen-code", "Qwen Code"
        KIMI_CLI = "kimi-cli", "Kimi CLI"
        GOOSE = "goose", "Goose"

    class Mode(models.TextChoices):
        ROTATION = "rotation", "rotation"
        IN_PLACE = "in_place", "in-place"

    class Trigger(models.TextChoices):
        AUTO = "auto"
        MANUAL = "manual"
        WHAT_IF = "what_if", "what-if"
        UNKNOWN = "unknown", "not recorded"  # an agent's compaction whose transcript omits it

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMMITTED = "committed"
        SKIPPED = "skipped"
        ABORTED = "aborted"
        FAILED = "failed"
        DRY_RUN = "dry_run", "dry run"
        UNDONE = "undone"  # committed, then undone (services.undo); a redo commits it again

    IN_PROGRESS = (Status.QUEUED, Status.RUNNING)
    FINISHED = (
        Status.COMMITTED,
        Status.SKIPPED,
        Status.ABORTED,
        Status.FAILED,
        Status.DRY_RUN,
        Status.UNDONE,
    )

    public_id = models.CharField(max_length=64, unique=True, default=new_public_id, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compactions")
    result_session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="produced_by"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.ROTATION)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.MANUAL)
    focus = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    reason = models.CharField(max_length=64, blank=True)
    report = models.JSONField(null=True, blank=True)
    tokens_before = models.PositiveIntegerField(null=True, blank=True)
    tokens_after = models.PositiveIntegerField(null=True, blank=True)
    provider_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    summarizer = models.CharField(max_length=32, blank=True)
    summarizer_model = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # Highest message position the run compacted; rows after it arrived while it ran.
    snapshot_position = models.PositiveIntegerField(null=True, blank=True)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    source = models.CharField(max_length=32, choices=Source.choices, default="", blank=True)
    native_summary = models.TextField(blank=True)  # the agent's summary, verbatim
    native_marker = models.TextField(blank=True)  # what the transcript says when no summary
    # Everything else the transcript recorded: tokens before/after as written, line, ids.
    native_record = models.JSONField(default=dict, blank=True)
    # The agent's summarizer transcript where it kept one: {"input": [...], "output": "..."}.
    summarizer_transcript = models.JSONField(null=True, blank=True)
    replay_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="replays"
    )
    # Who asked, when a client did through a provider's compaction API on /v1 ({} otherwise):
    # {"protocol", "endpoint", "asked_with", "key", "client"} (see ``who_asked``).
    asked_by = models.JSONField(default=dict, blank=True)
    # Of a committed rotation, for clients that rebuild their history (openai_compat.replaced):
    # the chained hash of the messages it replaced (its input up to the tail it kept), and
    # the input's prefix hashes from there to its end. One indexed lookup finds the run a
    # request starts with, instead of reading and hashing candidates' rows per request.
    # ``replaced_hashes`` is null until indexed, [] when no request can use the run.
    replaced_prefix_hash = models.CharField(max_length=64, blank=True, default="")
    replaced_hashes = models.JSONField(null=True, blank=True)

    objects = CompactionQuerySet.as_manager()

    class Meta:
        ordering = ["-queued_at"]
        indexes = [
            models.Index(fields=["session", "-queued_at"]),
            models.Index(
                fields=["replaced_prefix_hash"],
                condition=~models.Q(replaced_prefix_hash=""),
                name="compaction_replaced_prefix",
            ),
        ]
        constraints = [
            # One real (non-dry) run per session queued or running: enforced by the database,
            # so simultaneous requests cannot both get in.
            models.UniqueConstraint(
                fields=["session"],
                condition=models.Q(status__in=["queued", "running"]) & ~models.Q(trigger="what_if"),
                name="one_live_compaction_per_session",
            )
        ]

    def __str__(self) -> str:
        return f"compaction {self.public_id} ({self.status})"

    @property
    def who_asked(self) -> str:
        """``asked_by`` as people read it: ``anthropic /v1/messages context_management
        compact_20260112 · API key “laptop” · claude-cli/2.1.0`` ("" when no API request
        asked: our own threshold, a button, an import)."""
        asked = self.asked_by if isinstance(self.asked_by, dict) else {}
        request = " ".join(
            str(asked[name]) for name in ("protocol", "endpoint", "asked_with") if asked.get(name)
        )
        if not request:
            return ""
        parts = [request]
        if asked.get("key"):
            parts.append(f"API key “{asked['key']}”")
        if asked.get("client"):
            parts.append(str(asked["client"]))
        return " · ".join(parts)

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def is_native(self) -> bool:
        """An agent's own compaction (imported), not a run of our engine."""
        return self.source != self.Source.OURS

    @property
    def source_label(self) -> str:
        """ "Claude Code's own compaction", or "" for ours."""
        return f"{self.get_source_display()}'s own compaction" if self.is_native else ""

    @property
    def ratio(self) -> float | None:
        if self.tokens_before and self.tokens_after is not None:
            return self.tokens_after / self.tokens_before
        return None

    def finish(self, status: str, **fields: Any) -> "Compaction":
        """Record the outcome (``status`` plus ``fields``), only if this row is still running.

        A finish never overwrites another: a run taken over meanwhile keeps the other
        worker's outcome. Reloads this instance and returns it.
        """
        fields.update(status=status, finished_at=timezone.now())
        Compaction.objects.filter(pk=self.pk, status=self.Status.RUNNING).update(**fields)
        self.refresh_from_db()
        return self

    def mark_failed(self, error: str) -> bool:
        """Give up on this run if it is still queued or running (a finished row is left alone).

        Works on an unloaded instance (``Compaction(pk=...)``): one UPDATE, no reload.
        Returns whether the row was changed.
        """
        return bool(
            Compaction.objects.filter(pk=self.pk, status__in=self.IN_PROGRESS).update(
                status=self.Status.FAILED, error=error[:2000], finished_at=timezone.now()
            )
        )

    def input_rows(self) -> "MessageQuerySet":
        """The rows the engine compacted, in order (a queryset; slice it before evaluating).

        An in-place commit archived exactly those rows; a rotation parent (ended, never
        written again) and a dry run keep them active up to the snapshot position. A replay
        reads the rows of the compaction it replays.
        """
        if self.replay_of_id is not None:
            replayed = Compaction.objects.only(
                "status", "mode", "session_id", "snapshot_position", "replay_of_id"
            ).get(pk=self.replay_of_id)
            return replayed.input_rows()
        if self.status == self.Status.COMMITTED and self.mode == self.Mode.IN_PLACE:
            return Message.objects.filter(archived_by=self).order_by("position")
        rows = Message.objects.filter(session_id=self.session_id, active=True)
        if self.snapshot_position is not None:
            rows = rows.filter(position__lte=self.snapshot_position)
        return rows.order_by("position")

    def final_rows(self, limit: int) -> "MessageQuerySet":
        """The committed, assembled list, at most ``limit`` rows (the child's rows, or the new
        rows of an in-place commit); empty unless the run committed."""
        if self.status != self.Status.COMMITTED or self.result_session_id is None:
            return Message.objects.none()
        count = ((self.report or {}).get("counts") or {}).get("messages_after") or limit
        rows = Message.objects.filter(session_id=self.result_session_id)
        if self.mode == self.Mode.IN_PLACE and self.snapshot_position is not None:
            rows = rows.filter(position__gt=self.snapshot_position)
        return rows.order_by("position")[: min(count, limit)]


class SessionLock(models.Model):
    """A lease on a session: at most one compaction holds it; it expires if a worker dies."""

    session = models.OneToOneField(
        Session, on_delete=models.CASCADE, primary_key=True, related_name="lock"
    )
    holder = models.CharField(max_length=64, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"lock on {self.session_id} by {self.holder or 'nobody'}"


class AgentTurnQuerySet(models.QuerySet):
    def for_user(self, user) -> "AgentTurnQuerySet":
        return self.filter(session__owner=user)


class AgentTurn(models.Model):
    """One agent turn run in the background: model calls and tool calls until a reply."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        STOPPED = "stopped"

    public_id = models.CharField(max_length=64, unique=True, default=new_public_id, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="turns")
    user_message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    model = models.CharField(max_length=200, blank=True)
    partial_content = models.TextField(blank=True)  # the reply streamed so far
    usage = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=32, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A message sent while another turn runs waits here (stored at once, shown "queued"); it
    # becomes a user message row only when its turn starts, so replies stay in order.
    queued_text = models.TextField(blank=True)
    # Set by the Stop button; the running loop sees it at its next write and stops cleanly.
    stop_requested = models.BooleanField(default=False)

    objects = AgentTurnQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"turn {self.public_id} ({self.status})"


class ApiKeyQuerySet(models.QuerySet):
    def usable(self) -> "ApiKeyQuerySet":
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """A bearer key for the JSON API. Only its SHA-256 is stored; the key is shown once."""

    PREFIX = "hk_"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def hash(raw_key: str) -> str:
        return hashlib.sha256(raw_key.encode()).hexdigest()

    @classmethod
    def issue(cls, *, owner, name: str) -> tuple["ApiKey", str]:
        """Create a key; returns the row and the raw key, which is never stored."""
        raw = cls.PREFIX + secrets.token_urlsafe(32)
        key = cls.objects.create(owner=owner, name=name, prefix=raw[:10], key_hash=cls.hash(raw))
        return key, raw


class WorkerPing(models.Model):
    """A round trip through the broker: written by the web side, stamped by a worker."""

    created_at = models.DateTimeField(default=timezone.now)
    processed_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)

    def __str__(self) -> str:
        return f"ping {self.pk}"


class WorkerHeartbeat(models.Model):
    """A Celery worker process's last sign of life (written every few seconds by the worker)."""

    name = models.CharField(max_length=200, unique=True)
    queues = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"worker {self.name}"


class RecallTestQuerySet(models.QuerySet):
    def for_user(self, user) -> "RecallTestQuerySet":
        return self.filter(compaction__session__owner=user)


class RecallTest(models.Model):
    """A recall test of one compaction (``services.recall_test``): a bank of questions drawn
    from the region it removed and, per arm and per context, how many the context answers.

    ``bank`` is the list of ``compaction.probes.Probe`` dicts; ``results`` holds the arms per
    context (``{"contexts": [...], "tokens": ..., "cost": ...}``). Two runs on one compaction
    draw the same bank, so their results compare.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    public_id = models.CharField(max_length=64, unique=True, default=new_public_id, editable=False)
    compaction = models.ForeignKey(
        Compaction, on_delete=models.CASCADE, related_name="recall_tests"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    questions = models.PositiveIntegerField(default=15)
    progress = models.PositiveIntegerField(default=0)  # percent
    bank = models.JSONField(default=list, blank=True)
    results = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = RecallTestQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"recall test {self.public_id} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)


class FollowedFolder(models.Model):
    """A folder whose agent files are imported as the agent writes them (``follow``): the
    worker's beat scans it by size and mtime; ``manage.py follow`` watches it."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="followed_folders"
    )
    path = models.CharField(max_length=1024)
    created_at = models.DateTimeField(default=timezone.now)
    last_scan = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "path"], name="followed_folder_once")
        ]

    def __str__(self) -> str:
        return f"followed folder {self.path}"


class FollowedFile(models.Model):
    """One agent file being followed: what of it was imported (its size, mtime and inode,
    and a hash of those bytes) and the sessions it became, so that a grown file appends to
    them and a rewritten one becomes a new version (importers/follow.py)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="followed_files"
    )
    folder = models.ForeignKey(
        FollowedFolder, null=True, blank=True, on_delete=models.CASCADE, related_name="files"
    )
    path = models.CharField(max_length=1024)
    format = models.CharField(max_length=32, blank=True)
    size = models.BigIntegerField(default=0)  # bytes read by the last import
    mtime_ns = models.BigIntegerField(default=0)
    inode = models.BigIntegerField(default=0)
    prefix_hash = models.CharField(max_length=64, blank=True)  # sha256 of those ``size`` bytes
    sessions = models.JSONField(default=list, blank=True)  # pks of the sessions it became
    last_import = models.DateTimeField(null=True, blank=True)
    last_status = models.TextField(blank=True)  # what the last import did, or why it failed
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["owner", "path"], name="followed_file_once")]

    def __str__(self) -> str:
        return f"followed file {self.path}"
