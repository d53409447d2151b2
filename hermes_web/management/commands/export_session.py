from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from hermes_web.exporters import (
    FORMATS,
    REPORT_FORMATS,
    export_report_text,
    iter_session_export,
    latest_report,
)
from hermes_web.models import Compaction, Session


def find_session(id: str, username: str | None, missing: str) -> Session:
    """The session whose id is ``id``, or else the one imported session whose tool id
    (``extra["source_id"]``, what the agent wrote) is ``id``, of ``username`` if given:
    imported ids carry their owner's namespace, so the tool's id alone is what people have."""
    sessions = Session.objects.all()
    if username:
        sessions = sessions.filter(owner__username=username)
    session = sessions.filter(public_id=id).first()
    if session is not None:
        return session
    found = list(sessions.filter(extra__source_id=id).order_by("pk")[:6])
    if len(found) == 1:
        return found[0]
    if found:
        ids = ", ".join(s.public_id for s in found[:5]) + (", …" if len(found) > 5 else "")
        raise CommandError(
            f"{id!r} is the tool's id of {len(found) if len(found) < 6 else 'several'} imported "
            f"sessions ({ids}): give one of those ids, or --user to say whose"
        )
    raise CommandError(
        f"{missing} with id {id!r}" + (f" for user {username!r}" if username else "")
    )


class Command(BaseCommand):
    help = (
        "Export a session (openai, hermes-jsonl) or a compaction report (report-json, report-md)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("id", help="a session id; for report formats also a compaction id")
        parser.add_argument("--format", default="openai", choices=FORMATS)
        parser.add_argument("--output", help="write here instead of stdout")
        parser.add_argument(
            "--user",
            help="whose session: narrows the tool's own id (e.g. a Claude Code session id)",
        )

    def handle(
        self, *args, id: str, format: str, output: str | None, user: str | None = None, **options
    ) -> None:
        if format in REPORT_FORMATS:
            compaction = Compaction.objects.filter(public_id=id).select_related("session").first()
            if compaction is None:
                session = find_session(id, user, "no session or compaction")
                compaction = latest_report(session)
                if compaction is None:
                    raise CommandError(f"session {id} has no compaction report yet")
            chunks = iter([export_report_text(compaction, format)])
        else:
            session = find_session(id, user, "no session")
            chunks = iter_session_export(session, format)  # streamed: constant memory
        if output:
            with Path(output).open("w", encoding="utf-8") as file:
                for chunk in chunks:
                    file.write(chunk)
            self.stderr.write(f"wrote {output}")
        else:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
