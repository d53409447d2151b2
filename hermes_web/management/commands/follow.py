import signal
import threading
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from hermes_web.importers.follow import AGENT_HOMES, FollowOutcome, agent_homes


class Command(BaseCommand):
    help = (
        "Follow agents' folders as they write them: new sessions are imported, a file that "
        "grew appends its new rows to its stored session, a file rewritten otherwise becomes "
        "a new version. The folders are only read. Stop with Ctrl-C."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "paths",
            nargs="*",
            help="folders (or files) to follow; default: the agent homes that exist ("
            + ", ".join(f"~/{home}" for home in AGENT_HOMES)
            + ")",
        )
        parser.add_argument("--user", required=True, help="username that will own the sessions")
        parser.add_argument(
            "--poll",
            action="store_true",
            help="poll the folders (every --poll-seconds) instead of the kernel's file events "
            "(network and container file systems may send none)",
        )
        parser.add_argument("--poll-seconds", type=float, default=1.0)
        parser.add_argument(
            "--debounce",
            type=float,
            default=0.3,
            help="seconds a file must be quiet before it is imported (at most 2 s after its "
            "first write)",
        )
        parser.add_argument(
            "--once", action="store_true", help="import what changed once, then stop"
        )

    def handle(
        self,
        *args,
        paths: list[str],
        user: str,
        poll: bool,
        poll_seconds: float,
        debounce: float,
        once: bool,
        **options,
    ) -> None:
        from hermes_web.importers.follow_watch import Follower  # watchdog: only when following

        try:
            owner = get_user_model().objects.get(username=user)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user named {user!r}") from None
        roots = [Path(p).expanduser() for p in paths] or agent_homes()
        if not roots:
            raise CommandError(
                "no agent home found (" + ", ".join(f"~/{h}" for h in AGENT_HOMES) + "): "
                "name the folders to follow"
            )
        for root in roots:
            if not root.is_dir():
                raise CommandError(f"{root}: not a folder")
        follower = Follower(
            roots,
            owner,
            poll=poll,
            poll_seconds=poll_seconds,
            debounce=debounce,
            report=self._report,
        )
        stop = threading.Event()
        if once:
            follower.start()
            follower.stop()
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        follower.start()
        how = f"polling every {poll_seconds:g} s" if follower.polling else "file events"
        self.stdout.write(f"following {', '.join(map(str, roots))} ({how}); Ctrl-C stops")
        self.stdout.flush()
        try:
            follower.run(stop)
        finally:
            follower.stop()

    def _report(self, outcome: FollowOutcome) -> None:
        stream = self.stderr if outcome.problems else self.stdout
        stream.write(f"{outcome.path}: {outcome.line()}")
        stream.flush()
