"""``manage.py rebuild_search_index``: index every stored message and compaction again.

The triggers keep the index current on every write; this is for a database restored from
elsewhere, an index emptied by hand, or a changed indexing rule.
"""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from hermes_web.services.search_index import rebuild


class Command(BaseCommand):
    help = "Rebuild the search index from every stored message and compaction (progress printed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch", type=int, default=50_000, help="rows indexed per statement (by id range)"
        )

    def handle(self, *args, batch: int, **options) -> None:
        if batch < 1:
            raise CommandError("--batch must be at least 1")
        names = {"hermes_web_message": "messages", "hermes_web_compaction": "compactions"}

        def progress(table: str, done: int, top: int) -> None:
            self.stdout.write(f"{names[table]}: ids up to {done:,} of {top:,} indexed")

        counts = rebuild(batch=batch, progress=progress)
        self.stdout.write(
            self.style.SUCCESS(
                f"indexed {counts['hermes_web_message']:,} messages and "
                f"{counts['hermes_web_compaction']:,} compactions: {counts['entries']:,} entries"
            )
        )
