"""Needle recall at retained tokens: what a compacted context still holds of the region it
removed (the method of Hermes Agent's ``evals/compaction``; ``compaction/probes.py``).

1. Generated Claude Code-shaped sessions (``bench/claude_code_shapes.py``, our own text):
   each profile (``classic``, ``hermes``) compacts the whole session at a few windows; a bank
   of 15 questions is drawn from the middle it removed; the figure is the share of gold
   answers still literally in the compacted list, at its tokens.
2. Real transcripts, when a folder of them exists (``HERMES_BENCH_REAL``, default
   ``/tmp/real``; never in the repo): every Claude Code ``.jsonl`` (and Codex rollout) with
   native compactions is imported with ``manage.py import_sessions`` into a throwaway
   database; at each of the agent's own compaction points the recall test
   (``services.recall_test``, needle arm only) compares the agent's own result with our
   replay of the same rows at the agent's retained token budget and with each profile.

    .venv/bin/python bench/bench_recall.py
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TMP = tempfile.mkdtemp(prefix="hermes-bench-recall-")
os.environ.update(
    DATABASE_URL=f"sqlite:///{TMP}/db.sqlite3",
    HERMES_DATA_DIR=TMP,
    SECRET_KEY="bench-only",
    DJANGO_SETTINGS_MODULE="hermes_web.settings",
    HERMES_CHAT_MODEL="",  # needle only: no model is called
)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from bench.claude_code_shapes import claude_code_session  # noqa: E402
from compaction import CompactionConfig, compact, count_message_tokens  # noqa: E402
from compaction.probes import answers_in, draw_probes, message_text  # noqa: E402

REAL = Path(os.environ.get("HERMES_BENCH_REAL", "/tmp/real"))
WINDOWS = (32_000, 128_000)
SIZES = (600, 2_000)


def _pct(hits) -> str:
    return f"{100 * sum(hits) / len(hits):5.1f} %" if hits else "   —   "


def generated() -> None:
    print("Generated Claude Code-shaped sessions: needle recall (15 questions) @ tokens after")
    print(f"{'messages':>8} {'window':>8} {'tokens before':>14}  classic              hermes")
    for size in SIZES:
        messages = claude_code_session(size, seed=size)
        before = sum(count_message_tokens(m, CompactionConfig()) for m in messages)
        for window in WINDOWS:
            cells = []
            for profile in ("classic", "hermes"):
                config = CompactionConfig(context_length=window, profile=profile)
                result = compact(messages, config=config, force=True)
                report = result.report.to_dict()
                lo, hi = report["boundaries"]["middle"]
                bank = draw_probes(messages, range(lo, hi))
                text = "\n".join(message_text(m) for m in result.messages)
                hits = answers_in(bank, text)
                cells.append(f"{_pct(hits)} @ {report['tokens']['after']:>7,}")
            print(f"{size:>8} {window:>8,} {before:>14,}  {cells[0]}   {cells[1]}")


def real() -> None:
    files = sorted(REAL.glob("claude/*.jsonl")) + sorted(REAL.glob("codex/*.jsonl"))
    files = [
        f
        for f in files
        if b"compact_boundary" in f.read_bytes() or b'"compacted"' in f.read_bytes()
    ]
    if not files:
        print(f"\nNo real transcripts with native compactions under {REAL}: part 2 skipped.")
        return
    from hermes_web.models import Compaction, Session
    from hermes_web.services.native import replay_native
    from hermes_web.services.recall_test import run_recall_test, start_recall_test

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    print(f"\nReal transcripts under {REAL}: the agent's own compaction vs our replay of the same")
    print("rows at its retained budget, and each profile (needle recall of 15 questions @ tokens)")
    totals: dict[str, list[bool]] = {}
    for path in files:
        call_command("import_sessions", str(path), "--user", "bench", stdout=io.StringIO())
        sessions = Session.objects.filter(owner=user).order_by("-pk")[:1]
        for session in sessions:
            natives = Compaction.objects.filter(session=session).native().order_by("queued_at")
            for k, native in enumerate(natives, 1):
                if not native.input_rows().exists():
                    continue
                replay_native(native, requested_by=user)
                test = run_recall_test(start_recall_test(native, enqueue=False).pk)
                if test.status != "done" or not test.bank:
                    print(f"  {path.name} #{k}: {test.status} {test.error or 'no questions'}")
                    continue
                cells = []
                for context in test.results["contexts"]:
                    needle = next(a for a in context["arms"] if a["arm"] == "needle")
                    name = {
                        "this compaction": native.get_source_display(),
                        "our replay at its retained budget": "ours@budget",
                    }.get(context["label"], context["profile"])
                    totals.setdefault(name, []).extend(needle["hits"])
                    cells.append(
                        f"{name} {needle['recall']:5.1f} % @ {context['tokens_after'] or 0:,}"
                    )
                rows = native.input_rows().count()
                print(f"  {path.name} #{k} ({rows} rows, {len(test.bank)} q): " + " | ".join(cells))
            session.delete()
    print(
        "  overall: "
        + " | ".join(f"{name} {_pct(hits)} ({len(hits)} q)" for name, hits in totals.items())
    )


if __name__ == "__main__":
    generated()
    real()
