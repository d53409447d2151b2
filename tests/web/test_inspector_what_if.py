"""What-if you can iterate on: values kept, a URL that reproduces, parameters listed, errors per field."""

import pytest
from django.urls import reverse
from django.utils.html import escape

from hermes_web.models import Compaction
from tests.web.inspector_seed import seed_conversation

pytestmark = pytest.mark.django_db


def what_if_url(session):
    return reverse("what_if", args=[session.public_id])


def test_the_form_keeps_the_last_run_and_its_url_reproduces_it(alice, alice_client):
    session = seed_conversation(alice, n=120)
    posted = {
        "tail": "1500",
        "head": "2",
        "summarizer": "deterministic",
        "mode": "in_place",
        "focus": "the parser",
    }
    response = alice_client.post(what_if_url(session), posted)
    assert response.status_code == 302
    page = alice_client.get(response["Location"])
    values = page.context["values"]
    assert values["tail"] == "1500"
    assert values["head"] == "2"
    assert values["mode"] == "in_place"
    assert values["focus"] == "the parser"
    html = page.content.decode()
    assert 'value="1500"' in html
    assert '<option value="in_place" selected>' in html
    # The reproduce link alone (no run id) fills the form in the same way.
    link = page.context["reproduce_url"]
    assert "tail=1500" in link
    again = alice_client.get(what_if_url(session) + link)
    assert again.context["values"]["tail"] == "1500"
    assert again.context["values"]["focus"] == "the parser"
    # Opening an earlier run by its id alone shows its parameters too.
    run = Compaction.objects.get(session=session)
    by_id = alice_client.get(what_if_url(session), {"run": run.public_id})
    assert by_id.context["values"]["tail"] == "1500"
    assert by_id.context["values"]["mode"] == "in_place"


def test_the_result_lists_every_parameter_and_marks_the_changed_ones(alice, alice_client):
    session = seed_conversation(alice, n=120)
    response = alice_client.post(
        what_if_url(session), {"tail": "1500", "summarizer": "deterministic", "mode": "rotation"}
    )
    page = alice_client.get(response["Location"])
    rows = {p["label"]: p for p in page.context["run_params"]}
    assert rows["Tail budget (tokens)"]["differs"] is True
    assert rows["Tail budget (tokens)"]["used"] == "1,500"
    assert rows["Tail budget (tokens)"]["default"] == "20,000"
    assert rows["Head: messages kept after the system prompt"]["differs"] is False
    # The threshold as it is used: the hermes profile raises 50 % to 75 % on a 128,000
    # window; the form showed 75 % too, so it is no change (issue #37).
    assert rows["Threshold (% of the context window)"]["used"] == "75 %"
    assert rows["Threshold (% of the context window)"]["default"] == "75 %"
    assert rows["Threshold (% of the context window)"]["differs"] is False
    # The summarizer the form pre-selects is the default: choosing it is no change.
    assert rows["Summarizer asked for"]["differs"] is False
    assert rows["Engine profile"]["differs"] is False
    html = page.content.decode()
    assert html.count('class="badge changed"') == 1


def test_the_form_shows_the_defaults_that_run_and_an_untouched_run_changes_nothing(
    alice, alice_client
):
    session = seed_conversation(alice, n=120)  # window 128,000: the hermes floor is 75 %
    form = alice_client.get(what_if_url(session))
    assert form.context["values"]["threshold"] == 75.0
    assert form.context["values"]["summarizer"] == "deterministic"
    posted = {k: v for k, v in form.context["values"].items() if v not in ("", None)}
    response = alice_client.post(what_if_url(session), posted)
    page = alice_client.get(response["Location"])
    assert [p["label"] for p in page.context["run_params"] if p["differs"]] == []
    assert 'class="badge changed"' not in page.content.decode()


def test_the_threshold_floor_is_explained_next_to_the_field(alice, alice_client):
    session = seed_conversation(alice, n=20)  # window 128,000
    response = alice_client.post(
        what_if_url(session), {"threshold": "10", "summarizer": "nope"}
    )  # an error keeps the page, with the note for 10 %
    note = response.context["threshold_note"]
    # Each step in plain words, and why a lower percentage changes nothing (issue #27).
    assert note == (
        "10 % of this conversation's 128,000-token window is 12,800 tokens. The hermes profile "
        "never starts below 75 % of a window under 512,000 tokens, so 75 % is used: 96,000 "
        "tokens. Threshold: 96,000 tokens. Any percentage below 75.0 % gives this same "
        "threshold, so lowering it further has no effect."
    )
    assert escape(note) in response.content.decode()


def test_errors_point_at_their_field_in_plain_words(alice, alice_client):
    session = seed_conversation(alice, n=20)
    response = alice_client.post(
        what_if_url(session),
        {"content_head": "5000", "content_tail": "2000", "summarizer": "deterministic"},
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert "content_head + content_tail" not in html  # no internal names
    assert (
        "The start kept (5,000) plus the end kept (2,000) is 7,000 characters, longer than "
        "the truncation limit (6,000)." in html
    )
    assert 'aria-invalid="true"' in html
    assert 'aria-describedby="f-content_head-help f-content_head-error"' in html
    assert '<a href="#f-content_head">' in html
    assert not Compaction.objects.filter(session=session).exists()


def test_the_profile_choice_follows_the_installed_engine(alice, alice_client):
    from hermes_web.views.inspector import engine_has_profiles

    session = seed_conversation(alice, n=120)
    page = alice_client.get(what_if_url(session)).content.decode()
    if not engine_has_profiles():
        assert 'id="f-profile"' not in page  # nothing to choose before the engine has profiles
        return
    assert 'id="f-profile"' in page
    response = alice_client.post(
        what_if_url(session), {"profile": "classic", "summarizer": "deterministic"}
    )
    run = Compaction.objects.get(session=session)
    assert run.config["profile"] == "classic"
    assert "profile=classic" in response["Location"]


def test_the_what_if_form_overrides_only_what_differs_from_the_sessions_defaults(alice):
    from hermes_web.views.what_if import WhatIfForm

    session = seed_conversation(alice, n=20)
    unbound = WhatIfForm(session)
    assert unbound.error_messages() == {}
    assert unbound.overrides == {}
    assert unbound.values()["tail"] == unbound.defaults["tail_token_budget"]

    same = WhatIfForm(session, {"tail": str(unbound.defaults["tail_token_budget"]), "head": ""})
    assert same.is_valid()
    assert same.overrides == {}

    changed = WhatIfForm(session, {"threshold": "60", "head": "2", "summarizer": "auto"})
    assert changed.is_valid(), changed.errors
    assert changed.overrides == {"threshold_percent": 0.6, "protect_first_n": 2}
    assert changed.values()["summarizer"] == "auto"


def test_the_what_if_form_says_which_field_is_wrong_in_its_own_words(alice):
    from hermes_web.views.what_if import WhatIfForm

    session = seed_conversation(alice, n=20)
    errors = WhatIfForm(
        session, {"tail": "lots", "threshold": "120", "mode": "sideways", "summarizer": "x"}
    ).error_messages()
    assert errors["tail"] == "Tail budget (tokens): “lots” is not a whole number."
    assert errors["threshold"] == "Give a percentage above 0 and at most 100."
    assert errors["mode"] == "Mode: choose rotation or in-place."
    assert errors["summarizer"] == "Summarizer: choose auto or deterministic."
    engine = WhatIfForm(session, {"content_head": "9000"}).error_messages()
    assert "longer than the truncation limit" in engine["content_head"]
