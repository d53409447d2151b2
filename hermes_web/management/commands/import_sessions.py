from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from hermes_web.importers import FORMATS, import_path

SUFFIXES = {".jsonl", ".json", ".db", ".sqlite", ".sqlite3"}


class Command(BaseCommand):
    help = "Import conversations (Hermes JSONL or state.db, OpenAI JSON, Claude Code, Codex) for a user."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "path", help="a file, or a directory whose .jsonl/.json/.db files are imported"
        )
        parser.add_argument("--format", default="auto", choices=("auto", *FORMATS))
        parser.add_argument("--user", required=True, help="username that will own the sessions")

    def handle(self, *args, path: str, format: str, user: str, **options) -> None:
        try:
            owner = get_user_model().objects.get(username=user)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {user!r}") from None
        root = Path(path)
        if not root.exists():
            raise CommandError(f"{path}: no such file or directory")
        files = (
            sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
            if root.is_dir()
            else [root]
        )
        failed = 0
        for file in files:
            report = import_path(file, owner=owner, fmt=format, name=str(file))
            for session in report.sessions:
                self.stdout.write(
                    f"imported {session.public_id}  {session.messages.count()} messages  {session.title}"
                )
            for skipped in report.skipped:
                self.stdout.write(f"skipped {skipped}")
            for problem in report.errors:
                self.stderr.write(f"error: {problem}")
            failed += len(report.errors)
        if failed:
            raise CommandError(
                f"{failed} session(s) or file(s) failed to import; the others were imported"
            )
