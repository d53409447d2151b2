"""What the /v1 benches share: hermes-web's environment over a fake upstream, and an API key.

A bench runs gunicorn itself (each with its own worker settings); this sets up the temporary
SQLite database it serves, migrated, with a ``bench`` user and its key.
"""

import os
from pathlib import Path


def prepare_hermes(tmp: Path, upstream_url: str) -> tuple[dict[str, str], str]:
    """The environment for gunicorn (also applied to this process) and a fresh raw API key."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
        "SECRET_KEY": "bench",
        "CELERY_BROKER_URL": "memory://",
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "HERMES_DATA_DIR": str(tmp),
        "HERMES_WORKSPACE": str(tmp),
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
        "HERMES_CHAT_MODEL": "openai/fake-chat",
        "HERMES_CHAT_API_BASE": upstream_url,
        "HERMES_CHAT_API_KEY": "x",
        "HERMES_SUMMARY_MODEL": "",
        "HERMES_LLM_MAX_RETRIES": "0",
        "HERMES_CONTEXT_LENGTH": "128000",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from hermes_web.models import ApiKey

    user = get_user_model().objects.create_user("bench")
    return env, ApiKey.issue(owner=user, name="bench")[1]
