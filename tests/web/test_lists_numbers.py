"""Thousands separators on every number the lists and inspector pages print, and the
conversation list grouped by rotation chain (latest first, equal titles told apart)."""

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from hermes_web.models import Compaction, Session
from hermes_web.services.chat import start_chat
from hermes_web.services.sessions import resolve_tip
from tests.web.test_chat_undo import compacted

pytestmark = pytest.mark.django_db

# A run of five or more digits standing alone: a number printed without separators.
BARE = re.compile(r"(?<![\w.,:/-])\d{4,}(?![\w.,:/-])")


class VisibleText(HTMLParser):
    """The text a reader sees, plus title/desc text of SVG charts (read out by screen readers)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        for name, value in attrs:
            if name in ("title", "aria-label") and value:
                self.parts.append(value)

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def visible(response) -> str:
    assert response.status_code == 200
    parser = VisibleText()
    parser.feed(response.content.decode())
    return " ".join(parser.parts)


@pytest.mark.parametrize("mode", ["in_place", "rotation"])
def test_every_page_prints_numbers_with_separators(alice, alice_client, mode):
    session, run, _ = compacted(alice, mode)
    assert run.tokens_before >= 10_000  # the pages have five-digit numbers to print
    pages = {
        "inspector": reverse("compaction_detail", args=[run.public_id]),
        "timeline": reverse("conversation_timeline", args=[session.public_id]),
        "tree": reverse("conversation_tree", args=[session.public_id]),
        "compare": reverse("compare")
        + f"?session={session.public_id}&a={run.public_id}&b={run.public_id}",
        "list": reverse("conversation_list"),
        "home": reverse("home"),
    }
    before = f"{run.tokens_before:,}"
    # Short ids are hex prefixes that can be all digits by chance: they are not numbers.
    short_ids = {
        public_id[:n]
        for model in (Session, Compaction)
        for public_id in model.objects.values_list("public_id", flat=True)
        for n in (8, 6)
    }
    for name, url in pages.items():
        text = visible(alice_client.get(url))
        for short_id in short_ids:
            text = text.replace(short_id, "id")
        bare = [text[max(0, m.start() - 40) : m.end()] for m in BARE.finditer(text)]
        assert not bare, (name, bare[:5])
        if name != "list":
            assert before in text, name


def test_the_list_groups_a_rotation_chain_under_its_root(alice, alice_client):
    session, run, _ = compacted(alice, "rotation")
    child = resolve_tip(Session.objects.get(pk=session.pk))
    assert child.pk != session.pk
    response = alice_client.get(reverse("conversation_list"))
    page = response.content.decode()
    tips = _tip_rows(page)
    assert list(tips) == [child.public_id]
    members = re.findall(r'<tr class="chain-member">(.*?)</tr>', page, re.S)
    assert len(members) == 1
    assert session.public_id in members[0]
    compactions = re.findall(r'<td class="num">([^<]*)', tips[child.public_id])[2]
    assert compactions.strip() == "1"
    assert "chain of 2" in page
    # The live session comes first, its root below it.
    assert page.index(child.public_id) < page.index(session.public_id)


def test_equal_titles_are_told_apart_with_date_and_short_id(alice, alice_client):
    first = start_chat(owner=alice, title="What is in this workspace?")
    second = start_chat(owner=alice, title="What is in this workspace?")
    start_chat(owner=alice, title="Something else")
    page = alice_client.get(reverse("conversation_list")).content.decode()
    labels = {}
    for public_id, row in _tip_rows(page).items():
        found = re.search(r'class="muted small chain-when">([^<]*)<', row)
        labels[public_id] = found.group(1) if found else ""
    assert first.public_id[:6] in labels[first.public_id]
    assert second.public_id[:6] in labels[second.public_id]
    assert labels[first.public_id] != labels[second.public_id]
    assert [v for k, v in labels.items() if k not in (first.public_id, second.public_id)] == [""]


def _tip_rows(page: str) -> dict[str, str]:
    """The conversation list's chain rows, by the public id their title links to."""
    rows = {}
    for row in page.split('<tr class="chain-tip">')[1:]:
        row = row.split("</tr>")[0]
        rows[re.search(r'href="/conversations/([^/"]+)/', row).group(1)] = row
    return rows
