"""Server time of the inspector pages on big data (target ≤ 300 ms each).

- the conversation view (first chunk of 200) of a 10,000-message conversation;
- the compaction inspector of a rotation compaction of that conversation;
- the what-if page and Compare on that conversation, the signed-in home page;
- the rotation tree of a chain of 50 sessions.

Runs on a temporary SQLite database; times Django test-client GETs (median of several).
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TMP = tempfile.mkdtemp(prefix="hermes-bench-inspector-")
os.environ.update(
    DATABASE_URL=f"sqlite:///{TMP}/db.sqlite3",
    HERMES_DATA_DIR=TMP,
    SECRET_KEY="bench-only",
    DJANGO_SETTINGS_MODULE="hermes_web.settings",
)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from compaction import CompactionConfig, count_message_tokens, generate_conversation  # noqa: E402
from hermes_web.models import Compaction, Message, Session  # noqa: E402
from hermes_web.services.compactions import request_compaction  # noqa: E402
from hermes_web.services.sessions import create_session  # noqa: E402

TARGET_MS = 300
RUNS = 7


def seed_big(owner, n: int) -> Session:
    """A 10k-message session, bulk-inserted (seeding speed is not what is measured)."""
    session = create_session(owner=owner, title=f"{n} messages", context_length=200_000)
    config = CompactionConfig()
    rows = []
    for position, m in enumerate(generate_conversation(n, seed=7)):
        rows.append(
            Message(
                session=session,
                position=position,
                role=m["role"],
                content=m.get("content"),
                tool_calls=m.get("tool_calls"),
                tool_call_id=m.get("tool_call_id") or "",
                reasoning=m.get("reasoning") or m.get("reasoning_content"),
                token_count=count_message_tokens(m, config),
            )
        )
    Message.objects.bulk_create(rows, batch_size=500)
    return session


def seed_chain(owner, length: int) -> Session:
    """A rotation chain of ``length`` sessions with a committed compaction on every edge."""
    root = create_session(owner=owner, title="chain")
    parent = root
    now = timezone.now()
    for i in range(1, length):
        child = Session.objects.create(owner=owner, title="chain", parent=parent, root=root)
        Message.objects.bulk_create(
            Message(session=s, position=p, role="user", content=f"m{p}", token_count=10)
            for s in (parent,)
            for p in range(20)
        )
        Compaction.objects.create(
            session=parent,
            result_session=child,
            mode="rotation",
            status="committed",
            tokens_before=90_000,
            tokens_after=20_000 + i,
            summarizer="deterministic",
            finished_at=now,
            report={},
        )
        Session.objects.filter(pk=parent.pk).update(ended_at=now, end_reason="compression")
        parent = child
    return parent


def median_ms(client: Client, url: str, **headers) -> tuple[float, int]:
    client.get(url, **headers)  # warm-up: template compilation, first queries
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        response = client.get(url, **headers)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), len(response.content)


def main() -> int:
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")
    client = Client()
    client.force_login(user)

    t = time.perf_counter()
    big = seed_big(user, 10_000)
    print(f"seeded 10,000 messages in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    run = request_compaction(
        session=big, requested_by=user, summarizer="deterministic", run_now=True
    )
    print(
        f"rotation compaction ({run.status}) in {time.perf_counter() - t:.1f} s; "
        f"{run.tokens_before} → {run.tokens_after} tokens"
    )
    what_if = request_compaction(
        session=big,
        requested_by=user,
        trigger="what_if",
        summarizer="deterministic",
        config_overrides={"tail_token_budget": 8_000},
        run_now=True,
    )
    tip = seed_chain(user, 50)

    cases = [
        ("conversation view, first chunk (10k messages)", f"/conversations/{big.public_id}/", {}),
        (
            "conversation view, htmx chunk at 5,000",
            f"/conversations/{big.public_id}/?start=5000&chunk=1",
            {"HTTP_HX_REQUEST": "true"},
        ),
        ("compaction inspector (10k messages)", f"/compactions/{run.public_id}/", {}),
        (
            "what-if page with its run (10k messages)",
            f"/conversations/{big.public_id}/what-if/?run={what_if.public_id}",
            {},
        ),
        (
            "compare two runs (10k messages)",
            f"/compare/?session={big.public_id}&a={run.public_id}&b={what_if.public_id}",
            {},
        ),
        ("home overview", "/", {}),
        ("rotation tree (50 sessions)", f"/conversations/{tip.public_id}/tree/", {}),
        ("timeline (49 compactions)", f"/conversations/{tip.public_id}/timeline/", {}),
    ]
    failed = 0
    for label, url, headers in cases:
        ms, size = median_ms(client, url, **headers)
        verdict = "PASS" if ms <= TARGET_MS else "MISS"
        failed += verdict == "MISS"
        print(
            f"{label:50s} {ms:8.1f} ms  ({size / 1024:.0f} KiB)  target ≤ {TARGET_MS} ms  {verdict}"
        )
    # Not page-time targets: what a first visit costs before the panel cache holds the page.
    from django.core.cache import cache

    firsts = []
    for _ in range(3):
        cache.clear()
        start = time.perf_counter()
        client.get(f"/compactions/{run.public_id}/")
        firsts.append((time.perf_counter() - start) * 1000)
    print(
        f"{'compaction inspector, first (uncached) load':50s} {statistics.median(firsts):8.1f} ms  (informational)"
    )
    # The fact-survival audit reads the whole middle once, then is cached.
    start = time.perf_counter()
    client.get(f"/compactions/{run.public_id}/audit/")
    print(
        f"{'fact-survival audit, first (uncached) load':50s} {(time.perf_counter() - start) * 1000:8.1f} ms  (informational)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
