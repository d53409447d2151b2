from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from hermes_web.importers import FORMATS, import_path

SUFFIXES = {".jsonl", ".json", ".db", ".sqlite", ".sqlite3"}
NAMES = (".aider.chat.history.md",)  # logs picked up by name: no other .md file is a session


def fidelity_line(report: dict) -> str:
    """One line of the fidelity report: what was kept, and what was not and why."""
    parts = [
        f"{report['records']} records",
        f"{report['messages']} messages",
        f"{report['tool_results_paired']}/{report['tool_calls']} tool calls paired",
    ]
    for key, label in (
        ("stub_results", "stub results"),
        ("meta_rows", "meta rows"),
        ("archived", "archived"),
        ("summaries", "summaries"),
        ("images", "images"),
        ("reasoning", "with reasoning"),
    ):
        if report.get(key):
            parts.append(f"{report[key]} {label}")
    if report.get("metadata"):
        parts.append("metadata: " + ", ".join(report["metadata"]))
    return "; ".join(parts)


class Command(BaseCommand):
    help = (
        "Import conversations (Hermes JSONL, JSON, transcripts or state.db, OpenAI JSON, "
        "Claude Code, Codex) for a user. The source files are only read."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "path", help="a file, or a directory whose .jsonl/.json/.db files are imported"
        )
        parser.add_argument("--format", default="auto", choices=("auto", *FORMATS))
        parser.add_argument("--user", required=True, help="username that will own the sessions")
        parser.add_argument(
            "--skip-existing",
            action="store_true",
            help="sessions imported before are skipped quietly instead of failing as duplicates",
        )

    def handle(
        self, *args, path: str, format: str, user: str, skip_existing: bool, **options
    ) -> None:
        try:
            owner = get_user_model().objects.get(username=user)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {user!r}") from None
        root = Path(path)
        if not root.exists():
            raise CommandError(f"{path}: no such file or directory")
        files = (
            sorted(
                (
                    p
                    for p in root.rglob("*")
                    if p.is_file() and (p.suffix.lower() in SUFFIXES or p.name.endswith(NAMES))
                ),
                key=str,  # a main transcript before its <session>/subagents/ directory
            )
            if root.is_dir()
            else [root]
        )
        failed = duplicates = 0
        for file in files:
            report = import_path(
                file, owner=owner, fmt=format, name=str(file), skip_existing=skip_existing
            )
            for session in report.sessions:
                self.stdout.write(
                    f"imported {session.public_id}  {session.message_total} messages  "
                    f"{session.title}"
                )
                fidelity = getattr(session, "fidelity", None)
                if fidelity:
                    self.stdout.write(f"  kept: {fidelity_line(fidelity)}")
                    for why, count in fidelity["skipped"].items():
                        self.stdout.write(f"  not a message: {count} × {why}")
            for skipped in report.skipped:
                self.stdout.write(f"skipped {skipped}")
            for warning in report.warnings:
                self.stderr.write(f"warning: {report.file}: {warning}")
            for problem in report.duplicates:
                self.stderr.write(f"duplicate: {problem}")
            for problem in report.errors:
                self.stderr.write(f"error: {problem}")
            failed += len(report.errors)
            duplicates += len(report.duplicates)
        if failed or duplicates:
            raise CommandError(
                f"{failed} session(s) or file(s) failed to import and {duplicates} were "
                "already imported (--skip-existing skips those); the others were imported"
            )
