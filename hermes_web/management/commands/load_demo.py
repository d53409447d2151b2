from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-hermes"


class Command(BaseCommand):
    help = "Create the demo account and its demo conversations once (no-op when they exist)."

    def handle(self, *args, **options) -> None:
        if not settings.HERMES_DEMO_DATA:
            self.stdout.write("demo data disabled (HERMES_DEMO_DATA=false)")
            return
        User = get_user_model()
        user, created = User.objects.get_or_create(username=DEMO_USERNAME)
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save(update_fields=["password"])
        from hermes_web.demo import load_demo_conversations

        loaded = load_demo_conversations(user)
        self.stdout.write(
            f"demo account: {DEMO_USERNAME} / {DEMO_PASSWORD}"
            + (f" ({loaded} demo conversations loaded)" if loaded else "")
        )
