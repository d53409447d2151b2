"""Failed log-ins are limited per address across usernames too (issue #39): axes locks a
username and address pair, so an attacker trying a new username each time was never stopped."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

ATTACKER = {"REMOTE_ADDR": "198.51.100.30"}


def log_in(client, username, password, **meta):
    return client.post("/accounts/login/", {"username": username, "password": password}, **meta)


def test_many_usernames_from_one_address_are_locked_out(settings, django_user_model):
    settings.HERMES_LOGIN_ADDRESS_FAILURE_LIMIT = 12
    django_user_model.objects.create_user("carol", password="carol-pass-123")
    django_user_model.objects.create_user("mallory", password="mallory-pass-123")
    attacker = Client()
    statuses = []
    for number in range(16):
        # A fresh username each time: no username and address pair comes near axes' limit.
        statuses.append(log_in(attacker, f"user{number}", "guess", **ATTACKER).status_code)
        if number == 5:  # the attacker's own log-in in between does not clear the count
            assert log_in(attacker, "mallory", "mallory-pass-123", **ATTACKER).status_code == 302
            attacker.post("/accounts/logout/", **ATTACKER)
    assert statuses[:12] == [200] * 12
    assert statuses[12:] == [429] * 4
    # From that address even a right password waits for the cool-off…
    locked = log_in(Client(), "carol", "carol-pass-123", **ATTACKER)
    assert locked.status_code == 429
    assert b"Too many failed log-ins from your address" in locked.content
    # …but Carol's own log-in from her address still works.
    own = log_in(Client(), "carol", "carol-pass-123", REMOTE_ADDR="198.51.100.31")
    assert own.status_code == 302


def test_the_default_limit_is_above_one_pairs(settings):
    # People behind one address share its count: it must allow more than one pair's lockout.
    assert settings.HERMES_LOGIN_ADDRESS_FAILURE_LIMIT > settings.AXES_FAILURE_LIMIT
