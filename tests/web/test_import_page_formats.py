"""The Import page lists every format the importer registry knows and links a duplicate
to the conversation already stored (issue #37, item 6)."""

import html as html_lib
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from hermes_web.importers import FORMATS
from hermes_web.models import Session
from hermes_web.views.imports import FORMAT_HELP

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_every_format_in_the_dropdown_is_explained_in_the_help_list(alice_client):
    page = html_lib.unescape(alice_client.get("/import/").content.decode())
    assert set(FORMAT_HELP) == set(FORMATS)
    offered = re.findall(r'<option value="([^"]+)"', page)
    assert set(offered) == {"auto", *FORMATS}
    help_list = page.split('id="format-list">', 1)[1].split("</ul>", 1)[0]
    for name in ("Gemini CLI", "Aider", "OpenHands", "Cline / Roo Code", "Continue", "Codex"):
        assert f"<strong>{name}</strong>" in help_list
    assert help_list.count("<li>") == len(FORMATS)


def test_a_duplicate_links_the_stored_conversation_and_is_no_red_error(alice_client):
    def upload():
        name = "codex_rollout.jsonl"
        return SimpleUploadedFile(name, (FIXTURES / name).read_bytes())

    assert alice_client.post("/import/", {"file": upload()}).status_code == 200
    stored = Session.objects.get()
    again = alice_client.post("/import/", {"file": upload()})
    page = again.content.decode()
    assert "already imported: a duplicate" in page
    results = page.split('id="import-results"', 1)[1]
    assert 'class="errorlist"' not in results
    link = reverse("conversation_detail", args=[stored.public_id])
    assert f'<a href="{link}">open the stored conversation</a>' in results
