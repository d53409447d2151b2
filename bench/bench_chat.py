"""Per-turn overhead the app adds on top of the model's own latency.

200 chat turns run through the agent runner directly (no worker) on a temporary SQLite
database, against the local fake OpenAI-compatible server answering instantly and streaming.
The model's share of each turn is measured as the wall time of one identical streamed
litellm call made on its own; the app's overhead is the turn's wall time minus that (storing
the user message and turn, loading the conversation, streaming bookkeeping, storing the reply
with its token count, the auto-compaction check). Target: median ≤ 50 ms.
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TURNS = 200
TARGET_MEDIAN_MS = 50.0


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="bench_chat_"))
    os.environ.update(
        {
            "DATABASE_URL": f"sqlite:///{tmp / 'bench.sqlite3'}",
            "SECRET_KEY": "bench",
            "CELERY_BROKER_URL": "memory://",
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "HERMES_DATA_DIR": str(tmp),
            "HERMES_WORKSPACE": str(tmp),
            "LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
        }
    )
    from tests.fake_openai import FakeOpenAIServer

    server = FakeOpenAIServer(
        default_reply={"content": "An answer of a few words.", "prompt_tokens": 1_000}
    ).start()
    os.environ.update(
        {
            "HERMES_CHAT_MODEL": "openai/fake-chat",
            "HERMES_CHAT_API_BASE": server.base_url,
            "HERMES_CHAT_API_KEY": "x",
            "HERMES_LLM_MAX_RETRIES": "0",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import transaction

    call_command("migrate", verbosity=0)
    import litellm
    from django.contrib.auth import get_user_model

    from hermes_web.agent.runner import run_turn, send_message, start_chat

    litellm.suppress_debug_info = True
    user = get_user_model().objects.create_user("bench")
    session = start_chat(owner=user)

    def model_only(messages: list[dict]) -> float:
        started = time.perf_counter()
        for _ in litellm.completion(
            model="openai/fake-chat",
            api_base=server.base_url,
            api_key="x",
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            max_retries=0,
            num_retries=0,
        ):
            pass
        return time.perf_counter() - started

    from hermes_web.services.sessions import openai_messages

    for _ in range(5):  # warm up: imports, tokenizer, connections
        model_only([{"role": "user", "content": "warm up"}])
        with transaction.atomic():
            turn = send_message(session=session, text="warm up")
        run_turn(turn.pk)

    totals, overheads, models = [], [], []
    for i in range(TURNS):
        started = time.perf_counter()
        # The on_commit enqueue is captured by the atomic block's end; no broker is involved.
        with transaction.atomic():
            turn = send_message(
                session=session, text=f"question {i}: what does the ingest loop do?"
            )
        run_turn(turn.pk)
        total = time.perf_counter() - started
        model = model_only(openai_messages(session))
        totals.append(total * 1000)
        models.append(model * 1000)
        overheads.append(max(0.0, total - model) * 1000)
    server.stop()

    def p95(values: list[float]) -> float:
        return sorted(values)[int(len(values) * 0.95) - 1]

    median = statistics.median(overheads)
    print(f"chat turns: {TURNS} (conversation grew to {len(openai_messages(session))} messages)")
    print(
        f"turn wall time      median {statistics.median(totals):7.1f} ms   p95 {p95(totals):7.1f} ms"
    )
    print(
        f"model call alone    median {statistics.median(models):7.1f} ms   p95 {p95(models):7.1f} ms"
    )
    print(
        f"app overhead/turn   median {median:7.1f} ms   p95 {p95(overheads):7.1f} ms   "
        f"(target median <= {TARGET_MEDIAN_MS:.0f} ms)"
    )
    print("PASS" if median <= TARGET_MEDIAN_MS else "MISS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
