from django.apps import AppConfig


class HermesWebConfig(AppConfig):
    name = "hermes_web"
    verbose_name = "Hermes"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from hermes_web.auth import connect_signals

        connect_signals()
