"""Two threads of a web process queueing their first task at the same moment both find it
(Celery's autodiscovery answers nothing to a thread that comes while another is inside it)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter, so the task modules are not imported yet; the discovery is slowed down
# so the second thread surely arrives while the first is importing.
SCRIPT = """
import os, threading, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
import django
django.setup()
import celery.loaders.base as loaders
from hermes_web import jobs

found = loaders.find_related_module
def slow(package, related_name):
    time.sleep(0.3)
    return found(package, related_name)
loaders.find_related_module = slow

errors = []
def first_queue():
    try:
        jobs.task(jobs.COMPACT_SESSION)
    except Exception as error:
        errors.append(repr(error))
threads = [threading.Thread(target=first_queue) for _ in range(3)]
for thread in threads:
    thread.start()
    time.sleep(0.05)
for thread in threads:
    thread.join()
print(errors)
"""


def test_threads_queueing_their_first_task_together_all_find_it():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
