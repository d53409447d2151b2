import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db


def test_first_visit_on_a_fresh_install_leads_to_signup(client):
    assert client.get("/").url == "/accounts/signup/"
    assert client.get("/accounts/login/").url == "/accounts/signup/"
    page = client.get("/accounts/signup/")
    assert b"fresh install" in page.content


def test_with_users_the_home_page_is_the_landing_page_with_log_in(client, alice):
    response = client.get("/")
    assert response.status_code == 200
    assert b'href="/accounts/login/"' in response.content


@pytest.mark.parametrize("url", ["/conversations/", "/chat/", "/compare/", "/import/"])
def test_pages_require_login(client, alice, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/")


def test_api_requires_auth(client):
    assert client.get("/api/me").status_code == 401


def test_signup_creates_the_account_and_logs_in(client):
    response = client.post(
        "/accounts/signup/",
        {
            "username": "carol",
            "password1": "a-long-pass-phrase-1",
            "password2": "a-long-pass-phrase-1",
        },
    )
    assert response.status_code == 302
    assert get_user_model().objects.filter(username="carol").exists()
    assert client.get("/api/me").json() == {"username": "carol"}


def test_signup_shows_errors_and_stores_nothing_on_bad_input(client):
    response = client.post(
        "/accounts/signup/", {"username": "carol", "password1": "x", "password2": "y"}
    )
    assert response.status_code == 200
    assert b"didn" in response.content  # "The two password fields didn't match."
    assert not get_user_model().objects.filter(username="carol").exists()


def test_login_and_logout(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-pass-123"})
    assert response.status_code == 302
    assert client.get("/conversations/").status_code == 200
    client.post("/accounts/logout/")
    assert client.get("/conversations/").status_code == 302


def test_base_page_loads_htmx_locally_and_sends_csrf_to_htmx(alice_client):
    html = alice_client.get("/conversations/").content.decode()
    assert "/static/django_htmx/htmx-2.min.js" in html
    assert 'hx-headers=\'{"X-CSRFToken": "' in html
    assert "https://" not in html.split("<body")[0]  # no CDN in <head>
    for label in ("Conversations", "Chat", "Compare", "Import", "API docs"):
        assert f">{label}</a>" in html


def test_static_htmx_is_served(client):
    response = client.get("/static/django_htmx/htmx-2.min.js")
    assert response.status_code == 200


def test_empty_conversation_list_points_to_chat_and_import(alice_client):
    html = alice_client.get("/conversations/").content.decode()
    assert "No conversations yet" in html
    assert 'href="/chat/"' in html
    assert 'href="/import/"' in html


def test_the_signed_in_user_is_read_from_the_cache_and_dropped_when_saved(client, alice):
    client.force_login(alice)
    client.get("/api/me")  # the first request loads the user row and caches it
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/me").json() == {"username": "alice"}
    assert not any('"auth_user"' in q["sql"] for q in queries.captured_queries)

    alice.is_active = False
    alice.save()  # a deactivation applies on the next request, not when the cache expires
    assert client.get("/api/me").status_code == 401
    assert client.get("/conversations/").status_code == 302
