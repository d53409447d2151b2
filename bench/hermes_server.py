"""What the /v1 benches share: hermes-web's environment over a fake upstream, an API key, the
tool output their agents read every turn and the percentile they report.

A bench runs gunicorn itself (each with its own worker settings); this sets up the temporary
SQLite database it serves, migrated, with a ``bench`` user and its key.
"""

import os
from pathlib import Path


def prepare_hermes(
    tmp: Path, upstream_url: str, overrides: dict[str, str] | None = None
) -> tuple[dict[str, str], str]:
    """The environment for gunicorn (also applied to this process) and a fresh raw API key;
    ``overrides``: settings of the bench's own (another model, another context length)."""
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
        **(overrides or {}),
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


TOOL_OUTPUT_LINES = 40  # ~2,000 characters per tool result


def tool_output(turn: int) -> str:
    """What the benches' agent reads each turn: a grep-like listing, different every turn."""
    return "\n".join(
        f"src/mod_{turn}.py:{n}: def handler_{n}(event): return route(event, shard={n % 7})"
        for n in range(TOOL_OUTPUT_LINES)
    )


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]
