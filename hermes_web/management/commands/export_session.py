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


class Command(BaseCommand):
    help = (
        "Export a session (openai, hermes-jsonl) or a compaction report (report-json, report-md)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("id", help="a session id; for report formats also a compaction id")
        parser.add_argument("--format", default="openai", choices=FORMATS)
        parser.add_argument("--output", help="write here instead of stdout")

    def handle(self, *args, id: str, format: str, output: str | None, **options) -> None:
        if format in REPORT_FORMATS:
            compaction = Compaction.objects.filter(public_id=id).select_related("session").first()
            if compaction is None:
                session = Session.objects.filter(public_id=id).first()
                if session is None:
                    raise CommandError(f"no session or compaction with id {id!r}")
                compaction = latest_report(session)
                if compaction is None:
                    raise CommandError(f"session {id} has no compaction report yet")
            chunks = iter([export_report_text(compaction, format)])
        else:
            session = Session.objects.filter(public_id=id).first()
            if session is None:
                raise CommandError(f"no session with id {id!r}")
            chunks = iter_session_export(session, format)  # streamed: constant memory
        if output:
            with Path(output).open("w", encoding="utf-8") as file:
                for chunk in chunks:
                    file.write(chunk)
            self.stderr.write(f"wrote {output}")
        else:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
