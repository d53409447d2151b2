import stat
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from hermes_web.importers import FORMATS, import_directory, import_path, summary_line
from hermes_web.importers.base import damage_lines
from hermes_web.importers.directory import file_kind


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
        ("tool_result_files_joined", "tool-results files joined"),
        ("tool_result_files_missing", "tool-results files missing"),
        ("tool_result_files_too_large", "tool-results files too large (stub kept)"),
        ("compaction_agents_attached", "compaction agents attached"),
        ("control_characters_replaced", "control characters replaced (NUL shown as ␀)"),
    ):
        if report.get(key):
            parts.append(f"{report[key]} {label}")
    if report.get("metadata"):
        parts.append("metadata: " + ", ".join(report["metadata"]))
    parts.extend(damage_lines(report))
    return "; ".join(parts)


class Command(BaseCommand):
    help = (
        "Import conversations (Hermes JSONL, JSON, transcripts or state.db, OpenAI JSON, "
        "Claude Code, Codex) for a user. The source files are only read."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "path",
            help="a file, or a directory whose .jsonl/.json/.db files and Claude Code session "
            "folders are imported (symbolic links are not followed)",
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
        try:
            mode = root.stat().st_mode
        except FileNotFoundError:
            raise CommandError(f"{path}: no such file or directory") from None
        except OSError as error:
            raise CommandError(f"{path}: cannot read: {error.strerror or error}") from None
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):  # a FIFO would block forever
            raise CommandError(f"{path}: {file_kind(mode)}, not a file or directory: refused")
        if stat.S_ISDIR(mode):
            reports, passed_over = import_directory(
                root, owner=owner, fmt=format, skip_existing=skip_existing
            )
            for where, why in passed_over:
                self.stderr.write(f"skipped {where}: {why}")
        else:
            reports = [
                import_path(
                    root, owner=owner, fmt=format, name=str(root), skip_existing=skip_existing
                )
            ]
        failed = duplicates = again = sessions = messages = empties = archived = 0
        for report in reports:
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
            if report.skipped.left_off:
                self.stdout.write(f"skipped {report.skipped.left_off} more (not listed)")
            for warning in report.warnings:
                self.stderr.write(f"warning: {report.file}: {warning}")
            for problem in report.duplicates:
                self.stderr.write(f"duplicate: {problem}")
            if report.duplicates.left_off:
                self.stderr.write(
                    f"duplicate: {report.file}: {report.duplicates.left_off} more not listed"
                )
            for problem in report.errors:
                self.stderr.write(f"error: {problem}")
            if report.errors.left_off:
                self.stderr.write(f"error: {report.file}: {report.errors.left_off} more not listed")
            for empty in report.empties:
                self.stdout.write(f"left out {empty}")
            failed += report.errors.total
            duplicates += report.duplicates.total
            again += report.duplicates.total + report.skipped.total
            sessions += len(report.sessions)
            messages += report.messages
            archived += report.archived
            empties += len(report.empties)
        self.stdout.write(
            "summary: " + summary_line(sessions, messages, empties, again, failed, archived)
        )
        if failed or duplicates:
            raise CommandError(
                f"{failed} session(s) or file(s) failed to import and {duplicates} were "
                "already imported (--skip-existing skips those); the others were imported"
            )
