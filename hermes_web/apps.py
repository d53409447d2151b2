from django.apps import AppConfig


class HermesWebConfig(AppConfig):
    name = "hermes_web"
    verbose_name = "Hermes"
    default_auto_field = "django.db.models.BigAutoField"
