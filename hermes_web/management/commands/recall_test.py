from django.core.management.base import BaseCommand, CommandError

from hermes_web.models import Compaction, RecallTest
from hermes_web.services.recall_test import run_recall_test, start_recall_test


class Command(BaseCommand):
    help = (
        "Run a recall test of a compaction now, in this process: questions from the region it "
        "removed, answered from what is left (needle; model arms with a configured chat model)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("id", help="compaction id")
        parser.add_argument("--questions", type=int, default=15, help="bank size (1-100)")

    def handle(self, *args, id: str, questions: int, **options) -> None:
        compaction = Compaction.objects.filter(public_id=id).first()
        if compaction is None:
            raise CommandError(f"no compaction with id {id!r}")
        try:
            # Stored first (never sent: the queue is not this command's), then run here.
            test = start_recall_test(compaction, questions=questions, enqueue=False)
        except ValueError as error:
            raise CommandError(str(error)) from None
        test = run_recall_test(test.pk)
        if test.status != RecallTest.Status.DONE:
            raise CommandError(f"recall test {test.public_id} {test.status}: {test.error}")
        results = test.results
        self.stdout.write(f"recall test {test.public_id}: {results['questions']} questions")
        for context in results["contexts"]:
            arms = ", ".join(
                f"{a['arm']} {a['recall']} %"
                if a["status"] == "done"
                else f"{a['arm']} {a['status']}"
                for a in context["arms"]
            )
            self.stdout.write(f"  {context['label']} @ {context['tokens_after']} tokens: {arms}")
        control = results["control"]
        self.stdout.write(
            f"  control (uncompacted) @ {control.get('tokens')} tokens: needle "
            f"{results['control_needle']['recall']} %, model "
            + (f"{control['recall']} %" if control["status"] == "done" else control["status"])
        )
