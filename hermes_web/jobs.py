"""The one seam through which services queue Celery work.

Services name the task they want (its registered name is the contract) instead of importing
``hermes_web.tasks``: the tasks call the services, so a service importing the tasks module
was the project's only import cycle (runner ↔ services.compactions ↔ tasks). Layers now point
one way: tasks → services → jobs → the Celery app.
"""

from __future__ import annotations

import logging
import threading

from django.db import transaction

log = logging.getLogger(__name__)

# Celery's autodiscovery returns nothing at once while another thread is inside it (its
# ``_RACE_PROTECTION`` flag), so two requests of a threaded server queueing their first task
# together would see ``NotRegistered``: the second waits for the first's import instead.
_discovering = threading.Lock()

COMPACT_SESSION = "hermes_web.tasks.compact_session"
RUN_AGENT_TURN = "hermes_web.tasks.run_agent_turn"
INDEX_SEARCH = "hermes_web.tasks.index_search"


def task(name: str):
    """The registered Celery task called ``name``.

    A web process imports the task modules only when it first queues something (Celery's
    autodiscovery, run here on demand), as it did before when a service imported them.
    """
    from hermes_web.celery import app

    if name not in app.tasks:
        with _discovering:
            if name not in app.tasks:
                app.loader.import_default_modules()
    return app.tasks[name]


def enqueue_on_commit(task_or_name, row_id: int) -> None:
    """Send ``task(row_id)`` once the current transaction commits, never failing the request.

    ``task_or_name`` is a Celery task or its registered name. If the broker cannot be reached
    the row stays queued in the database and ``recover_stranded_runs`` sends it again later:
    the user's request still succeeds.
    """

    def send() -> None:
        job = task(task_or_name) if isinstance(task_or_name, str) else task_or_name
        if job.app.conf.task_always_eager:
            job.delay(row_id)  # runs inline: its own errors must surface, not be logged away
            return
        try:
            job.delay(row_id)
        except Exception as error:  # each transport raises its own connection errors
            log.warning("could not queue %s(%s): %s; it will be re-sent", job.name, row_id, error)

    transaction.on_commit(send)


def queue_compaction(compaction_id: int) -> None:
    """Run compaction ``compaction_id`` on a worker once this transaction commits."""
    enqueue_on_commit(COMPACT_SESSION, compaction_id)


def queue_agent_turn(turn_id: int) -> None:
    """Run agent turn ``turn_id`` on a worker once this transaction commits."""
    enqueue_on_commit(RUN_AGENT_TURN, turn_id)


def send_compaction(compaction_id: int) -> None:
    """Send compaction ``compaction_id`` to the workers now; the broker's errors propagate."""
    task(COMPACT_SESSION).delay(compaction_id)


def queue_search_index(session_id: int) -> None:
    """Index the rows written so far for search (a worker, once this transaction commits):
    an import stores thousands of rows, which a worker indexes rather than the request."""
    enqueue_on_commit(INDEX_SEARCH, session_id)
