"""Tables on a phone (issue #37, item 7): at 390 px the conversations list, the
inspector's final list and the timeline table keep each header word on one line (they
scroll inside their scroller) instead of collapsing to one character per line."""

import pytest

from hermes_web.demo import load_demo_conversations
from hermes_web.models import Compaction, Session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "phone-tables-123"

# Every header cell whose one-word label wraps inside itself: narrower than its word.
SQUEEZED = """() => [...document.querySelectorAll('main table th')]
  .filter(th => th.offsetParent !== null && th.textContent.trim())
  .filter(th => {
    const word = th.textContent.trim().split(/\\s+/).reduce((a, b) => (b.length > a.length ? b : a));
    const probe = document.createElement('span');
    probe.style.whiteSpace = 'nowrap';
    probe.textContent = word;
    th.appendChild(probe);
    const wide = probe.getBoundingClientRect().width;
    probe.remove();
    const style = getComputedStyle(th);
    const inner = th.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    return inner + 1 < wide;
  })
  .map(th => th.textContent.trim())"""


def test_tables_keep_their_header_words_whole_on_a_phone(live_server, page, django_user_model):
    user = django_user_model.objects.create_user("pat", password=PASSWORD)
    load_demo_conversations(user)
    run = Compaction.objects.filter(session__owner=user, status="committed").first()
    rotated = Session.objects.filter(owner=user, parent__isnull=True, children__isnull=False)[0]
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("pat")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()
    for path in (
        "/conversations/",
        f"/conversations/{rotated.public_id}/timeline/",
        f"/compactions/{run.public_id}/",
    ):
        page.goto(live_server.url + path)
        page.wait_for_load_state()
        assert page.evaluate(SQUEEZED) == [], path
