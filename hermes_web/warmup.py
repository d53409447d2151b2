"""Do once, before a server forks its workers, what every worker would otherwise do on its
first requests: import every view, compile every template, load the tokenizer.

``hermes_web.wsgi`` calls ``warm()``; under ``gunicorn --preload`` that happens in the master
process, so the workers start warm and share the memory. Measured on the 2-core dev box: the
first conversation-list request of a cold worker took 377 ms, a warm one 9 ms.
"""

import gc
import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import get_template
from django.urls import get_resolver

log = logging.getLogger(__name__)


def warm() -> None:
    """Import the views, compile the templates and load the token encoding; never raises."""
    try:
        _import_views(get_resolver().url_patterns)
        template_engine: dict[str, Any] = settings.TEMPLATES[0]
        for directory in template_engine["DIRS"]:
            root = Path(directory)
            for path in sorted(root.rglob("*.html")):
                try:
                    get_template(path.relative_to(root).as_posix())
                except (TemplateDoesNotExist, TemplateSyntaxError):  # surfaced on first use
                    log.warning("template %s did not compile at start-up", path)
        from compaction.tokens import get_encoding
        from hermes_web.services.sessions import DEFAULT_TOKEN_MODEL

        get_encoding(settings.HERMES_CHAT_MODEL or DEFAULT_TOKEN_MODEL)
        # litellm costs ~150 MB of every web process's RSS and only /v1 calls a model, so it
        # is imported here (once in gunicorn's --preload master, shared by the forked
        # workers) only on request; otherwise the first /v1 request of each process imports
        # it (issue #28: 4.5 s on an idle core, 15 s on a busy one).
        if settings.HERMES_WEB_PRELOAD_LITELLM:
            from hermes_web.openai_compat.upstream import preload_litellm

            preload_litellm()
        # Everything imported so far lives as long as the process: frozen, a garbage
        # collection in a forked worker neither scans those objects nor writes to their
        # pages, which stay shared with the master instead of being copied into each worker.
        gc.freeze()
    except Exception:  # a warm-up must never keep the server from starting
        log.exception("warm-up failed; workers will warm on their first requests")


def _import_views(patterns) -> None:
    for pattern in patterns:
        if hasattr(pattern, "url_patterns"):  # an include()
            _import_views(pattern.url_patterns)
        else:
            pattern.callback  # noqa: B018 (resolving the callback imports its module)


def warm_worker(*, calls_models: bool = True) -> float:
    """Pay at worker start what the first chat turn would otherwise pay; never raises.

    A worker that never calls a model (``calls_models`` false: a compaction worker with the
    deterministic summarizer) loads only the token encoding: litellm would cost it ~150 MB.

    The first reply after ``make run`` took 18 s against 2–3 s for later ones: the worker
    imported litellm (≈4.5 s), its streaming and OpenAI client code on the first call, the
    tool schemas, and loaded the tokenizer. Here: import litellm and the turn loop, load the
    token encoding, and stream one offline ``mock_response`` completion through litellm (no
    network: the bundled cost map is used). Returns the seconds it took.
    """
    import time

    started = time.perf_counter()
    try:
        if calls_models:
            from hermes_web.llm_models import litellm_module

            litellm = litellm_module()
            from hermes_web.agent.tools import tool_schemas
            from hermes_web.llm_models import chat_model, is_demo_model

            tool_schemas()
            model = chat_model()
            if is_demo_model(model):
                from hermes_web.agent.demo_model import register

                register()
            for _ in litellm.completion(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "warm up"}],
                mock_response="ok",
                stream=True,
                stream_options={"include_usage": True},
            ):
                pass
            # The OpenAI client class a real provider call builds on first use.
            import openai  # noqa: F401

        from compaction.tokens import get_encoding
        from hermes_web.services.sessions import DEFAULT_TOKEN_MODEL

        get_encoding(settings.HERMES_CHAT_MODEL or DEFAULT_TOKEN_MODEL)
        get_encoding(DEFAULT_TOKEN_MODEL)
    except Exception:  # a warm-up must never keep the worker from starting
        log.exception("worker warm-up failed; the first turn will warm it")
    elapsed = time.perf_counter() - started
    log.info(
        "worker warmed in %.1f s (%s)",
        elapsed,
        "litellm, turn loop, tokenizer" if calls_models else "tokenizer; no model calls here",
    )
    return elapsed
