"""Issue #28, idle processes ≤ 200 MB: litellm (~150 MB of RSS) only in processes that call a model."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_web.celery import worker_calls_models

ROOT = Path(__file__).resolve().parent.parent.parent

WORKER_START = """
import sys, types
import django
django.setup()
from hermes_web.celery import app, consumed_queues, _warm_worker
app.amqp.queues.select({queues!r})  # what `celery worker -Q ...` does before worker_init
worker = types.SimpleNamespace(app=app)
_warm_worker(sender=worker)
import hermes_web.tasks  # what the worker imports to run its tasks
print(sorted(consumed_queues(worker)), 'litellm' in sys.modules, 'tiktoken' in sys.modules)
"""


def _start_worker(tmp_path, queues: list[str], **env_extra: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HERMES_SUMMARY_MODEL", "HERMES_CHAT_MODEL", "HERMES_WORKER_WARMUP")
    }
    env.update(
        HERMES_DATA_DIR=str(tmp_path),
        DATABASE_URL="",
        DJANGO_SETTINGS_MODULE="hermes_web.settings",
        **env_extra,
    )
    done = subprocess.run(
        [sys.executable, "-c", WORKER_START.format(queues=queues)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "warm-up failed" not in done.stderr, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_compaction_worker_with_the_deterministic_summarizer_never_imports_litellm(tmp_path):
    assert _start_worker(tmp_path, ["compaction"]) == "['compaction'] False True"


def test_a_compaction_worker_with_an_llm_summarizer_starts_with_litellm_warm(tmp_path):
    llm = _start_worker(tmp_path, ["compaction"], HERMES_SUMMARY_MODEL="openai/gpt-4o-mini")
    assert llm == "['compaction'] True True"


@pytest.mark.parametrize(
    ("queues", "summary_model", "calls"),
    [
        ({"compaction"}, "", False),
        ({"default"}, "", False),
        ({"compaction", "default"}, "", False),
        ({"compaction"}, "openai/gpt-4o-mini", True),
        ({"chat"}, "", True),
        ({"chat", "compaction", "default"}, "", True),
        ({"someone-elses-queue"}, "", True),  # unknown work: warm, as before
        (set(), "", True),
    ],
)
def test_which_workers_call_models(settings, queues, summary_model, calls):
    settings.HERMES_SUMMARY_MODEL = summary_model
    settings.HERMES_CHAT_MODEL = ""
    assert worker_calls_models(queues) is calls
