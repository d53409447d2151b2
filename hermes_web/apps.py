from django.apps import AppConfig
from django.db.models.signals import post_migrate


def create_cache_tables(sender: AppConfig, using: str = "default", **kwargs: object) -> None:
    """``createcachetable`` after every migrate: the sign-up limit counts in a database cache
    when there is no Redis, so ``make run``, ``make run-scaled`` and the test databases all
    need its table (the command skips tables that exist)."""
    from django.core.management import call_command

    call_command("createcachetable", database=using, verbosity=0)


class HermesWebConfig(AppConfig):
    name = "hermes_web"
    verbose_name = "Hermes"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from hermes_web.auth import connect_signals

        connect_signals()
        post_migrate.connect(create_cache_tables, sender=self, dispatch_uid="hermes-cache-tables")
