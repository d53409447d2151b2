from django.core.management.base import BaseCommand, CommandError

from compaction import ConfigError
from hermes_web.models import Session
from hermes_web.services.compactions import CompactionRefused, request_compaction
from hermes_web.services.sessions import resolve_tip


class Command(BaseCommand):
    help = "Compact a session now, in this process (no worker needed), and print the result."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "id", help="session id (a rotated session continues in its latest child)"
        )
        parser.add_argument("--focus", default="", help="topic to keep in detail")
        parser.add_argument("--mode", choices=("rotation", "in-place", "in_place"))
        parser.add_argument("--dry-run", action="store_true", help="report only; change nothing")
        parser.add_argument("--deterministic", action="store_true", help="summarize without an LLM")

    def handle(
        self,
        *args,
        id: str,
        focus: str,
        mode: str | None,
        dry_run: bool,
        deterministic: bool,
        **options,
    ) -> None:
        session = Session.objects.filter(public_id=id).first()
        if session is None:
            raise CommandError(f"no session with id {id!r}")
        if not dry_run:
            session = resolve_tip(session)
        try:
            run = request_compaction(
                session=session,
                trigger="what_if" if dry_run else "manual",
                mode=mode,
                focus=focus,
                summarizer="deterministic" if deterministic else "auto",
                run_now=True,
            )
        except (CompactionRefused, ConfigError, ValueError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"compaction {run.public_id}: {run.status}" + (f" ({run.reason})" if run.reason else "")
        )
        if run.error:
            self.stdout.write(f"error: {run.error}")
        if run.tokens_before is not None:
            ratio = f"{run.ratio:.1%}" if run.ratio is not None else "n/a"
            self.stdout.write(
                f"tokens: {run.tokens_before} -> {run.tokens_after} ({ratio} of before)"
            )
        counts = (run.report or {}).get("counts") or {}
        if counts:
            self.stdout.write(
                f"messages: {counts.get('messages_before')} -> {counts.get('messages_after')}"
            )
        if run.summarizer:
            self.stdout.write(
                f"summarizer: {run.summarizer}"
                + (f" ({run.summarizer_model})" if run.summarizer_model else "")
            )
        if run.result_session is not None and run.result_session_id != session.pk:
            self.stdout.write(f"continues in session {run.result_session.public_id}")
        if run.status in ("failed", "aborted"):
            raise CommandError(f"compaction {run.status}")
