"""Parent links made by an import mark the sessions they change as changed (``updated_at``
is in the cache keys of the pages showing them)."""

from datetime import timedelta
from pathlib import Path

import pytest

from hermes_web.importers import import_path
from hermes_web.models import Session

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ROOT, CHILD = "20260511_180601_82f04a", "20260511_193215_1c9e0d"


def test_a_waiting_child_linked_by_its_parent_gets_a_new_updated_at(alice, tmp_path):
    lines = (FIXTURES / "hermes_export.jsonl").read_text().splitlines()
    (tmp_path / "child.jsonl").write_text(lines[1] + "\n")
    (tmp_path / "parent.jsonl").write_text(lines[0] + "\n")
    assert not import_path(tmp_path / "child.jsonl", owner=alice).errors
    child = Session.objects.get(public_id=f"{CHILD}.{alice.pk}")
    long_ago = child.updated_at - timedelta(days=30)
    Session.objects.filter(pk=child.pk).update(updated_at=long_ago)

    assert not import_path(tmp_path / "parent.jsonl", owner=alice).errors

    child.refresh_from_db()
    assert child.parent.public_id == f"{ROOT}.{alice.pk}"
    assert child.updated_at > long_ago + timedelta(days=29)
