"""An agent's own compactions (``ParsedSession.native_compactions``) stored as ``Compaction``
rows inside the session's transaction, so they open in the inspector like ours.

``NativeRows`` is driven by the store while it inserts the rows: each compaction row is
created when the first row naming it is inserted (streaming parsers may append compactions
as they read), rows it replaced get ``archived_by`` in their insert, its summary row names
it in ``extra["native_compaction"]``, and ``finish`` writes each one's report: the same
shape as an engine report (tokens, boundaries, per-row tokens, summary), so the inspector,
the fact audit, the exports and Compare read it unchanged. The agent's recorded numbers
stay as recorded (``tokens_before``); our own count of the rows is kept beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import F, Max, Q
from django.utils import timezone

from hermes_web.importers.base import ImportProblem, NativeCompaction, ParsedMessage, ParsedSession
from hermes_web.importers.validate import Invalid, check_text
from hermes_web.models import Compaction, Message, Session

TRIGGERS = {"auto": Compaction.Trigger.AUTO, "manual": Compaction.Trigger.MANUAL}
# An agent's recorded token count past this is not a count (PositiveIntegerField's range).
MAX_TOKENS = 2**31 - 1


@dataclass
class _Tally:
    """What the inserted rows say about one native compaction."""

    replaced: list[int] = field(default_factory=list)  # our token count per replaced row
    first_position: int | None = None
    last_position: int | None = None
    summary_position: int | None = None
    summary_tokens: int | None = None
    kept_positions: list[int] = field(default_factory=list)
    kept_tokens: list[int] = field(default_factory=list)


class NativeRows:
    """The native compactions of one session being stored (see the module doc)."""

    def __init__(self, session: Session, parsed: ParsedSession, file: str) -> None:
        self.session, self.parsed, self.file = session, parsed, file
        self.runs: list[Compaction] = []
        self.tallies: list[_Tally] = []

    def _problem(self, index: int, problem: str) -> ImportProblem:
        native = self.parsed.native_compactions[index]
        line = native.extra.get("line") if isinstance(native.extra, dict) else None
        return ImportProblem(
            self.file,
            line if isinstance(line, int) else self.parsed.line,
            f"{native.source or 'the agent'}'s compaction {index + 1}: {problem}",
            self.parsed.public_id,
        )

    def run(self, index: int) -> Compaction:
        """The row of native compaction ``index``, created (with those before it) on first use."""
        natives = self.parsed.native_compactions
        if not 0 <= index < len(natives):
            raise ImportProblem(
                self.file,
                self.parsed.line,
                f"a message names the agent's compaction {index + 1}, but the session records "
                f"{len(natives)}",
                self.parsed.public_id,
            )
        while len(self.runs) <= index:
            self.runs.append(self._create(len(self.runs)))
            self.tallies.append(_Tally())
        return self.runs[index]

    def _create(self, index: int) -> Compaction:
        native = self.parsed.native_compactions[index]
        if native.source not in Compaction.Source.values or not native.source:
            raise self._problem(index, f"unknown agent {native.source!r}")
        for name in ("tokens_before", "tokens_after"):
            value = getattr(native, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 <= value <= MAX_TOKENS
            ):
                raise self._problem(index, f"{name.replace('_', ' ')} is not a token count")
        transcript = None
        if native.summarizer_input is not None or native.summarizer_output:
            transcript = {"input": native.summarizer_input, "output": native.summarizer_output}
        try:
            for value, where in (
                (native.summary, "summary"),
                (native.marker, "marker"),
                (native.extra, "recorded metadata"),
                (transcript, "summarizer transcript"),
            ):
                check_text(value, where)
        except Invalid as error:
            raise self._problem(index, str(error)) from None
        when = native.created_at or self.session.created_at or timezone.now()
        rotation = bool(native.extra.get("rotation")) if isinstance(native.extra, dict) else False
        return Compaction.objects.create(
            session=self.session,
            result_session=self.session,
            source=native.source,
            mode=Compaction.Mode.ROTATION if rotation else Compaction.Mode.IN_PLACE,
            trigger=TRIGGERS.get(native.trigger, Compaction.Trigger.UNKNOWN),
            status=Compaction.Status.COMMITTED,
            summarizer=native.source,
            tokens_before=native.tokens_before,
            tokens_after=native.tokens_after,
            native_summary=native.summary,
            native_marker=native.marker,
            native_record=native.extra,
            summarizer_transcript=transcript,
            queued_at=when,
            started_at=when,
            finished_at=when,
        )

    def row(self, message: ParsedMessage, position: int, tokens: int) -> tuple[int | None, dict]:
        """One row about to be inserted: the compaction that archived it (its pk, or None)
        and the row's ``extra`` (naming the compaction whose summary it is)."""
        extra = message.extra
        if message.meta:
            return None, extra
        archived_by = None
        if message.replaced_by is not None and message.archived:
            archived_by = self.run(message.replaced_by).pk
            tally = self.tallies[message.replaced_by]
            tally.replaced.append(tokens)
            if tally.first_position is None:
                tally.first_position = position
            tally.last_position = position
        if message.summary_of is not None:
            run = self.run(message.summary_of)
            tally = self.tallies[message.summary_of]
            if tally.summary_position is None:
                tally.summary_position, tally.summary_tokens = position, tokens
                extra = {**extra, "native_compaction": run.public_id}
        if message.kept_by is not None:
            self.run(message.kept_by)
            self.tallies[message.kept_by].kept_positions.append(position)
            self.tallies[message.kept_by].kept_tokens.append(tokens)
        return archived_by, extra

    def finish(self, children: bool | None = None) -> None:
        """Every compaction recorded gets its row (also those no message named: a marker)
        and its report; Hermes rotations move to the parent they compacted, once stored.
        ``children``: whether the session has child sessions, when the caller knows (its
        links were just made); asked of the database otherwise."""
        if self.parsed.native_compactions:
            self.run(len(self.parsed.native_compactions) - 1)
        for run, native, tally in zip(
            self.runs, self.parsed.native_compactions, self.tallies, strict=True
        ):
            run.report = native_report(native, tally.replaced, tally)
            run.snapshot_position = tally.last_position
            run.save(update_fields=["report", "snapshot_position"])
        if self.parsed.source == Session.Source.IMPORT_HERMES and (  # only Hermes rotates
            any(native.extra.get("rotation") for native in self.parsed.native_compactions)
            or (
                children
                if children is not None
                else Session.objects.filter(parent_id=self.session.pk).exists()
            )
        ):  # a rotation of its own, or children whose rotations wait for it: else nothing
            # to move, and the search (a scan of the compactions) is not run per session
            attach_rotations(self.session)


def native_report(native: NativeCompaction, replaced: list[int], tally: _Tally) -> dict[str, Any]:
    """An engine-shaped report of the agent's compaction: the rows it replaced are the
    middle (no head, no tail of ours), its summary the summary, what it kept the rest."""
    count = len(replaced)
    counted = sum(replaced)
    after_counted = (tally.summary_tokens or 0) + sum(tally.kept_tokens)
    before = native.tokens_before if native.tokens_before is not None else counted
    after = native.tokens_after if native.tokens_after is not None else after_counted
    output = ([tally.summary_tokens] if tally.summary_tokens is not None else []) + list(
        tally.kept_tokens
    )
    return {
        "status": "compacted",
        "native": {
            "source": native.source,
            "trigger": native.trigger,
            "marker": native.marker,
            "tokens_before_recorded": native.tokens_before,
            "tokens_after_recorded": native.tokens_after,
            "tokens_before_counted": counted,
            "tokens_after_counted": after_counted,
            "first_position": tally.first_position,
            "summary_position": tally.summary_position,
            "kept_positions": tally.kept_positions,
        },
        "summary": native.summary or None,
        "summarizer": native.source,
        "profile": f"agent:{native.source}",  # no profile of ours: the agent's own way
        "summary_role": "user",
        "summary_index": 0 if tally.summary_tokens is not None else None,
        "boundaries": {"head": [0, 0], "middle": [0, count], "tail": [count, count]},
        "message_tokens": replaced,
        "tokens": {
            "before": before,
            "after": after,
            "saved": before - after,
            "ratio": round(after / before, 4) if before else None,
            "summary": tally.summary_tokens,
            "head": 0,
            "middle": counted,
            "tail": 0,
            "counted_before": counted,
            "counted_after": after_counted,
        },
        "counts": {"messages_before": count, "messages_after": len(output)},
        "output_message_tokens": output,
    }


def attach_rotations(session: Session) -> None:
    """Hermes rotations whose parent session is stored belong to that parent: it is the
    session the agent compacted (it ended, its rows stay), the child holds the summary.

    Called in each session's transaction (after its links are made), so the move happens
    whichever of parent and child is imported first."""
    runs = Compaction.objects.filter(
        source=Compaction.Source.HERMES,
        mode=Compaction.Mode.ROTATION,
        session_id=F("result_session_id"),
        result_session__parent__isnull=False,
    ).filter(Q(result_session=session) | Q(result_session__parent=session))
    for run in runs.select_related("result_session"):
        parent_id = run.result_session.parent_id  # type: ignore[union-attr]  # filtered above
        rows = Message.objects.filter(session_id=parent_id, active=True)
        replaced = list(rows.order_by("position").values_list("token_count", flat=True))
        report = dict(run.report or {})
        native = NativeCompaction(
            source=run.source,
            trigger=(report.get("native") or {}).get("trigger", ""),
            tokens_before=run.tokens_before,
            tokens_after=run.tokens_after,
            summary=run.native_summary,
            marker=run.native_marker,
        )
        previous = report.get("native") or {}
        tally = _Tally(
            summary_position=previous.get("summary_position"),
            summary_tokens=(report.get("tokens") or {}).get("summary"),
        )
        run.session_id = parent_id
        run.snapshot_position = rows.aggregate(top=Max("position"))["top"]
        run.report = native_report(native, replaced, tally)
        run.save(update_fields=["session", "snapshot_position", "report"])
