"""The time one import may take, and what it stored so far (to undo it when time runs out).

An upload is imported inside a web request: its budget (``HERMES_IMPORT_UPLOAD_SECONDS``,
90 s by default) is well below the web server's own timeout (gunicorn ``--timeout 120`` in
the Procfile), so the importer stops first, removes what it stored and says so, instead of
the worker being killed half-way (the probe's 500 with 10,916 of 20,000 sessions stored).
The command line has a longer one (``HERMES_IMPORT_CLI_SECONDS``). An archive's files share
their upload's budget: the outermost import owns it (a context variable).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from hermes_web.importers.base import ImportProblem


class OverBudget(ImportProblem):
    """The import ran past its time budget: nothing of it is kept."""


@dataclass
class Budget:
    """One import's deadline and the sessions it stored (their primary keys)."""

    seconds: float
    deadline: float
    stored: list[int] = field(default_factory=list)

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    def check(self, file: str) -> None:
        """Raise ``OverBudget`` once the deadline has passed."""
        if self.expired():
            raise self.problem(file)

    def problem(self, file: str) -> OverBudget:
        return OverBudget(
            file,
            0,
            f"import stopped after {self.seconds:.0f} s, the limit for one import here: "
            f"{len(self.stored):,} session(s) had been read; nothing stored "
            "(the command line, manage.py import_sessions, allows longer)",
        )


_current: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "import_budget", default=None
)


def current() -> Budget | None:
    """The budget of the import running in this context, if any."""
    return _current.get()


@contextmanager
def running(seconds: float) -> Iterator[tuple[Budget, bool]]:
    """(the budget, whether this call owns it): a new one of ``seconds``, or the enclosing
    import's (an archive's file)."""
    outer = _current.get()
    if outer is not None:
        yield outer, False
        return
    budget = Budget(seconds=seconds, deadline=time.monotonic() + seconds)
    token = _current.set(budget)
    try:
        yield budget, True
    finally:
        _current.reset(token)
